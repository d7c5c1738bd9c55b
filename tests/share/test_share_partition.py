"""Kafka's SharePartitionTest (core/src/test/java/kafka/server/share/), ported to the pure SharePartition.

Each test names the Kafka method it ports. Kafka's tests feed MemoryRecords and a mocked persister whose writes
succeed at once; here the batches are header ranges and :func:`ack`/:func:`release` complete the write at once
(the write-failure tests complete it with an error instead). Kafka's timer tests wait for the lock to expire;
here time is an argument.
"""

from __future__ import annotations

import pytest

from cluster.share.share_partition import (
    EMPTY_MEMBER_ID,
    AcknowledgementBatch,
    AcquiredRecords,
    BatchRange,
    RecordState,
    SharePartition,
    SharePartitionState,
    ShareError,
    StateBatch,
    aborted_transaction_batches,
)
from protocol.errors import ErrorCode

MEMBER = "member-1"
LOCK_MS = 100
MAX_FETCH = 500
BATCH_SIZE = 500


def make(*, max_in_flight=200, max_delivery=5, start=0, state_epoch=0, batches=()) -> SharePartition:
    sp = SharePartition("group", "topic-id", 0, max_in_flight_records=max_in_flight, max_delivery_count=max_delivery,
                        record_lock_duration_ms=LOCK_MS)
    sp.begin_initialize()
    sp.initialize(start, state_epoch, list(batches))
    return sp


def acquire(sp, member, *ranges, fetch_offset=None, max_fetch=MAX_FETCH, batch_size=BATCH_SIZE, now=0,
            record_limit=False, aborted=()):
    batches = [BatchRange(f, lst) for f, lst in ranges]
    if fetch_offset is None:
        fetch_offset = batches[0].base_offset if batches else 0
    return sp.acquire(member, batches, fetch_offset=fetch_offset, max_fetch_records=max_fetch,
                      batch_size=batch_size, now=now, record_limit=record_limit, aborted_batches=aborted)


def ack(sp, member, *batches, now=0):
    """Acknowledge and let the share coordinator accept the write; returns the error the client gets."""
    t = sp.acknowledge(member, [AcknowledgementBatch(f, lst, tuple(types)) for f, lst, types in batches], now)
    if t.error != ErrorCode.NONE or t.write is None:
        return t.error
    return sp.write_completed(t.write.write_id, 0, now)


def release(sp, member, now=0):
    t = sp.release_acquired_records(member, now)
    if t.write is None:
        return t.error
    return sp.write_completed(t.write.write_id, 0, now)


def state(sp, offset):
    return sp.record_state(offset)


def test_record_state_validate_transition():
    """testRecordStateValidateTransition"""
    assert RecordState.AVAILABLE.validate_transition(RecordState.ACQUIRED) is RecordState.ACQUIRED
    for new in (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
        assert RecordState.ACQUIRED.validate_transition(new) is new
    for bad_from, bad_to in ((RecordState.AVAILABLE, RecordState.AVAILABLE),
                             (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED),
                             (RecordState.AVAILABLE, RecordState.ARCHIVED),
                             (RecordState.ACQUIRED, RecordState.ACQUIRED),
                             (RecordState.ACKNOWLEDGED, RecordState.AVAILABLE),
                             (RecordState.ARCHIVED, RecordState.ACQUIRED)):
        with pytest.raises(ValueError):
            bad_from.validate_transition(bad_to)


def test_record_state_for_id():
    """testRecordStateForId"""
    assert [RecordState(i) for i in (0, 1, 2, 4)] == [RecordState.AVAILABLE, RecordState.ACQUIRED,
                                                       RecordState.ACKNOWLEDGED, RecordState.ARCHIVED]
    with pytest.raises(ValueError):
        RecordState(5)


def test_maybe_initialize():
    """testMaybeInitialize"""
    sp = make(start=5, state_epoch=3, batches=[StateBatch(5, 10, 0, 2), StateBatch(11, 15, 4, 3)])
    assert sp.partition_state is SharePartitionState.ACTIVE
    assert (sp.start_offset, sp.end_offset, sp.state_epoch, sp.next_fetch_offset()) == (5, 15, 3, 5)
    assert sp.cached_batches() == [(5, 10, RecordState.AVAILABLE, 2, EMPTY_MEMBER_ID),
                                   (11, 15, RecordState.ARCHIVED, 3, EMPTY_MEMBER_ID)]
    assert sp.delivery_complete_count == 5


def test_maybe_initialize_share_partition_again():
    """testMaybeInitializeSharePartitionAgain: a second initialization is refused while one runs, a no-op after."""
    sp = SharePartition("group", "topic-id", 0)
    assert sp.begin_initialize()
    with pytest.raises(ShareError) as e:
        sp.begin_initialize()
    assert e.value.code == ErrorCode.LEADER_NOT_AVAILABLE
    sp.initialize(0, 0, [])
    assert not sp.begin_initialize()
    sp.mark_fenced()
    with pytest.raises(ShareError) as e:
        sp.begin_initialize()
    assert e.value.code == ErrorCode.LEADER_NOT_AVAILABLE


def test_maybe_initialize_with_empty_state_batches():
    """testMaybeInitializeWithEmptyStateBatches"""
    sp = make(start=10, state_epoch=5)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset(), sp.cached_batches()) == (10, 10, 10, [])


@pytest.mark.parametrize("persister_error, client_error", [
    (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_ID_NOT_FOUND),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR),
])
def test_maybe_initialize_with_error_partition_response(persister_error, client_error):
    """testMaybeInitializeWithErrorPartitionResponse: the persister's error, mapped as fetchPersisterError."""
    sp = SharePartition("group", "topic-id", 0)
    sp.begin_initialize()
    with pytest.raises(ShareError) as e:
        sp.initialize(0, 0, [], error_code=persister_error)
    assert e.value.code == client_error
    assert sp.partition_state is SharePartitionState.FAILED
    with pytest.raises(ShareError):
        sp.begin_initialize()


def test_maybe_initialize_with_invalid_start_offset_state_batches():
    """testMaybeInitializeWithInvalidStartOffsetStateBatches: a state batch below the start offset fails loading."""
    sp = SharePartition("group", "topic-id", 0)
    sp.begin_initialize()
    with pytest.raises(ShareError):
        sp.initialize(6, 3, [StateBatch(5, 10, 0, 2), StateBatch(11, 15, 4, 3)])
    assert sp.partition_state is SharePartitionState.FAILED


def test_maybe_initialize_when_read_state_rpc_returns_zero_available_records():
    """testMaybeInitializeWhenReadStateRpcReturnsZeroAvailableRecords, with 4.2's initial-read gap window: 233 is
    in no state batch (acquired, never persisted), so it is fetched again and the SPSO waits there."""
    batches = [StateBatch(234 + i, 234 + i, 2, 1) for i in range(500)] + [StateBatch(232, 232, 4, 1)]
    sp = make(start=232, state_epoch=3, batches=batches, max_in_flight=2000)
    assert sp.start_offset == 233
    assert sp.next_fetch_offset() == 233
    got = acquire(sp, MEMBER, (233, 233))
    assert got.records == (AcquiredRecords(233, 233, 1),)
    assert ack(sp, MEMBER, (233, 233, [1])) == ErrorCode.NONE
    # the gap filled, the SPSO passes the loaded batches at once (Kafka 4.2 waits for records past 733)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset(), sp.cached_batches()) == (734, 734, 734, [])


def test_maybe_initialize_all_terminal_clears_cache():
    """testMaybeInitializeWhenReadStateRpcReturnsZeroAvailableRecords, contiguous state batches: all terminal."""
    sp = make(start=232, state_epoch=3, batches=[StateBatch(232 + i, 232 + i, 2, 1) for i in range(502)])
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset(), sp.cached_batches()) == (734, 734, 734, [])
    assert sp.delivery_complete_count == 0


def test_acquire_single_record():
    """testAcquireSingleRecord"""
    sp = make()
    got = acquire(sp, MEMBER, (0, 0))
    assert got.records == (AcquiredRecords(0, 0, 1),) and got.count == 1
    assert sp.next_fetch_offset() == 1
    assert sp.cached_batches() == [(0, 0, RecordState.ACQUIRED, 1, MEMBER)]


def test_acquire_multiple_records():
    """testAcquireMultipleRecords"""
    sp = make()
    got = acquire(sp, MEMBER, (10, 14), fetch_offset=3)
    assert got.records == (AcquiredRecords(10, 14, 1),)
    assert sp.next_fetch_offset() == 15
    assert sp.cached_batches() == [(10, 14, RecordState.ACQUIRED, 1, MEMBER)]


def test_acquire_with_max_fetch_records():
    """testAcquireWithMaxFetchRecords: batch_optimized mode finishes the batch past max fetch records."""
    sp = make()
    got = acquire(sp, MEMBER, (10, 14), (15, 29), max_fetch=10)
    assert got.records == (AcquiredRecords(10, 29, 1),) and got.count == 20
    assert sp.next_fetch_offset() == 30


def test_acquire_with_multiple_batches_and_max_fetch_records():
    """testAcquireWithMultipleBatchesAndMaxFetchRecords"""
    sp = make()
    got = acquire(sp, MEMBER, (10, 14), (15, 29), (30, 44), max_fetch=10)
    assert got.records == (AcquiredRecords(10, 29, 1),)
    assert sp.next_fetch_offset() == 30
    assert sp.cached_batches() == [(10, 29, RecordState.ACQUIRED, 1, MEMBER)]


def test_acquire_multiple_records_with_overlap_and_new_batch():
    """testAcquireMultipleRecordsWithOverlapAndNewBatch"""
    sp = make()
    assert acquire(sp, MEMBER, (0, 4)).records == (AcquiredRecords(0, 4, 1),)
    got = acquire(sp, MEMBER, (0, 4), (5, 9), fetch_offset=0)
    assert got.records == (AcquiredRecords(5, 9, 1),)
    assert sp.next_fetch_offset() == 10


def test_acquire_same_batch_again():
    """testAcquireSameBatchAgain: nothing, as long as it is acquired."""
    sp = make()
    acquire(sp, MEMBER, (10, 12))
    got = acquire(sp, MEMBER, (10, 12))
    assert got.records == () and got.count == 0
    assert sp.cached_batches() == [(10, 12, RecordState.ACQUIRED, 1, MEMBER)]


def test_acquire_with_empty_fetch_records():
    """testAcquireWithEmptyFetchRecords"""
    sp = make()
    assert acquire(sp, MEMBER).records == ()
    assert sp.next_fetch_offset() == 0


def test_acquire_with_batch_size_and_multiple_batches():
    """testAcquireWithBatchSizeAndMultipleBatches (4.x): acquired records split at batch boundaries by batch size."""
    sp = make()
    got = acquire(sp, MEMBER, (2, 6), (7, 11), (12, 16), (17, 21), batch_size=8)
    assert got.records == (AcquiredRecords(2, 11, 1), AcquiredRecords(12, 21, 1))
    assert [b[:2] for b in sp.cached_batches()] == [(2, 11), (12, 21)]


def test_next_fetch_offset_initial_state():
    """testNextFetchOffsetInitialState"""
    assert make().next_fetch_offset() == 0


def test_next_fetch_offset_with_find_and_cached_state():
    """testNextFetchOffsetWithFindAndCachedState"""
    sp = make()
    acquire(sp, MEMBER, (0, 4))
    acquire(sp, MEMBER, (5, 9))
    assert ack(sp, MEMBER, (5, 9, [2])) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 5
    acquire(sp, MEMBER, (5, 9))
    assert sp.next_fetch_offset() == 10


def test_next_fetch_offset_with_multiple_consumers():
    """testNextFetchOffsetWithMultipleConsumers"""
    sp = make(max_in_flight=100)
    acquire(sp, MEMBER, (0, 2))
    assert sp.next_fetch_offset() == 3
    ack(sp, MEMBER, (0, 2, [2]))
    assert sp.next_fetch_offset() == 0
    acquire(sp, "member-2", (3, 4))
    assert sp.next_fetch_offset() == 0
    acquire(sp, MEMBER, (0, 2))
    assert sp.next_fetch_offset() == 5
    ack(sp, "member-2", (3, 4, [2]))
    assert sp.next_fetch_offset() == 3


def test_can_acquire_records_with_empty_cache():
    """testCanAcquireRecordsWithEmptyCache"""
    assert make(max_in_flight=1).can_acquire_records()


def test_can_acquire_records_with_cached_data_and_limit_not_reached():
    """testCanAcquireRecordsWithCachedDataAndLimitNotReached"""
    sp = make(max_in_flight=6)
    acquire(sp, MEMBER, (0, 4))
    assert sp.can_acquire_records()
    assert (sp.start_offset, sp.end_offset) == (0, 4)


def test_can_acquire_records_with_cached_data_and_limit_reached():
    """testCanAcquireRecordsWithCachedDataAndLimitReached"""
    sp = make(max_in_flight=1)
    acquire(sp, MEMBER, (0, 4))
    assert not sp.can_acquire_records()


def test_acquire_with_max_in_flight_records_and_try_acquire_new_batch():
    """testAcquireWithMaxInFlightRecordsAndTryAcquireNewBatch: the window caps new records at batch boundaries."""
    sp = make(max_in_flight=20)
    got = acquire(sp, MEMBER, (0, 9), (10, 19), (20, 29))
    assert got.records == (AcquiredRecords(0, 19, 1),)
    assert not sp.can_acquire_records()
    assert acquire(sp, MEMBER, (20, 29)).records == ()
    ack(sp, MEMBER, (0, 9, [1]))
    assert sp.start_offset == 10 and sp.can_acquire_records()
    assert acquire(sp, MEMBER, (20, 29)).records == (AcquiredRecords(20, 29, 1),)


def test_acknowledge_single_record_batch():
    """testAcknowledgeSingleRecordBatch"""
    sp = make()
    acquire(sp, MEMBER, (1, 1))
    assert ack(sp, MEMBER, (1, 1, [1])) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 2
    assert sp.cached_batches() == []


def test_acknowledge_multiple_record_batch():
    """testAcknowledgeMultipleRecordBatch"""
    sp = make()
    acquire(sp, MEMBER, (5, 14))
    assert ack(sp, MEMBER, (5, 14, [1])) == ErrorCode.NONE
    assert (sp.next_fetch_offset(), sp.start_offset, sp.cached_batches()) == (15, 15, [])


def test_acknowledge_multiple_record_batch_with_gap_offsets():
    """testAcknowledgeMultipleRecordBatchWithGapOffsets"""
    sp = make()
    acquire(sp, MEMBER, (5, 6))
    acquire(sp, MEMBER, (10, 18), fetch_offset=7)
    assert sp.next_fetch_offset() == 19
    assert ack(sp, MEMBER, (5, 6, [2]), (10, 18, [2, 2, 2, 2, 2, 0, 0, 0, 1])) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 5
    assert sp.cached_batches()[0] == (5, 6, RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.is_split(10)
    expected = {10: RecordState.AVAILABLE, 11: RecordState.AVAILABLE, 12: RecordState.AVAILABLE,
                13: RecordState.AVAILABLE, 14: RecordState.AVAILABLE, 15: RecordState.ARCHIVED,
                16: RecordState.ARCHIVED, 17: RecordState.ARCHIVED, 18: RecordState.ACKNOWLEDGED}
    assert {o: state(sp, o) for o in expected} == {o: (s, 1, EMPTY_MEMBER_ID) for o, s in expected.items()}


def test_acknowledge_out_of_range_cached_data():
    """testAcknowledgeOutOfRangeCachedData"""
    sp = make()
    assert ack(sp, MEMBER, (0, 0, [3])) == ErrorCode.INVALID_RECORD_STATE
    acquire(sp, MEMBER, (5, 9))
    assert ack(sp, MEMBER, (20, 24, [3])) == ErrorCode.INVALID_REQUEST


def test_acknowledge_out_of_range_cached_data_first_batch():
    """testAcknowledgeOutOfRangeCachedDataFirstBatch, as 4.2: offsets all below the SPSO are skipped, offsets past
    the cache refuse the request."""
    sp = make()
    acquire(sp, MEMBER, (5, 9))
    acquire(sp, MEMBER, (10, 14))
    assert ack(sp, MEMBER, (0, 4, [3])) == ErrorCode.NONE
    assert ack(sp, MEMBER, (5, 15, [3])) == ErrorCode.INVALID_REQUEST
    assert sp.cached_batches() == [(5, 9, RecordState.ACQUIRED, 1, MEMBER), (10, 14, RecordState.ACQUIRED, 1, MEMBER)]


def test_acknowledge_with_another_member():
    """testAcknowledgeWithAnotherMember"""
    sp = make()
    acquire(sp, MEMBER, (5, 9))
    assert ack(sp, "member-2", (5, 9, [1])) == ErrorCode.INVALID_RECORD_STATE
    assert state(sp, 5) == (RecordState.ACQUIRED, 1, MEMBER)


def test_acknowledge_when_offset_not_acquired():
    """testAcknowledgeWhenOffsetNotAcquired"""
    sp = make()
    acquire(sp, MEMBER, (5, 9))
    assert ack(sp, MEMBER, (5, 9, [2])) == ErrorCode.NONE
    assert ack(sp, MEMBER, (5, 9, [1])) == ErrorCode.INVALID_RECORD_STATE
    acquire(sp, MEMBER, (5, 9))
    assert ack(sp, MEMBER, (6, 7, [1])) == ErrorCode.NONE
    assert ack(sp, MEMBER, (6, 6, [1])) == ErrorCode.INVALID_RECORD_STATE


def test_acknowledge_rollback_with_full_batch_error():
    """testAcknowledgeRollbackWithFullBatchError: a failing batch rolls back the request's earlier ones."""
    sp = make()
    for first in (5, 10, 15):
        acquire(sp, MEMBER, (first, first + 4))
    assert ack(sp, MEMBER, (5, 9, [2]), (10, 14, [1]), (15, 19, [1]), (15, 19, [1])) == ErrorCode.INVALID_RECORD_STATE
    assert [b[2] for b in sp.cached_batches()] == [RecordState.ACQUIRED] * 3
    assert not any(sp.has_ongoing_transition(o) for o in range(5, 20))
    assert sp.delivery_complete_count == 0


def test_acknowledge_rollback_with_subset_error():
    """testAcknowledgeRollbackWithSubsetError"""
    sp = make()
    for first in (5, 10, 15):
        acquire(sp, MEMBER, (first, first + 4))
    assert ack(sp, MEMBER, (5, 9, [2]), (10, 14, [1]), (15, 19, [1]), (16, 19, [1])) == ErrorCode.INVALID_RECORD_STATE
    assert sp.cached_batches()[:2] == [(5, 9, RecordState.ACQUIRED, 1, MEMBER),
                                       (10, 14, RecordState.ACQUIRED, 1, MEMBER)]
    assert all(state(sp, o) == (RecordState.ACQUIRED, 1, MEMBER) for o in range(15, 20))


def test_acknowledge_subset_with_another_member():
    """testAcknowledgeSubsetWithAnotherMember"""
    sp = make()
    acquire(sp, MEMBER, (5, 11))
    assert ack(sp, MEMBER, (5, 7, [1])) == ErrorCode.NONE
    assert ack(sp, "member-2", (9, 11, [1])) == ErrorCode.INVALID_RECORD_STATE


def test_acquire_released_record():
    """testAcquireReleasedRecord"""
    sp = make()
    acquire(sp, MEMBER, (10, 14))
    ack(sp, MEMBER, (12, 13, [2]))
    assert sp.next_fetch_offset() == 12
    got = acquire(sp, MEMBER, (10, 14), fetch_offset=12)
    assert got.records == (AcquiredRecords(12, 12, 2), AcquiredRecords(13, 13, 2))
    assert sp.next_fetch_offset() == 15
    assert all(state(sp, o)[0] is RecordState.ACQUIRED for o in range(10, 15))


def test_acquire_released_record_multiple_batches():
    """testAcquireReleasedRecordMultipleBatches"""
    sp = make()
    for first in (5, 10, 15, 20):
        acquire(sp, MEMBER, (first, first + 4))
    ack(sp, MEMBER, (12, 13, [2]))
    got = acquire(sp, MEMBER, (5, 9), (10, 14), (15, 19), (20, 24), fetch_offset=12)
    assert got.records == (AcquiredRecords(12, 12, 2), AcquiredRecords(13, 13, 2))
    assert sp.next_fetch_offset() == 25


def test_acquisition_lock_for_acquiring_single_record():
    """testAcquisitionLockForAcquiringSingleRecord: on expiry Available, delivery count kept."""
    sp = make()
    acquire(sp, MEMBER, (0, 0), now=0)
    assert sp.lock_deadline(0) == LOCK_MS and sp.next_deadline() == LOCK_MS
    writes = sp.on_time(LOCK_MS - 1)
    assert writes == [] and state(sp, 0) == (RecordState.ACQUIRED, 1, MEMBER)
    writes = sp.on_time(LOCK_MS)
    assert [w.state_batches for w in writes] == [(StateBatch(0, 0, 0, 1),)]
    assert writes[0].reason == "timeout"
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.next_fetch_offset() == 0 and sp.lock_deadline(0) is None
    assert sp.take_woken()


def test_acquisition_lock_for_acquiring_multiple_records_with_overlap_and_new_batch():
    """testAcquisitionLockForAcquiringMultipleRecordsWithOverlapAndNewBatch"""
    sp = make()
    acquire(sp, MEMBER, (0, 4), now=0)
    acquire(sp, MEMBER, (0, 4), (5, 9), now=50)
    sp.on_time(LOCK_MS)
    assert state(sp, 0)[0] is RecordState.AVAILABLE and state(sp, 5)[0] is RecordState.ACQUIRED
    sp.on_time(LOCK_MS + 50)
    assert state(sp, 5) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.next_fetch_offset() == 0


def test_acquisition_lock_on_acknowledging_single_record_batch():
    """testAcquisitionLockOnAcknowledgingSingleRecordBatch: a Release clears the lock; nothing expires later."""
    sp = make()
    acquire(sp, MEMBER, (0, 0))
    ack(sp, MEMBER, (0, 0, [2]), now=10)
    assert sp.lock_deadline(0) is None and state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.on_time(LOCK_MS * 2) == []


def test_acquisition_lock_on_acknowledging_multiple_subset_record_batch_with_gap_offsets():
    """testAcquisitionLockOnAcknowledgingMultipleSubsetRecordBatchWithGapOffsets: only still-acquired offsets
    expire."""
    sp = make()
    acquire(sp, MEMBER, (5, 6))
    acquire(sp, MEMBER, (10, 18), fetch_offset=7)
    ack(sp, MEMBER, (10, 13, [2, 0, 0, 1]))
    writes = sp.on_time(LOCK_MS)
    expired = sorted((sb.first_offset, sb.last_offset) for w in writes for sb in w.state_batches)
    assert expired == [(5, 6)] + [(o, o) for o in range(14, 19)]
    assert state(sp, 10) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert state(sp, 13) == (RecordState.ACKNOWLEDGED, 1, EMPTY_MEMBER_ID)
    assert state(sp, 14) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.next_fetch_offset() == 5


def test_acquisition_lock_timeout_cause_max_delivery_count_exceed():
    """testAcquisitionLockTimeoutCauseMaxDeliveryCountExceed"""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (0, 9))
    acquire(sp, MEMBER, (10, 19))
    sp.on_time(LOCK_MS)
    assert sp.next_fetch_offset() == 0
    assert sp.cached_batches()[1] == (10, 19, RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    acquire(sp, MEMBER, (10, 19), now=LOCK_MS)
    assert sp.cached_batches()[1] == (10, 19, RecordState.ACQUIRED, 2, MEMBER)
    sp.on_time(2 * LOCK_MS)
    assert sp.cached_batches()[1] == (10, 19, RecordState.ARCHIVED, 2, EMPTY_MEMBER_ID)
    assert sp.next_fetch_offset() == 0


def test_acquisition_lock_timeout_cause_spso_move_forward():
    """testAcquisitionLockTimeoutCauseSPSOMoveForward: archived at the limit, then the SPSO passes them."""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (0, 9))
    ack(sp, MEMBER, (0, 4, [2]))
    acquire(sp, MEMBER, (0, 9), now=1)
    writes = sp.on_time(LOCK_MS + 1)
    for w in writes:
        assert sp.write_completed(w.write_id, 0, LOCK_MS + 1) == ErrorCode.NONE
    # 0-4 reached 2 deliveries and were archived; 5-9 were delivered once and are available again
    assert sp.start_offset == 5
    assert state(sp, 5) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.next_fetch_offset() == 5


def test_acquisition_lock_timeout_cause_spso_move_forward_and_clear_cached_state():
    """testAcquisitionLockTimeoutCauseSPSOMoveForwardAndClearCachedState"""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (0, 9))
    ack(sp, MEMBER, (0, 9, [2]))
    acquire(sp, MEMBER, (0, 9), now=1)
    for w in sp.on_time(LOCK_MS + 1):
        sp.write_completed(w.write_id, 0, LOCK_MS + 1)
    assert (sp.start_offset, sp.end_offset, sp.cached_batches(), sp.next_fetch_offset()) == (10, 10, [], 10)


def test_acknowledge_after_acquisition_lock_timeout():
    """testAcknowledgeAfterAcquisitionLockTimeout: INVALID_RECORD_STATE once the lock expired."""
    sp = make()
    acquire(sp, MEMBER, (5, 9))
    sp.on_time(LOCK_MS)
    assert ack(sp, MEMBER, (5, 9, [1]), now=LOCK_MS) == ErrorCode.INVALID_RECORD_STATE
    assert state(sp, 5) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)


def test_acknowledge_expires_due_locks_first():
    """An acknowledgement past the lock deadline fails even when no timer ran yet (Kafka's timer thread would have
    fired); the expiry's write is queued for the adapter."""
    sp = make()
    acquire(sp, MEMBER, (5, 9))
    assert ack(sp, MEMBER, (5, 9, [1]), now=LOCK_MS) == ErrorCode.INVALID_RECORD_STATE
    assert [w.reason for w in sp.drain_writes()] == ["timeout"]


def test_acquisition_lock_on_batch_with_write_share_group_state_failure():
    """testAcquisitionLockOnBatchWithWriteShareGroupStateFailure: the expiry stands though its write failed."""
    sp = make()
    acquire(sp, MEMBER, (5, 14))
    (w,) = sp.on_time(LOCK_MS)
    assert sp.write_completed(w.write_id, ErrorCode.GROUP_ID_NOT_FOUND, LOCK_MS) == ErrorCode.NONE
    assert sp.cached_batches() == [(5, 14, RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)]
    assert sp.next_fetch_offset() == 5


def test_acknowledge_batch_with_write_share_group_state_failure():
    """testAcknowledgeBatchWithWriteShareGroupStateFailure: the records go back to Acquired; the client gets the
    persister's error as fetchPersisterError maps it."""
    sp = make()
    acquire(sp, MEMBER, (5, 14))
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(5, 14, (1,))], 1)
    assert t.error == ErrorCode.NONE and t.write is not None
    assert t.write.state_batches == (StateBatch(5, 14, 2, 1),)
    assert sp.has_ongoing_transition(5)
    assert sp.write_completed(t.write.write_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 2) == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert sp.cached_batches() == [(5, 14, RecordState.ACQUIRED, 1, MEMBER)]
    assert sp.delivery_complete_count == 0 and sp.start_offset == 5


def test_acknowledge_offset_with_write_share_group_state_failure():
    """testAcknowledgeOffsetWithWriteShareGroupStateFailure"""
    sp = make()
    acquire(sp, MEMBER, (5, 14))
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(6, 7, (1,)), AcknowledgementBatch(8, 8, (3,))], 1)
    assert sp.write_completed(t.write.write_id, ErrorCode.GROUP_ID_NOT_FOUND, 2) == ErrorCode.GROUP_ID_NOT_FOUND
    assert all(state(sp, o) == (RecordState.ACQUIRED, 1, MEMBER) for o in range(5, 15))


def test_rollback_after_lock_expired_during_write():
    """InFlightState.completeStateTransition(false) after the lock expired during the write: Available, or
    Archived at the delivery limit (Kafka's AcquisitionLockTimerTask.hasExpired branch)."""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (0, 4))
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(0, 4, (1,))], 10)
    assert sp.on_time(LOCK_MS) == []  # in transition: the expiry waits for the write
    sp.write_completed(t.write.write_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, LOCK_MS)
    assert sp.cached_batches() == [(0, 4, RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)]
    acquire(sp, MEMBER, (0, 4), now=LOCK_MS)
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(0, 4, (1,))], LOCK_MS + 1)
    sp.write_completed(t.write.write_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, 3 * LOCK_MS)
    assert sp.record_state(0) is None  # archived at the limit, and the SPSO passed it
    assert (sp.start_offset, sp.cached_batches(), sp.delivery_complete_count) == (5, [], 0)


def test_release_single_record_batch():
    """testReleaseSingleRecordBatch"""
    sp = make()
    acquire(sp, MEMBER, (1, 1))
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 1
    assert sp.cached_batches() == [(1, 1, RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)]


def test_release_multiple_record_batch():
    """testReleaseMultipleRecordBatch"""
    sp = make()
    acquire(sp, MEMBER, (5, 14))
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 5
    assert sp.cached_batches() == [(5, 14, RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)]


def test_release_multiple_acknowledged_record_batch():
    """testReleaseMultipleAcknowledgedRecordBatch"""
    sp = make()
    acquire(sp, MEMBER, (0, 4))
    acquire(sp, MEMBER, (5, 14))
    ack(sp, MEMBER, (5, 14, [1]))
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 0
    assert sp.cached_batches() == [(0, 4, RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID),
                                   (5, 14, RecordState.ACKNOWLEDGED, 1, EMPTY_MEMBER_ID)]


def test_release_acquired_records_with_another_member():
    """testReleaseAcquiredRecordsWithAnotherMember"""
    sp = make()
    acquire(sp, "member-2", (5, 5))
    acquire(sp, MEMBER, (10, 20), fetch_offset=6)
    ack(sp, MEMBER, (10, 18, [1, 1, 0, 0, 1, 0, 1, 0, 1]))
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 19
    assert state(sp, 5) == (RecordState.ACQUIRED, 1, "member-2")
    assert state(sp, 19) == (RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)
    assert state(sp, 18) == (RecordState.ACKNOWLEDGED, 1, EMPTY_MEMBER_ID)


def test_release_acquired_records_with_another_member_and_subset_acknowledged():
    """testReleaseAcquiredRecordsWithAnotherMemberAndSubsetAcknowledged"""
    sp = make()
    acquire(sp, "member-2", (5, 6))
    acquire(sp, MEMBER, (10, 20), fetch_offset=7)
    ack(sp, MEMBER, (10, 18, [1, 1, 0, 0, 1, 0, 1, 0, 1]))
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 19
    assert sp.cached_batches()[0] == (5, 6, RecordState.ACQUIRED, 1, "member-2")
    ack(sp, "member-2", (5, 5, [1]))
    assert release(sp, "member-2") == ErrorCode.NONE
    assert sp.next_fetch_offset() == 6
    assert state(sp, 5) == (RecordState.ACKNOWLEDGED, 1, EMPTY_MEMBER_ID)
    assert state(sp, 6) == (RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)
    assert state(sp, 19) == (RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)


def test_release_acquired_records_for_empty_cached_data():
    """testReleaseAcquiredRecordsForEmptyCachedData"""
    sp = make()
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert sp.cached_batches() == []


def test_max_delivery_count_limit_not_exceeded_for_records_subset_after_release_acquired_records():
    """testMaxDeliveryCountLimitExceededForRecordsSubsetAfterReleaseAcquiredRecords: a session's release does not
    count the delivery, so records at the limit come back Available."""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (10, 24))
    ack(sp, MEMBER, (10, 14, [2]))
    acquire(sp, MEMBER, (10, 24), fetch_offset=10)
    assert state(sp, 10) == (RecordState.ACQUIRED, 2, MEMBER)
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert state(sp, 10) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert state(sp, 15) == (RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)


def test_release_batch_with_write_share_group_state_failure():
    """testReleaseBatchWithWriteShareGroupStateFailure; unlike Kafka the rollback restores the delivery count the
    release had decreased (Kafka leaves it at 0, and a second failed release would make it -1)."""
    sp = make()
    acquire(sp, MEMBER, (5, 14))
    t = sp.release_acquired_records(MEMBER, 1)
    assert sp.write_completed(t.write.write_id, ErrorCode.GROUP_ID_NOT_FOUND, 2) == ErrorCode.GROUP_ID_NOT_FOUND
    assert sp.cached_batches() == [(5, 14, RecordState.ACQUIRED, 1, MEMBER)]


def test_max_delivery_count_limit_exceeded_for_record_batch():
    """testMaxDeliveryCountLimitExceededForRecordBatch"""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (5, 14))
    ack(sp, MEMBER, (5, 14, [2]))
    acquire(sp, MEMBER, (5, 14))
    ack(sp, MEMBER, (5, 14, [2]))
    assert (sp.start_offset, sp.end_offset, sp.cached_batches(), sp.next_fetch_offset()) == (15, 15, [], 15)


def test_max_delivery_count_limit_exceeded_for_records_subset():
    """testMaxDeliveryCountLimitExceededForRecordsSubset"""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (10, 14))
    acquire(sp, MEMBER, (15, 24))
    ack(sp, MEMBER, (10, 12, [2]), (13, 16, [1]), (17, 19, [3]), (20, 24, [2]))
    acquire(sp, MEMBER, (10, 14), (15, 24), fetch_offset=10)
    ack(sp, MEMBER, (10, 12, [2]), (20, 24, [2]))
    assert (sp.start_offset, sp.end_offset, sp.cached_batches(), sp.next_fetch_offset()) == (25, 25, [], 25)


def test_lso_movement_on_initialization_share_partition():
    """testLsoMovementOnInitializationSharePartition"""
    sp = make()
    sp.update_log_start_offset(5)
    assert (sp.next_fetch_offset(), sp.start_offset, sp.end_offset) == (5, 5, 5)
    sp.update_log_start_offset(3)
    assert (sp.start_offset, sp.end_offset) == (5, 5)


def test_lso_movement_for_archiving_batches():
    """testLsoMovementForArchivingBatches"""
    sp = make()
    for first in (2, 7, 12, 17, 22, 27, 32):
        acquire(sp, MEMBER, (first, first + 4))
    ack(sp, MEMBER, (2, 6, [1]), (12, 16, [2]), (22, 26, [2]), (27, 31, [3]))
    sp.update_log_start_offset(20)
    assert (sp.next_fetch_offset(), sp.start_offset, sp.end_offset) == (22, 20, 36)
    assert sp.cached_batches() == [(7, 11, RecordState.ACQUIRED, 1, MEMBER),
                                   (12, 16, RecordState.ARCHIVED, 1, EMPTY_MEMBER_ID),
                                   (17, 21, RecordState.ACQUIRED, 1, MEMBER),
                                   (22, 26, RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID),
                                   (27, 31, RecordState.ARCHIVED, 1, EMPTY_MEMBER_ID),
                                   (32, 36, RecordState.ACQUIRED, 1, MEMBER)]
    assert sp.lock_deadline(7) is not None and sp.lock_deadline(12) is None


def test_lso_movement_ahead_of_end_offset():
    """testLsoMovementAheadOfEndOffset"""
    sp = make()
    acquire(sp, MEMBER, (2, 6))
    acquire(sp, MEMBER, (7, 11))
    ack(sp, MEMBER, (2, 6, [2]))
    sp.update_log_start_offset(14)
    assert (sp.next_fetch_offset(), sp.start_offset, sp.end_offset) == (14, 14, 14)
    assert sp.cached_batches()[0] == (2, 6, RecordState.ARCHIVED, 1, EMPTY_MEMBER_ID)
    # the acquired batch below the start archives when its holder acknowledges it
    assert ack(sp, MEMBER, (7, 11, [1])) == ErrorCode.NONE


def test_acquisition_lock_timeout_for_batches_post_start_offset_movement():
    """testAcquisitionLockTimeoutForBatchesPostStartOffsetMovement: expiry below the start archives."""
    sp = make()
    acquire(sp, MEMBER, (5, 9))
    acquire(sp, MEMBER, (10, 14))
    sp.update_log_start_offset(12)
    sp.on_time(LOCK_MS)
    assert sp.cached_batches()[0] == (5, 9, RecordState.ARCHIVED, 1, EMPTY_MEMBER_ID)
    assert state(sp, 11) == (RecordState.ARCHIVED, 1, EMPTY_MEMBER_ID)
    assert state(sp, 12) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.next_fetch_offset() == 12


def test_release_acquired_records_batches_post_start_offset_movement_to_middle_of_batch():
    """testReleaseAcquiredRecordsBatchesPostStartOffsetMovementToMiddleOfBatch"""
    sp = make()
    acquire(sp, MEMBER, (5, 14))
    sp.update_log_start_offset(11)
    assert release(sp, MEMBER) == ErrorCode.NONE
    assert state(sp, 10) == (RecordState.ARCHIVED, 1, EMPTY_MEMBER_ID)  # archiving keeps the count
    assert state(sp, 11) == (RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)


def test_maybe_update_cached_state_when_acknowledgement_type_accept():
    """testMaybeUpdateCachedStateWhenAcknowledgementTypeAccept"""
    sp = make(max_in_flight=100)
    acquire(sp, MEMBER, (0, 99))
    assert not sp.can_acquire_records()
    ack(sp, MEMBER, (0, 99, [1]))
    assert (sp.next_fetch_offset(), sp.start_offset, sp.end_offset, sp.cached_batches()) == (100, 100, 100, [])
    assert sp.can_acquire_records()


def test_maybe_update_cached_state_when_acknowledgement_type_release():
    """testMaybeUpdateCachedStateWhenAcknowledgementTypeRelease"""
    sp = make(max_in_flight=100)
    acquire(sp, MEMBER, (0, 99))
    ack(sp, MEMBER, (0, 99, [2]))
    assert sp.can_acquire_records()
    assert (sp.next_fetch_offset(), sp.start_offset, sp.end_offset) == (0, 0, 99)


def test_maybe_update_cached_state_when_acknowledgements_in_between():
    """testMaybeUpdateCachedStateWhenAcknowledgementsInBetween"""
    sp = make(max_in_flight=20)
    acquire(sp, MEMBER, (0, 14))
    assert sp.can_acquire_records()
    acquire(sp, MEMBER, (15, 29))
    assert not sp.can_acquire_records()
    ack(sp, MEMBER, (10, 14, [3]))
    assert state(sp, 9)[0] is RecordState.ACQUIRED and state(sp, 10)[0] is RecordState.ARCHIVED
    assert not sp.can_acquire_records()
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 29, 30)


def test_maybe_update_cached_state_when_acknowledgements_from_beginning_for_batch_subset():
    """testMaybeUpdateCachedStateWhenAcknowledgementsFromBeginningForBatchSubset"""
    sp = make(max_in_flight=20)
    acquire(sp, MEMBER, (0, 14))
    acquire(sp, MEMBER, (15, 29))
    ack(sp, MEMBER, (0, 12, [1]))
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (13, 29, 30)
    assert sp.can_acquire_records()
    assert state(sp, 12)[0] is RecordState.ACKNOWLEDGED and state(sp, 13)[0] is RecordState.ACQUIRED


def test_maybe_update_cached_state_multiple_acquisitions_and_acknowledgements():
    """testMaybeUpdateCachedStateMultipleAcquisitionsAndAcknowledgements (shortened)"""
    sp = make(max_in_flight=100)
    acquire(sp, MEMBER, (0, 19))
    acquire(sp, MEMBER, (20, 39))
    ack(sp, MEMBER, (0, 19, [1]))
    assert (sp.start_offset, sp.end_offset) == (20, 39)
    ack(sp, MEMBER, (20, 39, [3]))
    assert (sp.start_offset, sp.end_offset, sp.cached_batches()) == (40, 40, [])
    acquire(sp, MEMBER, (40, 59))
    ack(sp, MEMBER, (45, 59, [1]))
    assert sp.start_offset == 40
    ack(sp, MEMBER, (40, 44, [1]))
    assert (sp.start_offset, sp.end_offset, sp.cached_batches()) == (60, 60, [])


def test_reacquire_subset_with_another_member():
    """testReacquireSubsetWithAnotherMember"""
    sp = make()
    acquire(sp, MEMBER, (5, 5))
    acquire(sp, MEMBER, (10, 20), fetch_offset=6)
    ack(sp, MEMBER, (5, 11, [2, 0, 0, 0, 0, 2, 1]))
    got = acquire(sp, "member-2", (5, 5), (10, 20), fetch_offset=5)
    assert got.records == (AcquiredRecords(5, 5, 2), AcquiredRecords(10, 10, 2))
    assert state(sp, 10) == (RecordState.ACQUIRED, 2, "member-2")
    assert state(sp, 12) == (RecordState.ACQUIRED, 1, MEMBER)


def test_number_of_write_calls_on_updates():
    """testNumberOfWriteCallsOnUpdates: one write per acknowledgement request, none on acquisition."""
    sp = make()
    acquire(sp, MEMBER, (5, 6))
    assert sp.pending_writes() == 0
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(5, 6, (1,))], 1)
    assert sp.pending_writes() == 1
    assert t.write.start_offset == 5 and t.write.delivery_complete_count == 2
    sp.write_completed(t.write.write_id, 0, 1)
    assert sp.pending_writes() == 0


# ---------------------------------------------------------------------------------------------- Kafka 4.2 additions


def test_acquire_record_limit_mode_single_batch():
    """SharePartitionTest (4.2), record_limit acquire mode (KIP-1206): at most max records from a larger batch;
    the rest of the batch stays Available and is acquired next."""
    sp = make()
    got = acquire(sp, MEMBER, (10, 19), max_fetch=5, record_limit=True)
    assert got.records == (AcquiredRecords(10, 14, 1),) and got.count == 5
    assert state(sp, 14) == (RecordState.ACQUIRED, 1, MEMBER)
    assert state(sp, 15) == (RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)
    assert sp.end_offset == 19 and sp.next_fetch_offset() == 15
    got = acquire(sp, "member-2", (10, 19), fetch_offset=15, max_fetch=3, record_limit=True)
    assert got.records == tuple(AcquiredRecords(o, o, 1) for o in (15, 16, 17))
    assert sum(r.last_offset - r.first_offset + 1 for r in got.records) == 3


def test_acquire_record_limit_mode_multiple_batches():
    """record_limit across cached batches: never more than max records in one answer."""
    sp = make()
    acquire(sp, MEMBER, (0, 4))
    acquire(sp, MEMBER, (5, 9))
    ack(sp, MEMBER, (0, 4, [2]), (5, 9, [2]))
    got = acquire(sp, "member-2", (0, 4), (5, 9), max_fetch=7, record_limit=True)
    assert sum(r.last_offset - r.first_offset + 1 for r in got.records) == 7
    assert got.records[0] == AcquiredRecords(0, 4, 2)


def test_batch_optimized_ignores_record_limit_inside_batch():
    """batch_optimized (mode 0) acquires the whole batch even past max records."""
    sp = make()
    got = acquire(sp, MEMBER, (10, 19), max_fetch=5)
    assert got.records == (AcquiredRecords(10, 19, 1),)


def test_renew_acknowledgement_extends_lock():
    """SharePartitionTest (4.2), Renew acknowledgements (KIP-1222): the lock restarts, nothing is persisted."""
    sp = make()
    acquire(sp, MEMBER, (0, 4), now=0)
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(0, 4, (4,))], 60)
    assert t.error == ErrorCode.NONE and t.write is None
    assert sp.lock_deadline(0) == 60 + LOCK_MS
    assert sp.on_time(LOCK_MS) == []
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, MEMBER)
    assert [w.reason for w in sp.on_time(60 + LOCK_MS)] == ["timeout"]
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)


def test_renew_per_offset_mixed_with_accept():
    """Renew and Accept per offset: the accepted offsets are written, the renewed ones only relocked."""
    sp = make()
    acquire(sp, MEMBER, (0, 3), now=0)
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(0, 3, (1, 4, 4, 1))], 50)
    assert [(sb.first_offset, sb.delivery_state) for sb in t.write.state_batches] == [(0, 2), (3, 2)]
    sp.write_completed(t.write.write_id, 0, 50)
    assert sp.lock_deadline(1) == 50 + LOCK_MS and sp.lock_deadline(0) is None
    assert sp.start_offset == 1


def test_renew_by_other_member_refused():
    sp = make()
    acquire(sp, MEMBER, (0, 4))
    assert ack(sp, "member-2", (0, 4, [4])) == ErrorCode.INVALID_RECORD_STATE


def test_delivery_throttling_isolates_last_delivery():
    """4.2's delivery throttling (shouldThrottleRecordsDelivery, acquireSubsetBatchRecords): past half the limit
    records go out in halving groups, and the last attempt alone."""
    sp = make(max_delivery=4)
    acquire(sp, MEMBER, (0, 9))
    ack(sp, MEMBER, (0, 9, [2]))
    assert acquire(sp, MEMBER, (0, 9)).records == (AcquiredRecords(0, 9, 2),)
    ack(sp, MEMBER, (0, 9, [2]))
    got = acquire(sp, MEMBER, (0, 9))
    assert got.records == tuple(AcquiredRecords(o, o, 3) for o in range(5))  # 10 >> 1
    ack(sp, MEMBER, (0, 4, [2]))
    got = acquire(sp, MEMBER, (0, 9))
    assert got.records == (AcquiredRecords(0, 0, 4),)  # the last delivery goes alone


def test_aborted_transaction_batches_archived():
    """maybeFilterAbortedTransactionalAcquiredRecords / fetchAbortedTransactionRecordBatches"""

    class H:
        def __init__(self, base, last, pid=-1, txn=False, control=False, abort=False):
            self.base_offset, self.last_offset, self.producer_id = base, last, pid
            self.is_transactional, self.is_control, self.abort = txn, control, abort

    headers = [H(0, 4), H(5, 9, pid=7, txn=True), H(10, 10, pid=7, txn=True, control=True, abort=True),
               H(11, 14, pid=8, txn=True)]
    aborted = aborted_transaction_batches(headers, [(7, 5)], lambda h: h.abort)
    assert [(h.base_offset, h.last_offset) for h in aborted] == [(5, 9)]
    sp = make()
    got = sp.acquire(MEMBER, headers, fetch_offset=0, max_fetch_records=500, batch_size=500, now=0,
                     aborted_batches=aborted)
    assert got.records == (AcquiredRecords(0, 4, 1), AcquiredRecords(10, 14, 1))
    assert got.count == 10
    assert state(sp, 5) == (RecordState.ARCHIVED, 1, EMPTY_MEMBER_ID)
    ack(sp, MEMBER, (0, 4, [1]), (10, 14, [1]))
    assert (sp.start_offset, sp.cached_batches()) == (15, [])


def test_fenced_partition_refuses():
    sp = make()
    acquire(sp, MEMBER, (0, 4))
    sp.mark_fenced()
    assert acquire(sp, MEMBER, (5, 9)).records == ()
    assert ack(sp, MEMBER, (0, 4, [1])) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_woken_on_release_and_window_moves():
    """The long poll's signals: records released, expired, or the window moved."""
    sp = make(max_in_flight=5)
    sp.take_woken()
    acquire(sp, MEMBER, (0, 4))
    assert not sp.take_woken()
    ack(sp, MEMBER, (0, 1, [1]))
    assert sp.take_woken()
    release(sp, MEMBER)
    assert sp.take_woken()


def test_lock_timeouts_and_in_flight_batches_for_the_metrics():
    """SharePartitionMetrics' AcquisitionLockTimeoutPerSec counts the records whose lock expired (a whole batch or
    the still-acquired offsets of a split one, never an acknowledged one); InFlightBatchCount the cached batches."""
    sp = make()
    acquire(sp, MEMBER, (5, 6))
    acquire(sp, MEMBER, (10, 18), fetch_offset=7)
    assert sp.num_in_flight_batches() == 2 and sp.num_in_flight_records() == 14
    ack(sp, MEMBER, (10, 13, [2, 0, 0, 1]))
    assert sp.lock_timeouts == 0
    sp.on_time(LOCK_MS - 1)
    assert sp.lock_timeouts == 0
    sp.on_time(LOCK_MS)
    assert sp.lock_timeouts == 2 + 5  # 5-6 whole, 14-18 one by one
    sp.on_time(LOCK_MS * 3)
    assert sp.lock_timeouts == 7  # nothing acquired any more


def test_offsets_of_a_split_batch_acknowledged_under_one_type():
    """commit_sync's pattern: a poll's batch acknowledged 100 offsets at a time under one type. The write carries
    the touched offsets as ranges of one state and count (a release at the delivery limit archives its offsets);
    an offset the member does not hold refuses the call and rolls back every offset it had changed."""
    sp = make(max_delivery=2)
    acquire(sp, MEMBER, (0, 9))
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(0, 3, (1,))], 0)
    assert t.write.state_batches == (StateBatch(0, 3, 2, 1),) and sp.delivery_complete_count == 4
    assert sp.has_ongoing_transition(3) and not sp.has_ongoing_transition(4)
    assert sp.write_completed(t.write.write_id, 0, 0) == ErrorCode.NONE
    assert sp.start_offset == 4 and not sp.has_ongoing_transition(3)
    # offsets 4-5 released and delivered again (count 2, the limit); a release of 4-7 then archives 4-5
    assert ack(sp, MEMBER, (4, 5, [2])) == ErrorCode.NONE
    got = sp.acquire("other", [BatchRange(0, 9)], fetch_offset=4, max_fetch_records=2, batch_size=2, now=0)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.records] == [(4, 4, 2), (5, 5, 2)]
    t = sp.acknowledge("other", [AcknowledgementBatch(4, 5, (2,))], 0)
    assert t.write.state_batches == (StateBatch(4, 5, 4, 2),)
    assert sp.write_completed(t.write.write_id, 0, 0) == ErrorCode.NONE
    assert state(sp, 4) == (RecordState.ARCHIVED, 2, EMPTY_MEMBER_ID) and sp.start_offset == 6
    # 6-9 held by MEMBER; 8 taken away: accepting 6-9 fails at 8 and 6-7 are as before
    assert ack(sp, MEMBER, (8, 8, [2])) == ErrorCode.NONE
    sp.acquire("other", [BatchRange(0, 9)], fetch_offset=8, max_fetch_records=1, batch_size=1, now=0)
    before = [state(sp, o) for o in range(6, 10)]
    complete = sp.delivery_complete_count
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(6, 9, (1,))], 0)
    assert t.error == ErrorCode.INVALID_RECORD_STATE and t.write is None
    assert [state(sp, o) for o in range(6, 10)] == before and sp.delivery_complete_count == complete
    assert not any(sp.has_ongoing_transition(o) for o in range(6, 10))
    # a failed write rolls the range back: the offsets are the member's again
    t = sp.acknowledge(MEMBER, [AcknowledgementBatch(6, 7, (1,))], 0)
    assert sp.write_completed(t.write.write_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, 0) != ErrorCode.NONE
    assert [state(sp, o) for o in (6, 7)] == [(RecordState.ACQUIRED, 1, MEMBER)] * 2
    assert sp.delivery_complete_count == complete
