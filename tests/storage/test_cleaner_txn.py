"""The cleaner and transactions: Kafka's LogCleanerTest cases that touch transactions, markers or producer state,
ported (each test's docstring names its Kafka method), and odradek's own checks that producer state, the
``.txnindex`` and the last stable offset stay right after cleaning and after a reload, clean or not.

As in Kafka's tests, ``_clean`` cleans from a first dirty offset up to the active segment (``Cleaner.doClean`` on a
``LogToClean``) at a given time; keys and values are the decimal strings of ints."""

from __future__ import annotations

import os
import random

import pytest

from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch, control_record_key, decode_batch
from protocol.records import iter_batch_positions
from storage.cleaner import CleanedTransactionMetadata, Cleaner, CleanerStats, LogToClean, OffsetMap
from storage.config import LogConfig
from storage.log import ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION
from storage.txn_index import AbortedTxn

from .helpers import open_log

TOMBSTONE_RETENTION_MS = 86_400_000
LARGE_TIMESTAMP = 2**63 - 1 - TOMBSTONE_RETENTION_MS - 1   # LogCleanerTest.largeTimestamp
LONG_MAX = 2**63 - 1
TP = ("test", 0)


def _config(segment_bytes: int = 1024, **kw) -> LogConfig:
    """LogCleanerTest.logConfig: compacted, 1 KiB segments and indexes (segment.bytes as each test sets it)."""
    return LogConfig(cleanup_policy=("compact",), segment_bytes=segment_bytes, max_index_size=1024,
                     file_delete_delay_ms=0, **kw)


def _log(tmp_path, segment_bytes: int = 1024, **kw):
    return open_log(str(tmp_path), _config(segment_bytes, **kw), name="test-0")


def _reload(tmp_path, lg, segment_bytes: int = 1024, *, clean: bool = True, **kw):
    """Close and open again; an unclean reload also loses the producer snapshots, so producer state and the
    ``.txnindex`` files past the recovery point are rebuilt from the cleaned log itself."""
    lg.close()
    if not clean:
        for n in os.listdir(lg.dir):
            if n.endswith(".snapshot"):
                os.unlink(os.path.join(lg.dir, n))
    return open_log(str(tmp_path), _config(segment_bytes, **kw), name="test-0", had_clean_shutdown=clean,
                    recovery_point=lg.log_end_offset if clean else 0)


class FakeOffsetMap(OffsetMap):
    """LogCleanerTest's ``FakeOffsetMap``: ``clear`` keeps the latest offset, so a pass whose dirty section is
    empty cleans again up to where the previous pass ended (Kafka's tests run their second passes so)."""

    def clear(self) -> None:
        self._map.clear()


def _cleaner(capacity: int = 1 << 16) -> Cleaner:
    """``makeCleaner(capacity)``: a ``FakeOffsetMap`` of ``capacity`` slots filled to 0.75 of them."""
    cleaner = Cleaner(capacity * 24, 0.75)
    cleaner.offset_map = FakeOffsetMap(capacity * 24, 0.75)
    return cleaner


def _clean(cleaner: Cleaner, lg, first_dirty: int = 0, now: int = LARGE_TIMESTAMP) -> int:
    """``cleaner.doClean(LogToClean(tp, log, firstDirty, log.activeSegment.baseOffset), now)._1``"""
    end, _ = cleaner.clean(LogToClean(TP, lg, first_dirty, lg.active_segment.base_offset), now)
    lg.scheduler.run_all()  # the replaced segments' files go now (file.delete.delay.ms=0)
    return end


def _two_pass_clean(cleaner: Cleaner, lg, first_dirty: int = 0, now: int = LARGE_TIMESTAMP) -> int:
    """``runTwoPassClean``: a pass that sets delete horizons, then one past them."""
    _clean(cleaner, lg, first_dirty, now)
    return _clean(cleaner, lg, first_dirty, now + TOMBSTONE_RETENTION_MS + 1)


def _kv(k: int, v: int | None = None) -> Record:
    return Record(str(k).encode(), str(k if v is None else v).encode(), timestamp=1000)


class _Appender:
    """``appendTransactionalAsLeader`` / ``appendIdempotentAsLeader``: each call appends one batch of keys."""

    def __init__(self, lg, pid: int, epoch: int = 0, *, transactional: bool = True,
                 origin: str = ORIGIN_CLIENT) -> None:
        self.lg, self.pid, self.epoch, self.transactional, self.origin, self.seq = lg, pid, epoch, transactional, \
            origin, 0

    def __call__(self, keys):
        b = build_batch([_kv(k) for k in keys], producer_id=self.pid, producer_epoch=self.epoch,
                        base_sequence=self.seq, is_transactional=self.transactional)
        self.seq += len(keys)
        return self.lg.append_as_leader(bytearray(b), 0, now_ms=0, origin=self.origin)


def _txn(lg, pid, epoch=0, **kw) -> _Appender:
    return _Appender(lg, pid, epoch, transactional=True, **kw)


def _idempotent(lg, pid, epoch=0) -> _Appender:
    return _Appender(lg, pid, epoch, transactional=False)


def _marker(lg, pid: int, commit: bool, epoch: int = 0, origin: str = ORIGIN_COORDINATOR):
    """``commitMarker`` / ``abortMarker`` appended as the coordinator's (or a replica's) control batch."""
    b = build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0,
                                   timestamp=1000)
    return lg.append_as_leader(bytearray(b), 0, now_ms=0, origin=origin)


def _record(lg, key: int, value: int, pid: int = -1, epoch: int = -1, seq: int = -1):
    """``record(key, value, producerId, producerEpoch, sequence)`` appended as the leader."""
    b = build_batch([_kv(key, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    return lg.append_as_leader(bytearray(b), 0, now_ms=0)


def _batches(lg) -> list:
    """(header, records) of every batch of every segment, empty batches included (``segment.log.batches``)."""
    out = []
    for seg in lg.log_segments():
        with open(seg.log.path, "rb") as f:
            data = f.read(seg.size)
        out += [decode_batch(data, pos) for pos, _ in iter_batch_positions(data)]
    return out


def keys_in_log(lg) -> list[int]:
    """``LogTestUtils.keysInLog``: keys of the data records with a value."""
    return [int(r.key) for h, recs in _batches(lg) if not h.is_control for r in recs
            if r.key is not None and r.value is not None]


def offsets_in_log(lg) -> list[int]:
    """``offsetsInLog``: offsets of every record with a key and a value, markers included."""
    return [r.offset for _, recs in _batches(lg) for r in recs if r.key is not None and r.value is not None]


def last_offsets_per_batch(lg) -> list[int]:
    return [h.base_offset + h.last_offset_delta for h, _ in _batches(lg)]


def batch_base_offsets(lg) -> list[int]:
    return [h.base_offset for h, _ in _batches(lg)]


def last_sequences_in_log(lg) -> dict[int, int]:
    return {h.producer_id: h.last_sequence for h, _ in _batches(lg) if not h.is_control and h.producer_id >= 0}


def all_aborted(lg, upper: int | None = None) -> list[AbortedTxn]:
    return lg.collect_aborted_transactions(0, lg.log_end_offset if upper is None else upper)


def all_transactions_complete(lg) -> bool:
    return all(e.current_txn_first_offset is None for e in lg.producer_state.producers.values())


# ---- ports of LogCleanerTest ------------------------------------------------------------------------------------

def test_duplicate_check_after_cleaning(tmp_path):
    """LogCleanerTest.testDuplicateCheckAfterCleaning"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 2048)
    p1, p2, p3 = _idempotent(lg, 1), _idempotent(lg, 2), _idempotent(lg, 3)
    p1([1, 2, 3])
    p2([3, 1, 4])
    p3([1, 4])
    lg.roll(now_ms=0)
    _clean(cleaner, lg)
    assert last_offsets_per_batch(lg) == [2, 5, 7]
    assert last_sequences_in_log(lg) == {1: 2, 2: 2, 3: 1}
    assert keys_in_log(lg) == [2, 3, 1, 4]
    assert offsets_in_log(lg) == [1, 3, 6, 7]

    lg = _reload(tmp_path, lg, 2048, clean=False)
    dup = _idempotent(lg, 1)([1, 2, 3])
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 2)
    dup = _idempotent(lg, 3)([1, 4])
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (6, 7)
    dup = _idempotent(lg, 2)([3, 1, 4])
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (3, 5)

    # one more append and a round of cleaning removes another record of producer 1's batch
    _idempotent(lg, 4)([2])
    lg.roll(now_ms=0)
    _clean(cleaner, lg)
    assert last_sequences_in_log(lg) == {1: 2, 2: 2, 3: 1, 4: 0}
    assert last_offsets_per_batch(lg) == [2, 5, 7, 8]
    assert keys_in_log(lg) == [3, 1, 4, 2]
    assert offsets_in_log(lg) == [3, 6, 7, 8]

    lg = _reload(tmp_path, lg, 2048, clean=False)
    dup = _idempotent(lg, 1)([1, 2, 3])
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 2)
    lg.close()


def test_multi_pass_segment_cleaning_with_aborted_transactions(tmp_path):
    """LogCleanerTest.testMultiPassSegmentCleaningWithAbortedTransactions: the aborted transactions' state (the
    index too) survives cleanings that each cover part of the log."""
    delete_retention_ms = 50_000
    lg = _log(tmp_path, delete_retention_ms=delete_retention_ms)
    p1, p2 = _txn(lg, 1), _txn(lg, 2)
    p1([1, 2])                                         # [0, 1]
    p2([2, 3])                                         # [2, 3]
    p1([3, 4])                                         # [4, 5]
    _marker(lg, 1, True, origin=ORIGIN_REPLICATION)    # [6, 6]
    _marker(lg, 2, True, origin=ORIGIN_REPLICATION)    # [7, 7]
    p1([2, 3])                                         # [8, 9]
    _marker(lg, 1, False, origin=ORIGIN_REPLICATION)   # [10, 10]
    p2([4, 5])                                         # [11, 12]
    p1([5, 6])                                         # [13, 14]
    _marker(lg, 1, True, origin=ORIGIN_REPLICATION)    # [15, 15]
    _marker(lg, 2, False, origin=ORIGIN_REPLICATION)   # [16, 16]
    p2([6, 7])                                         # [17, 18]
    _marker(lg, 2, True, origin=ORIGIN_REPLICATION)    # [19, 19]
    lg.roll(now_ms=0)
    assert lg.log_end_offset == 20
    expected = [AbortedTxn(1, 8, 10, 11), AbortedTxn(2, 11, 16, 17)]
    assert all_transactions_complete(lg)
    assert all_aborted(lg) == expected

    dirty = 0
    now = 1_000_000

    def clean_segments() -> None:
        nonlocal dirty
        cleaner = _cleaner(4)  # FakeOffsetMap(slots = 4): 3 keys per pass
        segments = lg.log_segments(0, lg.active_segment.base_offset)
        stats = CleanerStats()
        cleaner.build_offset_map(lg, dirty, lg.active_segment.base_offset, stats)
        cleaner.clean_segments(lg, segments, now, stats, lg.last_records_of_active_producers(),
                               segments[-1].read_next_offset(), CleanedTransactionMetadata())
        lg.scheduler.run_all()
        dirty = cleaner.offset_map.latest_offset + 1

    # the first pass deletes the aborted data; the markers stay until the retention time has passed
    clean_segments()
    assert dirty == 4
    assert batch_base_offsets(lg) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets_in_log(lg) == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert all_transactions_complete(lg)
    assert all_aborted(lg) == expected

    # the second: no aborted data is left; the markers stay (retention) but are no longer indexed
    clean_segments()
    assert dirty == 14
    assert batch_base_offsets(lg) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets_in_log(lg) == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert all_transactions_complete(lg)
    assert all_aborted(lg) == []

    # the last, once the retention time has passed: the abort markers (10 and 16) go
    now += delete_retention_ms
    clean_segments()
    assert dirty == 20
    assert batch_base_offsets(lg) == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert offsets_in_log(lg) == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    assert all_transactions_complete(lg)
    assert all_aborted(lg) == []


def test_basic_transaction_aware_cleaning(tmp_path):
    """LogCleanerTest.testBasicTransactionAwareCleaning"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 2048)
    p1, p2 = _txn(lg, 1), _txn(lg, 2)
    p1([1, 2])
    p2([2, 3])
    p1([3, 4])
    _marker(lg, 1, False)
    _marker(lg, 2, True)
    p1([2])
    _marker(lg, 1, True)
    aborted = all_aborted(lg)
    lg.roll(now_ms=0)
    _clean(cleaner, lg, now=0)
    assert keys_in_log(lg) == [3, 2]
    assert offsets_in_log(lg) == [3, 6, 7, 8, 9]
    assert all_aborted(lg) == aborted  # the transaction index is still right


def test_clean_with_transactions_spanning_segments(tmp_path):
    """LogCleanerTest.testCleanWithTransactionsSpanningSegments"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 1024)
    p1, p2, p3 = _txn(lg, 1), _txn(lg, 2), _txn(lg, 3)
    p1([1, 2])
    p3([2, 3])
    p2([3, 4])
    lg.roll(now_ms=0)
    p2([5, 6])
    p3([6, 7])
    p1([7, 8])
    _marker(lg, 2, False)
    p3([8, 9])
    _marker(lg, 3, True)
    p1([9, 10])
    _marker(lg, 1, False)
    # only the records of the first segment are cleaned
    dirty = _clean(cleaner, lg, now=0)
    assert keys_in_log(lg) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    lg.roll(now_ms=0)
    # a couple of extra batches so that the producers have later sequence numbers
    p2([11])
    p1([12])
    # finally only the keys of pid 3 stay
    _clean(cleaner, lg, dirty, now=0)
    assert keys_in_log(lg) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(tmp_path):
    """LogCleanerTest.testCommitMarkerRemoval"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 256)
    p = _txn(lg, 1)
    p([1])
    p([2, 3])
    _marker(lg, 1, True)
    p([2])
    _marker(lg, 1, True)
    lg.roll(now_ms=0)
    # the marker cannot go in this pass: its transaction still has records
    dirty = _clean(cleaner, lg)
    assert keys_in_log(lg) == [1, 3, 2]
    assert offsets_in_log(lg) == [0, 2, 3, 4, 5]

    p([1, 3])
    _marker(lg, 1, True)
    lg.roll(now_ms=0)
    # the first cleaning keeps the commit marker at 3: its transaction had records when it was read
    dirty = _clean(cleaner, lg, dirty)
    assert keys_in_log(lg) == [2, 1, 3]
    assert offsets_in_log(lg) == [3, 4, 5, 6, 7, 8]
    # again at the same time: the marker is not removed early
    dirty = _clean(cleaner, lg, dirty)
    assert keys_in_log(lg) == [2, 1, 3]
    assert offsets_in_log(lg) == [3, 4, 5, 6, 7, 8]
    # again at the largest time: the marker goes
    _clean(cleaner, lg, dirty, now=LONG_MAX)
    assert keys_in_log(lg) == [2, 1, 3]
    assert offsets_in_log(lg) == [4, 5, 6, 7, 8]


def test_deleted_batches_with_no_messages_read(tmp_path):
    """LogCleanerTest.testDeletedBatchesWithNoMessagesRead: cleaning goes on past batches deleted whole."""
    cleaner = _cleaner()
    lg = _log(tmp_path, 1000, max_message_bytes=100)
    p = _txn(lg, 1)
    p([1])
    _marker(lg, 1, False)
    p([2])
    p([2])
    _marker(lg, 1, True)
    lg.roll(now_ms=0)
    _clean(cleaner, lg)
    assert keys_in_log(lg) == [2]
    assert offsets_in_log(lg) == [1, 3, 4]
    # the first pass sets the abort marker's delete horizon, the second removes it
    _two_pass_clean(cleaner, lg)
    assert keys_in_log(lg) == [2]
    assert offsets_in_log(lg) == [3, 4]


def test_commit_marker_retention_with_empty_batch(tmp_path):
    """LogCleanerTest.testCommitMarkerRetentionWithEmptyBatch"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 256)
    producer1, producer2 = _txn(lg, 1), _txn(lg, 2)
    producer1([2, 3])        # offsets 0, 1
    lg.roll(now_ms=0)
    producer2([2, 3])        # offsets 2, 3
    _marker(lg, 2, True)     # offset 4
    lg.roll(now_ms=0)
    _record(lg, 2, 2)        # offset 5
    _record(lg, 3, 3)        # offset 6
    _marker(lg, 1, True)     # offset 7
    lg.roll(now_ms=0)

    # the records go; both producers' last batches stay, empty
    dirty = _clean(cleaner, lg)
    assert keys_in_log(lg) == [2, 3]
    assert offsets_in_log(lg) == [4, 5, 6, 7]
    assert last_offsets_per_batch(lg) == [1, 3, 4, 5, 6, 7]
    # the empty batches stay when cleaned again: they hold the last sequences
    dirty = _clean(cleaner, lg, dirty)
    assert keys_in_log(lg) == [2, 3]
    assert offsets_in_log(lg) == [4, 5, 6, 7]
    assert last_offsets_per_batch(lg) == [1, 3, 4, 5, 6, 7]

    # a new record of producer 2 lets its empty batch go
    producer2([1])           # offset 8
    _marker(lg, 2, True)     # offset 9
    lg.roll(now_ms=0)
    # {Producer2: Commit} at 4 gets no delete horizon yet: its transaction's empty batch was read
    dirty = _clean(cleaner, lg, dirty)
    assert keys_in_log(lg) == [2, 3, 1]
    assert offsets_in_log(lg) == [4, 5, 6, 7, 8, 9]
    assert last_offsets_per_batch(lg) == [1, 4, 5, 6, 7, 8, 9]
    # the first pass sets that marker's delete horizon, the second removes it
    _two_pass_clean(cleaner, lg, dirty)
    assert keys_in_log(lg) == [2, 3, 1]
    assert offsets_in_log(lg) == [5, 6, 7, 8, 9]
    assert last_offsets_per_batch(lg) == [1, 5, 6, 7, 8, 9]


def test_clean_empty_control_batch(tmp_path):
    """LogCleanerTest.testCleanEmptyControlBatch"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 256)
    _marker(lg, 1, True)     # offset 0
    _record(lg, 2, 2)        # offset 1
    _record(lg, 3, 3)        # offset 2
    lg.roll(now_ms=0)
    # a first pass sets the marker's delete horizon; the second removes the marker but keeps an empty control
    # batch: it holds the producer's epoch
    dirty = _two_pass_clean(cleaner, lg)
    assert keys_in_log(lg) == [2, 3]
    assert offsets_in_log(lg) == [1, 2]
    assert last_offsets_per_batch(lg) == [0, 1, 2]
    (h, recs), *_ = _batches(lg)
    assert h.is_control and h.producer_id == 1 and recs == []
    # an empty control batch cleans without error
    _clean(cleaner, lg, dirty, now=LONG_MAX)
    assert keys_in_log(lg) == [2, 3]
    assert offsets_in_log(lg) == [1, 2]
    assert last_offsets_per_batch(lg) == [0, 1, 2]


def test_committed_transaction_spanning_segments(tmp_path):
    """LogCleanerTest.testCommittedTransactionSpanningSegments"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 128)
    _txn(lg, 1)([1])
    lg.roll(now_ms=0)
    _marker(lg, 1, True)
    lg.roll(now_ms=0)
    # the record and the marker both stay
    _two_pass_clean(cleaner, lg)
    assert offsets_in_log(lg) == [0, 1]
    assert last_offsets_per_batch(lg) == [0, 1]


def test_aborted_transaction_spanning_segments(tmp_path):
    """LogCleanerTest.testAbortedTransactionSpanningSegments"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 128)
    _txn(lg, 1)([1])
    lg.roll(now_ms=0)
    _marker(lg, 1, False)
    lg.roll(now_ms=0)
    # the batch stays (emptied: it is the producer's last) and so does the marker (its transaction has a batch)
    _clean(cleaner, lg)
    assert offsets_in_log(lg) == [1]
    assert last_offsets_per_batch(lg) == [0, 1]
    # and again after a second cleaning
    _clean(cleaner, lg, now=LONG_MAX)
    assert offsets_in_log(lg) == [1]
    assert last_offsets_per_batch(lg) == [0, 1]


def test_abort_marker_removal(tmp_path):
    """LogCleanerTest.testAbortMarkerRemoval"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 256)
    p = _txn(lg, 1)
    p([1])
    p([2, 3])
    _marker(lg, 1, False)
    p([3])
    _marker(lg, 1, True)
    lg.roll(now_ms=0)
    # the aborted records go, the abort marker stays
    dirty = _clean(cleaner, lg)
    assert keys_in_log(lg) == [3]
    assert offsets_in_log(lg) == [3, 4, 5]
    # the first pass sets the abort marker's delete horizon, the second removes it
    _two_pass_clean(cleaner, lg, dirty)
    assert keys_in_log(lg) == [3]
    assert offsets_in_log(lg) == [4, 5]


def test_empty_batch_removal_with_sequence_reuse(tmp_path):
    """LogCleanerTest.testEmptyBatchRemovalWithSequenceReuse: the group coordinator starts every transaction at
    sequence 0; old empty batches and markers still go."""
    cleaner = _cleaner()
    lg = _log(tmp_path, 2048)
    _txn(lg, 1, origin=ORIGIN_REPLICATION)([1])
    _marker(lg, 1, True)
    _txn(lg, 1, origin=ORIGIN_REPLICATION)([2])
    _marker(lg, 1, True)
    _record(lg, 1, 1)
    _record(lg, 2, 1)
    lg.roll(now_ms=0)
    # both transactional batches are cleaned; the last stays empty for the producer's sequence and epoch
    _clean(cleaner, lg)
    assert offsets_in_log(lg) == [1, 3, 4, 5]
    assert last_offsets_per_batch(lg) == [1, 2, 3, 4, 5]
    # the first pass sets the first marker's delete horizon, the second removes it
    _two_pass_clean(cleaner, lg)
    assert offsets_in_log(lg) == [3, 4, 5]
    assert last_offsets_per_batch(lg) == [2, 3, 4, 5]


def test_abort_marker_retention_with_empty_batch(tmp_path):
    """LogCleanerTest.testAbortMarkerRetentionWithEmptyBatch"""
    cleaner = _cleaner()
    lg = _log(tmp_path, 256)
    p = _txn(lg, 1)
    p([2, 3])                # last offset 1
    _marker(lg, 1, False)    # 2
    lg.roll(now_ms=0)

    def assert_aborted_transaction_indexed():
        (t,) = all_aborted(lg, 100)
        assert (t.producer_id, t.first_offset, t.last_offset) == (1, 0, 2)

    assert_aborted_transaction_indexed()
    # the records go
    dirty = _clean(cleaner, lg)
    assert_aborted_transaction_indexed()
    assert keys_in_log(lg) == []
    assert offsets_in_log(lg) == [2]                 # the abort marker stays
    assert last_offsets_per_batch(lg) == [1, 2]      # and so does the empty batch
    # the empty batch stays when cleaned again: it holds the last sequence
    dirty = _two_pass_clean(cleaner, lg, dirty)
    assert_aborted_transaction_indexed()
    assert keys_in_log(lg) == []
    assert offsets_in_log(lg) == [2]
    assert last_offsets_per_batch(lg) == [1, 2]
    # a new last sequence lets the empty batch go
    p([1])
    lg.roll(now_ms=0)
    dirty = _clean(cleaner, lg, dirty)
    assert_aborted_transaction_indexed()
    assert keys_in_log(lg) == [1]
    assert offsets_in_log(lg) == [2, 3]              # the marker stays: the empty batch was read
    assert last_offsets_per_batch(lg) == [2, 3]      # but the empty batch is not kept
    # the first pass sets the abort marker's delete horizon, the second removes it
    dirty = _two_pass_clean(cleaner, lg, dirty)
    assert keys_in_log(lg) == [1]
    assert offsets_in_log(lg) == [3]
    assert last_offsets_per_batch(lg) == [3]
    assert all_aborted(lg, 100) == []                # the aborted transaction is no longer indexed


def test_log_cleaner_retains_producer_last_sequence(tmp_path):
    """LogCleanerTest.testLogCleanerRetainsProducerLastSequence"""
    cleaner = _cleaner(10)
    lg = _log(tmp_path, 1024)
    _record(lg, 0, 0)                            # 0
    _record(lg, 0, 1, pid=1, epoch=0, seq=0)     # 1
    _record(lg, 0, 2, pid=2, epoch=0, seq=0)     # 2
    _record(lg, 0, 3, pid=3, epoch=0, seq=0)     # 3
    _record(lg, 1, 1, pid=2, epoch=0, seq=1)     # 4
    lg.roll(now_ms=0)
    _clean(cleaner, lg, now=0)
    assert last_offsets_per_batch(lg) == [1, 3, 4]
    assert last_sequences_in_log(lg) == {1: 0, 2: 1, 3: 0}
    assert keys_in_log(lg) == [0, 1]
    assert offsets_in_log(lg) == [3, 4]


def test_log_cleaner_retains_last_sequence_even_if_transaction_aborted(tmp_path):
    """LogCleanerTest.testLogCleanerRetainsLastSequenceEvenIfTransactionAborted"""
    cleaner = _cleaner(10)
    lg = _log(tmp_path, 1024)
    p = _txn(lg, 1)
    p([1])
    p([2, 3])
    _marker(lg, 1, False)
    lg.roll(now_ms=0)
    _clean(cleaner, lg, now=0)
    assert last_offsets_per_batch(lg) == [2, 3]
    assert last_sequences_in_log(lg) == {1: 2}
    assert keys_in_log(lg) == []
    assert offsets_in_log(lg) == [3]
    # a new batch of the producer: the empty batch goes
    p([1, 5])
    lg.roll(now_ms=0)
    _clean(cleaner, lg, now=0)
    assert last_offsets_per_batch(lg) == [3, 5]
    assert last_sequences_in_log(lg) == {1: 4}
    assert keys_in_log(lg) == [1, 5]
    assert offsets_in_log(lg) == [3, 4, 5]


def test_cleaning_with_keys_conflicting_with_txn_marker_keys(tmp_path):
    """LogCleanerTest.testCleaningWithKeysConflictingWithTxnMarkerKeys: a data record keyed like a COMMIT marker
    does not make the marker look superseded."""
    cleaner = _cleaner(10)
    lg = _log(tmp_path, 1024)
    _txn(lg, 1)([1])
    _marker(lg, 1, True)
    b = build_batch([Record(control_record_key(1), b"foo", timestamp=1000)], producer_id=2, producer_epoch=0,
                    base_sequence=0, is_transactional=True)
    lg.append_as_leader(bytearray(b), 5, now_ms=0)
    _marker(lg, 2, True)
    lg.roll(now_ms=0)
    assert offsets_in_log(lg) == [0, 1, 2, 3]
    _clean(cleaner, lg, now=0)
    assert last_offsets_per_batch(lg) == [0, 1, 2, 3]
    assert offsets_in_log(lg) == [0, 1, 2, 3]


def test_partial_segment_clean(tmp_path):
    """LogCleanerTest.testPartialSegmentClean: an offset map of one key still makes progress, pass by pass."""
    cleaner = _cleaner(2)  # 0.75 of 2 slots: one key
    lg = _log(tmp_path, 1024)
    for k in (0, 1, 0, 1, 0):
        _record(lg, k, k)
    lg.roll(now_ms=0)
    _clean(cleaner, lg, 2, now=0)
    assert keys_in_log(lg) == [1, 0, 1, 0]
    assert offsets_in_log(lg) == [1, 2, 3, 4]
    _clean(cleaner, lg, 3, now=0)
    assert keys_in_log(lg) == [0, 1, 0]
    assert offsets_in_log(lg) == [2, 3, 4]
    _clean(cleaner, lg, 4, now=0)
    assert keys_in_log(lg) == [1, 0]
    assert offsets_in_log(lg) == [3, 4]


def test_clean_segments_retaining_last_empty_batch(tmp_path):
    """LogCleanerTest.testCleanSegmentsRetainingLastEmptyBatch: the last batch of a round stays, empty, so the
    log keeps its last offset."""
    cleaner = _cleaner()
    lg = _log(tmp_path, 1024)
    while lg.num_segments < 4:
        _record(lg, lg.log_end_offset, lg.log_end_offset)
    keys = keys_in_log(lg)
    assert keys == list(range(lg.log_end_offset))
    # every key deleted: a map pointing past them all
    m = cleaner.offset_map
    m.clear()
    for k in keys:
        m.put(str(k).encode(), LONG_MAX)
    segments = lg.log_segments()[:3]
    cleaner.clean_segments(lg, segments, 0, CleanerStats(), {}, segments[-1].read_next_offset(),
                           CleanedTransactionMetadata())
    assert lg.num_segments == 2
    first = lg.log_segments()[0]
    batches = [(h, r) for h, r in _batches(lg) if h.base_offset < lg.log_segments()[1].base_offset]
    assert len(batches) == 1, "one batch is retained in the cleaned segment"
    h, recs = batches[0]
    assert h.base_offset + h.last_offset_delta == lg.log_segments()[1].base_offset - 1 and recs == []
    assert first.base_offset == 0


# ---- odradek's own: what cleaning must not change, through reloads -----------------------------------------------

def _committed_view(lg) -> dict[bytes, tuple[int, bytes]]:
    """What a read_committed consumer sees of the log, latest per key: records below the last stable offset, minus
    the data batches the aborted transactions of the ``.txnindex`` cover (as the consumer skips them)."""
    lso = lg.last_stable_offset
    aborted = [(t.producer_id, t.first_offset, t.last_offset) for t in all_aborted(lg)]
    out = {}
    for h, recs in _batches(lg):
        if h.base_offset >= lso:
            break
        if h.is_control or (h.is_transactional and any(
                pid == h.producer_id and first <= h.base_offset <= last for pid, first, last in aborted)):
            continue
        for r in recs:
            out[r.key] = (r.offset, r.value)
    return out


def _producers(lg) -> dict[int, tuple]:
    """The producer state a reload must give back: epoch, last sequence and data offset, the open transaction."""
    return {pid: (e.producer_epoch, e.last_seq, e.last_data_offset, e.current_txn_first_offset)
            for pid, e in lg.producer_state.producers.items()}


def _workload(lg, rnd) -> tuple[set[int], set[int]]:
    """Committed and aborted transactions of four producers interleaved with plain writes, over ten keys; the
    last transaction stays open (the last stable offset is below the log end).  Returns the offsets of aborted
    records and of markers."""
    producers = {pid: _txn(lg, pid) for pid in (1, 2, 3, 4)}
    open_txn: dict[int, list[int]] = {}
    aborted_offsets: set[int] = set()
    markers: set[int] = set()
    for _ in range(60):
        pid = rnd.choice(list(producers))
        action = rnd.random()
        if action < 0.2:
            _record(lg, rnd.randrange(10), rnd.randrange(1000))
        elif pid in open_txn and action < 0.45:
            commit = rnd.random() < 0.6
            info = _marker(lg, pid, commit)
            markers.add(info.first_offset)
            if not commit:
                aborted_offsets.update(open_txn[pid])
            del open_txn[pid]
        else:
            keys = [rnd.randrange(10) for _ in range(rnd.randint(1, 3))]
            info = producers[pid](keys)
            open_txn.setdefault(pid, []).extend(range(info.first_offset, info.last_offset + 1))
    for pid in list(open_txn):
        info = _marker(lg, pid, False)
        markers.add(info.first_offset)
        aborted_offsets.update(open_txn.pop(pid))
    lg.roll(now_ms=0)
    producers[1]([0])  # open until the end
    _record(lg, 0, 0)
    return aborted_offsets, markers


@pytest.mark.parametrize("seed", range(4))
def test_cleaning_keeps_read_committed_view_producer_state_and_lso_through_reloads(tmp_path, seed):
    """Cleaned at three times (before, at and past the markers' delete horizon) and reloaded after each, cleanly
    and after a crash without producer snapshots (state and ``.txnindex`` rebuilt from the cleaned log): what a
    read_committed consumer sees, the producers' state and the last stable offset never change; aborted records go
    in the first pass, markers once their horizon has passed."""
    from storage.cleaner import LogCleaner
    from storage.config import LogManagerConfig

    from .helpers import NoSyncFileIO

    rnd = random.Random(seed)
    kw = dict(delete_retention_ms=1000, min_cleanable_dirty_ratio=0.01)
    lg = _log(tmp_path, 400, **kw)
    aborted_offsets, markers = _workload(lg, rnd)
    lg.roll(now_ms=0)
    _record(lg, 99, 0)  # in the active segment
    lg.update_high_watermark(lg.log_end_offset)
    view, producers, lso = _committed_view(lg), _producers(lg), lg.last_stable_offset
    assert lso < lg.log_end_offset and aborted_offsets and markers

    def check(lg):
        assert lg.last_stable_offset == lso
        assert _committed_view(lg) == view
        assert _producers(lg) == producers
        assert lg.verify() == []

    def clean(lg, now):
        cleaner = LogCleaner(LogManagerConfig(log_dirs=(str(tmp_path),), log_cleaner_dedupe_buffer_size=1 << 20),
                             lambda: {(lg.topic, lg.partition): lg}, [str(tmp_path)], file_io=NoSyncFileIO())
        cleaner.update_checkpoints(str(tmp_path), update=((lg.topic, lg.partition), 0))  # clean it all again
        cleaner.force_clean(lg, now)
        lg.scheduler.run_all()

    present = lambda lg: {o for h, recs in _batches(lg) for o in (r.offset for r in recs)}  # noqa: E731
    for i, now in enumerate((10_000, 10_500, 12_000)):
        clean(lg, now)
        check(lg)
        assert not (present(lg) & aborted_offsets & set(range(lso)))  # aborted data below the LSO is gone
        lg = _reload(tmp_path, lg, 400, clean=i % 2 == 0, **kw)
        lg.update_high_watermark(lg.log_end_offset)
        check(lg)
    # past the horizon set by the first pass, a marker of the cleaned section stays only while its transaction has
    # a batch left (a producer's last, kept empty) or while it is its producer's last batch (the epoch)
    batches = [h for h, _ in _batches(lg)]
    cleaned_end = lg.segments.floor_segment(lso).base_offset
    kept = {h.base_offset for h in batches if h.is_control and h.base_offset < cleaned_end}
    assert kept < markers
    for h in batches:
        if h.base_offset in kept:
            same = [b for b in batches if b.producer_id == h.producer_id]
            i = same.index(h)
            has_data = i > 0 and not same[i - 1].is_control
            assert has_data or i == len(same) - 1, h
    lg.close()
