"""A broker's side of a partition reassignment (Kafka's ReplicaManager.applyDelta): a replica added to this broker
opens its log and follows; the leader keeps its followers' positions when a replica joins in the same epoch; a
replica removed from this broker stops before its log is deleted (appends answer NOT_LEADER_OR_FOLLOWER, waiting
acks=all appends fail), then the log directory goes."""

from __future__ import annotations

import asyncio

import pytest

from broker.replication.replica_manager import ReplicaManager
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.metadata import PartitionChangeRecord, PartitionRecord, TopicRecord
from protocol.record_codec import Record, build_batch
from storage.log_manager import LogManager, LogManagerConfig

NOW = 1_700_000_000_000
TOPIC_ID = bytes(range(1, 17))


def _manager(tmp_path, node_id: int = 1) -> ReplicaManager:
    lm = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "d"),), cluster_id="q1Sh-9_ISia_zwGINzRvyQ",
                                     node_id=node_id))
    lm.startup(NOW)
    return ReplicaManager(node_id, lm, lambda: NOW)


def _image(replicas: list[int], leader: int) -> MetadataImage:
    return MetadataImage().apply([
        TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=replicas, isr=list(replicas), leader=leader,
                        leader_epoch=0, partition_epoch=0)], 1)


def _moving(base: MetadataImage, **change) -> MetadataImage:
    return base.apply([PartitionChangeRecord(topic_id=TOPIC_ID, partition_id=0, **change)], base.offset + 1)


def test_an_added_replica_opens_its_log_and_follows(tmp_path):
    rm = _manager(tmp_path, node_id=4)
    rm.apply_image(_image([1, 2, 3], leader=1))
    assert rm.get("t", 0) is None
    rm.apply_image(_moving(_image([1, 2, 3], leader=1), replicas=[2, 3, 4, 1], adding_replicas=[4],
                           removing_replicas=[1]))
    part = rm.get("t", 0)
    assert part is not None and not part.is_leader(4) and part.info.leader == 1
    assert (tmp_path / "d" / "t-0").is_dir()


def test_the_leader_keeps_known_follower_positions_when_a_replica_joins(tmp_path):
    rm = _manager(tmp_path)
    base = _image([1, 2, 3], leader=1)
    rm.apply_image(base)
    part = rm.get("t", 0)
    part.followers[2].log_end_offset = 7
    rm.apply_image(_moving(base, replicas=[2, 3, 4, 1], adding_replicas=[4], removing_replicas=[1]))
    assert set(part.followers) == {2, 3, 4}
    assert part.followers[2].log_end_offset == 7 and part.followers[4].log_end_offset == -1


def test_a_removed_replica_stops_before_its_log_is_deleted(tmp_path):
    async def run():
        rm = _manager(tmp_path)
        base = _image([1, 2, 3], leader=1)
        rm.apply_image(base)
        part = rm.get("t", 0)
        batch = bytearray(build_batch([Record(value=b"v")]))
        _, committed = rm.append(part, batch, NOW)  # acks=all waits for the followers
        assert committed is not None
        done = _moving(base, leader=2, replicas=[2, 3, 4], isr=[2, 3, 4], adding_replicas=[],
                       removing_replicas=[])
        rm.stop_partitions(done)
        assert rm.get("t", 0) is None
        assert rm.missing_error("t", 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # moved: refresh metadata
        with pytest.raises(KafkaError) as exc:
            await committed
        assert exc.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(KafkaError) as exc:  # a Produce that looked the partition up before it stopped
            rm.append(part, bytearray(build_batch([Record(value=b"w")])), NOW)
        assert exc.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (tmp_path / "d" / "t-0").is_dir()  # deleted off the event loop, by apply_image
        rm.apply_image(done)
        assert not (tmp_path / "d" / "t-0").exists() and rm.get("t", 0) is None

    asyncio.run(run())
