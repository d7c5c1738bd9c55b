"""Transactions in a partition's log, as a ``read_committed`` consumer sees them: the aborted ranges and the last
stable offset. Runs on the driver (planning) and in the compaction report; no pyspark import, headers only.

Kafka's rules (``Fetcher``/``CompletedFetch`` with ``READ_COMMITTED``, ``ProducerStateManager``):

* a transaction of producer P starts at P's first transactional data batch after P's previous marker and ends at
  P's next control batch (the marker: one COMMIT or ABORT control record);
* a data batch is aborted iff it is transactional and its offsets fall in ``[first, last]`` of an aborted
  transaction of its producer (``last`` = the ABORT marker's offset); producers' ranges never overlap their own;
* the last stable offset (LSO) is the first offset of the earliest transaction with no marker yet; with none, the
  log end (here: None, no bound).

Two sources, one answer:

* the ``.txnindex`` files (Kafka's ``TransactionIndex``: 34-byte big-endian entries ``int16 version 0, int64
  producerId, int64 firstOffset, int64 lastOffset, int64 lastStableOffset``, ``lastOffset`` increasing), used when
  every non-empty segment of the partition has a plausible one (Kafka creates the file at a segment's first abort,
  so a segment without it may simply have had none, or predate the index: that cannot be told apart, and the log
  is scanned). The aborted ranges are the entries; the LSO comes from a header walk from the newest entry's
  ``lastStableOffset`` (every transaction still open began at or after it: it was the first offset of the
  earliest transaction open when that abort was written) to the end;
* else a walk of every batch header of the partition (no CRC check, nothing decompressed); a control batch's
  type is read from its one small record (markers are never compressed).

A cleaned log works the same: the cleaner drops aborted data and, later, markers whose transaction has no data left
(and their index entries); a marker without data makes an empty range, data without its marker is an open
transaction, exactly as the consumer and the producer state see them.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from dataclasses import dataclass
from typing import Iterable, Sequence

from protocol.errors import CorruptRecordError, KafkaError
from protocol.record_codec import ControlRecordType, decode_batch, parse_control_record_type
from protocol.records import CONTROL_MASK, TRANSACTIONAL_MASK, iter_batch_positions

__all__ = ["TXN_ENTRY", "TxnState", "TxnTracker", "AbortedRanges", "read_txn_index", "scan_transactions",
           "partition_transactions", "marker_type"]

TXN_ENTRY = struct.Struct(">hqqqq")     # version, producerId, firstOffset, lastOffset, lastStableOffset (34 bytes)
TXN_INDEX_VERSION = 0
MAX_TXN_INDEX_BYTES = 256 * 1024 * 1024

Range = tuple[int, int, int]            # (producer id, first offset, last offset = the ABORT marker's)


@dataclass(frozen=True)
class TxnState:
    """One partition's transactions as a read_committed reader needs them."""

    aborted: tuple[Range, ...]          # sorted by last offset
    last_stable_offset: int | None      # None: no open transaction (read to the end)
    source: str                         # "txnindex" or "scan"


class TxnTracker:
    """The state machine over a partition's batches in offset order (data batches and markers of producers)."""

    __slots__ = ("open", "aborted")

    def __init__(self) -> None:
        self.open: dict[int, int] = {}          # producer id -> first offset of its ongoing transaction
        self.aborted: list[Range] = []

    def data(self, producer_id: int, base_offset: int) -> None:
        if producer_id not in self.open:
            self.open[producer_id] = base_offset

    def marker(self, producer_id: int, offset: int, abort: bool) -> None:
        first = self.open.pop(producer_id, None)
        if abort and first is not None:         # an abort with no data left aborts nothing
            self.aborted.append((producer_id, first, offset))

    def last_stable_offset(self) -> int | None:
        return min(self.open.values()) if self.open else None


def marker_type(buf, pos: int) -> ControlRecordType | None:
    """The type of the control batch at ``pos`` (its first record's key), None if it holds no record."""
    _, records = decode_batch(buf, pos, verify_crc=True)
    return parse_control_record_type(records[0].key) if records else None


@dataclass
class _WalkStats:
    batches: int = 0
    markers: int = 0


def _walk(tracker: TxnTracker, path: str, size: int, start: int, from_offset: int | None, counts: _WalkStats
          ) -> None:
    """Feed the transactional batches of one segment (``[start, size)``) to ``tracker``. A corrupt or torn batch
    ends the walk of that segment quietly: the reader reports it (or skips it with ignoreCorruptBatches)."""
    if size <= start:
        return
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
        scan = iter_batch_positions(mm, start, size)
        try:
            for pos, h in scan:
                counts.batches += 1
                attrs = h.attributes
                if not attrs & TRANSACTIONAL_MASK or h.producer_id < 0:
                    continue
                if from_offset is not None and h.base_offset < from_offset:
                    continue
                if attrs & CONTROL_MASK:
                    counts.markers += 1
                    try:
                        t = marker_type(mm, pos)
                    except KafkaError:
                        return
                    if t in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                        tracker.marker(h.producer_id, h.base_offset, t == ControlRecordType.ABORT)
                else:
                    tracker.data(h.producer_id, h.base_offset)
        except CorruptRecordError:
            return


def scan_transactions(segs: Sequence, stats=None) -> TxnState:
    """Walk every batch header of the partition's segments (:class:`~spark_jobs.planning.SegmentFile`, sizes as
    planned)."""
    tracker = TxnTracker()
    counts = _WalkStats()
    for seg in segs:
        _walk(tracker, seg.path, seg.size, 0, None, counts)
    _count(stats, scans=1, batches=counts.batches, markers=counts.markers)
    return TxnState(tuple(sorted(tracker.aborted, key=lambda r: r[2])), tracker.last_stable_offset(), "scan")


def _count(stats, **kw) -> None:
    if stats is None:
        return
    for k, v in kw.items():
        name = f"txn_{k}"
        setattr(stats, name, getattr(stats, name, 0) + v)


def read_txn_index(seg) -> list[tuple[int, int, int, int]] | None:
    """``(producer id, first, last, lso)`` of a segment's ``.txnindex``, or None when missing or implausible
    (size not a multiple of 34, another version, last offsets not increasing or outside the segment, first after
    last)."""
    path = os.path.join(seg.dir, f"{seg.base_offset:020d}.txnindex")
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size % TXN_ENTRY.size or size > MAX_TXN_INDEX_BYTES:
            return None
        data = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    out = []
    prev = -1
    for pos in range(0, len(data), TXN_ENTRY.size):
        version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
        if (version != TXN_INDEX_VERSION or pid < 0 or first > last or last <= prev or last < seg.base_offset
                or (seg.next_base_offset is not None and last >= seg.next_base_offset) or lso < 0):
            return None
        out.append((pid, first, last, lso))
        prev = last
    return out


def partition_transactions(segs: Sequence, stats=None, use_indexes: bool = True) -> TxnState:
    """The partition's :class:`TxnState`: from its ``.txnindex`` files when every non-empty segment has one (and a
    header walk of the tail for the LSO), else from a walk of every header."""
    segs = [s for s in segs if s.size > 0]
    if not segs:
        return TxnState((), None, "scan")
    entries: list[tuple[int, int, int, int]] = []
    if use_indexes:
        for seg in segs:
            e = read_txn_index(seg)
            if e is None:
                break
            _count(stats, index_files_read=1)
            entries += e
        else:
            if any(a[2] >= b[2] for a, b in zip(entries, entries[1:])):
                return scan_transactions(segs, stats)           # not increasing across segments: not trusted
            start = entries[-1][3] if entries else segs[0].base_offset
            tracker = TxnTracker()
            counts = _WalkStats()
            for i, seg in enumerate(segs):
                nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
                if nxt is not None and nxt <= start:
                    continue
                _walk(tracker, seg.path, seg.size, 0, start, counts)     # headers below ``start`` only walked
            _count(stats, tail_scans=1, batches=counts.batches, markers=counts.markers)
            return TxnState(tuple((p, f, la) for p, f, la, _ in entries), tracker.last_stable_offset(), "txnindex")
    return scan_transactions(segs, stats)


class AbortedRanges:
    """``is_aborted(producer_id, base_offset, last_offset)`` for transactional data batches, by bisection on each
    producer's ranges (sorted, disjoint)."""

    __slots__ = ("_by_pid",)

    def __init__(self, ranges: Iterable[Range]) -> None:
        by: dict[int, tuple[list[int], list[int]]] = {}
        for pid, first, last in sorted(ranges, key=lambda r: r[2]):
            firsts, lasts = by.setdefault(pid, ([], []))
            firsts.append(first)
            lasts.append(last)
        self._by_pid = by

    def __bool__(self) -> bool:
        return bool(self._by_pid)

    def is_aborted(self, producer_id: int, base_offset: int, last_offset: int) -> bool:
        r = self._by_pid.get(producer_id)
        if r is None:
            return False
        firsts, lasts = r
        i = bisect.bisect_left(lasts, base_offset)
        return i < len(lasts) and firsts[i] <= last_offset


def ranges_within(ranges: Sequence[Range], lo: int, hi: int | None) -> tuple[Range, ...]:
    """The ranges that may hold a batch with offsets in ``[lo, hi)`` (hi None: unbounded)."""
    return tuple(r for r in ranges if r[2] >= lo and (hi is None or r[1] < hi))
