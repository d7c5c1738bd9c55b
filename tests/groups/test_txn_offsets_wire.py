"""TxnOffsetCommit on the wire (KafkaApis.handleTxnOffsetCommitRequest): Kafka's errors per partition, the
offsets pending (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT) until EndTxn's marker reaches the group
coordinator, dropped on abort and on a fencing InitProducerId, and a restart of the broker that keeps committed
and pending transactional offsets as Kafka's loader does (the still-open transaction is then aborted by its
timeout, through the group coordinator)."""

from __future__ import annotations

import time

from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    AddOffsetsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest, OffsetFetchRequest,
    TxnOffsetCommitRequest, WriteTxnMarkersRequest,
)
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestTopic
from protocol.generated.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
)
from protocol.generated.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from tests.groups.conftest import make_broker
from tests.groups.workload import create_topic
from tests.kafka_wire import KafkaWire


def _retry(fn, retriable=(E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE,
                          E.NOT_COORDINATOR)):
    for _ in range(100):
        r = fn()
        if getattr(r, "error_code", 0) not in retriable:
            return r
        time.sleep(0.1)
    raise AssertionError(f"kept answering a retriable error: {r}")


def _init(w: KafkaWire, txn_id: str, timeout_ms: int = 20000) -> tuple[int, int]:
    _retry(lambda: w.call(10, 3, FindCoordinatorRequest(key=txn_id, key_type=1)))
    r = _retry(lambda: w.call(22, 4, InitProducerIdRequest(transactional_id=txn_id,
                                                           transaction_timeout_ms=timeout_ms)))
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def _add_offsets(w, txn_id, pid, epoch, group) -> int:
    return _retry(lambda: w.call(25, 3, AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=pid,
                                                               producer_epoch=epoch, group_id=group))).error_code


def _txn_commit(w, txn_id, pid, epoch, group, offsets: dict, version=3, generation=-1, member="",
                metadata=""):
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                                        committed_metadata=metadata))
    r = w.call(28, version, TxnOffsetCommitRequest(
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=generation,
        member_id=member, topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def _end(w, txn_id, pid, epoch, commit: bool) -> int:
    return _retry(lambda: w.call(26, 3, EndTxnRequest(transactional_id=txn_id, producer_id=pid,
                                                      producer_epoch=epoch, committed=commit))).error_code


def _fetch(w, group, topic, partitions, require_stable=True) -> dict[int, tuple[int, int]]:
    # a coordinator still loading (after a restart) answers a retriable error
    r = _retry(lambda: w.call(9, 7, OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=[
        OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)])))
    assert r.error_code == 0
    return {p.partition_index: (p.committed_offset, p.error_code) for t in r.topics for p in t.partitions}


def _until_stable(w, group, topic, partitions, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        got = _fetch(w, group, topic, partitions)
        if all(code != E.UNSTABLE_OFFSET_COMMIT for _, code in got.values()) or time.monotonic() > deadline:
            return {p: off for p, (off, _) in got.items()}
        time.sleep(0.1)


def test_txn_offset_commit_errors_pending_commit_abort_and_fencing(tmp_path):
    with make_broker(tmp_path / "data") as b:
        create_topic(b.bootstrap, "t", 2)
        with KafkaWire(b.port) as w:
            pid, epoch = _init(w, "tx-a")
            assert _add_offsets(w, "tx-a", pid, epoch, "g") == 0
            got = _txn_commit(w, "tx-a", pid, epoch, "g", {("t", 0): 5, ("t", 1): 6, ("t", 9): 1, ("nope", 0): 1})
            assert got == {("t", 0): 0, ("t", 1): 0, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
                           ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
            assert _txn_commit(w, "tx-a", pid, epoch, "g", {("t", 0): 5}, metadata="x" * 5000) == {
                ("t", 0): E.OFFSET_METADATA_TOO_LARGE}
            assert _txn_commit(w, "tx-a", pid, epoch, "", {("t", 0): 5}) == {("t", 0): E.INVALID_GROUP_ID}
            # v3+: a generation for a group that does not exist; v0-2 carry none
            assert _txn_commit(w, "tx-a", pid, epoch, "nogroup", {("t", 0): 5}, generation=3, member="m") == {
                ("t", 0): E.ILLEGAL_GENERATION}
            assert _txn_commit(w, "tx-a", pid, epoch, "g", {("t", 1): 7}, version=0) == {("t", 1): 0}
            # pending: require_stable answers UNSTABLE_OFFSET_COMMIT, without it nothing is committed yet
            assert _fetch(w, "g", "t", [0, 1]) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT), 1: (-1, E.UNSTABLE_OFFSET_COMMIT)}
            assert _fetch(w, "g", "t", [0, 1], require_stable=False) == {0: (-1, 0), 1: (-1, 0)}
            assert _end(w, "tx-a", pid, epoch, True) == 0
            assert _until_stable(w, "g", "t", [0, 1]) == {0: 5, 1: 7}

            # an aborted transaction leaves the committed offsets
            assert _add_offsets(w, "tx-a", pid, epoch, "g") == 0
            assert _txn_commit(w, "tx-a", pid, epoch, "g", {("t", 0): 50}) == {("t", 0): 0}
            assert _end(w, "tx-a", pid, epoch, False) == 0
            assert _until_stable(w, "g", "t", [0, 1]) == {0: 5, 1: 7}

            # a new InitProducerId fences the open transaction (aborted with the bumped epoch): its offsets are
            # dropped and the old epoch's TxnOffsetCommit is refused by the log's producer state
            assert _add_offsets(w, "tx-a", pid, epoch, "g") == 0
            assert _txn_commit(w, "tx-a", pid, epoch, "g", {("t", 0): 60}) == {("t", 0): 0}
            pid2, epoch2 = _init(w, "tx-a")
            assert pid2 == pid and epoch2 > epoch
            assert _until_stable(w, "g", "t", [0, 1]) == {0: 5, 1: 7}
            assert _txn_commit(w, "tx-a", pid, epoch, "g", {("t", 0): 61}) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
            assert _fetch(w, "g", "t", [0]) == {0: (5, 0)}

            # WriteTxnMarkers for __consumer_offsets, as the group coordinator answers them: a stale epoch is
            # refused by the log, a partition not hosted here is unknown
            p = b.broker.groups.partition_for("g")
            assert _marker(w, pid, epoch, p) == E.INVALID_PRODUCER_EPOCH
            assert _marker(w, pid, epoch2, 99) == E.UNKNOWN_TOPIC_OR_PARTITION
            assert _marker(w, pid, epoch2, p) == 0  # no open transaction: the marker is written, nothing changes
            assert _fetch(w, "g", "t", [0, 1]) == {0: (5, 0), 1: (7, 0)}


def _marker(w, pid, epoch, partition) -> int:
    r = w.call(27, 1, WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=1000,
        topics=[WritableTxnMarkerTopic(name="__consumer_offsets", partition_indexes=[partition])])]))
    return r.markers[0].topics[0].partitions[0].error_code


def test_pending_and_committed_transactional_offsets_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    overrides = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
    with make_broker(data, **overrides) as b:
        create_topic(b.bootstrap, "t", 2)
        with KafkaWire(b.port) as w:
            pid, epoch = _init(w, "tx-r")
            assert _add_offsets(w, "tx-r", pid, epoch, "g") == 0
            assert _txn_commit(w, "tx-r", pid, epoch, "g", {("t", 0): 10, ("t", 1): 11}) == {("t", 0): 0, ("t", 1): 0}
            assert _end(w, "tx-r", pid, epoch, True) == 0
            assert _until_stable(w, "g", "t", [0, 1]) == {0: 10, 1: 11}
            # an aborted one, then one left open (a long timeout: still open at the restart)
            assert _add_offsets(w, "tx-r", pid, epoch, "g") == 0
            assert _txn_commit(w, "tx-r", pid, epoch, "g", {("t", 1): 99}) == {("t", 1): 0}
            assert _end(w, "tx-r", pid, epoch, False) == 0
            assert _until_stable(w, "g", "t", [0, 1]) == {0: 10, 1: 11}
            pid_o, epoch_o = _init(w, "tx-open", timeout_ms=8000)
            assert _add_offsets(w, "tx-open", pid_o, epoch_o, "g") == 0
            assert _txn_commit(w, "tx-open", pid_o, epoch_o, "g", {("t", 0): 20}) == {("t", 0): 0}
    with make_broker(data, **overrides) as b:
        with KafkaWire(b.port) as w:
            # the aborted 99 never applied
            assert _fetch(w, "g", "t", [0, 1], require_stable=False) == {0: (10, 0), 1: (11, 0)}
            assert _fetch(w, "g", "t", [0, 1]) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT), 1: (11, 0)}
            # the open transaction times out and is aborted, its marker through the group coordinator
            assert _until_stable(w, "g", "t", [0, 1], timeout=30) == {0: 10, 1: 11}

