"""TransactionMetadataTest: one transactional id's transitions (cluster/txn/txn_metadata.py)."""

from __future__ import annotations

import pytest

from cluster.txn.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, IllegalStateError, TransactionMetadata, TransactionState,
    TransactionVersion, TxnError,
)
from protocol.errors import ErrorCode

S = TransactionState
TV_0, TV_2 = TransactionVersion.TV_0, TransactionVersion.TV_2
NOW = 1_000_000
PRODUCER_ID = 23423
TXN_ID = "txnlId"


def metadata(producer_epoch, state=S.EMPTY, last_epoch=NO_PRODUCER_EPOCH, previous_producer_id=NO_PRODUCER_ID,
             start=-1, tv=TV_0) -> TransactionMetadata:
    return TransactionMetadata(TXN_ID, PRODUCER_ID, previous_producer_id, NO_PRODUCER_ID, producer_epoch, last_epoch,
                               30000, state, (), start, NOW, tv)


def increment(md, expected_epoch, now=NOW):
    return md.prepare_increment_producer_epoch(30000, expected_epoch, now)


def test_initialize_epoch():
    """TransactionMetadataTest.testInitializeEpoch"""
    md = metadata(NO_PRODUCER_EPOCH)
    md.complete_transition_to(increment(md, None))
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (PRODUCER_ID, 0, NO_PRODUCER_EPOCH)


def test_normal_epoch_bump():
    """TransactionMetadataTest.testNormalEpochBump"""
    md = metadata(735)
    md.complete_transition_to(increment(md, None))
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (PRODUCER_ID, 736, NO_PRODUCER_EPOCH)


def test_bump_epoch_not_allowed_if_epochs_exhausted():
    """TransactionMetadataTest.testBumpEpochNotAllowedIfEpochsExhausted"""
    md = metadata(SHORT_MAX - 1)
    assert md.is_producer_epoch_exhausted
    with pytest.raises(IllegalStateError):
        increment(md, None)


def test_tolerate_update_time_shift_during_epoch_bump():
    """TransactionMetadataTest.testTolerateUpdateTimeShiftDuringEpochBump"""
    md = metadata(1, start=1)
    md.complete_transition_to(increment(md, 1, NOW - 1))
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (PRODUCER_ID, 2, 1)
    assert md.txn_start_timestamp == 1
    assert md.txn_last_update_timestamp == NOW - 1


def test_tolerate_update_time_reset_during_producer_id_rotation():
    """TransactionMetadataTest.testTolerateUpdateTimeResetDuringProducerIdRotation"""
    md = metadata(1, start=1)
    md.complete_transition_to(md.prepare_producer_id_rotation(PRODUCER_ID + 1, 30000, NOW - 1, True))
    assert (md.producer_id, md.last_producer_epoch, md.producer_epoch) == (PRODUCER_ID + 1, 1, 0)
    assert md.txn_start_timestamp == 1
    assert md.txn_last_update_timestamp == NOW - 1


def test_tolerate_time_shift_during_add_partitions():
    """TransactionMetadataTest.testTolerateTimeShiftDuringAddPartitions"""
    md = metadata(1, start=NOW)
    md.complete_transition_to(md.prepare_add_partitions({("topic1", 0)}, NOW - 1))
    assert md.topic_partitions == {("topic1", 0)}
    assert (md.producer_id, md.last_producer_epoch, md.producer_epoch) == (PRODUCER_ID, NO_PRODUCER_EPOCH, 1)
    assert (md.txn_start_timestamp, md.txn_last_update_timestamp) == (NOW - 1, NOW - 1)
    # in Ongoing the start time stays
    md.complete_transition_to(md.prepare_add_partitions({("topic2", 0)}, NOW - 2))
    assert md.topic_partitions == {("topic1", 0), ("topic2", 0)}
    assert (md.txn_start_timestamp, md.txn_last_update_timestamp) == (NOW - 1, NOW - 2)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_tolerate_time_shift_during_prepare(state):
    """TransactionMetadataTest.testTolerateTimeShiftDuringPrepareCommit, testTolerateTimeShiftDuringPrepareAbort"""
    md = metadata(1, S.ONGOING, start=1)
    md.complete_transition_to(md.prepare_abort_or_commit(state, TV_0, NO_PRODUCER_ID, NOW - 1))
    assert md.state is state
    assert (md.producer_id, md.last_producer_epoch, md.producer_epoch) == (PRODUCER_ID, NO_PRODUCER_EPOCH, 1)
    assert (md.txn_start_timestamp, md.txn_last_update_timestamp) == (1, NOW - 1)


@pytest.mark.parametrize("tv", [TV_0, TV_2])
@pytest.mark.parametrize("state,final", [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT)])
def test_tolerate_time_shift_during_complete(tv, state, final):
    """TransactionMetadataTest.testTolerateTimeShiftDuringCompleteCommit, testTolerateTimeShiftDuringCompleteAbort"""
    md = metadata(1, state, start=1, tv=tv)
    md.complete_transition_to(md.prepare_complete(NOW - 1))
    assert md.state is final
    assert md.producer_id == PRODUCER_ID
    assert md.last_producer_epoch == (1 if tv.supports_epoch_bump else NO_PRODUCER_EPOCH)
    assert md.producer_epoch == 1
    assert (md.txn_start_timestamp, md.txn_last_update_timestamp) == (1, NOW - 1)


def test_fence_producer_after_epochs_exhausted():
    """TransactionMetadataTest.testFenceProducerAfterEpochsExhausted"""
    md = metadata(SHORT_MAX - 1, S.ONGOING)
    assert md.is_producer_epoch_exhausted
    fence = md.prepare_fence_producer_epoch()
    assert (fence.producer_epoch, fence.last_producer_epoch) == (SHORT_MAX, NO_PRODUCER_EPOCH)
    assert md.pending_state is S.PREPARE_EPOCH_FENCE
    md.pending_state = None  # make way for the abort
    transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, TV_0, NO_PRODUCER_ID, NOW)
    md.complete_transition_to(transit)
    assert transit.producer_id == PRODUCER_ID


def test_fence_producer_not_allowed_if_it_would_overflow():
    """TransactionMetadataTest.testFenceProducerNotAllowedIfItWouldOverflow"""
    md = metadata(SHORT_MAX, S.ONGOING)
    assert md.is_producer_epoch_exhausted
    with pytest.raises(IllegalStateError):
        md.prepare_fence_producer_epoch()


def test_rotate_producer_id():
    """TransactionMetadataTest.testRotateProducerId"""
    md = metadata(SHORT_MAX - 1)
    md.complete_transition_to(md.prepare_producer_id_rotation(9893, 30000, NOW, True))
    assert (md.producer_id, md.previous_producer_id) == (9893, PRODUCER_ID)
    assert (md.producer_epoch, md.last_producer_epoch) == (0, SHORT_MAX - 1)


def test_epoch_bump_on_end_txn():
    """TransactionMetadataTest.testEpochBumpOnEndTxn"""
    md = metadata(10, S.ONGOING, start=NOW)
    md.complete_transition_to(md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, NO_PRODUCER_ID, NOW - 1))
    assert (md.producer_id, md.producer_epoch, md.client_transaction_version) == (PRODUCER_ID, 11, TV_2)
    md.complete_transition_to(md.prepare_complete(NOW))
    assert (md.producer_id, md.producer_epoch, md.client_transaction_version) == (PRODUCER_ID, 11, TV_2)


def test_epoch_bump_on_end_txn_overflow():
    """TransactionMetadataTest.testEpochBumpOnEndTxnOverflow"""
    md = metadata(SHORT_MAX - 1, S.ONGOING, start=NOW)
    assert md.is_producer_epoch_exhausted
    md.complete_transition_to(md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, 9893, NOW - 1))
    assert (md.producer_id, md.producer_epoch, md.client_transaction_version) == (PRODUCER_ID, SHORT_MAX, TV_2)
    md.complete_transition_to(md.prepare_complete(NOW))
    assert (md.producer_id, md.producer_epoch, md.client_transaction_version) == (9893, 0, TV_2)
    assert md.previous_producer_id == PRODUCER_ID


@pytest.mark.parametrize("state,tv", [(S.ONGOING, TV_0), (S.PREPARE_ABORT, TV_0), (S.PREPARE_ABORT, TV_2),
                                      (S.PREPARE_COMMIT, TV_0), (S.PREPARE_COMMIT, TV_2)])
def test_rotate_producer_id_with_a_pending_transaction(state, tv):
    """TransactionMetadataTest.testRotateProducerIdInOngoingState, testRotateProducerIdInPrepareAbortState,
    testRotateProducerIdInPrepareCommitState"""
    md = metadata(SHORT_MAX - 1, state, previous_producer_id=PRODUCER_ID, tv=tv)
    with pytest.raises(IllegalStateError):
        md.prepare_producer_id_rotation(9893, 30000, NOW, False)


def test_attempted_epoch_bump_with_newly_created_metadata():
    """TransactionMetadataTest.testAttemptedEpochBumpWithNewlyCreatedMetadata"""
    md = metadata(NO_PRODUCER_EPOCH)
    md.complete_transition_to(increment(md, 735))
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (PRODUCER_ID, 0, NO_PRODUCER_EPOCH)


def test_epoch_bump_with_current_epoch_provided():
    """TransactionMetadataTest.testEpochBumpWithCurrentEpochProvided"""
    md = metadata(735)
    md.complete_transition_to(increment(md, 735))
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (PRODUCER_ID, 736, 735)


def test_attempted_epoch_bump_with_last_epoch():
    """TransactionMetadataTest.testAttemptedEpochBumpWithLastEpoch"""
    md = metadata(735, last_epoch=734)
    md.complete_transition_to(increment(md, 734))
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (PRODUCER_ID, 735, 734)


def test_attempted_epoch_bump_with_fenced_epoch():
    """TransactionMetadataTest.testAttemptedEpochBumpWithFencedEpoch"""
    md = metadata(735, last_epoch=734, previous_producer_id=PRODUCER_ID)
    with pytest.raises(TxnError) as exc:
        increment(md, 733)
    assert exc.value.code == ErrorCode.PRODUCER_FENCED
    assert md.pending_state is None


def test_transaction_state_id_and_name_mapping():
    """TransactionMetadataTest.testTransactionStateIdAndNameMapping (the admin client's names are Kafka's:
    Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, PrepareEpochFence)"""
    for state in TransactionState:
        assert TransactionState.from_id(state.id) is state
        assert TransactionState.from_name(state.state_name) is state
    assert [s.state_name for s in TransactionState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    assert [s.id for s in TransactionState] == list(range(8))
    with pytest.raises(IllegalStateError):
        TransactionState.from_id(8)


def test_all_transaction_states_are_mapped():
    """TransactionMetadataTest.testAllTransactionStatesAreMapped: every state has its valid previous states"""
    assert {s: s.valid_previous_states for s in TransactionState} == {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    assert {s for s in TransactionState if s.is_expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_a_second_prepare_while_one_is_pending_is_refused():
    """TransactionMetadata.prepareTransitionTo: a pending state blocks every other transition"""
    md = metadata(1)
    md.prepare_add_partitions({("t", 0)}, NOW)
    with pytest.raises(IllegalStateError):
        md.prepare_add_partitions({("t", 1)}, NOW)


def test_complete_without_pending_or_with_other_state_is_refused():
    """TransactionMetadata.completeTransitionTo's checks"""
    md = metadata(1)
    transit = md.prepare_add_partitions({("t", 0)}, NOW)
    other = metadata(1)
    with pytest.raises(IllegalStateError):
        other.complete_transition_to(transit)  # no pending state
    md.pending_state = S.DEAD
    with pytest.raises(IllegalStateError):
        md.complete_transition_to(transit)  # another pending state
