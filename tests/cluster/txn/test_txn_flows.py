"""Whole transactions through one shard, as an adapter drives it: write-then-answer, markers, Complete*, timers,
load after a failover, and the request/response mapping of cluster/txn/txn_api.py."""

from __future__ import annotations

import pytest

from cluster.txn.txn_api import (
    add_offsets_to_txn_response, add_partitions_error_result, add_partitions_response, add_partitions_result,
    add_partitions_transactions, end_txn_client_version, end_txn_response, init_producer_id_expected,
    init_producer_id_response, offsets_partition,
)
from cluster.txn.txn_coordinator import (
    COMPLETE_RETRY_BACKOFF_MS, EndTxnOutcome, InitProducerIdOutcome, TxnConfig, TxnCoordinatorShard,
)
from cluster.txn.txn_metadata import SHORT_MAX, TransactionState, TransactionVersion, TxnError
from protocol.errors import ErrorCode as E
from protocol.generated.messages import AddPartitionsToTxnRequest, InitProducerIdRequest
from protocol.generated.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
)
from tests.cluster.txn.harness import NOW, Harness

S = TransactionState
TV_0, TV_2 = TransactionVersion.TV_0, TransactionVersion.TV_2
TP = frozenset({("orders", 0), ("orders", 1), ("__consumer_offsets", 7)})


def begin(h, txn_id="app", partitions=TP, timeout=60000):
    outcome, _ = h.settle(h.shard.init_producer_id(txn_id, timeout, None, NOW, token="init"), token="init")
    assert outcome.error == E.NONE
    err, _ = h.settle(h.shard.add_partitions_to_txn(txn_id, outcome.producer_id, outcome.producer_epoch, partitions,
                                                    NOW, token="add"), token="add")
    assert err == E.NONE
    return outcome.producer_id, outcome.producer_epoch


@pytest.mark.parametrize("committed", [True, False])
def test_a_transaction_commits_after_every_marker_is_acknowledged(committed):
    h = Harness()
    pid, epoch = begin(h)
    res = h.shard.end_txn("app", pid, epoch, committed, TV_0, NOW, token="end")
    assert res.response is None and h.get("app").pending_state is (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT)
    outcome, results = h.settle(res, token="end")
    assert outcome == EndTxnOutcome(E.NONE, pid, epoch)
    (markers,) = [m for r in results for m in r.markers]
    assert (markers.producer_id, markers.producer_epoch, markers.committed, markers.partitions,
            markers.coordinator_epoch, markers.transaction_version) == (pid, epoch, committed, TP, 0, 0)
    md = h.get("app")
    assert md.state is (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT)
    assert md.pending_state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    # a second EndTxn while the markers are out
    again = h.shard.end_txn("app", pid, epoch, committed, TV_0, NOW, token="again")
    assert again.response == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)
    # one partition answers, then the rest
    first = h.shard.markers_written("app", 0, {("orders", 0): E.NONE}, NOW)
    assert first.writes == [] and md.topic_partitions == TP - {("orders", 0)}
    done = h.shard.markers_written("app", 0, dict.fromkeys(TP - {("orders", 0)}, E.NONE), NOW)
    ((complete,),) = [w.records for w in done.writes]
    assert complete.transit.txn_state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    h.settle(done)
    assert md.state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT) and md.pending_state is None
    assert md.topic_partitions == set()
    # a retry of the EndTxn now succeeds again
    assert h.shard.end_txn("app", pid, epoch, committed, TV_0, NOW).response == EndTxnOutcome(E.NONE, pid, epoch)


def test_an_empty_transaction_completes_without_markers():
    h = Harness()
    out, _ = h.settle(h.shard.init_producer_id("app", 1000, None, NOW, token="i"), token="i")
    h.put(h.get("app"))
    md = h.get("app")
    md.state = S.ONGOING  # Ongoing with no partitions (Kafka allows it through AddPartitions of an empty set)
    md.txn_start_timestamp = NOW
    outcome, results = h.settle(h.shard.end_txn("app", out.producer_id, out.producer_epoch, True, TV_0, NOW,
                                                token="e"), token="e")
    assert outcome.error == E.NONE and not [m for r in results for m in r.markers]
    assert md.state is S.COMPLETE_COMMIT


def test_retriable_marker_errors_send_the_markers_again_and_fatal_ones_cancel():
    h = Harness()
    pid, epoch = begin(h)
    _, results = h.settle(h.shard.end_txn("app", pid, epoch, True, TV_0, NOW, token="e"), token="e")
    res = h.shard.markers_written("app", 0, {("orders", 0): E.NOT_LEADER_OR_FOLLOWER, ("orders", 1): E.NONE,
                                             ("__consumer_offsets", 7): E.UNSUPPORTED_FOR_MESSAGE_FORMAT}, NOW)
    assert [(m.partitions, m.producer_epoch) for m in res.markers] == [(frozenset({("orders", 0)}), epoch)]
    assert h.get("app").topic_partitions == {("orders", 0)}
    cancelled = h.shard.markers_written("app", 0, {("orders", 0): E.INVALID_PRODUCER_EPOCH}, NOW)
    assert cancelled.writes == [] and cancelled.markers == []
    assert h.shard.pending_markers() == []
    # a reload sends them again (the transaction is still PrepareCommit in the log)
    reloaded = h.shard.load(1, h.log, NOW)
    assert [(m.partitions, m.coordinator_epoch) for m in reloaded.markers] == [(TP, 1)]


def test_partitions_without_a_leader_need_no_marker():
    h = Harness()
    pid, epoch = begin(h)
    h.settle(h.shard.end_txn("app", pid, epoch, False, TV_0, NOW, token="e"), token="e")
    h.shard.markers_written("app", 0, {("orders", 0): E.NONE, ("orders", 1): E.NONE}, NOW)
    res = h.shard.markers_not_needed("app", 0, {("__consumer_offsets", 7)}, NOW)
    assert [r.transit.txn_state for w in res.writes for r in w.records] == [S.COMPLETE_ABORT]


def test_a_complete_write_that_finds_the_coordinator_unavailable_is_retried():
    h = Harness()
    pid, epoch = begin(h)
    _, results = h.settle(h.shard.end_txn("app", pid, epoch, True, TV_0, NOW, token="e"), token="e")
    done = h.shard.markers_written("app", 0, dict.fromkeys(TP, E.NONE), NOW)
    h.shard.write_completed(done.writes[0].write_id, E.NOT_ENOUGH_REPLICAS, NOW)
    assert h.get("app").pending_state is S.COMPLETE_COMMIT
    assert h.shard.next_deadline() == NOW + COMPLETE_RETRY_BACKOFF_MS
    retry = h.shard.poll(NOW + COMPLETE_RETRY_BACKOFF_MS)
    h.settle(retry)
    assert h.get("app").state is S.COMPLETE_COMMIT and h.get("app").pending_state is None


def test_a_complete_write_that_finds_another_coordinator_is_dropped():
    h = Harness()
    pid, epoch = begin(h)
    h.settle(h.shard.end_txn("app", pid, epoch, True, TV_0, NOW, token="e"), token="e")
    done = h.shard.markers_written("app", 0, dict.fromkeys(TP, E.NONE), NOW)
    h.shard.write_completed(done.writes[0].write_id, E.NOT_LEADER_OR_FOLLOWER, NOW)
    md = h.get("app")
    assert md.state is S.PREPARE_COMMIT and md.pending_state is None
    assert h.shard.poll(NOW + COMPLETE_RETRY_BACKOFF_MS).writes == []


def test_transactions_v2_bump_the_epoch_at_every_end_txn():
    """KIP-890 part 2: EndTxn v5 bumps the epoch; the response carries the new one; a retry with the old epoch
    gets the same answer; the next transaction uses the bumped epoch"""
    h = Harness()
    pid, epoch = begin(h)
    outcome, results = h.settle(h.shard.end_txn("app", pid, epoch, True, TV_2, NOW, token="e"), token="e")
    assert outcome == EndTxnOutcome(E.NONE, pid, epoch + 1)
    (markers,) = [m for r in results for m in r.markers]
    assert (markers.producer_epoch, markers.transaction_version) == (epoch + 1, 2)
    assert h.shard.end_txn("app", pid, epoch, True, TV_2, NOW).response == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)
    h.ack_markers(results)
    md = h.get("app")
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (S.COMPLETE_COMMIT, epoch + 1, epoch + 1)
    assert h.shard.end_txn("app", pid, epoch, True, TV_2, NOW).response == EndTxnOutcome(E.NONE, pid, epoch + 1)
    assert h.shard.end_txn("app", pid, epoch + 1, True, TV_2, NOW).response == EndTxnOutcome(E.PRODUCER_FENCED)
    err, _ = h.settle(h.shard.add_partitions_to_txn("app", pid, epoch + 1, TP, NOW, token="a"), token="a")
    assert err == E.NONE


def test_transactions_v2_epoch_overflow_switches_producer_ids():
    h = Harness(level=TV_2, first_pid=500)
    pid, _ = begin(h)
    md = h.get("app")
    md.producer_epoch = SHORT_MAX - 1
    outcome, results = h.settle(h.shard.end_txn("app", pid, SHORT_MAX - 1, True, TV_2, NOW, token="e"),
                                token="e")
    new_pid = h.next_pid - 1
    assert new_pid != pid
    assert outcome == EndTxnOutcome(E.NONE, new_pid, 0)
    (markers,) = [m for r in results for m in r.markers]
    assert (markers.producer_id, markers.producer_epoch) == (pid, SHORT_MAX)
    h.ack_markers(results)
    assert (md.producer_id, md.producer_epoch, md.previous_producer_id) == (new_pid, 0, pid)
    # the client retries with the old id and epoch: the overflow retry is recognised
    assert h.shard.end_txn("app", pid, SHORT_MAX - 1, True, TV_2, NOW).response == EndTxnOutcome(E.NONE, new_pid, 0)
    # and a reload keeps the previous producer id (TransactionLogValue v1 tagged fields)
    h.shard.load(1, h.log, NOW)
    reloaded = h.get("app")
    assert (reloaded.producer_id, reloaded.previous_producer_id, reloaded.client_transaction_version) == (
        new_pid, pid, TV_2)


def test_a_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    h = Harness()
    pid, epoch = begin(h, timeout=5000)
    assert h.shard.poll(NOW + 5000).writes == []  # not yet due
    due = NOW + TxnConfig().abort_timed_out_transactions_interval_ms
    res = h.shard.poll(due)
    ((record,),) = [w.records for w in res.writes]
    assert (record.transit.txn_state, record.transit.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    _, results = h.settle(res)
    h.ack_markers(results)
    md = h.get("app")
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    # the old producer is fenced
    assert h.shard.end_txn("app", pid, epoch, True, TV_0, NOW).response == EndTxnOutcome(E.PRODUCER_FENCED)
    assert h.shard.next_deadline() == due + TxnConfig().abort_timed_out_transactions_interval_ms


def test_init_producer_id_during_a_transaction_aborts_it_then_bumps_again():
    h = Harness()
    pid, epoch = begin(h)
    outcome, results = h.settle(h.shard.init_producer_id("app", 60000, None, NOW, token="i"), token="i")
    assert outcome == InitProducerIdOutcome(-1, -1, E.CONCURRENT_TRANSACTIONS)
    assert h.shard.init_producer_id("app", 60000, None, NOW).response.error == E.CONCURRENT_TRANSACTIONS
    h.ack_markers(results)
    assert h.get("app").state is S.COMPLETE_ABORT
    outcome, _ = h.settle(h.shard.init_producer_id("app", 60000, None, NOW, token="i"), token="i")
    assert outcome == InitProducerIdOutcome(pid, epoch + 2)


def test_load_completes_prepared_transactions_and_restores_the_state():
    h = Harness()
    pid, epoch = begin(h, "a")
    begin(h, "b", frozenset({("t", 0)}))
    h.settle(h.shard.end_txn("a", pid, epoch, True, TV_0, NOW, token="e"), token="e")
    before = {k: v.copy() for k, v in h.shard.transactions.items()}
    fresh = TxnCoordinatorShard(0, TxnConfig(transaction_log_num_partitions=1), lambda: None, 1)
    res = fresh.load(5, h.log, NOW + 1)
    assert [(m.transactional_id, m.coordinator_epoch, m.partitions) for m in res.markers] == [("a", 5, TP)]
    for txn_id, md in before.items():
        got = fresh.transactions[txn_id]
        assert (got.producer_id, got.producer_epoch, got.state, got.topic_partitions, got.txn_timeout_ms) == (
            md.producer_id, md.producer_epoch, md.state, md.topic_partitions, md.txn_timeout_ms)
    assert fresh.transactions["a"].pending_state is S.COMPLETE_COMMIT
    assert fresh.end_txn("a", pid, epoch, True, TV_0, NOW).response == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)


def test_requests_while_a_write_is_in_flight_are_concurrent_transactions():
    h = Harness()
    pid, epoch = begin(h)
    res = h.shard.add_partitions_to_txn("app", pid, epoch, {("new", 0)}, NOW, token="a")
    assert res.writes and res.response is None
    assert h.shard.add_partitions_to_txn("app", pid, epoch, {("new", 1)}, NOW).response == E.CONCURRENT_TRANSACTIONS
    assert h.shard.end_txn("app", pid, epoch, True, TV_0, NOW).response == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)
    assert h.shard.init_producer_id("app", 1000, None, NOW).response.error == E.CONCURRENT_TRANSACTIONS
    assert h.settle(res, token="a")[0] == E.NONE


# ---- txn_api: requests and responses -----------------------------------------------------------------------------

@pytest.mark.parametrize("version,code", [(3, E.INVALID_PRODUCER_EPOCH), (4, E.PRODUCER_FENCED)])
def test_init_producer_id_producer_fenced_by_version(version, code):
    """KafkaApis.handleInitProducerIdRequest: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4"""
    resp = init_producer_id_response(InitProducerIdOutcome(-1, -1, E.PRODUCER_FENCED), version)
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (code, -1, -1)


def test_init_producer_id_expected_producer():
    """KafkaApis.handleInitProducerIdRequest: -1/-1 is none, only one of them set is INVALID_REQUEST"""
    assert init_producer_id_expected(InitProducerIdRequest(transactional_id="x")) is None
    assert init_producer_id_expected(InitProducerIdRequest(producer_id=5, producer_epoch=3)) == (5, 3)
    for pid, epoch in ((5, -1), (-1, 3)):
        with pytest.raises(TxnError) as exc:
            init_producer_id_expected(InitProducerIdRequest(producer_id=pid, producer_epoch=epoch))
        assert exc.value.code == E.INVALID_REQUEST


@pytest.mark.parametrize("version,code", [(0, E.INVALID_PRODUCER_EPOCH), (1, E.INVALID_PRODUCER_EPOCH),
                                          (2, E.PRODUCER_FENCED), (5, E.PRODUCER_FENCED)])
def test_end_txn_and_add_offsets_producer_fenced_by_version(version, code):
    """KafkaApis.handleEndTxnRequest, handleAddOffsetsToTxnRequest: before v2, INVALID_PRODUCER_EPOCH"""
    assert end_txn_response(EndTxnOutcome(E.PRODUCER_FENCED), version).error_code == code
    assert add_offsets_to_txn_response(E.PRODUCER_FENCED, version).error_code == code
    assert end_txn_response(EndTxnOutcome(E.CONCURRENT_TRANSACTIONS), version).error_code == E.CONCURRENT_TRANSACTIONS


def test_end_txn_v5_is_transactions_v2():
    assert [end_txn_client_version(v) for v in range(6)] == [TV_0] * 5 + [TV_2]
    resp = end_txn_response(EndTxnOutcome(E.NONE, 7, 3), 5)
    assert (resp.producer_id, resp.producer_epoch) == (7, 3)


def test_add_partitions_requests_and_responses():
    """KafkaApis.handleAddPartitionsToTxnRequest: v0-3 one transaction in the top-level fields, v4+ batches;
    PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2 (adds only)"""
    v3 = AddPartitionsToTxnRequest(v3_and_below_transactional_id="x", v3_and_below_producer_id=4,
                                   v3_and_below_producer_epoch=1,
                                   v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=[0, 1])])
    assert add_partitions_transactions(v3, 3) == [("x", 4, 1, False, [("t", 0), ("t", 1)])]
    v4 = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id="y", producer_id=5, producer_epoch=2, verify_only=True,
        topics=[AddPartitionsToTxnTopic(name="u", partitions=[3])])])
    assert add_partitions_transactions(v4, 4) == [("y", 5, 2, True, [("u", 3)])]
    fenced = add_partitions_error_result("x", [("t", 0), ("t", 1)], E.PRODUCER_FENCED, 1)
    old = add_partitions_response([fenced], 1)
    assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
            for t in old.results_by_topic_v3_and_below] == [("t", [(0, E.INVALID_PRODUCER_EPOCH),
                                                                  (1, E.INVALID_PRODUCER_EPOCH)])]
    new = add_partitions_response([add_partitions_result("y", {("u", 3): E.TRANSACTION_ABORTABLE})], 4)
    assert new.results_by_transaction[0].transactional_id == "y"
    assert new.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == \
        E.TRANSACTION_ABORTABLE


def test_add_offsets_adds_the_groups_offsets_partition():
    assert offsets_partition("my-group", 50)[0] == "__consumer_offsets"
    from cluster.groups.group_records import partition_for
    assert offsets_partition("my-group", 50)[1] == partition_for("my-group", 50)


# ---- transactions V2 as Kafka 4.x runs them (implicit adds, KAFKA-17754, KAFKA-18660, #18086) ----------------

def begin_v2(h, txn_id="app", partitions=TP, timeout=60000):
    """InitProducerId, then the broker's implicit add of a Produce v12+ (AddPartitionsToTxn v5, TV2)."""
    outcome, _ = h.settle(h.shard.init_producer_id(txn_id, timeout, None, NOW, token="init"), token="init")
    assert outcome.error == E.NONE
    err, _ = h.settle(h.shard.add_partitions_to_txn(txn_id, outcome.producer_id, outcome.producer_epoch, partitions,
                                                    NOW, token="add", client_transaction_version=TV_2), token="add")
    assert err == E.NONE
    return outcome.producer_id, outcome.producer_epoch


def test_an_implicit_add_records_tv2_in_the_transaction_and_its_record():
    """The coordinator learns the transaction's version from the add (Kafka #18086); it is in the Ongoing record
    (TransactionLogValue v1 ClientTransactionVersion) and survives a reload, and it persists across InitProducerId."""
    h = Harness(level=TV_2)
    pid, epoch = begin_v2(h)
    md = h.get("app")
    assert (md.state, md.client_transaction_version) == (S.ONGOING, TV_2)
    h.shard.load(1, h.log, NOW)
    assert h.get("app").client_transaction_version == TV_2
    md = h.get("app")
    outcome, results = h.settle(h.shard.init_producer_id("app", 60000, None, NOW, token="i"), token="i")
    assert outcome.error == E.CONCURRENT_TRANSACTIONS  # the open transaction is aborted first
    h.ack_markers(results)
    outcome, _ = h.settle(h.shard.init_producer_id("app", 60000, None, NOW, token="i"), token="i")
    assert outcome.error == E.NONE
    assert (h.get("app").state, h.get("app").client_transaction_version) == (S.EMPTY, TV_2)
    # a client's AddPartitionsToTxn v0-3 is TV0
    err, _ = h.settle(h.shard.add_partitions_to_txn("app", outcome.producer_id, outcome.producer_epoch, TP, NOW,
                                                    token="a"), token="a")
    assert (err, h.get("app").client_transaction_version) == (E.NONE, TV_0)


def _delayed_end_txn(tv):
    """KAFKA-17754's race at the coordinator: transaction 1 is committed by a retried EndTxn while the first one is
    held up; transaction 2 begins (same producer) and the held-up EndTxn(commit) of transaction 1 arrives."""
    h = Harness(level=tv)
    start = begin_v2 if tv == TV_2 else begin
    pid, epoch = start(h)
    outcome, results = h.settle(h.shard.end_txn("app", pid, epoch, True, tv, NOW, token="e"), token="e")
    assert outcome.error == E.NONE
    h.ack_markers(results)
    epoch2 = outcome.producer_epoch
    err, _ = h.settle(h.shard.add_partitions_to_txn("app", pid, epoch2, TP, NOW, token="a",
                                                    client_transaction_version=tv), token="a")
    assert err == E.NONE and h.get("app").state is S.ONGOING
    late, results = h.settle(h.shard.end_txn("app", pid, epoch, True, tv, NOW, token="late"), token="late")
    return h, epoch, epoch2, late, results


def test_kafka_17754_tv0_a_delayed_end_txn_commits_the_next_transaction():
    """TV0/1: both transactions share the epoch, so the delayed EndTxn is taken as transaction 2's: it commits it
    although its producer never asked to (an abort it sends next is refused)."""
    h, epoch, epoch2, late, results = _delayed_end_txn(TV_0)
    assert epoch2 == epoch and late.error == E.NONE
    assert [m.committed for r in results for m in r.markers] == [True]
    h.ack_markers(results)
    assert h.get("app").state is S.COMPLETE_COMMIT
    abort = h.shard.end_txn("app", late.producer_id, epoch, False, TV_0, NOW).response
    assert abort.error == E.INVALID_TXN_STATE


def test_kafka_17754_tv2_the_epoch_bump_fences_a_delayed_end_txn():
    """TV2: transaction 2 runs at the bumped epoch; the delayed EndTxn carries the old one: PRODUCER_FENCED, no
    record, no marker, transaction 2 untouched and then committed by its own EndTxn."""
    h, epoch, epoch2, late, results = _delayed_end_txn(TV_2)
    assert epoch2 == epoch + 1
    assert late == EndTxnOutcome(E.PRODUCER_FENCED)
    assert not any(r.writes or r.markers for r in results)
    md = h.get("app")
    assert (md.state, md.producer_epoch, md.pending_state) == (S.ONGOING, epoch2, None)
    outcome, results = h.settle(h.shard.end_txn("app", md.producer_id, epoch2, False, TV_2, NOW, token="e"),
                                token="e")
    assert outcome == EndTxnOutcome(E.NONE, md.producer_id, epoch2 + 1)


def test_kafka_18660_an_add_with_the_next_producer_id_waits_for_the_overflow_to_complete():
    """An EndTxn v5 that exhausts the epochs answers the next producer id while its Complete* (the switch to that id)
    waits for the markers: the producer's implicit add with the new id gets CONCURRENT_TRANSACTIONS, retriable,
    not INVALID_PRODUCER_ID_MAPPING; once complete the add goes through."""
    h = Harness(level=TV_2, first_pid=500)
    pid, _ = begin_v2(h)
    h.get("app").producer_epoch = SHORT_MAX - 1
    outcome, results = h.settle(h.shard.end_txn("app", pid, SHORT_MAX - 1, True, TV_2, NOW, token="e"),
                                token="e")
    new_pid = outcome.producer_id
    assert new_pid != pid and outcome.producer_epoch == 0
    add = h.shard.add_partitions_to_txn("app", new_pid, 0, TP, NOW, client_transaction_version=TV_2)
    assert add.response == E.CONCURRENT_TRANSACTIONS and not add.writes
    h.ack_markers(results)
    err, _ = h.settle(h.shard.add_partitions_to_txn("app", new_pid, 0, TP, NOW, token="a",
                                                    client_transaction_version=TV_2), token="a")
    assert err == E.NONE and h.get("app").producer_id == new_pid


def test_tv2_end_txn_with_a_stale_or_future_epoch_changes_nothing():
    """EndTxn v5 with an epoch below or above the transaction's: PRODUCER_FENCED, no write."""
    h = Harness(level=TV_2)
    pid, epoch = begin_v2(h)
    before = h.get("app").copy()
    for e in (epoch - 1, epoch + 1):
        res = h.shard.end_txn("app", pid, e, True, TV_2, NOW)
        assert res.response == EndTxnOutcome(E.PRODUCER_FENCED) and not res.writes and not res.markers
    assert h.get("app") == before and h.get("app").pending_state is None


def test_a_new_coordinator_sends_a_tv2_transactions_markers_again_at_the_bumped_epoch():
    """The coordinator moves after a TV2 PrepareCommit: the new one reads the bumped epoch and TV2 from the record and
    sends the same markers (WriteTxnMarkers v2), which leaders that already wrote them take as a retry
    (KAFKA-19999); the producer's retry of its EndTxn (the epoch before the bump) is CONCURRENT_TRANSACTIONS until
    the markers are done, then answered with the bumped epoch."""
    h = Harness(level=TV_2)
    pid, epoch = begin_v2(h)
    outcome, results = h.settle(h.shard.end_txn("app", pid, epoch, True, TV_2, NOW, token="e"), token="e")
    first = [(m.producer_epoch, m.transaction_version, m.partitions) for r in results for m in r.markers]
    assert first == [(epoch + 1, 2, TP)]
    fresh = TxnCoordinatorShard(0, TxnConfig(transaction_log_num_partitions=1), lambda: None, 1, TV_2)
    res = fresh.load(5, h.log, NOW + 1)
    assert [(m.producer_epoch, m.transaction_version, m.partitions, m.coordinator_epoch) for m in res.markers] == [
        (epoch + 1, 2, TP, 5)]
    assert fresh.end_txn("app", pid, epoch, True, TV_2, NOW).response == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)
    for m in res.markers:
        done = fresh.markers_written(m.transactional_id, m.coordinator_epoch, dict.fromkeys(m.partitions, E.NONE), NOW)
        for w in done.writes:
            fresh.write_completed(w.write_id, E.NONE, NOW)
    assert fresh.transactions["app"].state is S.COMPLETE_COMMIT
    assert fresh.end_txn("app", pid, epoch, True, TV_2, NOW).response == EndTxnOutcome(E.NONE, pid, epoch + 1)


# ---- TransactionMarkerChannelManagerTest's completion cases, at the shard ---------------------------------------

def test_should_only_write_txn_completion_once():
    """shouldOnlyWriteTxnCompletionOnce: markers answered again while the Complete* write is in flight (a resent
    request's answer, a coordinator that took the answers twice) start no second write."""
    h = Harness()
    pid, epoch = begin(h)
    h.settle(h.shard.end_txn("app", pid, epoch, True, TV_0, NOW, token="end"), token="end")
    first = h.shard.markers_written("app", 0, dict.fromkeys(TP, E.NONE), NOW)
    assert len(first.writes) == 1
    again = h.shard.markers_written("app", 0, dict.fromkeys(TP, E.NONE), NOW)
    assert again.writes == [] and again.markers == []
    h.settle(first)
    assert h.get("app").state is S.COMPLETE_COMMIT


def test_should_not_lose_txn_completion_after_load():
    """shouldNotLoseTxnCompletionAfterLoad: the coordinator moves away and back while the markers are out; the
    loaded shard sends them again at its new epoch and writes the completion once they are answered."""
    h = Harness()
    pid, epoch = begin(h)
    h.settle(h.shard.end_txn("app", pid, epoch, False, TV_0, NOW, token="end"), token="end")
    fresh = TxnCoordinatorShard(0, TxnConfig(transaction_log_num_partitions=1), lambda: None, 1)
    loaded = fresh.load(7, h.log, NOW + 1)
    (markers,) = loaded.markers
    assert (markers.transactional_id, markers.coordinator_epoch, markers.committed) == ("app", 7, False)
    stale = fresh.markers_written("app", 0, dict.fromkeys(TP, E.NONE), NOW + 2)  # the old epoch's answers
    assert stale.writes == []
    done = fresh.markers_written("app", 7, dict.fromkeys(TP, E.NONE), NOW + 2)
    ((complete,),) = [w.records for w in done.writes]
    assert complete.transit.txn_state is S.COMPLETE_ABORT
