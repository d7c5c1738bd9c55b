"""Transactions in the producer state on its own (storage/producer_state.py): ports of Kafka's
ProducerStateManagerTest cases about transactional batches, end-transaction markers, the first unstable offset
and snapshots of open or finished transactions. Each test's docstring names the Kafka method it ports.

Kafka's helpers ``appendClientEntry`` / ``appendEndTxnMarker`` are :func:`_append` / :func:`_end_txn`: real
one-record batches and marker batches (``build_batch`` / ``build_end_txn_marker_batch``) go through
``ProducerAppendInfo.append``, as the log's append path does."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch
from protocol.records import parse_header
from storage.errors import InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError
from storage.producer_state import (
    NO_SEQUENCE,
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
    TxnMetadata,
    read_snapshot,
    write_snapshot,
)

from .helpers import NoSyncFileIO

PID = 1
EPOCH = 0
DEFAULT_SEQ = 0
EXPIRATION_MS = 86400000  # Kafka's PRODUCER_ID_EXPIRATION_MS_DEFAULT
MAX_TXN_TIMEOUT_MS = 5 * 60 * 1000
NOW = 1_700_000_000_000  # MockTime's start: a wall-clock millisecond value


def _psm(log_dir) -> ProducerStateManager:
    return ProducerStateManager(str(log_dir), producer_id_expiration_ms=EXPIRATION_MS,
                                max_transaction_timeout_ms=MAX_TXN_TIMEOUT_MS, file_io=NoSyncFileIO())


@pytest.fixture
def psm(tmp_path):
    return _psm(tmp_path)


def _data_batch(pid: int, epoch: int, first_seq: int, first_offset: int, last_offset: int, ts: int,
                transactional: bool) -> bytes:
    n = last_offset - first_offset + 1
    return build_batch([Record(None, b"v%d" % i, timestamp=ts) for i in range(n)], base_offset=first_offset,
                       producer_id=pid, producer_epoch=epoch, base_sequence=first_seq, is_transactional=transactional)


def _append(psm: ProducerStateManager, pid: int, epoch: int, seq: int, offset: int, transactional: bool,
            ts: int = NOW, origin: str = ORIGIN_CLIENT) -> None:
    """``appendClientEntry``: one record at ``offset``, sequence ``seq``."""
    info = psm.prepare_update(pid, origin)
    buf = _data_batch(pid, epoch, seq, offset, offset, ts, transactional)
    assert info.append(parse_header(buf), buf, 0) is None
    psm.update(info)
    psm.update_map_end_offset(offset + 1)


def _end_txn(psm: ProducerStateManager, pid: int, epoch: int, commit: bool, offset: int, coordinator_epoch: int = 0,
             ts: int = NOW) -> CompletedTxn | None:
    """``appendEndTxnMarker``: a COMMIT/ABORT marker batch at ``offset`` from the coordinator; completes what it
    ends."""
    info = psm.prepare_update(pid, ORIGIN_COORDINATOR)
    buf = build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=epoch,
                                     coordinator_epoch=coordinator_epoch, timestamp=ts, base_offset=offset)
    completed = info.append(parse_header(buf), buf, 0)
    psm.update(info)
    if completed is not None:
        psm.complete_txn(completed)
    psm.update_map_end_offset(offset + 1)
    return completed


def _entry(psm: ProducerStateManager, pid: int = PID) -> ProducerStateEntry:
    e = psm.last_entry(pid)
    assert e is not None, f"producer {pid} should have an entry"
    return e


def _reloaded(tmp_path, log_start: int, log_end: int, now_ms: int = NOW) -> ProducerStateManager:
    """A new manager on the same directory, loaded from its snapshots (``truncateAndReload``)."""
    recovered = _psm(tmp_path)
    recovered.truncate_and_reload(log_start, log_end, now_ms)
    return recovered


def test_append_txn_marker_with_no_producer_state(psm):
    """ProducerStateManagerTest.testAppendTxnMarkerWithNoProducerState"""
    epoch = 2
    assert _end_txn(psm, PID, epoch, True, 27) is None
    first = _entry(psm)
    assert (first.producer_epoch, first.producer_id, first.last_seq) == (epoch, PID, NO_SEQUENCE)

    # fencing still works when the marker is all that is left
    with pytest.raises(InvalidProducerEpochError):
        _append(psm, PID, 0, DEFAULT_SEQ, 4, False, ts=0)
    # a non-zero sequence is out of order, so that the producer resets its state
    with pytest.raises(OutOfOrderSequenceError):
        _append(psm, PID, epoch, 17, 4, False, ts=0)
    # sequence 0 is accepted
    _append(psm, PID, epoch, DEFAULT_SEQ, 39, False, ts=4)
    second = _entry(psm)
    assert (second.producer_epoch, second.producer_id, second.last_seq) == (epoch, PID, 0)


def test_control_record_bumps_producer_epoch(psm):
    """ProducerStateManagerTest.testControlRecordBumpsProducerEpoch"""
    _append(psm, PID, EPOCH, DEFAULT_SEQ, 0, False)
    bumped = 1
    _end_txn(psm, PID, bumped, False, 1)
    e = _entry(psm)
    assert e.producer_epoch == bumped
    assert e.current_txn_first_offset is None
    assert (e.first_seq, e.last_seq) == (NO_SEQUENCE, NO_SEQUENCE)
    # the new epoch starts at sequence 0
    _append(psm, PID, bumped, 0, 2, False)
    assert _entry(psm).first_seq == DEFAULT_SEQ


def test_txn_first_offset_metadata_cached(psm):
    """ProducerStateManagerTest.testTxnFirstOffsetMetadataCached: the transaction's first offset (with a KIP-890
    verification entry on the append) is the first unstable offset. odradek's manager keeps the bare offset; the
    log caches its position (``Log._first_unstable_offset``), so only the offset is checked here."""
    offset = 992342
    verification = psm.maybe_create_verification_state_entry(PID, DEFAULT_SEQ, EPOCH, now_ms=NOW)
    info = ProducerAppendInfo(PID, ProducerStateEntry(PID), ORIGIN_CLIENT, verification)
    buf = _data_batch(PID, EPOCH, DEFAULT_SEQ, offset, offset, NOW, True)
    info.append(parse_header(buf), buf, 0)
    psm.update(info)
    assert psm.first_unstable_offset() == offset
    assert psm.first_undecided_offset() == offset


def test_update_producer_transaction_state(psm):
    """ProducerStateManagerTest.updateProducerTransactionState"""
    coordinator_epoch = 15
    _append(psm, PID, EPOCH, DEFAULT_SEQ, 9, False)
    info = psm.prepare_update(PID, ORIGIN_CLIENT)

    def check(entry, last_seq, last_offset, txn_first_offset):
        assert entry.producer_epoch == EPOCH
        assert (entry.first_seq, entry.last_seq) == (1, last_seq)
        assert (entry.first_data_offset, entry.last_data_offset) == (16, last_offset)
        assert entry.current_txn_first_offset == txn_first_offset
        assert info.started_transactions == [TxnMetadata(PID, 16)]

    buf = _data_batch(PID, EPOCH, 1, 16, 20, NOW, True)  # sequences 1-5
    info.append(parse_header(buf), buf, 0)
    check(info.to_entry(), 5, 20, 16)
    buf = _data_batch(PID, EPOCH, 6, 26, 30, NOW, True)  # sequences 6-10
    info.append(parse_header(buf), buf, 0)
    check(info.to_entry(), 10, 30, 16)

    completed = info.append_end_txn_marker(True, coordinator_epoch, EPOCH, 40, NOW)
    assert completed == CompletedTxn(PID, 16, 40, False)
    # the marker leaves the cached batches as they were
    last = info.to_entry()
    check(last, 10, 30, None)
    assert last.coordinator_epoch == coordinator_epoch
    assert last.last_timestamp == NOW


def test_out_of_sequence_after_control_record_epoch_bump(psm):
    """ProducerStateManagerTest.testOutOfSequenceAfterControlRecordEpochBump"""
    _append(psm, PID, EPOCH, DEFAULT_SEQ, 0, True)
    _append(psm, PID, EPOCH, 1, 1, True)
    bumped = 1
    _end_txn(psm, PID, bumped, False, 1)
    # the sequence must restart after the bump
    with pytest.raises(OutOfOrderSequenceError):
        _append(psm, PID, bumped, 2, 2, True)
    with pytest.raises(OutOfOrderSequenceError):
        _append(psm, PID, bumped + 1, 2, 2, True)
    # from sequence 0 it is fine
    _append(psm, PID, bumped, DEFAULT_SEQ, 0, True)
    e = _entry(psm)
    assert (e.producer_epoch, e.last_seq) == (bumped, 0)


def test_non_transactional_append_with_ongoing_transaction(psm):
    """ProducerStateManagerTest.testNonTransactionalAppendWithOngoingTransaction"""
    _append(psm, PID, EPOCH, DEFAULT_SEQ, 0, True)
    with pytest.raises(InvalidTxnStateError):
        _append(psm, PID, EPOCH, 1, 1, False)
    assert _entry(psm).current_txn_first_offset == 0


def test_recover_from_snapshot_unfinished_transaction(psm, tmp_path):
    """ProducerStateManagerTest.testRecoverFromSnapshotUnfinishedTransaction"""
    _append(psm, PID, EPOCH, 0, 0, True)
    _append(psm, PID, EPOCH, 1, 1, True)
    assert psm.take_snapshot() is not None
    recovered = _reloaded(tmp_path, 0, 3)
    # the snapshot keeps only the last batch's metadata
    e = _entry(recovered)
    assert (e.first_data_offset, e.first_seq, e.last_data_offset, e.last_seq) == (1, 1, 1, 1)
    assert e.current_txn_first_offset == 0
    assert recovered.first_undecided_offset() == 0  # the reloaded transaction is still open
    _append(recovered, PID, EPOCH, 2, 2, True)  # the next sequence is taken after recovery
    assert _entry(recovered).last_seq == 2


def test_recover_from_snapshot_finished_transaction(psm, tmp_path):
    """ProducerStateManagerTest.testRecoverFromSnapshotFinishedTransaction"""
    _append(psm, PID, EPOCH, 0, 0, True)
    _append(psm, PID, EPOCH, 1, 1, True)
    assert _end_txn(psm, PID, EPOCH, False, 2) == CompletedTxn(PID, 0, 2, True)
    psm.take_snapshot()
    recovered = _reloaded(tmp_path, 0, 3)
    e = _entry(recovered)
    assert (e.first_data_offset, e.first_seq, e.last_data_offset, e.last_seq) == (1, 1, 1, 1)
    assert e.current_txn_first_offset is None
    assert recovered.first_undecided_offset() is None


def test_recover_from_snapshot_empty_transaction(psm, tmp_path):
    """ProducerStateManagerTest.testRecoverFromSnapshotEmptyTransaction"""
    append_ts = NOW
    assert _end_txn(psm, PID, EPOCH, False, 0, 0, ts=append_ts) is None
    psm.take_snapshot()
    recovered = _reloaded(tmp_path, 0, 1)
    e = _entry(recovered)
    assert e.last_timestamp == append_ts
    assert e.current_txn_first_offset is None


def test_producer_state_after_fencing_abort_marker(psm):
    """ProducerStateManagerTest.testProducerStateAfterFencingAbortMarker"""
    _append(psm, PID, EPOCH, DEFAULT_SEQ, 0, True)
    assert _end_txn(psm, PID, EPOCH + 1, False, 1) == CompletedTxn(PID, 0, 1, True)
    e = _entry(psm)
    assert e.current_txn_first_offset is None
    assert (e.last_data_offset, e.first_data_offset) == (-1, -1)
    # kept (the fencing epoch must survive): not expired
    psm.remove_expired_producers(NOW)
    assert _entry(psm).producer_epoch == EPOCH + 1


def test_first_unstable_offset_after_truncation(psm):
    """ProducerStateManagerTest.testFirstUnstableOffsetAfterTruncation"""
    _append(psm, PID, EPOCH, DEFAULT_SEQ, 99, True)
    assert psm.first_unstable_offset() == 99
    psm.take_snapshot()  # at 100, the transaction open

    _end_txn(psm, PID, EPOCH, True, 105)
    psm.on_high_watermark_updated(106)
    assert psm.first_unstable_offset() is None
    psm.take_snapshot()  # at 106, nothing open

    _append(psm, PID, EPOCH, DEFAULT_SEQ + 1, 106, False)
    psm.truncate_and_reload(0, 106, NOW)
    assert psm.first_unstable_offset() is None
    assert psm.snapshot_offsets() == [100, 106]

    psm.truncate_and_reload(0, 100, NOW)
    assert psm.first_unstable_offset() == 99
    assert psm.snapshot_offsets() == [100]


def test_first_unstable_offset(psm):
    """ProducerStateManagerTest.testFirstUnstableOffset"""
    epoch = 5
    assert psm.first_undecided_offset() is None

    _append(psm, PID, epoch, DEFAULT_SEQ, 99, True)
    assert psm.first_undecided_offset() == 99
    assert psm.first_unstable_offset() == 99

    another = 2
    _append(psm, another, epoch, DEFAULT_SEQ, 105, True)
    assert psm.first_undecided_offset() == 99
    assert psm.first_unstable_offset() == 99

    _end_txn(psm, PID, epoch, True, 109)
    assert psm.first_undecided_offset() == 105
    assert psm.first_unstable_offset() == 99  # decided, not yet replicated

    psm.on_high_watermark_updated(100)
    assert psm.first_unstable_offset() == 99
    psm.on_high_watermark_updated(110)
    assert psm.first_unstable_offset() == 105

    _end_txn(psm, another, epoch, False, 112)
    assert psm.first_undecided_offset() is None
    assert psm.first_unstable_offset() == 105

    psm.on_high_watermark_updated(113)
    assert psm.first_unstable_offset() is None


def test_producers_with_ongoing_transactions_dont_expire(psm):
    """ProducerStateManagerTest.testProducersWithOngoingTransactionsDontExpire"""
    epoch = 5
    _append(psm, PID, epoch, DEFAULT_SEQ, 99, True)
    assert psm.first_undecided_offset() == 99

    later = NOW + EXPIRATION_MS + 1
    psm.remove_expired_producers(later)
    assert psm.last_entry(PID) is not None
    assert psm.first_undecided_offset() == 99
    psm.remove_expired_producers(later)
    assert psm.last_entry(PID) is not None


def test_old_epoch_for_control_record(psm):
    """ProducerStateManagerTest.testOldEpochForControlRecord"""
    epoch = 5
    assert psm.first_undecided_offset() is None
    _append(psm, PID, epoch, DEFAULT_SEQ, 99, True)
    with pytest.raises(InvalidProducerEpochError):
        _end_txn(psm, PID, 3, True, 100)
    assert psm.first_undecided_offset() == 99  # the refused marker ended nothing


def _assert_coordinator_fenced(psm, epoch: int, offset: int, coordinator_epoch: int) -> None:
    with pytest.raises(KafkaError) as ei:
        _end_txn(psm, PID, epoch, True, offset, coordinator_epoch)
    assert ei.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_coordinator_fencing(psm):
    """ProducerStateManagerTest.testCoordinatorFencing"""
    epoch = 5
    _append(psm, PID, epoch, DEFAULT_SEQ, 99, True)
    _end_txn(psm, PID, epoch, True, 100, 1)
    assert _entry(psm).coordinator_epoch == 1
    # the current coordinator epoch is allowed
    _end_txn(psm, PID, epoch, True, 101, 1)
    # a bumped one too
    _end_txn(psm, PID, epoch, True, 102, 2)
    assert _entry(psm).coordinator_epoch == 2
    # an older one is not
    _assert_coordinator_fenced(psm, epoch, 103, 1)
    assert _entry(psm).coordinator_epoch == 2


def test_coordinator_fenced_after_reload(psm, tmp_path):
    """ProducerStateManagerTest.testCoordinatorFencedAfterReload. Kafka's test reloads to a log end of 2, which
    deletes the snapshot (at 101, past that end), and then appends the stale marker to the original manager; here a
    manager reloaded from the snapshot also fences it, before Kafka's steps."""
    _append(psm, PID, EPOCH, DEFAULT_SEQ, 99, True)
    _end_txn(psm, PID, EPOCH, True, 100, 1)
    psm.take_snapshot()
    recovered = _reloaded(tmp_path, 0, 101, now_ms=70000)
    assert _entry(recovered).coordinator_epoch == 1
    _assert_coordinator_fenced(recovered, EPOCH, 101, 0)  # a marker from the old coordinator (epoch 0)

    truncated = _reloaded(tmp_path, 0, 2, now_ms=70000)
    assert truncated.last_entry(PID) is None and truncated.snapshot_offsets() == []
    _assert_coordinator_fenced(psm, EPOCH, 100, 0)


def test_append_empty_control_batch(psm):
    """ProducerStateManagerTest.testAppendEmptyControlBatch: a control batch with no record (the cleaner removed
    the transaction it ended) neither fails nor starts a transaction."""
    pid, base_offset = 23423, 15
    buf = build_batch([], base_offset=base_offset, producer_id=pid, producer_epoch=0, is_transactional=True,
                      is_control=True)
    h = parse_header(buf)
    assert h.is_control and h.records_count == 0
    info = psm.prepare_update(pid, ORIGIN_CLIENT)
    assert info.append(h, buf, 0) is None
    psm.update(info)
    psm.update_map_end_offset(base_offset + 1)
    assert _entry(psm, pid).current_txn_first_offset is None
    assert psm.first_undecided_offset() is None


def test_read_write_snapshot(tmp_path):
    """ProducerStateManagerTest.testReadWriteSnapshot: an open transaction's first offset and the coordinator epoch
    survive the snapshot file."""
    no_ts = -1
    with_txn = ProducerStateEntry(1, 2, 3, no_ts, 100)
    with_txn.batch_metadata.append(BatchMetadata(1, 2, 3, no_ts))
    without = ProducerStateEntry(11, 12, 13, 123456, None)
    path = str(tmp_path / "testReadWriteSnapshot")
    write_snapshot(path, [with_txn, without], True, file_io=NoSyncFileIO())
    got = {e.producer_id: e for e in read_snapshot(path)}
    assert got.keys() == {1, 11}
    for want in (with_txn, without):
        e = got[want.producer_id]
        assert (e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset) == \
            (want.producer_epoch, want.coordinator_epoch, want.last_timestamp, want.current_txn_first_offset)
        assert list(e.batch_metadata) == list(want.batch_metadata)
