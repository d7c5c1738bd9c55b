"""TransactionCoordinatorTest: the APIs of one ``__transaction_state`` partition's coordinator
(cluster/txn/txn_coordinator.py). Kafka's mocked TransactionStateManager is the shard's own cache here: a test
puts the metadata in, and commits or fails the writes as Kafka's mocked appendTransactionToLog does."""

from __future__ import annotations

import pytest

from cluster.txn.txn_log import partition_for
from cluster.txn.txn_coordinator import EndTxnOutcome, InitProducerIdOutcome, TxnConfig
from cluster.txn.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, TransactionMetadata, TransactionState, TransactionVersion,
    TxnTransitMetadata,
)
from protocol.errors import ErrorCode as E
from tests.cluster.txn.harness import (
    COORDINATOR_EPOCH, NOW, PARTITIONS, PRODUCER_EPOCH, PRODUCER_ID, PRODUCER_ID2, TXN_ID, TXN_TIMEOUT_MS, Harness,
)

S = TransactionState
TV_0, TV_2 = TransactionVersion.TV_0, TransactionVersion.TV_2
TVS = pytest.mark.parametrize("tv", [TV_0, TV_2])


def md(pid=PRODUCER_ID, prev=PRODUCER_ID, nxt=NO_PRODUCER_ID, epoch=PRODUCER_EPOCH, last=NO_PRODUCER_EPOCH,
       timeout=TXN_TIMEOUT_MS, state=S.EMPTY, partitions=(), start=NOW, update=NOW, tv=TV_0, txn_id=TXN_ID):
    return TransactionMetadata(txn_id, pid, prev, nxt, epoch, last, timeout, state, partitions, start, update, tv)


def init_pid(h, txn_id=TXN_ID, timeout=TXN_TIMEOUT_MS, expected=None, error=0):
    res = h.shard.init_producer_id(txn_id, timeout, expected, NOW, token="req")
    outcome, results = h.settle(res, error, token="req")
    return outcome, results


def add_partitions(h, pid, epoch, partitions=PARTITIONS, txn_id=TXN_ID, error=0):
    res = h.shard.add_partitions_to_txn(txn_id, pid, epoch, partitions, NOW, token="req")
    return h.settle(res, error, token="req")


def end_txn(h, pid, epoch, committed, tv=TV_0, txn_id=TXN_ID, error=0):
    res = h.shard.end_txn(txn_id, pid, epoch, committed, tv, NOW, token="req")
    return h.settle(res, error, token="req")


def request_epoch(tv):
    return PRODUCER_EPOCH - 1 if tv.supports_epoch_bump else PRODUCER_EPOCH


def failed(code):
    return InitProducerIdOutcome(-1, -1, code)


# ---- InitProducerId ---------------------------------------------------------------------------------------------

def test_should_return_invalid_request_when_transactional_id_is_empty():
    """TransactionCoordinatorTest.shouldReturnInvalidRequestWhenTransactionalIdIsEmpty"""
    h = Harness()
    assert init_pid(h, "")[0] == failed(E.INVALID_REQUEST)
    assert init_pid(h, "")[0] == failed(E.INVALID_REQUEST)


@pytest.mark.parametrize("timeout", [0, -1, 900001])
def test_invalid_transaction_timeout(timeout):
    """TransactionStateManagerTest.testValidateTransactionTimeout through InitProducerId: > transaction.max.timeout.ms
    or <= 0 is INVALID_TRANSACTION_TIMEOUT"""
    h = Harness()
    assert init_pid(h, timeout=timeout)[0] == failed(E.INVALID_TRANSACTION_TIMEOUT)
    assert TxnConfig().validate_transaction_timeout_ms(900000)
    assert not TxnConfig().validate_transaction_timeout_ms(900001)


def test_should_init_pid_with_epoch_zero_for_new_transactional_id():
    """TransactionCoordinatorTest.shouldInitPidWithEpochZeroForNewTransactionalId"""
    h = Harness()
    assert init_pid(h)[0] == InitProducerIdOutcome(h.next_pid - 1, 0)
    assert h.get().state is S.EMPTY and h.get().producer_epoch == 0


def test_should_generate_new_producer_id_if_no_state_and_producer_id_and_epoch_provided():
    """TransactionCoordinatorTest.shouldGenerateNewProducerIdIfNoStateAndProducerIdAndEpochProvided"""
    h = Harness()
    assert init_pid(h, expected=(PRODUCER_ID, PRODUCER_EPOCH))[0] == InitProducerIdOutcome(h.next_pid - 1, 0)


def test_should_generate_new_producer_id_if_epochs_exhausted():
    """TransactionCoordinatorTest.shouldGenerateNewProducerIdIfEpochsExhausted"""
    h = Harness()
    h.put(md(epoch=SHORT_MAX - 1, last=SHORT_MAX - 2))
    outcome = init_pid(h)[0]
    assert outcome.producer_id != PRODUCER_ID and outcome.producer_epoch == 0 and outcome.error == E.NONE


def test_should_respond_with_not_coordinator_on_init_pid_when_not_coordinator():
    """TransactionCoordinatorTest.shouldRespondWithNotCoordinatorOnInitPidWhenNotCoordinator"""
    h = Harness()
    h.shard.unload(NOW)
    assert init_pid(h)[0] == failed(E.NOT_COORDINATOR)
    other = Harness(num_partitions=50, partition=partition_for("a", 50) + 1)  # "a" is another partition's id
    assert init_pid(other, txn_id="a")[0] == failed(E.NOT_COORDINATOR)
    assert other.shard.describe_transaction("a").error_code == E.NOT_COORDINATOR


def test_should_respond_with_coordinator_load_in_progress_on_init_pid_when_coordinator_loading():
    """TransactionCoordinatorTest.shouldRespondWithCoordinatorLoadInProgressOnInitPidWhenCoordinatorLoading"""
    h = Harness()
    h.shard.begin_load(1, NOW)
    assert init_pid(h)[0] == failed(E.COORDINATOR_LOAD_IN_PROGRESS)


def test_producer_ids_unavailable_is_coordinator_load_in_progress():
    """RPCProducerIdManager.generateProducerId while no block is at hand: COORDINATOR_LOAD_IN_PROGRESS, and the
    result asks the adapter for a block"""
    h = Harness()
    h.pids_available = False
    res = h.shard.init_producer_id(TXN_ID, TXN_TIMEOUT_MS, None, NOW, token="req")
    assert res.response == failed(E.COORDINATOR_LOAD_IN_PROGRESS) and res.needs_producer_ids
    assert TXN_ID not in h.shard.transactions and not res.writes


def test_should_respond_with_invalid_pid_mapping_on_add_partitions_when_transactional_id_not_present():
    """TransactionCoordinatorTest.shouldRespondWithInvalidPidMappingOnAddPartitionsToTransactionWhenTransactionalIdNotPresent"""
    assert add_partitions(Harness(), 0, 1)[0] == E.INVALID_PRODUCER_ID_MAPPING


def test_should_respond_with_invalid_request_add_partitions_when_transactional_id_is_empty():
    """TransactionCoordinatorTest.shouldRespondWithInvalidRequestAddPartitionsToTransactionWhenTransactionalIdIsEmpty,
    ...WhenTransactionalIdIsNull"""
    assert add_partitions(Harness(), 0, 1, txn_id="")[0] == E.INVALID_REQUEST
    assert add_partitions(Harness(), 0, 1, txn_id=None)[0] == E.INVALID_REQUEST


def test_should_respond_with_not_coordinator_on_add_partitions_when_not_coordinator():
    """TransactionCoordinatorTest.shouldRespondWithNotCoordinatorOnAddPartitionsWhenNotCoordinator"""
    h = Harness()
    h.shard.unload(NOW)
    assert add_partitions(h, 0, 1)[0] == E.NOT_COORDINATOR


def test_should_respond_with_coordinator_load_in_progress_on_add_partitions_when_coordinator_loading():
    """TransactionCoordinatorTest.shouldRespondWithCoordinatorLoadInProgressOnAddPartitionsWhenCoordinatorLoading"""
    h = Harness()
    h.shard.begin_load(1, NOW)
    assert add_partitions(h, 0, 1)[0] == E.COORDINATOR_LOAD_IN_PROGRESS


def test_verify_partition_handling():
    """TransactionCoordinatorTest.testVerifyPartitionHandling"""
    h = Harness()
    h.put(md(pid=1, prev=0, epoch=0, timeout=0, state=S.PREPARE_COMMIT, partitions=PARTITIONS, start=0, update=0))
    assert set(h.shard.verify_partitions_in_txn(TXN_ID, 0, 0, PARTITIONS).values()) == {E.INVALID_PRODUCER_ID_MAPPING}
    h.put(md(pid=0, prev=0, epoch=0, timeout=0, state=S.PREPARE_COMMIT, partitions=PARTITIONS, start=0, update=0))
    assert set(h.shard.verify_partitions_in_txn(TXN_ID, 0, 1, PARTITIONS).values()) == {E.PRODUCER_FENCED}
    assert set(h.shard.verify_partitions_in_txn(TXN_ID, 0, 0, PARTITIONS).values()) == {E.CONCURRENT_TRANSACTIONS}
    ongoing = h.put(md(pid=0, prev=0, epoch=0, timeout=0, state=S.ONGOING, start=0, update=0))
    ongoing.pending_state = S.COMPLETE_COMMIT  # the pending state does not matter
    assert set(h.shard.verify_partitions_in_txn(TXN_ID, 0, 0, PARTITIONS).values()) == {E.TRANSACTION_ABORTABLE}
    assert set(h.shard.verify_partitions_in_txn("", 0, 0, PARTITIONS).values()) == {E.INVALID_REQUEST}
    assert set(h.shard.verify_partitions_in_txn("unknown", 0, 0, PARTITIONS).values()) == {
        E.INVALID_PRODUCER_ID_MAPPING}


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_respond_with_concurrent_transactions_on_add_partitions_when_state_is_prepare(state):
    """TransactionCoordinatorTest.shouldRespondWithConcurrentTransactionsOnAddPartitionsWhenStateIsPrepareCommit,
    shouldRespondWithConcurrentTransactionOnAddPartitionsWhenStateIsPrepareAbort"""
    h = Harness()
    h.put(md(pid=0, prev=0, epoch=0, timeout=0, state=state, start=0, update=0, tv=TV_2))
    assert add_partitions(h, 0, 0)[0] == E.CONCURRENT_TRANSACTIONS


def test_should_respond_with_producer_fenced_on_add_partitions_when_epochs_are_different():
    """TransactionCoordinatorTest.shouldRespondWithProducerFencedOnAddPartitionsWhenEpochsAreDifferent"""
    h = Harness()
    h.put(md(pid=0, prev=0, epoch=10, last=9, timeout=0, state=S.PREPARE_COMMIT, start=0, update=0, tv=TV_2))
    assert add_partitions(h, 0, 0)[0] == E.PRODUCER_FENCED


@pytest.mark.parametrize("state,tv", [(S.EMPTY, TV_0), (S.ONGOING, TV_0), (S.COMPLETE_COMMIT, TV_0),
                                      (S.COMPLETE_COMMIT, TV_2), (S.COMPLETE_ABORT, TV_0), (S.COMPLETE_ABORT, TV_2)])
def test_successful_add_partitions(state, tv):
    """TransactionCoordinatorTest.shouldAppendNewMetadataToLogOnAddPartitionsWhenPartitionsAdded,
    shouldRespondWithSuccessOnAddPartitionsWhenStateIsOngoing, ...WhenStateIsCompleteCommit,
    ...WhenStateIsCompleteAbort"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1, state=state, tv=tv))
    res = h.shard.add_partitions_to_txn(TXN_ID, PRODUCER_ID, PRODUCER_EPOCH, PARTITIONS, NOW + 5, token="req")
    assert res.response is None
    ((record,),) = [w.records for w in res.writes]
    assert record.transit.txn_state is S.ONGOING and record.transit.topic_partitions == PARTITIONS
    assert h.get().pending_state is S.ONGOING
    assert h.settle(res, token="req")[0] == E.NONE
    assert h.get().state is S.ONGOING and h.get().topic_partitions == set(PARTITIONS)
    assert h.get().txn_start_timestamp == (NOW if state is S.ONGOING else NOW + 5)


def test_should_respond_with_errors_none_on_add_partition_when_no_errors_and_partitions_the_same():
    """TransactionCoordinatorTest.shouldRespondWithErrorsNoneOnAddPartitionWhenNoErrorsAndPartitionsTheSame (the
    metadata is Ongoing: Kafka's test builds it Empty with partitions, which its prepare would refuse to write)"""
    h = Harness()
    h.put(md(pid=0, prev=0, epoch=0, timeout=0, state=S.ONGOING, partitions=PARTITIONS, start=0, update=0))
    res = h.shard.add_partitions_to_txn(TXN_ID, 0, 0, PARTITIONS, NOW, token="req")
    assert res.response == E.NONE and not res.writes


def test_should_respond_with_errors_none_on_add_partition_when_ongoing_verify_only_and_partitions_the_same():
    """TransactionCoordinatorTest.shouldRespondWithErrorsNoneOnAddPartitionWhenOngoingVerifyOnlyAndPartitionsTheSame"""
    h = Harness()
    h.put(md(pid=0, prev=0, epoch=0, timeout=0, state=S.ONGOING, partitions=PARTITIONS, start=0, update=0))
    assert set(h.shard.verify_partitions_in_txn(TXN_ID, 0, 0, PARTITIONS).values()) == {E.NONE}


def test_should_respond_with_invalid_txn_state_when_verify_only_and_partition_not_present():
    """TransactionCoordinatorTest.shouldRespondWithInvalidTxnStateWhenVerifyOnlyAndPartitionNotPresent"""
    h = Harness()
    h.put(md(pid=0, prev=0, epoch=0, timeout=0, state=S.EMPTY, partitions=PARTITIONS, start=0, update=0))
    got = h.shard.verify_partitions_in_txn(TXN_ID, 0, 0, PARTITIONS | {("topic2", 0)})
    assert got == {("topic1", 0): E.NONE, ("topic2", 0): E.TRANSACTION_ABORTABLE}


# ---- EndTxn -------------------------------------------------------------------------------------------------------

@TVS
def test_should_reply_with_invalid_pid_mapping_on_end_txn_when_txn_id_doesnt_exist(tv):
    """TransactionCoordinatorTest.shouldReplyWithInvalidPidMappingOnEndTxnWhenTxnIdDoesntExist"""
    assert end_txn(Harness(), 0, 0, True, tv)[0] == EndTxnOutcome(E.INVALID_PRODUCER_ID_MAPPING)


@TVS
def test_should_reply_with_invalid_pid_mapping_on_end_txn_when_pid_dosent_match_mapped(tv):
    """TransactionCoordinatorTest.shouldReplyWithInvalidPidMappingOnEndTxnWhenPidDosentMatchMapped"""
    h = Harness()
    h.put(md(pid=10, prev=10, epoch=0, timeout=0, state=S.ONGOING, start=0))
    assert end_txn(h, 0, 0, True, tv)[0] == EndTxnOutcome(E.INVALID_PRODUCER_ID_MAPPING)


@TVS
def test_should_reply_with_producer_fenced_on_end_txn_when_epoch_is_not_same_as_transaction(tv):
    """TransactionCoordinatorTest.shouldReplyWithProducerFencedOnEndTxnWhenEpochIsNotSameAsTransaction"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1, state=S.ONGOING, start=0))
    assert end_txn(h, PRODUCER_ID, 0, True, tv)[0] == EndTxnOutcome(E.PRODUCER_FENCED)


@TVS
@pytest.mark.parametrize("state,committed", [(S.COMPLETE_COMMIT, True), (S.COMPLETE_ABORT, False)])
def test_should_return_ok_on_end_txn_when_status_is_complete_and_result_matches(tv, state, committed):
    """TransactionCoordinatorTest.shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIsCommit,
    shouldReturnOkOnEndTxnWhenStatusIsCompleteAbortAndResultIsAbort"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1, state=state, start=0, tv=tv))
    res = h.shard.end_txn(TXN_ID, PRODUCER_ID, request_epoch(tv), committed, tv, NOW, token="req")
    assert res.response == EndTxnOutcome(E.NONE, PRODUCER_ID, PRODUCER_EPOCH) and not res.writes


@TVS
@pytest.mark.parametrize("state,committed", [(S.COMPLETE_ABORT, True), (S.COMPLETE_COMMIT, False)])
def test_should_return_invalid_txn_request_on_end_txn_when_complete_and_result_differs(tv, state, committed):
    """TransactionCoordinatorTest.shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsCompleteAbortAndResultIsNotAbort,
    ...WhenStatusIsCompleteCommitAndResultIsNotCommit"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1, state=state, start=0, tv=tv))
    assert end_txn(h, PRODUCER_ID, request_epoch(tv), committed, tv)[0] == EndTxnOutcome(E.INVALID_TXN_STATE)


@TVS
def test_should_return_concurrent_transactions_on_end_txn_request_when_status_is_prepare_commit(tv):
    """TransactionCoordinatorTest.shouldReturnConcurrentTransactionsOnEndTxnRequestWhenStatusIsPrepareCommit"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1, state=S.PREPARE_COMMIT, start=0, tv=tv))
    assert end_txn(h, PRODUCER_ID, request_epoch(tv), True, tv)[0] == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)


@TVS
def test_should_return_invalid_txn_request_on_end_txn_request_when_status_is_prepare_abort(tv):
    """TransactionCoordinatorTest.shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsPrepareAbort"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.PREPARE_ABORT, start=0, tv=tv))
    assert end_txn(h, PRODUCER_ID, request_epoch(tv), True, tv)[0] == EndTxnOutcome(E.INVALID_TXN_STATE)


def test_should_return_when_transaction_version_downgraded():
    """TransactionCoordinatorTest.shouldReturnWhenTransactionVersionDowngraded"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH + 1, state=S.PREPARE_COMMIT, start=0, tv=TV_2))
    assert end_txn(h, PRODUCER_ID, PRODUCER_EPOCH, True, TV_0)[0] == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)
    h.put(md(epoch=PRODUCER_EPOCH + 1, state=S.COMPLETE_COMMIT, start=0, tv=TV_2))
    assert end_txn(h, PRODUCER_ID, PRODUCER_EPOCH, True, TV_0)[0] == EndTxnOutcome(E.NONE, PRODUCER_ID,
                                                                                    PRODUCER_EPOCH + 1)


def test_should_return_correctly_when_transaction_version_upgraded():
    """TransactionCoordinatorTest.shouldReturnCorrectlyWhenTransactionVersionUpgraded"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.PREPARE_COMMIT, start=0, tv=TV_0))
    assert end_txn(h, PRODUCER_ID, PRODUCER_EPOCH, True, TV_2)[0] == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)
    h.put(md(epoch=PRODUCER_EPOCH, state=S.COMPLETE_COMMIT, start=0, tv=TV_0))
    assert end_txn(h, PRODUCER_ID, PRODUCER_EPOCH, True, TV_2)[0] == EndTxnOutcome(E.NONE, PRODUCER_ID, PRODUCER_EPOCH)


def test_should_return_invalid_txn_request_on_end_txn_v2_if_not_end_txn_v2_retry():
    """TransactionCoordinatorTest.shouldReturnInvalidTxnRequestOnEndTxnV2IfNotEndTxnV2Retry"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.PREPARE_COMMIT, start=0, tv=TV_2))
    assert end_txn(h, PRODUCER_ID, PRODUCER_EPOCH, True, TV_2)[0] == EndTxnOutcome(E.PRODUCER_FENCED)
    h.put(md(epoch=PRODUCER_EPOCH, state=S.COMPLETE_COMMIT, start=0, tv=TV_2))
    assert end_txn(h, PRODUCER_ID, PRODUCER_EPOCH, True, TV_2)[0] == EndTxnOutcome(E.PRODUCER_FENCED)


def test_should_return_ok_on_end_txn_v2_if_end_txn_v2_retry_epoch_overflow():
    """TransactionCoordinatorTest.shouldReturnOkOnEndTxnV2IfEndTxnV2RetryEpochOverflow"""
    h = Harness()
    h.put(md(nxt=PRODUCER_ID2, epoch=SHORT_MAX, last=SHORT_MAX - 1, state=S.PREPARE_COMMIT, start=0, tv=TV_2))
    assert end_txn(h, PRODUCER_ID, SHORT_MAX - 1, True, TV_2)[0] == EndTxnOutcome(E.CONCURRENT_TRANSACTIONS)
    h.put(md(pid=PRODUCER_ID2, prev=PRODUCER_ID, epoch=0, state=S.COMPLETE_COMMIT, start=0, tv=TV_2))
    assert end_txn(h, PRODUCER_ID, SHORT_MAX - 1, True, TV_2)[0] == EndTxnOutcome(E.NONE, PRODUCER_ID2, 0)


@TVS
@pytest.mark.parametrize("committed,state", [(True, S.PREPARE_COMMIT), (False, S.PREPARE_ABORT)])
def test_should_append_prepare_to_log_on_end_txn_when_status_is_ongoing(tv, committed, state):
    """TransactionCoordinatorTest.shouldAppendPrepareCommitToLogOnEndTxnWhenStatusIsOngoingAndResultIsCommit,
    shouldAppendPrepareAbortToLogOnEndTxnWhenStatusIsOngoingAndResultIsAbort"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS))
    res = h.shard.end_txn(TXN_ID, PRODUCER_ID, PRODUCER_EPOCH, committed, tv, NOW, token="req")
    assert res.response is None
    ((record,),) = [w.records for w in res.writes]
    bumped = PRODUCER_EPOCH + 1 if tv.supports_epoch_bump else PRODUCER_EPOCH
    last = PRODUCER_EPOCH if tv.supports_epoch_bump else NO_PRODUCER_EPOCH
    assert record.transit == TxnTransitMetadata(PRODUCER_ID, PRODUCER_ID, NO_PRODUCER_ID, bumped, last,
                                                TXN_TIMEOUT_MS, state, PARTITIONS, NOW, NOW, tv)


@TVS
def test_should_respond_with_invalid_request_on_end_txn_when_transactional_id_is_null_or_empty(tv):
    """TransactionCoordinatorTest.shouldRespondWithInvalidRequestOnEndTxnWhenTransactionalIdIsNull,
    shouldRespondWithInvalidRequestOnEndTxnWhenTransactionalIdIsEmpty"""
    assert end_txn(Harness(), 0, 0, True, tv, txn_id=None)[0] == EndTxnOutcome(E.INVALID_REQUEST)
    h = Harness()
    h.shard.unload(NOW)
    assert end_txn(h, 0, 0, True, tv, txn_id="")[0] == EndTxnOutcome(E.INVALID_REQUEST)


@TVS
def test_should_respond_with_not_coordinator_on_end_txn_when_is_not_coordinator_for_id(tv):
    """TransactionCoordinatorTest.shouldRespondWithNotCoordinatorOnEndTxnWhenIsNotCoordinatorForId"""
    h = Harness()
    h.shard.unload(NOW)
    assert end_txn(h, 0, 0, True, tv)[0] == EndTxnOutcome(E.NOT_COORDINATOR)


@TVS
def test_should_respond_with_coordinator_load_in_progress_on_end_txn_when_coordinator_is_loading(tv):
    """TransactionCoordinatorTest.shouldRespondWithCoordinatorLoadInProgressOnEndTxnWhenCoordinatorIsLoading"""
    h = Harness()
    h.shard.begin_load(1, NOW)
    assert end_txn(h, 0, 0, True, tv)[0] == EndTxnOutcome(E.COORDINATOR_LOAD_IN_PROGRESS)


@TVS
@pytest.mark.parametrize("server_epoch,larger", [(1, True), (2, False)])
def test_should_return_invalid_epoch_on_end_txn_when_epoch_differs(tv, server_epoch, larger):
    """TransactionCoordinatorTest.shouldReturnInvalidEpochOnEndTxnWhenEpochIsLarger,
    shouldReturnInvalidEpochOnEndTxnWhenEpochIsSmaller"""
    h = Harness()
    h.put(md(epoch=server_epoch, last=1, state=S.COMPLETE_COMMIT, start=0, tv=tv))
    epoch = server_epoch + 1 if larger else request_epoch(tv)
    assert end_txn(h, PRODUCER_ID, epoch, True, tv)[0] == EndTxnOutcome(E.PRODUCER_FENCED)


# ---- InitProducerId on existing ids ---------------------------------------------------------------------------------

@pytest.mark.parametrize("state,tv", [(S.EMPTY, TV_0), (S.COMPLETE_ABORT, TV_0), (S.COMPLETE_ABORT, TV_2),
                                      (S.COMPLETE_COMMIT, TV_0), (S.COMPLETE_COMMIT, TV_2)])
def test_should_increment_epoch_and_update_metadata_on_handle_init_pid(state, tv):
    """TransactionCoordinatorTest.shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExistingEmptyTransaction,
    ...WhenExistingCompleteTransaction, ...WhenExistingCompleteCommitTransaction"""
    h = Harness()
    m = h.put(md(epoch=PRODUCER_EPOCH, state=state, tv=tv, update=NOW - 100))
    assert init_pid(h, timeout=10)[0] == InitProducerIdOutcome(PRODUCER_ID, PRODUCER_EPOCH + 1)
    assert (m.txn_timeout_ms, m.txn_last_update_timestamp, m.producer_epoch, m.producer_id) == (
        10, NOW, PRODUCER_EPOCH + 1, PRODUCER_ID)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_wait_for_commit_to_complete_on_handle_init_pid_in_prepare_state(state):
    """TransactionCoordinatorTest.shouldWaitForCommitToCompleteOnHandleInitPidAndExistingTransactionInPrepareCommitState,
    ...InPrepareAbortState"""
    h = Harness()
    h.put(md(pid=0, prev=0, epoch=0, timeout=0, state=state, partitions={("topic", 1)}, start=0, update=0, tv=TV_2))
    assert init_pid(h, timeout=10)[0] == failed(E.CONCURRENT_TRANSACTIONS)


def test_should_abort_transaction_on_handle_init_pid_when_existing_transaction_in_ongoing_state():
    """TransactionCoordinatorTest.shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1, state=S.ONGOING, partitions=PARTITIONS))
    res = h.shard.init_producer_id(TXN_ID, TXN_TIMEOUT_MS, None, NOW, token="req")
    ((record,),) = [w.records for w in res.writes]
    original = md(epoch=PRODUCER_EPOCH + 1, state=S.ONGOING, partitions=PARTITIONS)
    assert record.transit == original.prepare_abort_or_commit(S.PREPARE_ABORT, TV_0, NO_PRODUCER_ID, NOW)
    assert h.settle(res, token="req")[0] == failed(E.CONCURRENT_TRANSACTIONS)


def test_should_fail_to_abort_transaction_on_handle_init_pid_when_producer_epoch_is_smaller():
    """TransactionCoordinatorTest.shouldFailToAbortTransactionOnHandleInitPidWhenProducerEpochIsSmaller: the epoch
    moved past the fence's between the fence and its abort (Kafka's mock returns a bumped metadata the second time)"""
    h = Harness()
    m = h.put(md(epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1, state=S.ONGOING, partitions=PARTITIONS))
    fence = m.prepare_fence_producer_epoch

    def fence_then_bumped_elsewhere():
        transit = fence()
        m.producer_epoch = PRODUCER_EPOCH + 2
        return transit
    m.prepare_fence_producer_epoch = fence_then_bumped_elsewhere
    res = h.shard.init_producer_id(TXN_ID, TXN_TIMEOUT_MS, None, NOW, token="req")
    assert res.response == failed(E.PRODUCER_FENCED) and not res.writes


def test_should_not_repeatedly_bump_epoch_due_to_init_pid_during_ongoing_txn_if_append_to_log_fails():
    """TransactionCoordinatorTest.shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppendToLogFails"""
    h = Harness()
    m = h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS))
    expected = md(epoch=PRODUCER_EPOCH + 1, state=S.ONGOING, partitions=PARTITIONS).prepare_abort_or_commit(
        S.PREPARE_ABORT, TV_0, NO_PRODUCER_ID, NOW)
    for _ in range(2):
        res = h.shard.init_producer_id(TXN_ID, TXN_TIMEOUT_MS, None, NOW, token="req")
        assert res.writes[0].records[0].transit == expected
        assert h.settle(res, E.NOT_ENOUGH_REPLICAS, token="req")[0] == failed(E.COORDINATOR_NOT_AVAILABLE)
        assert m.producer_epoch == PRODUCER_EPOCH + 1 and m.has_failed_epoch_fence and m.pending_state is None
    res = h.shard.init_producer_id(TXN_ID, TXN_TIMEOUT_MS, None, NOW, token="req")
    assert res.writes[0].records[0].transit == expected
    assert h.settle(res, token="req")[0] == failed(E.CONCURRENT_TRANSACTIONS)
    assert m.producer_epoch == PRODUCER_EPOCH + 1 and not m.has_failed_epoch_fence


def test_should_use_last_epoch_to_fence_when_epochs_are_exhausted():
    """TransactionCoordinatorTest.shouldUseLastEpochToFenceWhenEpochsAreExhausted"""
    h = Harness()
    m = h.put(md(epoch=SHORT_MAX - 1, last=SHORT_MAX - 2, state=S.ONGOING, partitions=PARTITIONS))
    assert m.is_producer_epoch_exhausted
    res = h.shard.init_producer_id(TXN_ID, TXN_TIMEOUT_MS, None, NOW, token="req")
    assert res.writes[0].records[0].transit == TxnTransitMetadata(
        PRODUCER_ID, PRODUCER_ID, NO_PRODUCER_ID, SHORT_MAX, NO_PRODUCER_EPOCH, TXN_TIMEOUT_MS, S.PREPARE_ABORT,
        PARTITIONS, NOW, NOW, TV_0)
    assert m.producer_epoch == SHORT_MAX
    assert h.settle(res, token="req")[0] == failed(E.CONCURRENT_TRANSACTIONS)


def test_init_producer_id_with_no_last_producer_data():
    """TransactionCoordinatorTest.testInitProducerIdWithNoLastProducerData"""
    h = Harness()
    h.put(md(prev=NO_PRODUCER_ID, nxt=NO_PRODUCER_ID, epoch=PRODUCER_EPOCH + 1, state=S.EMPTY))
    assert init_pid(h, expected=(PRODUCER_ID, PRODUCER_EPOCH))[0] == failed(E.PRODUCER_FENCED)


def test_fence_producer_when_mapping_exists_with_different_producer_id():
    """TransactionCoordinatorTest.testFenceProducerWhenMappingExistsWithDifferentProducerId"""
    h = Harness()
    h.put(md(pid=PRODUCER_ID + 1, prev=PRODUCER_ID, epoch=PRODUCER_EPOCH, last=PRODUCER_EPOCH - 1))
    assert init_pid(h, expected=(PRODUCER_ID, PRODUCER_EPOCH))[0] == failed(E.PRODUCER_FENCED)


def test_init_producer_id_with_current_epoch_provided():
    """TransactionCoordinatorTest.testInitProducerIdWithCurrentEpochProvided"""
    h = Harness()
    h.put(md(epoch=10, last=9))
    assert init_pid(h, expected=(PRODUCER_ID, 10))[0] == InitProducerIdOutcome(PRODUCER_ID, 11)
    # a retry after a bump whose answer was lost
    assert init_pid(h, expected=(PRODUCER_ID, 10))[0] == InitProducerIdOutcome(PRODUCER_ID, 11)


def test_init_producer_id_stale_current_epoch_provided():
    """TransactionCoordinatorTest.testInitProducerIdStaleCurrentEpochProvided"""
    h = Harness()
    h.put(md(epoch=10, last=9))
    assert init_pid(h)[0] == InitProducerIdOutcome(PRODUCER_ID, 11)
    assert init_pid(h, expected=(PRODUCER_ID, 10))[0] == failed(E.PRODUCER_FENCED)


def test_retry_init_producer_id_after_producer_id_rotation():
    """TransactionCoordinatorTest.testRetryInitProducerIdAfterProducerIdRotation"""
    h = Harness(first_pid=PRODUCER_ID + 1)
    h.put(md(epoch=SHORT_MAX - 1, last=SHORT_MAX - 2))
    assert init_pid(h, expected=(PRODUCER_ID, SHORT_MAX - 1))[0] == InitProducerIdOutcome(PRODUCER_ID + 1, 0)
    assert init_pid(h, expected=(PRODUCER_ID, SHORT_MAX - 1))[0] == InitProducerIdOutcome(PRODUCER_ID + 1, 0)


def test_init_producer_id_with_invalid_epoch_after_producer_id_rotation():
    """TransactionCoordinatorTest.testInitProducerIdWithInvalidEpochAfterProducerIdRotation"""
    h = Harness(first_pid=PRODUCER_ID + 1)
    h.put(md(epoch=SHORT_MAX - 1, last=SHORT_MAX - 2))
    assert init_pid(h, expected=(PRODUCER_ID, SHORT_MAX - 1))[0] == InitProducerIdOutcome(PRODUCER_ID + 1, 0)
    assert init_pid(h, expected=(PRODUCER_ID, SHORT_MAX - 2))[0] == failed(E.PRODUCER_FENCED)


def test_should_remove_transactions_for_partition_on_emigration():
    """TransactionCoordinatorTest.shouldRemoveTransactionsForPartitionOnEmigration: unload drops the state and the
    markers, and answers the requests waiting for a write NOT_COORDINATOR"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS))
    waiting = h.shard.end_txn(TXN_ID, PRODUCER_ID, PRODUCER_EPOCH, True, TV_0, NOW, token="req")
    res = h.shard.unload(NOW)
    assert res.completions == [("req", EndTxnOutcome(E.NOT_COORDINATOR))]
    assert h.shard.transactions == {} and h.shard.coordinator_epoch is None
    assert h.shard.write_completed(waiting.writes[0].write_id, 0, NOW).completions == []  # a stale report


# ---- timed-out transactions -----------------------------------------------------------------------------------------

def abort_interval():
    return TxnConfig().abort_timed_out_transactions_interval_ms


def test_should_abort_expired_transactions_in_ongoing_state_and_bump_epoch():
    """TransactionCoordinatorTest.shouldAbortExpiredTransactionsInOngoingStateAndBumpEpoch"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS))
    assert h.shard.next_deadline() == NOW + abort_interval()
    res = h.shard.poll(NOW + abort_interval())
    ((record,),) = [w.records for w in res.writes]
    assert record.transit == TxnTransitMetadata(PRODUCER_ID, PRODUCER_ID, NO_PRODUCER_ID, PRODUCER_EPOCH + 1,
                                                NO_PRODUCER_EPOCH, TXN_TIMEOUT_MS, S.PREPARE_ABORT, PARTITIONS, NOW,
                                                NOW + abort_interval(), TV_0)


def test_should_not_accept_smaller_epoch_during_transaction_expiration():
    """TransactionCoordinatorTest.shouldNotAcceptSmallerEpochDuringTransactionExpiration: the coordinator's abort
    carrying an epoch below the current one is PRODUCER_FENCED"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH + 2, state=S.ONGOING, partitions=PARTITIONS))
    outcomes = []
    h.shard._run(NOW, h.shard._end_transaction, TXN_ID, PRODUCER_ID, PRODUCER_EPOCH + 1, False, False, TV_0,
                 outcomes.append)
    assert outcomes == [EndTxnOutcome(E.PRODUCER_FENCED)]


def test_should_not_abort_expired_transactions_that_have_a_pending_state_transition():
    """TransactionCoordinatorTest.shouldNotAbortExpiredTransactionsThatHaveAPendingStateTransition"""
    h = Harness()
    m = h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS))
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, NO_PRODUCER_ID, NOW)
    res = h.shard.poll(NOW + abort_interval())
    assert res.writes == [] and m.pending_state is S.PREPARE_COMMIT


def test_should_not_bump_epoch_when_aborting_expired_transaction_if_append_to_log_fails():
    """TransactionCoordinatorTest.shouldNotBumpEpochWhenAbortingExpiredTransactionIfAppendToLogFails"""
    h = Harness()
    m = h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS))
    res = h.shard.poll(NOW + abort_interval())
    h.settle(res, E.NOT_ENOUGH_REPLICAS)
    assert m.producer_epoch == PRODUCER_EPOCH + 1 and m.has_failed_epoch_fence and m.state is S.ONGOING
    res = h.shard.poll(NOW + 2 * abort_interval())  # the next try keeps the epoch
    assert res.writes[0].records[0].transit.producer_epoch == PRODUCER_EPOCH + 1


def test_should_not_bump_epoch_with_pending_transaction():
    """TransactionCoordinatorTest.shouldNotBumpEpochWithPendingTransaction"""
    h = Harness()
    m = h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS))
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, NO_PRODUCER_ID, NOW)
    assert init_pid(h, expected=(PRODUCER_ID, 10))[0] == failed(E.CONCURRENT_TRANSACTIONS)


# ---- DescribeTransactions -----------------------------------------------------------------------------------------

def test_describe_transactions_with_empty_transactional_id():
    """TransactionCoordinatorTest.testDescribeTransactionsWithEmptyTransactionalId"""
    got = Harness().shard.describe_transaction("")
    assert (got.transactional_id, got.error_code) == ("", E.INVALID_REQUEST)


def test_describe_transactions_with_expiring_transactional_id():
    """TransactionCoordinatorTest.testDescribeTransactionsWithExpiringTransactionalId"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.DEAD))
    got = h.shard.describe_transaction(TXN_ID)
    assert (got.transactional_id, got.error_code) == (TXN_ID, E.TRANSACTIONAL_ID_NOT_FOUND)
    assert Harness().shard.describe_transaction(TXN_ID).error_code == E.TRANSACTIONAL_ID_NOT_FOUND


def test_describe_transactions_while_coordinator_loading():
    """TransactionCoordinatorTest.testDescribeTransactionsWhileCoordinatorLoading"""
    h = Harness()
    h.shard.begin_load(1, NOW)
    got = h.shard.describe_transaction(TXN_ID)
    assert (got.transactional_id, got.error_code) == (TXN_ID, E.COORDINATOR_LOAD_IN_PROGRESS)


def test_describe_transactions():
    """TransactionCoordinatorTest.testDescribeTransactions"""
    h = Harness()
    h.put(md(epoch=PRODUCER_EPOCH, state=S.ONGOING, partitions=PARTITIONS | {("topic1", 3), ("t0", 1)}))
    got = h.shard.describe_transaction(TXN_ID)
    assert got.error_code == E.NONE and got.transactional_id == TXN_ID
    assert (got.producer_id, got.producer_epoch, got.transaction_timeout_ms, got.transaction_start_time_ms) == (
        PRODUCER_ID, PRODUCER_EPOCH, TXN_TIMEOUT_MS, NOW)
    assert got.transaction_state == "Ongoing"
    assert {(t.topic, p) for t in got.topics for p in t.partitions} == PARTITIONS | {("topic1", 3), ("t0", 1)}
    assert COORDINATOR_EPOCH == h.shard.coordinator_epoch
