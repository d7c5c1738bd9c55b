"""TransactionStateManagerTest, its state-machine parts: the cache, the write-then-complete callbacks, load and
unload, ListTransactions, timed-out transactions and transactional id expiry (cluster/txn/txn_coordinator.py). Kafka
runs one manager over every partition; here each ``__transaction_state`` partition is a shard (numPartitions 2)."""

from __future__ import annotations

import struct

import pytest

from cluster.txn.txn_api import list_transactions_response
from cluster.txn.txn_coordinator import TxnConfig, TxnCoordinatorShard
from cluster.txn.txn_log import decode_record, key_to_bytes, partition_for, value_to_bytes
from cluster.txn.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, IllegalStateError, TransactionMetadata, TransactionState, TransactionVersion,
    TxnError,
)
from protocol.errors import ErrorCode as E
from protocol.generated.coordinator import TransactionLogKey
from protocol.generated.messages import ListTransactionsRequest

S = TransactionState
TV_2 = TransactionVersion.TV_2
NUM_PARTITIONS = 2
PARTITION = 0
COORDINATOR_EPOCH = 10
TXN_TIMEOUT_MS = 1000
NOW = 1_000_000
CONFIG = TxnConfig(transaction_log_num_partitions=NUM_PARTITIONS)
ID1, ID2 = "one", "two"
PIDS = {ID1: 1, ID2: 2}


def transaction_metadata(txn_id, producer_id, state=S.EMPTY, txn_timeout=TXN_TIMEOUT_MS, now=NOW):
    return TransactionMetadata(txn_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_ID, 0, NO_PRODUCER_EPOCH, txn_timeout,
                               state, (), now, now)


def shard(partition=PARTITION, epoch=COORDINATOR_EPOCH, records=(), config=CONFIG, now=NOW):
    s = TxnCoordinatorShard(partition, config, lambda: None, NUM_PARTITIONS, TV_2)
    s.load(epoch, records, now)
    return s


def record(m: TransactionMetadata):
    return key_to_bytes(m.transactional_id), value_to_bytes(m.prepare_no_transit(), TV_2)


def test_partitions_of_the_ids():
    assert [partition_for(x, NUM_PARTITIONS) for x in (ID1, ID2, "b", "a")] == [0, 0, 0, 1]


def test_validate_transaction_timeout():
    """TransactionStateManagerTest.testValidateTransactionTimeout"""
    assert CONFIG.validate_transaction_timeout_ms(1)
    assert not CONFIG.validate_transaction_timeout_ms(-1)
    assert not CONFIG.validate_transaction_timeout_ms(0)
    assert CONFIG.validate_transaction_timeout_ms(CONFIG.transaction_max_timeout_ms)
    assert not CONFIG.validate_transaction_timeout_ms(CONFIG.transaction_max_timeout_ms + 1)


def test_add_get_pids():
    """TransactionStateManagerTest.testAddGetPids"""
    s = shard()
    m1, m2 = transaction_metadata(ID1, 1), transaction_metadata(ID2, 2)
    assert s.get_transaction_state(ID1) is None
    assert s.put_transaction_state_if_not_exists(m1) == (COORDINATOR_EPOCH, m1)
    assert s.get_transaction_state(ID1) == (COORDINATOR_EPOCH, m1)
    assert s.put_transaction_state_if_not_exists(m2) == (COORDINATOR_EPOCH, m2)
    assert s.put_transaction_state_if_not_exists(transaction_metadata(ID1, 9))[1] is m1  # the first one stays


def test_delete_partition():
    """TransactionStateManagerTest.testDeletePartition"""
    s0, s1 = shard(0), shard(1)
    s0.put_transaction_state_if_not_exists(transaction_metadata("b", 5))
    s1.put_transaction_state_if_not_exists(transaction_metadata("a", 10))
    s0.unload(NOW)
    with pytest.raises(TxnError) as exc:
        s0.get_transaction_state("b")
    assert exc.value.code == E.NOT_COORDINATOR
    assert s1.get_transaction_state("a")[1].producer_epoch == 0


def test_delete_loading_partition():
    """TransactionStateManagerTest.testDeleteLoadingPartition: an unload during the load leaves nothing loaded"""
    m1 = transaction_metadata(ID1, 1, S.PREPARE_COMMIT)
    m1.add_partitions({("topic1", 0), ("topic1", 1)})
    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: None, NUM_PARTITIONS, TV_2)
    s.begin_load(0, NOW)
    s.replay(*record(m1))
    s.unload(NOW)
    assert not s.loading
    with pytest.raises(TxnError) as exc:
        s.get_transaction_state(ID1)
    assert exc.value.code == E.NOT_COORDINATOR


def test_load_and_remove_transactions_for_partition():
    """TransactionStateManagerTest.testLoadAndRemoveTransactionsForPartition"""
    m1, m2 = transaction_metadata(ID1, 1), transaction_metadata(ID2, 2)
    records = []
    m1.state = S.ONGOING
    m1.add_partitions({("topic1", 0), ("topic1", 1)})
    records.append(record(m1))
    m1.add_partitions({("topic2", 0), ("topic2", 1), ("topic2", 2)})
    records.append(record(m1))
    m1.state = S.PREPARE_COMMIT
    records.append(record(m1))
    m2.state = S.ONGOING
    m2.add_partitions({("topic3", 0), ("topic3", 1), ("topic3", 2)})
    records.append(record(m2))
    m2.state = S.PREPARE_ABORT
    records.append(record(m2))
    m2.state = S.COMPLETE_ABORT
    records.append(record(m2))
    m2.state = S.EMPTY
    m2.topic_partitions.clear()
    records.append(record(m2))

    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: None, NUM_PARTITIONS, TV_2)
    for txn_id in (ID1, ID2):
        with pytest.raises(TxnError) as exc:
            s.get_transaction_state(txn_id)
        assert exc.value.code == E.NOT_COORDINATOR
    res = s.load(0, records, NOW)
    assert s.get_transaction_state(ID1)[1] == m1
    assert s.get_transaction_state(ID2)[1] == m2
    assert [(m.transactional_id, m.committed) for m in res.markers] == [(ID1, True)]  # m1 is in PrepareCommit
    s.unload(NOW)
    for txn_id in (ID1, ID2):
        with pytest.raises(TxnError) as exc:
            s.get_transaction_state(txn_id)
        assert exc.value.code == E.NOT_COORDINATOR


def _add_partitions(s, txn_id=ID1, partitions=frozenset({("topic1", 0), ("topic1", 1)})):
    m = s.get_transaction_state(txn_id)[1]
    return s.add_partitions_to_txn(txn_id, m.producer_id, m.producer_epoch, partitions, NOW, token="req")


def test_complete_transition_when_append_succeeded():
    """TransactionStateManagerTest.testCompleteTransitionWhenAppendSucceeded"""
    s = shard()
    m1 = transaction_metadata(ID1, 1)
    s.put_transaction_state_if_not_exists(m1)
    res = _add_partitions(s)
    done = s.write_completed(res.writes[0].write_id, E.NONE, NOW)
    assert done.completions == [("req", E.NONE)]
    assert s.get_transaction_state(ID1) == (COORDINATOR_EPOCH, m1)
    assert m1.pending_state is None and m1.state is S.ONGOING


@pytest.mark.parametrize("append_error,expected", [
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE), (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR), (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR), (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR)])
def test_append_fail_maps_the_error_and_resets_the_pending_state(append_error, expected):
    """TransactionStateManagerTest.testAppendFailToCoordinatorNotAvailableError, testAppendFailToNotCoordinatorError,
    testAppendFailToUnknownError"""
    s = shard()
    m1 = transaction_metadata(ID1, 1)
    s.put_transaction_state_if_not_exists(m1)
    res = _add_partitions(s, partitions={("topic2", 0)})
    assert m1.pending_state is S.ONGOING
    assert s.write_completed(res.writes[0].write_id, append_error, NOW).completions == [("req", expected)]
    assert s.get_transaction_state(ID1) == (COORDINATOR_EPOCH, m1)
    assert m1.pending_state is None and m1.state is S.EMPTY


def test_append_fail_to_coordinator_loading_error():
    """TransactionStateManagerTest.testAppendFailToCoordinatorLoadingError: the partition is reloaded while the write
    is in flight. Kafka's callback finds it loading (COORDINATOR_LOAD_IN_PROGRESS); here the reload first unloads,
    which answers the waiting request NOT_COORDINATOR (the client looks the coordinator up again)"""
    s = shard()
    s.put_transaction_state_if_not_exists(transaction_metadata(ID1, 1))
    res = _add_partitions(s, partitions={("topic2", 0)})
    reload = s.begin_load(COORDINATOR_EPOCH + 1, NOW)
    assert reload.completions == [("req", E.NOT_COORDINATOR)]
    assert s.write_completed(res.writes[0].write_id, E.NONE, NOW).completions == []


def test_pending_state_not_reset_on_retry_append():
    """TransactionStateManagerTest.testPendingStateNotResetOnRetryAppend: a Complete* write that found the
    coordinator unavailable keeps its pending state and is written again"""
    s = shard()
    m1 = transaction_metadata(ID1, 1, S.PREPARE_COMMIT)
    s.put_transaction_state_if_not_exists(m1)
    res = s.load(COORDINATOR_EPOCH, [record(m1)], NOW)
    m1 = s.get_transaction_state(ID1)[1]
    assert not res.markers and len(res.writes) == 1  # no partitions: completes at once
    assert m1.pending_state is S.COMPLETE_COMMIT
    s.write_completed(res.writes[0].write_id, E.UNKNOWN_TOPIC_OR_PARTITION, NOW)
    assert m1.pending_state is S.COMPLETE_COMMIT
    retry = s.poll(s.next_deadline())
    assert [r.transactional_id for w in retry.writes for r in w.records] == [ID1]
    s.write_completed(retry.writes[0].write_id, E.NONE, NOW)
    assert m1.state is S.COMPLETE_COMMIT and m1.pending_state is None


def test_append_transaction_to_log_while_producer_fenced():
    """TransactionStateManagerTest.testAppendTransactionToLogWhileProducerFenced: the coordinator epoch changed
    between the append and its completion: NOT_COORDINATOR"""
    s = shard(epoch=0)
    s.put_transaction_state_if_not_exists(transaction_metadata(ID1, 1))
    res = _add_partitions(s)
    again = s.load(10, [], NOW)
    assert again.completions == [("req", E.NOT_COORDINATOR)]
    assert s.write_completed(res.writes[0].write_id, E.NONE, NOW).completions == []


def test_append_transaction_to_log_while_pending_state_changed():
    """TransactionStateManagerTest.testAppendTransactionToLogWhilePendingStateChanged"""
    s = shard()
    m1 = transaction_metadata(ID1, 1)
    s.put_transaction_state_if_not_exists(m1)
    res = _add_partitions(s)
    m1.pending_state = None
    with pytest.raises(IllegalStateError):
        s.write_completed(res.writes[0].write_id, E.NONE, NOW)


def test_should_return_not_coordinator_error_if_transaction_id_partition_not_owned():
    """TransactionStateManagerTest.shouldReturnNotCoordinatorErrorIfTransactionIdPartitionNotOwned"""
    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: None, NUM_PARTITIONS)
    with pytest.raises(TxnError) as exc:
        s.get_transaction_state(ID1)
    assert exc.value.code == E.NOT_COORDINATOR


def test_list_transactions_with_coordinator_loading_in_progress():
    """TransactionStateManagerTest.testListTransactionsWithCoordinatorLoadingInProgress"""
    s = TxnCoordinatorShard(0, CONFIG, lambda: None, NUM_PARTITIONS)
    s.begin_load(15, NOW)
    assert list_transactions_response([s], ListTransactionsRequest(), 1, NOW).error_code == \
        E.COORDINATOR_LOAD_IN_PROGRESS
    assert list_transactions_response([], ListTransactionsRequest(), 1, NOW, any_loading=True).error_code == \
        E.COORDINATOR_LOAD_IN_PROGRESS


def test_list_transactions_filtering():
    """TransactionStateManagerTest.testListTransactionsFiltering (with the v2 transactional id pattern)"""
    shards = [shard(p, 0) for p in range(NUM_PARTITIONS)]
    now = NOW

    def put(txn_id, pid, state):
        shards[partition_for(txn_id, NUM_PARTITIONS)].put_transaction_state_if_not_exists(
            transaction_metadata(txn_id, pid, state, now=now))

    put("t0", 0, S.ONGOING)
    put("t1", 1, S.ONGOING)
    now += 1000
    put("t2", 2, S.PREPARE_COMMIT)
    put("t3", 3, S.PREPARE_ABORT)
    now += 1000
    put("t4", 4, S.COMPLETE_COMMIT)
    put("t5", 5, S.COMPLETE_ABORT)
    put("t6", 6, S.COMPLETE_ABORT)
    put("t7", 7, S.PREPARE_EPOCH_FENCE)
    now += 1000
    put("t8", 8, S.DEAD)  # never listed: being expired

    def check(expected, producer_ids=(), states=(), duration=-1, pattern=None, version=2):
        req = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                      duration_filter=duration, transactional_id_pattern=pattern)
        resp = list_transactions_response(shards, req, version, now)
        assert resp.error_code == E.NONE
        assert {t.transactional_id for t in resp.transaction_states} == set(expected)
        assert set(resp.unknown_state_filters) == {s for s in states if TransactionState.from_name(s) is None}

    everything = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}
    check(everything)
    check(everything, duration=0)
    check({"t0", "t1", "t2", "t3"}, duration=1000)
    check({"t0", "t1"}, duration=2000)
    check(set(), duration=3000)
    check(everything, duration=3000, version=0)  # no duration filter before v1
    check({"t0", "t1"}, states={"Ongoing"})
    check({"t0", "t1"}, states={"Ongoing", "UnknownState"})
    check({"t2", "t4"}, states={"PrepareCommit", "CompleteCommit"})
    check(set(), states={"UnknownState"})
    check({"t5"}, producer_ids={5})
    check({"t5", "t6"}, producer_ids={5, 6, 8, 9})
    check({"t4"}, producer_ids={4, 5}, states={"CompleteCommit"})
    check({"t4", "t5"}, producer_ids={4, 5}, states={"CompleteCommit", "CompleteAbort"})
    check(set(), producer_ids={3, 6}, states={"UnknownState"})
    check(set(), producer_ids={10}, states={"CompleteCommit"})
    check(set(), states={"Dead"})
    check({"t1", "t3", "t5", "t7"}, pattern="t[1357]")
    check({"t1"}, pattern="t1")  # the whole id must match
    check(everything, pattern="")
    check(everything, pattern="t[1357]", version=1)  # no pattern before v2
    bad = ListTransactionsRequest(transactional_id_pattern="t[")
    assert list_transactions_response(shards, bad, 2, now).error_code == E.INVALID_REGULAR_EXPRESSION


def test_should_only_consider_transactions_in_the_ongoing_state_to_abort():
    """TransactionStateManagerTest.shouldOnlyConsiderTransactionsInTheOngoingStateToAbort"""
    shards = {p: shard(p, 0) for p in range(NUM_PARTITIONS)}
    for txn_id, pid, state, timeout in [("ongoing", 0, S.ONGOING, 1000), ("not-expiring", 1, S.ONGOING, 10000),
                                        ("prepare-commit", 2, S.PREPARE_COMMIT, 1000),
                                        ("prepare-abort", 3, S.PREPARE_ABORT, 1000),
                                        ("complete-commit", 4, S.COMPLETE_COMMIT, 1000),
                                        ("complete-abort", 5, S.COMPLETE_ABORT, 1000)]:
        shards[partition_for(txn_id, NUM_PARTITIONS)].put_transaction_state_if_not_exists(
            transaction_metadata(txn_id, pid, state, timeout))
    expiring = []
    for s in shards.values():
        s.now_ms = NOW + 2000
        expiring += s.timed_out_transactions()
    assert expiring == [("ongoing", 0, 0)]


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_write_txn_markers_for_transaction_in_prepared_state(state):
    """TransactionStateManagerTest.shouldWriteTxnMarkersForTransactionInPreparedCommitState,
    shouldWriteTxnMarkersForTransactionInPreparedAbortState"""
    m1 = transaction_metadata(ID1, 1, state)
    m1.add_partitions({("topic1", 0), ("topic1", 1)})
    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: None, NUM_PARTITIONS, TV_2)
    res = s.load(0, [record(m1)], NOW)
    assert [(m.transactional_id, m.committed, m.partitions, m.coordinator_epoch, m.producer_id, m.producer_epoch)
            for m in res.markers] == [(ID1, state is S.PREPARE_COMMIT, frozenset({("topic1", 0), ("topic1", 1)}), 0,
                                       1, 0)]
    assert s.get_transaction_state(ID1)[1].pending_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


def _expiry(state, error):
    """setupAndRunTransactionalIdExpiration: id1 idle for transactional.id.expiration.ms, id2 just updated."""
    s = shard()
    m1 = transaction_metadata(ID1, 1, state, now=NOW - CONFIG.transactional_id_expiration_ms)
    m2 = transaction_metadata(ID2, 2)
    s.put_transaction_state_if_not_exists(m1)
    s.put_transaction_state_if_not_exists(m2)
    assert s.next_deadline() == NOW + CONFIG.abort_timed_out_transactions_interval_ms
    res = s.poll(NOW + CONFIG.remove_expired_transactional_ids_interval_ms)
    expiry = [w for w in res.writes if all(r.transit is None for r in w.records)]
    for w in expiry:
        s.write_completed(w.write_id, error, NOW)
    return s, expiry


def _usable(s, txn_id):
    got = s.get_transaction_state(txn_id)
    return got is not None and got[1].pending_state is None


@pytest.mark.parametrize("state", [S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.EMPTY])
def test_should_remove_expired_transactional_ids(state):
    """TransactionStateManagerTest.shouldRemoveCompleteCommitExpiredTransactionalIds,
    shouldRemoveCompleteAbortExpiredTransactionalIds, shouldRemoveEmptyExpiredTransactionalIds"""
    s, expiry = _expiry(state, E.NONE)
    assert [[r.encode() for r in w.records] for w in expiry] == [[(key_to_bytes(ID1), None)]]
    assert s.get_transaction_state(ID1) is None
    assert _usable(s, ID2)


def test_should_not_remove_expired_transactional_ids_if_log_append_fails():
    """TransactionStateManagerTest.shouldNotRemoveExpiredTransactionalIdsIfLogAppendFails"""
    s, expiry = _expiry(S.COMPLETE_ABORT, E.NOT_ENOUGH_REPLICAS)
    assert len(expiry) == 1
    assert _usable(s, ID1) and _usable(s, ID2)


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT])
def test_should_not_remove_transactional_ids_with_a_transaction(state):
    """TransactionStateManagerTest.shouldNotRemoveOngoingTransactionalIds, shouldNotRemovePrepareAbortTransactionalIds,
    shouldNotRemovePrepareCommitTransactionalIds"""
    s, expiry = _expiry(state, E.NONE)
    assert expiry == []
    assert s.get_transaction_state(ID1) is not None and _usable(s, ID2)


def _expired_ids(s, n):
    ids = set()
    for i in range(n + 1):
        txn_id = f"id_{i}"
        if partition_for(txn_id, NUM_PARTITIONS) != s.partition:
            continue
        m = transaction_metadata(txn_id, i)
        m.txn_last_update_timestamp = NOW - CONFIG.transactional_id_expiration_ms
        s.put_transaction_state_if_not_exists(m)
        ids.add(txn_id)
    return ids


def _expire_now(s, error=E.NONE):
    s.now_ms = NOW
    res = s._run(NOW, s.remove_expired_transactional_ids)
    for w in res.writes:
        s.write_completed(w.write_id, error, NOW)
    return res.writes


def test_transactional_expiration_with_too_small_batch_size():
    """TransactionStateManagerTest.testTransactionalExpirationWithTooSmallBatchSize: every batch holds at least one
    tombstone, so expiry does not get stuck; a failed append leaves the ids in place"""
    s = shard(config=TxnConfig(transaction_log_num_partitions=NUM_PARTITIONS, max_batch_bytes=16))
    ids = _expired_ids(s, 20)
    writes = _expire_now(s, E.MESSAGE_TOO_LARGE)
    assert all(len(w.records) == 1 for w in writes) and len(writes) == len(ids)
    assert all(_usable(s, i) for i in ids)


def test_transaction_expiration_should_respect_batch_size():
    """TransactionStateManagerTest.testTransactionExpirationShouldRespectBatchSize"""
    s = shard(config=TxnConfig(transaction_log_num_partitions=NUM_PARTITIONS, max_batch_bytes=512))
    ids = _expired_ids(s, 1000)
    writes = _expire_now(s)
    assert len(writes) > 1
    for w in writes:
        size = 61 + sum(len(k) + 10 for k, _ in (r.encode() for r in w.records))  # a record batch's real size
        assert size < 512
    expired = {decode_record(*r.encode())[0] for w in writes for r in w.records}
    assert expired == ids
    assert all(s.get_transaction_state(i) is None for i in ids)


def test_transaction_expiration_should_not_fail_with_uninitialized_transaction_metadata():
    """TransactionStateManagerTest.testTransactionExpirationShouldNotFailWithUninitializedTransactionMetadata"""
    s = shard(partition_for("id", NUM_PARTITIONS))
    m = TransactionMetadata("id", 1, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                            TXN_TIMEOUT_MS, S.EMPTY, (), NOW - CONFIG.transactional_id_expiration_ms - 1,
                            NOW - CONFIG.transactional_id_expiration_ms - 1)
    s.put_transaction_state_if_not_exists(m)
    writes = _expire_now(s)
    assert [decode_record(*r.encode()) for w in writes for r in w.records] == [("id", None)]
    assert s.get_transaction_state("id") is None


def test_successful_reimmigration():
    """TransactionStateManagerTest.testSuccessfulReimmigration: a load at a newer epoch replaces the older one
    without an unload in between"""
    m1 = transaction_metadata(ID1, 1, S.PREPARE_COMMIT)
    m1.add_partitions({("topic1", 0), ("topic1", 1)})
    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: None, NUM_PARTITIONS, TV_2)
    first = s.load(0, [record(m1)], NOW)
    assert not s.loading and first.markers[0].coordinator_epoch == 0
    second = s.load(1, [record(m1)], NOW)
    assert not s.loading and s.coordinator_epoch == 1
    assert second.markers[0].coordinator_epoch == 1
    assert s.markers_written(ID1, 0, dict.fromkeys(first.markers[0].partitions, 0), NOW).writes == []  # stale


def test_load_transaction_metadata_with_corrupted_log():
    """TransactionStateManagerTest.testLoadTransactionMetadataWithCorruptedLog: nothing to read still ends the load"""
    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: None, NUM_PARTITIONS)
    s.load(0, [], NOW)
    assert not s.loading and s.transactions == {}


def test_ignore_unknown_record_type():
    """TransactionStateManagerTest.testIgnoreUnknownRecordType"""
    m1 = transaction_metadata(ID1, 1, S.PREPARE_COMMIT)
    m1.add_partitions({("topic1", 0), ("topic1", 1)})
    unknown = struct.pack(">h", 32767) + TransactionLogKey(transactional_id="").encode(0)
    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: None, NUM_PARTITIONS, TV_2)
    s.load(1, [(unknown, unknown), record(m1)], NOW)
    assert not s.loading and s.coordinator_epoch == 1
    got = s.get_transaction_state(ID1)[1]
    assert (got.transactional_id, got.producer_id, got.previous_producer_id, got.producer_epoch,
            got.last_producer_epoch, got.txn_timeout_ms, got.state, got.topic_partitions) == (
        m1.transactional_id, m1.producer_id, m1.previous_producer_id, m1.producer_epoch, m1.last_producer_epoch,
        m1.txn_timeout_ms, m1.state, m1.topic_partitions)


@pytest.mark.parametrize("level", list(TransactionVersion))
def test_transaction_version_in_transaction_manager(level):
    """TransactionStateManagerTest.testTransactionVersionInTransactionManager: the shard's level picks the value
    version of what it writes"""
    s = TxnCoordinatorShard(PARTITION, CONFIG, lambda: 7, NUM_PARTITIONS, level)
    s.load(0, [], NOW)
    assert s.transaction_version_level is level
    res = s.init_producer_id(ID1, 1000, None, NOW)
    key, value = res.writes[0].records[0].encode()
    assert struct.unpack_from(">h", value)[0] == level.transaction_log_value_version
