"""The transaction index through a log: appends (leader and follower), READ_COMMITTED reads, recovery after a crash,
truncation, retention, renames and the cleaner's swaps.  Ports of Kafka's UnifiedLogTest and LogLoaderTest cases
(each docstring names the method) plus crash cases of odradek's own."""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages.fetch_response import AbortedTransaction
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch, decode_batch
from protocol.records import LOG_OVERHEAD, iter_batch_positions
from storage.config import LogConfig
from storage.errors import InvalidProducerEpochError, KafkaStorageError
from storage.log import ORIGIN_COORDINATOR, FetchIsolation
from storage.txn_index import ENTRY_SIZE, AbortedTxn

from .helpers import NoSyncFileIO, batch, open_log

EXPECTED = [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]


class Producer:
    """``LogTestUtils.appendTransactionalAsLeader``: each call appends ``n`` transactional records."""

    def __init__(self, lg, pid: int, epoch: int = 0) -> None:
        self.lg, self.pid, self.epoch, self.seq = lg, pid, epoch, 0

    def __call__(self, n: int):
        info = self.lg.append_as_leader(batch(n, producer_id=self.pid, producer_epoch=self.epoch,
                                              base_sequence=self.seq, is_transactional=True), 0, now_ms=0)
        self.seq += n
        return info


def non_txn(lg, n: int):
    """``LogTestUtils.appendNonTransactionalAsLeader``"""
    return lg.append_as_leader(batch(n), 0, now_ms=0)


def end_txn(lg, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0, leader_epoch: int = 0):
    """``LogTestUtils.appendEndTxnMarkerAsLeader``"""
    marker = bytearray(build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=epoch,
                                                  coordinator_epoch=coordinator_epoch, timestamp=0))
    return lg.append_as_leader(marker, leader_epoch, now_ms=0, origin=ORIGIN_COORDINATOR)


def all_aborted(lg) -> list[AbortedTxn]:
    """``LogTestUtils.allAbortedTransactions``"""
    return [t for s in lg.log_segments() for t in s.txn_index.all_aborted_txns()]


def mixed_transactions(lg) -> None:
    """The history of testTransactionIndexUpdated and the LogLoaderTest recovery cases: four producers, two
    aborts (pid 1 at 29, pid 2 at 74), two commits, non-transactional data in between."""
    p1, p2, p3, p4 = (Producer(lg, pid) for pid in (1, 2, 3, 4))
    p1(5)  # 5
    non_txn(lg, 3)  # 8
    p2(2)  # 10
    p1(4)  # 14
    p3(3)  # 17
    non_txn(lg, 2)  # 19
    p1(10)  # 29
    end_txn(lg, 1, commit=False)  # 30
    p2(6)  # 36
    p4(3)  # 39
    non_txn(lg, 10)  # 49
    p3(9)  # 58
    end_txn(lg, 3, commit=True)  # 59
    p4(8)  # 67
    p2(7)  # 74
    end_txn(lg, 2, commit=False)  # 75
    non_txn(lg, 10)  # 85
    p4(4)  # 89
    end_txn(lg, 4, commit=True)  # 90
    assert lg.log_end_offset == 90


def _batches(data) -> list[tuple[int, int]]:
    return [(h.base_offset, h.base_offset + h.last_offset_delta) for _, h in iter_batch_positions(bytes(data))]


def test_transaction_index_updated(tmp_path):
    """UnifiedLogTest.testTransactionIndexUpdated"""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=5 * 1024 * 1024))
    mixed_transactions(lg)
    assert all_aborted(lg) == EXPECTED
    lg.update_high_watermark(30)
    assert lg.producer_state.first_unstable_offset() == 8 and lg.last_stable_offset == 8
    lg.update_high_watermark(75)
    assert lg.producer_state.first_unstable_offset() == 36 and lg.last_stable_offset == 36
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.producer_state.first_unstable_offset() is None and lg.last_stable_offset == 90


def _txn_at(base: int, pid: int, n: int, seq: int, epoch: int = 0, leader_epoch: int = -1) -> bytes:
    return build_batch([Record(b"k", b"v%d" % i, timestamp=1000) for i in range(n)], base_offset=base,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True,
                       partition_leader_epoch=leader_epoch)


def _plain_at(base: int, n: int) -> bytes:
    return build_batch([Record(b"k", b"v%d" % i, timestamp=1000) for i in range(n)], base_offset=base)


def _marker_at(base: int, pid: int, commit: bool, epoch: int = 0, leader_epoch: int = -1,
               coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=epoch,
                                      coordinator_epoch=coordinator_epoch, timestamp=0, base_offset=base,
                                      partition_leader_epoch=leader_epoch)


def test_transaction_index_updated_through_replication(tmp_path):
    """UnifiedLogTest.testTransactionIndexUpdatedThroughReplication: the follower's append maintains the index."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=5 * 1024 * 1024))
    seqs = {1: 0, 2: 0, 3: 0, 4: 0}

    def txn(base, pid, n):
        out = _txn_at(base, pid, n, seqs[pid])
        seqs[pid] += n
        return out

    buf = b"".join([
        txn(0, 1, 5), _plain_at(5, 3), txn(8, 2, 2), txn(10, 1, 4), txn(14, 3, 3), _plain_at(17, 2),
        txn(19, 1, 10), _marker_at(29, 1, False), txn(30, 2, 6), txn(36, 4, 3), _plain_at(39, 10), txn(49, 3, 9),
        _marker_at(58, 3, True), txn(59, 4, 8), txn(67, 2, 7), _marker_at(74, 2, False), _plain_at(75, 10),
        txn(85, 4, 4), _marker_at(89, 4, True)])
    lg.append_as_follower(bytearray(buf), now_ms=0)
    assert all_aborted(lg) == EXPECTED
    lg.update_high_watermark(30)
    assert lg.last_stable_offset == 8
    lg.update_high_watermark(75)
    assert lg.last_stable_offset == 36
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.producer_state.first_unstable_offset() is None


def test_zombie_coordinator_fenced(tmp_path):
    """UnifiedLogTest.testZombieCoordinatorFenced"""
    lg = open_log(str(tmp_path))
    append = Producer(lg, 1)
    append(10)
    end_txn(lg, 1, commit=False, coordinator_epoch=1)
    append(5)
    end_txn(lg, 1, commit=True, coordinator_epoch=2)
    with pytest.raises(KafkaError) as e:
        end_txn(lg, 1, commit=False, coordinator_epoch=1)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert all_aborted(lg) == [AbortedTxn(1, 0, 10, 11)]


def test_zombie_coordinator_fenced_empty_transaction(tmp_path):
    """UnifiedLogTest.testZombieCoordinatorFencedEmptyTransaction: markers of empty transactions add no entry."""
    lg = open_log(str(tmp_path))
    lg.append_as_follower(bytearray(_txn_at(0, 1, 10, 0, leader_epoch=1) + _marker_at(10, 1, True, leader_epoch=1)),
                          now_ms=0)
    end_txn(lg, 1, commit=False, coordinator_epoch=2, leader_epoch=1)
    end_txn(lg, 1, commit=False, coordinator_epoch=2, leader_epoch=1)
    with pytest.raises(KafkaError) as e:
        end_txn(lg, 1, commit=False, coordinator_epoch=1, leader_epoch=1)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert all_aborted(lg) == []


def test_end_txn_with_fenced_producer_epoch(tmp_path):
    """UnifiedLogTest.testEndTxnWithFencedProducerEpoch"""
    lg = open_log(str(tmp_path))
    end_txn(lg, 1, commit=False, epoch=5, coordinator_epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        end_txn(lg, 1, commit=False, epoch=4, coordinator_epoch=1)


def test_append_to_transaction_index_failure(tmp_path):
    """UnifiedLogTest.testAppendToTransactionIndexFailure: the marker is in the log, the index write fails, the log
    goes offline with the transaction still open; an unclean restart rebuilds the entry."""
    cfg = LogConfig(segment_bytes=5 * 1024 * 1024)
    lg = open_log(str(tmp_path), cfg)
    Producer(lg, 1)(10)
    lg.active_segment.txn_index.rename_to(lg.dir)  # an index that is a directory: its append fails
    with pytest.raises(KafkaStorageError):
        end_txn(lg, 1, commit=False, coordinator_epoch=1)
    assert lg.log_end_offset == 11 and lg.last_stable_offset == 0
    with pytest.raises(KafkaStorageError):
        end_txn(lg, 1, commit=False, coordinator_epoch=1)
    assert lg.log_end_offset == 11 and lg.last_stable_offset == 0
    lg.update_high_watermark(12)
    assert lg.last_stable_offset == 0
    assert lg.offline  # Kafka's close raises here; odradek's close of an offline log does nothing
    lg.close()
    reopened = open_log(str(tmp_path), cfg, had_clean_shutdown=False)
    assert reopened.log_end_offset == 11
    assert reopened.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 10, 11)]
    reopened.update_high_watermark(12)
    assert reopened.producer_state.first_unstable_offset() is None


def test_last_stable_offset_with_mixed_producer_data(tmp_path):
    """UnifiedLogTest.testLastStableOffsetWithMixedProducerData"""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=5 * 1024 * 1024))
    first = Producer(lg, 137, epoch=5)(3)
    assert lg.producer_state.first_unstable_offset() == first.first_offset
    non_txn(lg, 3)
    second = Producer(lg, 983, epoch=5)(3)
    assert lg.producer_state.first_unstable_offset() == first.first_offset
    abort = end_txn(lg, 137, commit=False, epoch=5)
    lg.update_high_watermark(abort.last_offset + 1)
    assert lg.producer_state.first_unstable_offset() == second.first_offset
    # the abort's LSO is where the other producer's transaction starts
    assert all_aborted(lg) == [AbortedTxn(137, 0, 9, second.first_offset)]
    commit = end_txn(lg, 983, commit=True, epoch=5)
    lg.update_high_watermark(commit.last_offset + 1)
    assert lg.producer_state.first_unstable_offset() is None


def test_aborted_transaction_spanning_multiple_segments(tmp_path):
    """UnifiedLogTest.testAbortedTransactionSpanningMultipleSegments"""
    records = batch(3, producer_id=137, producer_epoch=5, base_sequence=0, is_transactional=True)
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=len(records)))
    first = lg.append_as_leader(records, 0, now_ms=0)
    assert lg.producer_state.first_unstable_offset() == first.first_offset
    lg.append_as_leader(batch(3, producer_id=137, producer_epoch=5, base_sequence=3, is_transactional=True), 0,
                        now_ms=0)  # spills to the second segment
    assert lg.producer_state.first_unstable_offset() == first.first_offset
    assert lg.log_end_offset_metadata.segment_base_offset == 3
    abort = end_txn(lg, 137, commit=False, epoch=5)
    lg.update_high_watermark(abort.last_offset + 1)
    assert lg.producer_state.first_unstable_offset() is None
    info = lg.read(0, 2048, FetchIsolation.TXN_COMMITTED, True)
    assert info.aborted_transactions == [AbortedTransaction(producer_id=137, first_offset=0)]


def test_fetch_up_to_last_stable_offset(tmp_path):
    """UnifiedLogTest.testFetchUpToLastStableOffset, with the aborted transactions each read answers."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=1024 * 1024))
    p1, p2 = Producer(lg, 1), Producer(lg, 2)
    p1(5)
    non_txn(lg, 3)
    p2(2)
    p1(4)
    non_txn(lg, 2)
    p1(10)

    def assert_lso_bounded_fetches():
        lso = lg.last_stable_offset
        for offset in range(lg.log_start_offset, lso):
            info = lg.read(offset, 2**31 - 1, FetchIsolation.TXN_COMMITTED, True)
            assert info.records.length > 0 and not info.first_entry_incomplete
            assert all(last < lso for _, last in _batches(info.records.read()))
            assert isinstance(info.aborted_transactions, list)
        for offset in range(lso, lg.log_end_offset + 1):
            info = lg.read(offset, 2**31 - 1, FetchIsolation.TXN_COMMITTED, True)
            assert info.records.length == 0 and info.aborted_transactions == []

    assert_lso_bounded_fetches()
    lg.update_high_watermark(lg.log_end_offset)
    assert_lso_bounded_fetches()
    end_txn(lg, 1, commit=True)
    assert lg.last_stable_offset == 0
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.last_stable_offset == 8
    assert_lso_bounded_fetches()
    end_txn(lg, 2, commit=False)
    assert lg.last_stable_offset == 8
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.last_stable_offset == lg.log_end_offset
    assert_lso_bounded_fetches()
    info = lg.read(0, 2**31 - 1, FetchIsolation.TXN_COMMITTED, True)
    assert info.aborted_transactions == [AbortedTransaction(producer_id=2, first_offset=8)]
    assert lg.read(0, 2**31 - 1, FetchIsolation.HIGH_WATERMARK, True).aborted_transactions is None
    assert lg.read(0, 2**31 - 1, FetchIsolation.LOG_END, True).aborted_transactions is None


def test_read_committed_with_concurrent_high_watermark_updates(tmp_path):
    """UnifiedLogTest.testReadCommittedWithConcurrentHighWatermarkUpdates: a transaction is never visible before
    its marker, whatever the high watermark does meanwhile."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=5 * 1024 * 1024))
    append = Producer(lg, 15)
    last_offset = 50
    stop = threading.Event()

    def hw_loop():
        while not stop.is_set() and lg.log_end_offset < last_offset:
            lg.update_high_watermark(lg.log_end_offset)

    t = threading.Thread(target=hw_loop)
    t.start()
    non_empty = 0
    try:
        while lg.log_end_offset < last_offset:
            current = lg.log_end_offset
            append(1)
            if lg.read(current, 2**31 - 1, FetchIsolation.TXN_COMMITTED, False).records.length > 0:
                non_empty += 1
            end_txn(lg, 15, commit=False)
    finally:
        stop.set()
        t.join()
    assert non_empty == 0
    assert len(all_aborted(lg)) == 25


def test_read_committed_collects_across_segments_until_complete(tmp_path):
    """``LocalLog.collectAbortedTransactions``: the search walks later segments until one's entry has an LSO past
    the range read; a read bounded by the offset index's upper bound gets the transactions overlapping it."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=400, index_interval_bytes=1))
    a, b = Producer(lg, 1), Producer(lg, 2)
    a(2)  # 0-1: pid 1 opens
    b(2)  # 2-3: pid 2 opens
    for _ in range(3):
        non_txn(lg, 2)
    end_txn(lg, 2, commit=False)  # pid 2 aborted while pid 1 is open: LSO 0
    for _ in range(3):
        non_txn(lg, 2)
    end_txn(lg, 1, commit=False)
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.num_segments > 2
    marker1, marker2 = [t.last_offset for t in all_aborted(lg)]
    assert all_aborted(lg) == [AbortedTxn(2, 2, marker1, 0), AbortedTxn(1, 0, marker2, marker2 + 1)]
    full = lg.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    # the first segment's read is bounded there; both aborts (in later segments) overlap it
    assert full.aborted_transactions == [AbortedTransaction(producer_id=2, first_offset=2),
                                         AbortedTransaction(producer_id=1, first_offset=0)]
    tail = lg.read(marker2, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    assert tail.aborted_transactions == [AbortedTransaction(producer_id=1, first_offset=0)]
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == all_aborted(lg)


# ---- recovery (LogLoaderTest) -----------------------------------------------------------------------------------

def test_full_transaction_index_recovery(tmp_path):
    """LogLoaderTest.testFullTransactionIndexRecovery"""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=128 * 5))
    mixed_transactions(lg)
    assert lg.num_segments > 3
    for seg in lg.log_segments():
        seg.offset_index.delete_if_exists()
        seg.txn_index.delete_if_exists()
    lg.close()
    reloaded = open_log(str(tmp_path), LogConfig(segment_bytes=1024 * 5), had_clean_shutdown=False)
    assert all_aborted(reloaded) == EXPECTED


def test_recover_only_last_segment(tmp_path):
    """LogLoaderTest.testRecoverOnlyLastSegment"""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=128 * 5))
    mixed_transactions(lg)
    last = lg.log_segments()[-1]
    recovery_point = last.base_offset
    last.offset_index.delete_if_exists()
    last.txn_index.delete_if_exists()
    lg.close()
    reloaded = open_log(str(tmp_path), LogConfig(segment_bytes=1024 * 5), recovery_point=recovery_point,
                        had_clean_shutdown=False)
    assert all_aborted(reloaded) == EXPECTED


def test_recover_last_segment_with_no_snapshots(tmp_path):
    """LogLoaderTest.testRecoverLastSegmentWithNoSnapshots: the producer state is rebuilt from the log's start."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=128 * 5))
    mixed_transactions(lg)
    for name in os.listdir(lg.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(lg.dir, name))
    last = lg.log_segments()[-1]
    recovery_point = last.base_offset
    last.offset_index.delete_if_exists()
    last.txn_index.delete_if_exists()
    lg.close()
    for name in os.listdir(lg.dir):  # the close's snapshot too
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(lg.dir, name))
    reloaded = open_log(str(tmp_path), LogConfig(segment_bytes=1024 * 5), recovery_point=recovery_point,
                        had_clean_shutdown=False)
    assert all_aborted(reloaded) == EXPECTED


def _txn_files(d: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".txnindex"):
            with open(os.path.join(d, name), "rb") as f:
                out[name] = f.read()
    return out


def _damage(path: str, how: str) -> None:
    if how == "delete":
        os.unlink(path)
    elif how == "truncate":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 7)  # a torn last entry
    elif how == "below_base":
        with open(path, "r+b") as f:  # the first entry ends before the segment's base offset
            f.write(AbortedTxn(9, 0, 0, 1).to_bytes())
    else:
        with open(path, "ab") as f:
            f.write(b"\xff" * ENTRY_SIZE)  # an entry of an unknown version


@pytest.mark.parametrize("clean,how", [(False, "delete"), (False, "truncate"), (False, "below_base"),
                                       (False, "garbage"), (True, "truncate"), (True, "below_base"), (True, "garbage")])
def test_a_damaged_txn_index_is_rebuilt_equal(tmp_path, how, clean):
    """kill -9 style: the process dies (nothing closed), a .txnindex is lost, torn or corrupt; the log opened again
    has the same entries (recovered from the log after an unclean stop; found corrupt by the load's sanity check
    after a clean one).  After a clean stop a missing file is not noticed, as in Kafka: there is no sign there was
    one."""
    cfg = LogConfig(segment_bytes=128 * 5)
    lg = open_log(str(tmp_path), cfg)
    mixed_transactions(lg)
    lg.flush(0)
    before = all_aborted(lg)
    files_before = _txn_files(lg.dir)
    assert len(files_before) == 2 and before == EXPECTED
    end = lg.log_end_offset
    lg.close_handlers()  # the crash: nothing written on the way out
    victim = sorted(files_before)[-1]
    _damage(os.path.join(lg.dir, victim), how)
    reopened = open_log(str(tmp_path), cfg, had_clean_shutdown=clean, recovery_point=end if clean else 0)
    assert reopened.log_end_offset == end
    assert all_aborted(reopened) == before
    assert _txn_files(reopened.dir) == files_before
    if clean:
        assert any("corrupt index" in p for p in reopened.load_stats.problems)


def test_unflushed_txn_index_entries_are_rebuilt_after_a_crash(tmp_path):
    """A crash past the recovery point: the segments recovered rebuild their transaction indexes from the log and
    the producer state snapshotted at their start (transactions begun in earlier segments included)."""
    cfg = LogConfig(segment_bytes=128 * 5)
    lg = open_log(str(tmp_path), cfg)
    mixed_transactions(lg)
    lg.flush(0)
    files_before = _txn_files(lg.dir)
    # the recovery point: the segment after the one with the first abort (29); pid 2's aborted transaction (8-74)
    # began before it, so its entry needs the producer state snapshotted there
    recovery_point = lg.local_log.segments.higher_segment(lg.local_log.segments.floor_segment(29).base_offset)\
        .base_offset
    assert 8 < recovery_point <= 74
    lg.close_handlers()
    for name in files_before:
        os.unlink(os.path.join(str(tmp_path), "t-0", name))
    reopened = open_log(str(tmp_path), cfg, had_clean_shutdown=False, recovery_point=recovery_point)
    # only the entries of segments at or past the recovery point come back: the others were flushed, and are not
    # scanned again (as Kafka)
    assert all_aborted(reopened) == EXPECTED[1:]


# ---- truncation, retention, renames, the cleaner --------------------------------------------------------------------

def test_truncation_removes_entries_and_later_segments_files(tmp_path):
    """UnifiedLog.truncateTo: LogSegment.truncateTo truncates the index; later segments' files go (.deleted)."""
    cfg = LogConfig(segment_bytes=128 * 5, file_delete_delay_ms=0)
    lg = open_log(str(tmp_path), cfg)
    mixed_transactions(lg)
    lg.truncate_to(74, now_ms=0)  # the pid 2 abort marker (74) goes
    lg.scheduler.run_all()
    assert all_aborted(lg) == EXPECTED[:1]
    assert [len(v) for v in _txn_files(lg.dir).values() if v] == [ENTRY_SIZE]
    lg.update_high_watermark(lg.log_end_offset)
    # the aborted transaction of pid 2 is open again: its marker will be replicated again
    assert lg.producer_state.first_unstable_offset() == 8
    lg.truncate_to(29, now_ms=0)
    lg.scheduler.run_all()
    assert all_aborted(lg) == [] and not any(_txn_files(lg.dir).values())
    lg.truncate_fully_and_start_at(100, now_ms=0)
    lg.scheduler.run_all()
    assert all_aborted(lg) == [] and not _txn_files(lg.dir)


def test_retention_deletes_txn_index_files(tmp_path):
    """Retention renames a segment's .txnindex with the others (.deleted) and deletes it after the delay."""
    cfg = LogConfig(segment_bytes=128 * 5, file_delete_delay_ms=0, retention_bytes=1)
    lg = open_log(str(tmp_path), cfg)
    mixed_transactions(lg)
    lg.update_high_watermark(lg.log_end_offset)
    before = set(_txn_files(lg.dir))
    assert len(before) == 2
    lg.delete_old_segments(now_ms=0)
    remaining = {os.path.basename(s.txn_index.path) for s in lg.log_segments() if s.txn_index.all_aborted_txns()}
    assert set(_txn_files(lg.dir)) == remaining and before - remaining
    assert {n[:-len(".deleted")] for n in os.listdir(lg.dir) if n.endswith(".txnindex.deleted")} == before - remaining
    lg.scheduler.run_all()
    assert not any(n.endswith(".deleted") for n in os.listdir(lg.dir))
    assert all_aborted(lg) == [t for t in EXPECTED if t.last_offset >= lg.log_start_offset]


def test_rename_dir_moves_the_txn_index(tmp_path):
    """``LogSegment.updateParentDir``: after the directory's rename the index is found, and written, there."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=5 * 1024 * 1024))
    Producer(lg, 1)(3)
    end_txn(lg, 1, commit=False)
    lg.rename_dir("t-0.abc-delete")
    assert lg.active_segment.txn_index.path.startswith(lg.dir)
    Producer(lg, 2)(3)
    end_txn(lg, 2, commit=False)
    assert len(_txn_files(lg.dir)["00000000000000000000.txnindex"]) == 2 * ENTRY_SIZE


class _FailingDeleteRename(NoSyncFileIO):
    """Fails the rename of a replaced segment to ``.deleted``: a crash in the middle of the cleaner's swap."""

    fail_deleted = False

    def rename(self, src: str, dst: str) -> None:
        if self.fail_deleted and dst.endswith(".deleted"):
            raise OSError(5, "injected failure")
        super().rename(src, dst)


@pytest.mark.parametrize("interrupt", [False, True])
def test_cleaner_swap_keeps_the_entries(tmp_path, interrupt):
    """The cleaner's cleaned segment carries the entries of the segments it replaces (both ABORT markers are kept:
    each aborted transaction still has its producer's last batch, kept empty), through .cleaned -> .swap -> final
    names, and the replaced segments' files go; a swap interrupted after the .swap
    renames is completed by the loader with the .txnindex.swap."""
    from storage.cleaner import LogCleaner
    from storage.config import LogManagerConfig

    io = _FailingDeleteRename()
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=128 * 5, file_delete_delay_ms=0,
                    min_cleanable_dirty_ratio=0.01)
    lg = open_log(str(tmp_path), cfg, file_io=io)
    mixed_transactions(lg)
    non_txn(lg, 1)
    lg.roll(now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    lg.update_config(replace(cfg, segment_bytes=1 << 20))  # the cleaner groups every segment into one
    cleaner = LogCleaner(LogManagerConfig(log_dirs=(str(tmp_path),), log_cleaner_dedupe_buffer_size=1 << 20),
                         lambda: {(lg.topic, lg.partition): lg}, [str(tmp_path)], file_io=NoSyncFileIO())
    before_segments = lg.num_segments
    io.fail_deleted = interrupt
    cleaner.force_clean(lg, 1000)
    end = lg.log_end_offset
    if interrupt:
        # the swap stopped after .cleaned -> .swap: the log went offline; the loader finishes the swap
        assert lg.offline and any(n.endswith(".txnindex.swap") for n in os.listdir(lg.dir))
        io.fail_deleted = False
    else:
        lg.scheduler.run_all()
        assert lg.num_segments < before_segments
        assert all_aborted(lg) == EXPECTED
        assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
        lg.close()
    reopened = open_log(str(tmp_path), cfg, had_clean_shutdown=True, recovery_point=end)
    assert reopened.num_segments < before_segments
    assert all_aborted(reopened) == EXPECTED
    assert len(_txn_files(reopened.dir)) == 1  # one cleaned segment holds both entries
    assert not [n for n in os.listdir(reopened.dir) if n.endswith((".cleaned", ".swap"))]


def test_no_txn_index_without_aborts(tmp_path):
    """Most segments never get a .txnindex: none is created for commits or plain data."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=128 * 5))
    p = Producer(lg, 1)
    for _ in range(5):
        p(3)
        end_txn(lg, 1, commit=True)
        non_txn(lg, 2)
    lg.roll(now_ms=0)
    lg.close()
    assert not any(".txnindex" in n for n in os.listdir(lg.dir))


def test_read_committed_keeps_the_file_slice(tmp_path):
    """The READ_COMMITTED read still answers a slice of the segment file (sendfile), not bytes."""
    lg = open_log(str(tmp_path))
    Producer(lg, 1)(3)
    end_txn(lg, 1, commit=False)
    lg.update_high_watermark(lg.log_end_offset)
    info = lg.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    assert info.records.path == lg.active_segment.log.path and info.records.position == 0
    assert info.records.length == lg.active_segment.size
    _, recs = decode_batch(info.records.read(), 0)
    assert [r.offset for r in recs] == [0, 1, 2]
    assert LOG_OVERHEAD > 0 and info.aborted_transactions == [AbortedTransaction(producer_id=1, first_offset=0)]


# ---- the first unstable offset (UnifiedLogTest) ---------------------------------------------------------------------

def test_rebuild_transactional_state(tmp_path):
    """UnifiedLogTest.testRebuildTransactionalState"""
    cfg = LogConfig(segment_bytes=5 * 1024 * 1024)
    lg = open_log(str(tmp_path), cfg)
    Producer(lg, 137, epoch=5)(3)
    abort = end_txn(lg, 137, commit=False, epoch=5)
    lg.update_high_watermark(abort.last_offset + 1)
    assert lg.producer_state.first_unstable_offset() is None
    lg.close()
    reopened = open_log(str(tmp_path), cfg, had_clean_shutdown=False)
    reopened.update_high_watermark(abort.last_offset + 1)
    assert reopened.producer_state.first_unstable_offset() is None
    assert all_aborted(reopened) == [AbortedTxn(137, 0, 3, 4)]


def test_first_unstable_offset_with_transactional_data(tmp_path):
    """UnifiedLogTest.testFirstUnstableOffsetNoTransactionalData and testFirstUnstableOffsetWithTransactionalData"""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=5 * 1024 * 1024))
    non_txn(lg, 3)
    assert lg.producer_state.first_unstable_offset() is None
    p = Producer(lg, 137, epoch=5)
    first = p(3)
    assert lg.producer_state.first_unstable_offset() == first.first_offset
    p(1)
    assert lg.producer_state.first_unstable_offset() == first.first_offset
    commit = end_txn(lg, 137, commit=True, epoch=5)
    assert lg.producer_state.first_unstable_offset() == first.first_offset  # not until the HW passes the marker
    lg.update_high_watermark(commit.last_offset + 1)
    assert lg.producer_state.first_unstable_offset() is None
    assert all_aborted(lg) == []


@pytest.mark.parametrize("fully", [False, True])
def test_truncate_below_first_unstable_offset(tmp_path, fully):
    """UnifiedLogTest.testTruncateBelowFirstUnstableOffset and testTruncateFullyAndStartBelowFirstUnstableOffset"""
    cfg = LogConfig(segment_bytes=1024 * 1024)
    lg = open_log(str(tmp_path), cfg)
    non_txn(lg, 3)
    Producer(lg, 17, epoch=10)(2)
    assert lg.producer_state.first_unstable_offset() == 3
    lg.close()
    reopened = open_log(str(tmp_path), cfg, had_clean_shutdown=True, recovery_point=5)
    assert reopened.producer_state.first_unstable_offset() == 3
    if fully:
        reopened.truncate_fully_and_start_at(0, now_ms=0)
    else:
        reopened.truncate_to(0, now_ms=0)
    assert reopened.producer_state.first_unstable_offset() is None
    assert reopened.producer_state.producers == {}


def test_the_scrub_checks_the_txn_index(tmp_path):
    """``Log.verify`` and ``odradek verify-log`` check each .txnindex: a good one passes, a torn one or one whose
    entry ends past its segment is reported."""
    from storage.verify import verify_partition_dir

    cfg = LogConfig(segment_bytes=128 * 5)
    lg = open_log(str(tmp_path), cfg)
    mixed_transactions(lg)
    assert lg.verify() == []
    lg.close()
    assert verify_partition_dir(lg.dir) == []
    first, last = sorted(_txn_files(lg.dir))
    with open(os.path.join(lg.dir, first), "ab") as f:
        f.write(AbortedTxn(5, 80, 10_000, 10_001).to_bytes())  # its marker would lie in a later segment
    with open(os.path.join(lg.dir, last), "ab") as f:
        f.write(b"\x00" * 5)
    problems = verify_partition_dir(lg.dir)
    assert len(problems) == 2
    assert any(first in p and "past the segment's end" in p for p in problems)
    assert any(last in p and "not a multiple of 34" in p for p in problems)
