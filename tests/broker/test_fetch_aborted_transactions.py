"""Fetch's ``aborted_transactions`` (KafkaApis.handleFetchRequest: ``data.abortedTransactions.orElse(null)``): the
transactions aborted in the range a read_committed consumer's read returns, from the log's transaction indexes; null
for read_uncommitted, and for a partition answered with an error."""

from __future__ import annotations

import asyncio
import types

import pytest

from broker.apis import k01_fetch
from broker.clock import ManualClock
from broker.replication.fetch_session import FetchManager
from broker.replication.fetch_session.cache import FetchSessionCache
from broker.replication.replica_manager import Partition, ReplicaManager
from cluster.metadata_image import PartitionInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import FetchRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic, ReplicaState
from protocol.generated.messages.fetch_response import AbortedTransaction
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch
from storage.config import LogConfig
from storage.log import ORIGIN_COORDINATOR, Log

TOPIC_ID = b"\x09" * 16


class _Metrics:
    def fetched(self, topic: str, size: int) -> None:
        pass


def _txn(pid: int, n: int, seq: int) -> bytearray:
    return bytearray(build_batch([Record(b"k", b"v%d" % i) for i in range(n)], producer_id=pid, producer_epoch=0,
                                 base_sequence=seq, is_transactional=True))


def _marker(pid: int, commit: bool) -> bytearray:
    return bytearray(build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                                timestamp=0))


def _broker(tmp_path):
    clock = ManualClock()
    rm = ReplicaManager(1, log_manager=None, now_ms=clock.now_ms, replica_lag_time_max_ms=10_000)
    rm.image = types.SimpleNamespace(brokers={})
    log = Log.open(str(tmp_path / "t-0"), LogConfig.from_props({}), now_ms=clock.now_ms())
    rm.partitions[("t", 0)] = Partition("t", 0, TOPIC_ID, log, PartitionInfo(0, (1,), (1,), 1, 0, 0))
    # pid 7 aborts offsets 0-2 (marker 3) while pid 8's transaction (4-5) is open, then pid 8 commits (marker 6)
    log.append_as_leader(_txn(7, 3, 0), 0, clock.now_ms())
    log.append_as_leader(_txn(8, 2, 0), 0, clock.now_ms())
    log.append_as_leader(_marker(7, commit=False), 0, clock.now_ms(), origin=ORIGIN_COORDINATOR)
    log.append_as_leader(_marker(8, commit=True), 0, clock.now_ms(), origin=ORIGIN_COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    topic = types.SimpleNamespace(name="t")
    image = types.SimpleNamespace(topics_by_id={TOPIC_ID: topic}, topic=lambda name: topic if name == "t" else None)
    return types.SimpleNamespace(
        version=17, image=image, replicas=rm, clock=clock, metrics=_Metrics(), config={}, listener="PLAINTEXT",
        fetch_sessions=FetchManager(FetchSessionCache(10, 120_000, num_shards=1)),
        handles=types.SimpleNamespace(authorizer=None, quotas=None))  # no authorizer, no client quotas


def _fetch(ctx, isolation_level: int, offset: int = 0, leader_epoch: int = -1, version: int = 17):
    req = FetchRequest(replica_state=ReplicaState(replica_id=-1, replica_epoch=-1), replica_id=-1, max_wait_ms=0,
                       min_bytes=1, isolation_level=isolation_level, session_id=0, session_epoch=-1,
                       topics=[FetchTopic(topic_id=TOPIC_ID, topic="t", partitions=[
                           FetchPartition(partition=0, fetch_offset=offset, current_leader_epoch=leader_epoch,
                                          last_fetched_epoch=-1, log_start_offset=-1,
                                          partition_max_bytes=1 << 20)])])
    ctx.version = version
    resp = asyncio.run(k01_fetch.handle(ctx, req))  # a loop of its own: the current one is left as it was
    return resp.responses[0].partitions[0]


def test_read_committed_answers_the_aborted_transactions(tmp_path):
    ctx = _broker(tmp_path)
    pd = _fetch(ctx, isolation_level=1)
    assert pd.error_code == 0 and pd.records
    assert pd.last_stable_offset == 7
    assert pd.aborted_transactions == [AbortedTransaction(producer_id=7, first_offset=0)]


def test_read_uncommitted_answers_null(tmp_path):
    ctx = _broker(tmp_path)
    pd = _fetch(ctx, isolation_level=0)
    assert pd.error_code == 0 and pd.records
    assert pd.aborted_transactions is None


def test_read_committed_at_the_end_answers_an_empty_list(tmp_path):
    ctx = _broker(tmp_path)
    pd = _fetch(ctx, isolation_level=1, offset=7)
    assert pd.error_code == 0 and not pd.records
    assert pd.aborted_transactions == []


def test_read_committed_with_an_error_answers_null(tmp_path):
    ctx = _broker(tmp_path)
    pd = _fetch(ctx, isolation_level=1, offset=100)
    assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert pd.aborted_transactions is None
    pd = _fetch(ctx, isolation_level=1, leader_epoch=5)
    assert pd.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH and pd.aborted_transactions is None


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_the_answer_encodes_at_every_version(tmp_path, version):
    """The list goes into the response as the read returned it: it encodes (flexible and not)."""
    from protocol.generated.messages import FetchResponse

    ctx = _broker(tmp_path)
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, isolation_level=1, session_id=0, session_epoch=-1,
                       topics=[FetchTopic(topic_id=TOPIC_ID, topic="t", partitions=[
                           FetchPartition(partition=0, fetch_offset=0, current_leader_epoch=-1, last_fetched_epoch=-1,
                                          log_start_offset=-1, partition_max_bytes=1 << 20)])])
    ctx.version = version
    resp = asyncio.run(k01_fetch.handle(ctx, req))
    pd = resp.responses[0].partitions[0]
    pd.records = pd.records.read() if hasattr(pd.records, "read") else pd.records
    decoded = FetchResponse.decode(resp.encode(version), version)
    assert decoded.responses[0].partitions[0].aborted_transactions == [AbortedTransaction(producer_id=7,
                                                                                          first_offset=0)]
