"""The one append path: an append is counted, wakes fetchers, and its completion follows the
high-watermark policy alone (what acks=all and the group coordinator wait on)."""

from __future__ import annotations

import asyncio

import pytest

from broker.replication.replica_manager import Partition, ReplicaManager
from broker.replication.replica_state import FollowerState
from cluster.metadata_image import PartitionInfo
from protocol.errors import ErrorCode, KafkaError
from protocol.record_codec import Record, build_batch
from storage.config import LogConfig
from storage.log import ORIGIN_COORDINATOR, Log

NOW = 1_700_000_000_000


class _Counts:
    def __init__(self) -> None:
        self.appended: list[tuple[str, int, int]] = []
        self.refused: list[tuple[str, int]] = []

    def produced(self, topic: str, records: int, size: int) -> None:
        self.appended.append((topic, records, size))

    def rejected(self, topic: str, size: int) -> None:
        self.refused.append((topic, size))


def _setup(tmp_path, isr=(1,)):
    log = Log.open(str(tmp_path / "t-0"), LogConfig.from_props({}), now_ms=NOW)
    metrics = _Counts()
    rm = ReplicaManager(1, log_manager=None, now_ms=lambda: NOW, metrics=metrics)
    part = Partition("t", 0, b"\x07" * 16, log, PartitionInfo(0, (1, 2), isr, 1, 0, 0))
    part.followers = {2: FollowerState(last_caught_up_ms=NOW if 2 in isr else 0)}  # as apply_image makes them
    rm.partitions[("t", 0)] = part
    return rm, part, metrics


def _batch(n: int) -> bytearray:
    return bytearray(build_batch([Record(value=b"v%d" % i) for i in range(n)]))


def test_single_replica_append_is_committed_at_once(tmp_path):
    async def scenario():
        rm, part, metrics = _setup(tmp_path)
        woken = rm.fetch_waiters.register([("t", 0)])
        info, committed = rm.append(part, _batch(3), NOW)
        assert (info.first_offset, info.last_offset) == (0, 2)
        assert committed is None and part.log.high_watermark == 3
        assert woken.done()
        assert metrics.appended == [("t", 3, info.valid_bytes)]
        # the coordinator's own writes are not client produce traffic
        rm.append(part, _batch(1), NOW, origin=ORIGIN_COORDINATOR)
        assert len(metrics.appended) == 1
        part.log.close()

    asyncio.run(scenario())


def test_completion_waits_for_the_high_watermark(tmp_path):
    """With a follower in the ISR the high watermark waits for its fetches; the completion follows it."""

    async def scenario():
        rm, part, _ = _setup(tmp_path, isr=(1, 2))
        _, first = rm.append(part, _batch(2), NOW)
        _, second = rm.append(part, _batch(2), NOW)
        assert first is not None and second is not None and len(rm.commit_waiters) == 2
        await asyncio.sleep(0)
        assert not first.done()
        consumer = rm.fetch_waiters.register([("t", 0)])  # a consumer parked at the high watermark
        rm.record_follower_fetch(part, 2, 2, 0, part.log.log_end_offset, -1)  # the follower has the first batch
        assert part.log.high_watermark == 2 and first.done() and not second.done() and consumer.done()
        rm.record_follower_fetch(part, 2, 4, 0, part.log.log_end_offset, -1)
        assert part.log.high_watermark == 4 and second.done() and len(rm.commit_waiters) == 0
        rm.record_follower_fetch(part, 3, 4, 0, 4, -1)  # not a replica: changes nothing
        assert set(part.followers) == {2}
        part.log.close()

    asyncio.run(scenario())


def test_waiters_fail_when_the_partition_leaves(tmp_path):
    async def scenario():
        rm, part, _ = _setup(tmp_path, isr=(1, 2))
        _, committed = rm.append(part, _batch(1), NOW)
        rm.commit_waiters.fail(("t", 0), ErrorCode.NOT_LEADER_OR_FOLLOWER)
        with pytest.raises(KafkaError) as exc:
            await committed
        assert exc.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        part.log.close()

    asyncio.run(scenario())


def test_a_rejected_append_is_counted_and_raises(tmp_path):
    async def scenario():
        rm, part, metrics = _setup(tmp_path)
        bad = _batch(1)
        bad[17] ^= 0xFF  # inside the CRC-covered part
        with pytest.raises(KafkaError):
            rm.append(part, bad, NOW)
        assert metrics.refused == [("t", len(bad))] and part.log.log_end_offset == 0
        part.log.close()

    asyncio.run(scenario())


def test_replication_gauges_count_led_partitions_only(tmp_path):
    """ReplicaManager's UnderReplicatedPartitions / UnderMinIsrPartitionCount / AtMinIsrPartitionCount are about
    partitions this broker leads; a follower reports its fetch lag instead."""
    from broker.observability.metrics import _LogCollector
    from broker.network.sendfile import SendStats

    rm, part, _ = _setup(tmp_path, isr=(1,))  # replicas (1, 2), ISR (1): under-replicated, at min ISR 1
    follower_log = Log.open(str(tmp_path / "t-1"), LogConfig.from_props({}), now_ms=NOW)
    followed = Partition("t", 1, b"\x07" * 16, follower_log, PartitionInfo(1, (1, 2), (2,), 2, 0, 0))
    followed.follower_lag = 7
    rm.partitions[("t", 1)] = followed
    rm.isr_shrinks = 2
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for fam in _LogCollector(lambda: rm, SendStats()).collect() for s in fam.samples}
    assert got[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
    assert got[("kafka_server_replicamanager_atminisrpartitioncount", ())] == 1
    assert got[("kafka_server_replicamanager_underminisrpartitioncount", ())] == 0
    assert got[("kafka_server_fetcherlagmetrics_consumerlag", (("partition", "1"), ("topic", "t")))] == 7
    assert got[("kafka_server_replicamanager_isrshrinks_total", ())] == 2
    part.log.close()
    follower_log.close()


def test_list_offsets_on_a_new_leader_behind_its_epoch_start(tmp_path):
    """Partition.fetchOffsetForTimestamp: until the followers let the new leader's high watermark reach its
    epoch's first offset, latest is OFFSET_NOT_AVAILABLE (earliest still answers)."""
    from broker.apis.k02_list_offsets import EARLIEST, LATEST, _lookup
    from protocol.generated.messages.list_offsets_response import ListOffsetsPartitionResponse

    async def scenario():
        rm, part, _ = _setup(tmp_path, isr=(1, 2))
        rm.append(part, _batch(3), NOW)  # the follower has not fetched: the high watermark stays at 0
        part.epoch_start_offset = 3
        pr = ListOffsetsPartitionResponse()
        with pytest.raises(KafkaError) as exc:
            _lookup(part, LATEST, 0, pr)
        assert exc.value.code == ErrorCode.OFFSET_NOT_AVAILABLE
        _lookup(part, LATEST, None, pr)  # a replica asking (a follower after OFFSET_OUT_OF_RANGE): the log end
        assert pr.offset == 3
        _lookup(part, EARLIEST, 0, pr)
        assert pr.offset == 0
        rm.record_follower_fetch(part, 2, 3, 0, 3, -1)
        _lookup(part, LATEST, 0, pr)
        assert pr.offset == 3
        part.log.close()

    asyncio.run(scenario())


def test_acks_all_waiters_fail_when_leadership_moves(tmp_path):
    """DelayedProduce: an append waiting for the ISR fails with NOT_LEADER_OR_FOLLOWER once an image makes
    another broker the leader (the client retries there), instead of waiting out its timeout."""
    import dataclasses

    async def scenario():
        rm, part, _ = _setup(tmp_path, isr=(1, 2))
        _, committed = rm.append(part, _batch(1), NOW)
        part.info = dataclasses.replace(part.info, leader=2, leader_epoch=1)
        rm.after_image()
        with pytest.raises(KafkaError) as exc:
            await committed
        assert exc.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        part.log.close()

    asyncio.run(scenario())
