"""ReplicaManager.apply_image: leadership follows the image's leader epochs, and an image naming this broker
leader at an epoch its log has already passed (a stale image) changes neither the epoch cache nor the log."""

from __future__ import annotations

import logging

from broker.replication.replica_manager import ReplicaManager
from cluster.metadata_image import MetadataImage
from protocol.generated.metadata import PartitionChangeRecord, PartitionRecord, TopicRecord
from protocol.record_codec import Record, build_batch
from storage.epoch import EpochEntry
from storage.log_manager import LogManager, LogManagerConfig

NOW = 1_700_000_000_000
TOPIC_ID = bytes(range(1, 17))


class _NoMetrics:
    def produced(self, topic: str, records: int, size: int) -> None:
        pass

    def rejected(self, topic: str, size: int) -> None:
        pass


def _manager(tmp_path) -> ReplicaManager:
    lm = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "d"),), cluster_id="q1Sh-9_ISia_zwGINzRvyQ",
                                     node_id=1))
    lm.startup(NOW)
    return ReplicaManager(1, lm, lambda: NOW, _NoMetrics())


def _image(leader: int, leader_epoch: int) -> MetadataImage:
    """Topic ``t`` with one partition on brokers 1 and 2, led by ``leader`` at ``leader_epoch``."""
    return MetadataImage().apply([
        TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=leader,
                        leader_epoch=leader_epoch, partition_epoch=leader_epoch)], 1)


def _append(rm: ReplicaManager, n: int) -> None:
    part = rm.get("t", 0)
    part.log.append_as_leader(bytearray(build_batch([Record(value=b"v%d" % i) for i in range(n)])),
                              part.leader_epoch, NOW)


def test_leader_epochs_start_where_the_log_ends(tmp_path):
    rm = _manager(tmp_path)
    rm.apply_image(_image(leader=1, leader_epoch=0))
    _append(rm, 3)
    image = _image(leader=1, leader_epoch=0).apply([PartitionChangeRecord(topic_id=TOPIC_ID, partition_id=0,
                                                                          leader=1)], 2)
    rm.apply_image(image)
    part = rm.get("t", 0)
    assert part.leader_epoch == 1 and part.is_leader(1)
    assert part.log.leader_epoch_cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(1, 3)]
    assert part.epoch_start_offset == 3


def test_a_stale_image_never_rewrites_the_epoch_cache(tmp_path, caplog):
    """The log holds epoch 1; an image naming us leader at epoch 0 is refused: no leadership, no truncated
    epoch entries, no write at the stale epoch; a newer image makes us leader again."""
    rm = _manager(tmp_path)
    rm.apply_image(_image(leader=1, leader_epoch=1))
    _append(rm, 2)
    part = rm.get("t", 0)
    before = part.log.leader_epoch_cache.epoch_entries()
    with caplog.at_level(logging.ERROR, logger="odradek"):
        rm.apply_image(_image(leader=1, leader_epoch=0))
    assert "not leading at epoch 0: the log already holds epoch 1" in caplog.text
    assert not part.is_leader(1)
    _, error = rm.leader_partition("t", 0)
    assert error != 0
    assert part.log.leader_epoch_cache.epoch_entries() == before and part.log.log_end_offset == 2
    rm.apply_image(_image(leader=1, leader_epoch=2))
    assert part.is_leader(1) and part.log.leader_epoch_cache.epoch_entries()[-1] == EpochEntry(2, 2)
