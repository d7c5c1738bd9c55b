"""One log segment: a ``.log`` file plus its ``.index``, ``.timeindex`` and ``.txnindex`` (Kafka's
``LogSegment.java``).

Not thread-safe for writers; the owning log serialises appends, truncation and rolls.  Inactive segments
are immutable, so the cleaner thread and readers use them without the log's lock.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from typing import TYPE_CHECKING, NamedTuple

from protocol.errors import CorruptRecordError, ProtocolError
from protocol.records import LOG_OVERHEAD, validate_batch

from . import files
from .errors import CorruptIndexError, LogSegmentOffsetOverflowError
from .file_records import FileRecords, FileSlice, LogOffsetPosition, TimestampAndOffset
from .fileio import FileIO, is_plain
from .index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

if TYPE_CHECKING:
    from .config import LogConfig
    from .epoch import LeaderEpochFileCache
    from .producer_state import CompletedTxn, ProducerStateManager

log = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1
_RECOVERY_CHUNK = 1024 * 1024
_I32 = struct.Struct(">i")

__all__ = ["LogSegment", "LogOffsetMetadata", "FetchDataInfo", "RollParams"]


class LogOffsetMetadata(NamedTuple):
    """An offset plus where it lives: the base offset of its segment and its byte position there.

    ``segment_base_offset == -1`` means "offset only" (Kafka's ``UNKNOWN_OFFSET_METADATA``).
    """

    message_offset: int
    segment_base_offset: int = -1
    relative_position: int = -1

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == -1 and self.relative_position == -1

    def on_older_segment(self, that: "LogOffsetMetadata") -> bool:
        return self.segment_base_offset < that.segment_base_offset


class FetchDataInfo(NamedTuple):
    """A read's result: where it started and a slice of the file (possibly empty).

    ``aborted_transactions``: for a READ_COMMITTED read, FetchResponse's ``AbortedTransaction`` structs of the
    transactions aborted in the range read (a list, maybe empty); None for other reads (the response's null).
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice
    first_entry_incomplete: bool = False
    aborted_transactions: list | None = None

    @property
    def size(self) -> int:
        return self.records.length


class RollParams(NamedTuple):
    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now_ms: int


_UNKNOWN_TS = (NO_TIMESTAMP, -1)


class LogSegment:
    def __init__(self, dir: str, base_offset: int, log_records: FileRecords, *, index_interval_bytes: int,
                 max_index_size: int, roll_jitter_ms: int = 0, created_ms: int | None = None,
                 suffix: str = "", file_io: FileIO | None = None) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.log = log_records
        # the indexes and renames go through the same file I/O as the log file, unless told otherwise
        self.file_io = file_io if file_io is not None else log_records.file_io
        self._plain_log_io = is_plain(log_records.file_io)  # append writes with os.pwrite itself
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.created = created_ms if created_ms is not None else int(time.time() * 1000)
        self._offset_index_path = files.offset_index_file(dir, base_offset, suffix)
        self._time_index_path = files.time_index_file(dir, base_offset, suffix)
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        # no I/O until used: most segments never have an aborted transaction, so never a file
        self.txn_index = TransactionIndex(base_offset, files.transaction_index_file(dir, base_offset, suffix),
                                          file_io=self.file_io)
        self.rolling_based_timestamp: int | None = None
        self._max_ts_and_offset: tuple[int, int] | None = None  # None = not loaded (Kafka's UNKNOWN)
        self.bytes_since_last_index_entry = 0
        self._deleted = False
        self._unchecked_indexes = False  # loaded without checking its indexes: checked on their first use
        self.recovery_problem: str | None = None  # why the last recover() cut the file, if a batch was invalid

    # ---- construction ----------------------------------------------------------------------------
    @classmethod
    def open(cls, dir: str, base_offset: int, config: "LogConfig", *, file_already_exists: bool = False,
             suffix: str = "", now_ms: int | None = None, init_file_size: int = 0,
             preallocate: bool = False, file_io: FileIO | None = None, lazy: bool = False) -> "LogSegment":
        """``lazy`` (an existing inactive segment at start-up): nothing is opened or read until first used."""
        records = FileRecords.open(files.log_file(dir, base_offset, suffix), file_already_exists,
                                   init_file_size, preallocate, file_io=file_io, lazy=lazy)
        seg = cls(dir, base_offset, records, index_interval_bytes=config.index_interval_bytes,
                  max_index_size=config.max_index_size, roll_jitter_ms=config.random_segment_jitter(),
                  created_ms=now_ms, suffix=suffix, file_io=records.file_io)
        if not file_already_exists:
            # create the index files with the log file, so a segment closed before its first append still
            # has all three files on disk
            seg.offset_index
            seg.time_index
        return seg

    # ---- lazy indexes ----------------------------------------------------------------------------
    @property
    def offset_index(self) -> OffsetIndex:
        idx = self._offset_index
        if idx is None:
            idx = self._offset_index = OffsetIndex(self._offset_index_path, self.base_offset, self.max_index_size,
                                                   file_io=self.file_io)
            if self._unchecked_indexes:
                self._check_indexes()
        return idx

    @property
    def time_index(self) -> TimeIndex:
        idx = self._time_index
        if idx is None:
            idx = self._time_index = TimeIndex(self._time_index_path, self.base_offset, self.max_index_size,
                                               file_io=self.file_io)
            if self._unchecked_indexes:
                self._check_indexes()
        return idx

    def _check_indexes(self) -> None:
        """odradek's cheap index checks (Kafka runs none), on the first use of a loaded segment's indexes rather
        than at start-up: a corrupt index (they carry no checksum) is rebuilt from the log instead of being
        trusted."""
        self._unchecked_indexes = False
        try:
            self.offset_index.sanity_check(self.log.size)
            self.time_index.sanity_check()
        except CorruptIndexError as e:
            log.warning("Found a corrupted index file corresponding to log file %s due to %s, rebuilding index "
                        "files...", self.log.path, e)
            self.rebuild_indexes()
            if self.log.releasable:  # an inactive segment's indexes stay trimmed
                self.offset_index.trim_to_valid_size()
                self.time_index.trim_to_valid_size()

    @property
    def offset_index_path(self) -> str:
        return self._offset_index.path if self._offset_index is not None else self._offset_index_path

    @property
    def time_index_path(self) -> str:
        return self._time_index.path if self._time_index is not None else self._time_index_path

    # ---- size and time ---------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size

    def _max_ts(self) -> tuple[int, int]:
        m = self._max_ts_and_offset
        if m is None:
            m = self._max_ts_and_offset = self.time_index.last_entry
        return m

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_ts()[0]

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        return self._max_ts()[1]

    def read_max_timestamp_and_offset_so_far(self) -> tuple[int, int]:
        return self._max_ts()

    def largest_record_timestamp(self) -> int | None:
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else None

    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment, or the file's mtime if no batch has one (``largestTimestamp``)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified()

    def last_modified(self) -> int:
        try:
            return int(os.stat(self.log.path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def set_last_modified(self, ms: int) -> None:
        t = ms / 1000.0
        for p in (self.log.path, self.offset_index_path, self.time_index_path):
            try:
                os.utime(p, (t, t))
            except FileNotFoundError:
                pass

    def _load_first_batch_timestamp(self) -> None:
        if self.rolling_based_timestamp is None:
            for _, h in self.log.batches_from(0):
                self.rolling_based_timestamp = h.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """From the first batch's timestamp to the new batch's, or wall-clock time since creation if none."""
        self._load_first_batch_timestamp()
        ts = self.rolling_based_timestamp if self.rolling_based_timestamp is not None else -1
        if ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created

    def first_batch_timestamp(self) -> int:
        """The first batch's timestamp, or ``LONG_MAX`` if unavailable (``getFirstBatchTimestamp``)."""
        self._load_first_batch_timestamp()
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return ts
        return 2**63 - 1

    def should_roll_for(self, max_segment_ms: int, max_segment_bytes: int, max_timestamp_in_messages: int,
                        max_offset_in_messages: int, messages_size: int, now_ms: int) -> bool:
        """:meth:`should_roll` without building a :class:`RollParams` (the append hot path)."""
        size = self.log.size
        if size > max_segment_bytes - messages_size:
            return True
        oi, ti = self._offset_index, self._time_index
        if oi is None or ti is None:
            return self.should_roll(RollParams(max_segment_ms, max_segment_bytes, max_timestamp_in_messages,
                                               max_offset_in_messages, messages_size, now_ms))
        if oi.entries >= oi.max_entries or ti.entries >= ti.max_entries - 1:
            return True
        rel = max_offset_in_messages - self.base_offset
        if rel < 0 or rel > _INT_MAX:
            return True
        if size > 0:
            ts = self.rolling_based_timestamp
            if ts is None:
                self._load_first_batch_timestamp()
                ts = self.rolling_based_timestamp
            waited = (max_timestamp_in_messages - ts) if ts is not None and ts >= 0 else now_ms - self.created
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        return False

    def should_roll(self, p: RollParams) -> bool:
        reached_roll_ms = self.time_waited_for_roll(p.now_ms, p.max_timestamp_in_messages) > \
            p.max_segment_ms - self.roll_jitter_ms
        size = self.size
        return (size > p.max_segment_bytes - p.messages_size
                or (size > 0 and reached_roll_ms)
                or self.offset_index.is_full() or self.time_index.is_full()
                or not self.can_convert_to_relative_offset(p.max_offset_in_messages))

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        rel = offset - self.base_offset
        return 0 <= rel <= _INT_MAX

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def can_append_without_roll(self, max_segment_ms: int, max_segment_bytes: int, max_timestamp_in_messages: int,
                                max_offset_in_messages: int, messages_size: int, now_ms: int) -> bool:
        """The produce hot path's roll check: True only if :meth:`should_roll_for` would not roll, told without
        opening an index or reading the first batch's timestamp.  False when it cannot tell so cheaply (an index not
        open yet, the first batch's timestamp not loaded): the caller then takes the general path, which asks
        :meth:`should_roll_for`."""
        size = self.log.size
        oi, ti = self._offset_index, self._time_index
        if (size > max_segment_bytes - messages_size or oi is None or ti is None or oi.entries >= oi.max_entries
                or ti.entries >= ti.max_entries - 1 or max_offset_in_messages - self.base_offset > _INT_MAX):
            return False
        if size:
            ts = self.rolling_based_timestamp
            if ts is None:
                return False
            waited = (max_timestamp_in_messages - ts) if ts >= 0 else now_ms - self.created
            return waited <= max_segment_ms - self.roll_jitter_ms
        return True

    # ---- append ----------------------------------------------------------------------------------
    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
               records) -> None:
        """Append already-validated, offset-assigned batches (``LogSegment.append``): write them at the end of the
        ``.log`` file, move the segment's max timestamp, and once ``index.interval.bytes`` have been written since
        the last index entry, add an offset index entry for the position written at and a time index entry if
        the max timestamp moved.

        On the produce hot path (every batch goes through here): constant work per call, none per record, and
        ``records`` is written as given, never copied.  An ``OSError`` from the write leaves the file as it was.
        The common case of :meth:`FileRecords.append` (plain file I/O) is inlined: the call would cost about as much
        as the work it does.  Index entries (once per ``index.interval.bytes``) take the indexes' locks: an idle
        release may unmap them between appends.
        """
        n = len(records)
        if n == 0:
            return
        log_records = self.log
        physical_position = log_records.size
        if physical_position == 0:
            self.rolling_based_timestamp = largest_timestamp
        rel = largest_offset - self.base_offset
        if rel < 0 or rel > _INT_MAX:
            raise LogSegmentOffsetOverflowError(self, largest_offset)
        if self._plain_log_io:
            # FileRecords.append: write at the logical end, cut back on failure, then bump the size
            h = log_records._handle  # held across the write: an idle release cannot close it under us
            if h is None:
                h = log_records.handle()
            fd = h.fd
            try:
                written = os.pwrite(fd, records, physical_position)
                if written != n:
                    log_records.file_io.pwrite_all(fd, memoryview(records)[written:], physical_position + written)
            except OSError:
                log_records.file_io.ftruncate(fd, physical_position)
                raise
            log_records.size = physical_position + n
        else:
            log_records.append(records)  # a test's file I/O (power loss, a full disk) sees every write
        m = self._max_ts_and_offset
        if m is None:
            m = self._max_ts()
        if largest_timestamp > m[0]:
            self._max_ts_and_offset = m = (largest_timestamp, shallow_offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            try:
                self._append_index_entries(largest_offset, physical_position, m)
            except OSError as e:
                # the index could not be mapped (out of descriptors or address space): the batch is written and
                # stays; the index only misses an entry (it is sparse), and the next append tries again
                log.warning("Could not add an index entry to %s for offset %d: %s", self, largest_offset, e)
                self.bytes_since_last_index_entry += n
                return
            self.bytes_since_last_index_entry = n
        else:
            self.bytes_since_last_index_entry += n

    def _append_index_entries(self, largest_offset: int, physical_position: int, max_ts: tuple[int, int]) -> None:
        oi = self._offset_index
        if oi is None:
            oi = self.offset_index
        oi.append(largest_offset, physical_position)
        ti = self._time_index
        if ti is None:
            ti = self.time_index
        # TimeIndex.maybe_append does nothing unless the max timestamp moved (it raises for an entry going
        # backwards or a full index): skip the call, and its lock, when none of that can be
        lt = ti.last_entry
        if max_ts[0] != lt[0] or max_ts[1] < lt[1] or ti.entries >= ti.max_entries - 1:
            ti.maybe_append(max_ts[0], max_ts[1])

    # ---- transactions ----------------------------------------------------------------------------
    def update_txn_index(self, completed: "CompletedTxn", last_stable_offset: int) -> None:
        """An aborted transaction completed by a marker in this segment gets an entry (``updateTxnIndex``)."""
        if completed.is_aborted:
            self.txn_index.append(AbortedTxn.from_completed(completed, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """An offset past a read of ``fetch_size`` bytes from ``start_position``, from the offset index, or None."""
        return self.offset_index.fetch_upper_bound_offset(start_position, fetch_size)

    # ---- read ------------------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """Position and size of the first batch whose last offset is >= ``offset``.

        The index entry is checked against the batch header it points at; an entry that does not land on a
        batch boundary consistent with its offset means the index is corrupt: it is rebuilt from the log
        and the lookup retried (indexes carry no checksum).
        """
        idx_offset, idx_pos = self.offset_index.lookup(offset)
        if idx_pos == 0 or starting_file_position > idx_pos:
            return self.log.search_for_offset_with_size(offset, max(idx_pos, starting_file_position))
        try:
            if idx_pos + LOG_OVERHEAD > self.log.size or idx_offset < self.base_offset:
                raise CorruptRecordError("index entry outside the log")
            # the batch the entry points at must start at or below the entry's offset
            return self.log.search_for_offset_with_size(offset, idx_pos, idx_offset)
        except CorruptRecordError:
            # the index pointed outside the log, into the middle of a batch, or at the wrong batch
            log.warning("Offset index %s entry (%d, %d) does not match the log; rebuilding indexes",
                        self.offset_index_path, idx_offset, idx_pos)
            self.rebuild_indexes()
            idx_offset, idx_pos = self.offset_index.lookup(offset)
            return self.log.search_for_offset_with_size(offset, max(idx_pos, starting_file_position))

    def _index_entry_plausible(self, idx_offset: int, idx_pos: int) -> bool:
        size = self.log.size
        if idx_pos < 0 or idx_pos + LOG_OVERHEAD > size or idx_offset < self.base_offset:
            return False
        h = self.log.handle()
        head = os.pread(h.fd, 17, idx_pos)
        if len(head) < 17 or head[16] != 2:
            return False
        base = int.from_bytes(head[0:8], "big", signed=True)
        length = int.from_bytes(head[8:12], "big", signed=True)
        return self.base_offset <= base <= idx_offset and length >= 49 and idx_pos + length + 12 <= size

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> FetchDataInfo | None:
        """Batches from the one containing ``start_offset``, at most ``max_size`` bytes (or one whole batch with
        ``min_one_message``), never past ``max_position``; ``None`` if ``start_offset`` is beyond this segment.

        ``max_position=None`` means "no position is readable" (Kafka's empty ``maxPositionOpt``); pass
        ``self.size`` to allow everything.
        """
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start_position = found.position
        offset_metadata = LogOffsetMetadata(start_offset, self.base_offset, start_position)
        adjusted_max_size = max_size
        if min_one_message:
            adjusted_max_size = max(max_size, found.size)
        if adjusted_max_size == 0 or max_position is None:
            return FetchDataInfo(offset_metadata, FileSlice(-1, start_position, 0, self.log.path))
        fetch_size = min(max_position - start_position, adjusted_max_size)
        return FetchDataInfo(offset_metadata, self.log.slice(start_position, max(fetch_size, 0)),
                             adjusted_max_size < found.size)

    def read_next_offset(self) -> int:
        """The offset after the last batch in this segment (scans from the last index entry)."""
        last_idx_offset, pos = self.offset_index.lookup(self.offset_index.last_offset)
        if pos and not self._index_entry_plausible(last_idx_offset, pos):
            self.rebuild_indexes()
            pos = self.offset_index.lookup(self.offset_index.last_offset)[1]
        next_offset = self.base_offset
        for _, h in self.log.batches_from(pos):
            next_offset = h.base_offset + h.last_offset_delta + 1
        return next_offset

    def find_offset_by_timestamp(self, timestamp_ms: int, starting_offset: int) -> TimestampAndOffset | None:
        ts_entry = self.time_index.lookup(timestamp_ms)
        position = self.offset_index.lookup(max(ts_entry[1], starting_offset))[1]
        if position and not self._index_entry_plausible(self.offset_index.lookup(max(ts_entry[1], starting_offset))[0],
                                                         position):
            self.rebuild_indexes()
            position = 0
        return self.log.search_for_timestamp(timestamp_ms, position, starting_offset)

    # ---- recovery --------------------------------------------------------------------------------
    def recover(self, producer_state: "ProducerStateManager | None" = None,
                epoch_cache: "LeaderEpochFileCache | None" = None,
                *, max_batch_size: int | None = None, next_segment_base: int | None = None) -> int:
        """Re-validate every batch (length, magic, CRC32C, offsets increasing and within the segment), rebuild the
        offset and time indexes, feed the epoch cache and producer state, rebuild the transaction index from the
        transactions the producer state sees aborted (it must hold the state at this segment's base offset: a
        transaction may have begun in an earlier segment), and cut the file at the first invalid byte.

        ``next_segment_base`` (the following segment's base offset) bounds the offsets too: the base offset
        is not covered by the CRC, so a damaged one is caught only by such range checks.

        Returns the number of bytes truncated (``LogSegment.recover``); ``recovery_problem`` says why, if a batch
        was invalid (None for a clean segment or one whose last batch was only cut short).
        """
        self._next_segment_base = next_segment_base
        self.recovery_problem = None
        oi, ti = self.offset_index, self.time_index
        oi.reset()
        ti.reset()
        self.txn_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        interval = self.index_interval_bytes
        seg_base = self.base_offset
        next_expected = seg_base
        max_ts, max_off = -1, -1
        latest_epoch = epoch_cache.latest_epoch() if epoch_cache is not None else None
        handle = self.log.handle()  # held while recovering
        fd = handle.fd
        size = self.log.size
        unpack_len = _I32.unpack_from
        try:
            pos = 0
            while pos < size:
                chunk = os.pread(fd, min(_RECOVERY_CHUNK, size - pos), pos)
                n = len(chunk)
                if n >= 12:
                    length = unpack_len(chunk, 8)[0]
                    if length >= 49 and 12 + length > n and pos + 12 + length <= size:
                        chunk = os.pread(fd, 12 + length, pos)  # one batch bigger than the chunk
                        n = len(chunk)
                off = 0
                while off + 12 <= n:
                    length = unpack_len(chunk, off + 8)[0]
                    if length < 49:
                        raise CorruptRecordError(f"batch length {length} at position {pos + off} is smaller than "
                                                 f"the v2 header")
                    if max_batch_size is not None and length + 12 > max_batch_size:
                        raise CorruptRecordError(f"batch size {length + 12} at {pos + off} exceeds {max_batch_size}")
                    end = off + 12 + length
                    if end > n:
                        break
                    h = validate_batch(chunk, off)
                    base = h[0]
                    last = base + h[6]
                    if base < next_expected:
                        raise _NonMonotonic(f"batch at position {pos + off} has base offset {base} below the "
                                            f"expected next offset {next_expected}")
                    if last - seg_base > _INT_MAX:
                        raise LogSegmentOffsetOverflowError(self, last)
                    if next_segment_base is not None and last >= next_segment_base:
                        raise _NonMonotonic(f"batch at position {pos + off} ends at offset {last}, past the next "
                                            f"segment's base offset {next_segment_base}")
                    if h[8] > max_ts:
                        max_ts, max_off = h[8], last
                    if valid_bytes - last_index_entry > interval:
                        oi.append(last, valid_bytes)
                        ti.maybe_append(max_ts, max_off)
                        last_index_entry = valid_bytes
                    valid_bytes += length + 12
                    next_expected = last + 1
                    epoch = h[2]
                    if epoch >= 0 and epoch_cache is not None and (latest_epoch is None or epoch > latest_epoch):
                        epoch_cache.assign(epoch, base)
                        latest_epoch = epoch
                    if h[9] >= 0 and producer_state is not None:
                        done = producer_state.update_from_recovered_batch(h, chunk, off)
                        if done is not None:
                            self.update_txn_index(*done)
                    off = end
                if off == 0:
                    break  # a torn tail
                pos += off
        except (ProtocolError, LogSegmentOffsetOverflowError, _NonMonotonic) as e:
            # the loader's one line for this log says it (Kafka logs it here, and the truncation again)
            self.recovery_problem = f"invalid messages at byte offset {valid_bytes}: {e}"
            log.debug("Found invalid messages in log segment %s at byte offset %d: %s", self.log.path, valid_bytes, e)
        if producer_state is not None and valid_bytes:
            producer_state.update_map_end_offset(next_expected)
        self._max_ts_and_offset = (max_ts, max_off) if max_ts >= 0 else _UNKNOWN_TS
        truncated = self.log.size - valid_bytes
        if truncated > 0:
            log.debug("Truncated %d invalid bytes at the end of segment %s during recovery", truncated, self.log.path)
        self.log.truncate_to(valid_bytes)
        oi.trim_to_valid_size()
        ts, off = self._max_ts()
        ti.maybe_append(ts, off, skip_full_check=True)
        ti.trim_to_valid_size()
        self.bytes_since_last_index_entry = valid_bytes - last_index_entry if valid_bytes else 0
        self.rolling_based_timestamp = None
        return truncated

    def _recover_batch(self, h, position: int, valid_bytes: int, next_expected: int) -> None:
        if h.base_offset < next_expected:
            raise _NonMonotonic(f"batch at position {position} has base offset {h.base_offset} below the "
                                f"expected next offset {next_expected}")
        last = h.base_offset + h.last_offset_delta
        if not self.can_convert_to_relative_offset(last):
            raise LogSegmentOffsetOverflowError(self, last)
        nxt = getattr(self, "_next_segment_base", None)
        if nxt is not None and last >= nxt:
            raise _NonMonotonic(f"batch at position {position} ends at offset {last}, past the next segment's "
                                f"base offset {nxt}")
        if h.max_timestamp > self._max_ts()[0]:
            self._max_ts_and_offset = (h.max_timestamp, last)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the log without touching the log (a lazily detected corrupt index)."""
        self.offset_index.reset()
        self.time_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_ts: tuple[int, int] = _UNKNOWN_TS
        for pos, h in self.log.batches_from(0):
            last = h.base_offset + h.last_offset_delta
            if h.max_timestamp > max_ts[0]:
                max_ts = (h.max_timestamp, last)
            if valid_bytes - last_index_entry > self.index_interval_bytes:
                self.offset_index.append(last, valid_bytes)
                self.time_index.maybe_append(*max_ts)
                last_index_entry = valid_bytes
            valid_bytes = pos + h.batch_length + LOG_OVERHEAD
        self._max_ts_and_offset = max_ts
        self.bytes_since_last_index_entry = valid_bytes - last_index_entry if valid_bytes else 0

    def sanity_check(self, time_index_newly_created: bool, txn_index_exists: bool = True) -> None:
        """At start-up, as Kafka: the offset index must exist (else the loader recovers the segment) and the
        transaction index pass its check (else the loader recovers the segment, which rebuilds it with the producer
        state; ``txn_index_exists=False``: there is no file to read).  The offset and time indexes' own checks run
        on their first use (:meth:`_check_indexes`), so a start-up reads no index it does not need."""
        if not os.path.exists(self._offset_index_path):
            raise FileNotFoundError(f"Offset index file {self._offset_index_path} does not exist")
        if time_index_newly_created:
            self.time_index.resize(0)
        if txn_index_exists:
            self.txn_index.sanity_check()
        self._unchecked_indexes = self._offset_index is None or self._time_index is None
        if not self._unchecked_indexes:
            self._check_indexes()

    def has_overflow(self) -> bool:
        nxt = self.read_next_offset()
        return nxt > self.base_offset and not self.can_convert_to_relative_offset(nxt - 1)

    # ---- truncate --------------------------------------------------------------------------------
    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Remove every batch with offsets >= ``offset`` (the batch containing it goes entirely)."""
        mapping = self.translate_offset(offset)
        oi, ti = self.offset_index, self.time_index
        oi.truncate_to(offset)
        ti.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        oi.resize(oi.max_index_size)
        ti.resize(ti.max_index_size)
        truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size == 0:
            self.created = now_ms if now_ms is not None else int(time.time() * 1000)
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._max_ts_and_offset = self._read_largest_timestamp()
        return truncated

    def _read_largest_timestamp(self) -> tuple[int, int]:
        last_ts, last_off = self.time_index.last_entry
        pos = self.offset_index.lookup(last_off)[1]
        after = self.log.largest_timestamp_after(pos)
        if after.timestamp > last_ts:
            return after.timestamp, after.offset
        return last_ts, last_off

    # ---- lifecycle -------------------------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def on_become_inactive_segment(self) -> None:
        ts, off = self._max_ts()
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()
        self.log.make_releasable()

    def close(self) -> None:
        if self._max_ts_and_offset is not None and self._max_ts_and_offset != _UNKNOWN_TS:
            try:
                ts, off = self._max_ts_and_offset
                self.time_index.maybe_append(ts, off, skip_full_check=True)
            except Exception as e:  # noqa: BLE001 - Utils.swallow, as Kafka closes a segment
                log.warning("maybeAppend failed on close of %s: %s", self, e)
        for closer in (lambda: self._offset_index and self._offset_index.close(),
                       lambda: self._time_index and self._time_index.close(),
                       self.log.close, self.txn_index.close):
            try:
                closer()
            except Exception as e:  # noqa: BLE001 - Utils.closeQuietly: every index and file gets its close
                log.warning("Error closing %s: %s", self, e)

    def close_handlers(self) -> None:
        """Release the fd and mappings without writing anything (the disk may have failed)."""
        for closer in (lambda: self._offset_index and self._offset_index.close_handler(),
                       lambda: self._time_index and self._time_index.close_handler(),
                       self.log.close_handlers, self.txn_index.close):
            try:
                closer()
            except Exception:  # noqa: BLE001 - Utils.closeQuietly: every index and file gets its close
                pass

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        self.log.rename_to(files.replace_suffix(self.log.path, old_suffix, new_suffix))
        oi_path = self.offset_index_path
        ti_path = self.time_index_path
        new_oi = files.replace_suffix(oi_path, old_suffix, new_suffix)
        new_ti = files.replace_suffix(ti_path, old_suffix, new_suffix)
        if self._offset_index is not None:
            self._offset_index.rename_to(new_oi)
        elif os.path.exists(oi_path):
            self.file_io.rename(oi_path, new_oi)
        self._offset_index_path = new_oi
        if self._time_index is not None:
            self._time_index.rename_to(new_ti)
        elif os.path.exists(ti_path):
            self.file_io.rename(ti_path, new_ti)
        self._time_index_path = new_ti
        self.txn_index.rename_to(files.replace_suffix(self.txn_index.path, old_suffix, new_suffix))

    def has_suffix(self, suffix: str) -> bool:
        return (self.log.path.endswith(suffix) and self.offset_index_path.endswith(suffix)
                and self.time_index_path.endswith(suffix) and self.txn_index.path.endswith(suffix))

    def update_parent_dir(self, dir: str) -> None:
        self.dir = dir
        self.log.update_parent_dir(dir)
        self._offset_index_path = os.path.join(dir, os.path.basename(self.offset_index_path))
        self._time_index_path = os.path.join(dir, os.path.basename(self.time_index_path))
        if self._offset_index is not None:
            self._offset_index.update_parent_dir(dir)
        if self._time_index is not None:
            self._time_index.update_parent_dir(dir)
        self.txn_index.update_parent_dir(dir)

    def delete_if_exists(self) -> None:
        self._deleted = True
        self.log.delete_if_exists()
        for idx, path in ((self._offset_index, self.offset_index_path), (self._time_index, self.time_index_path)):
            if idx is not None:
                idx.delete_if_exists()
            else:
                try:
                    self.file_io.unlink(path)
                except FileNotFoundError:
                    pass
        self.txn_index.delete_if_exists()

    @property
    def deleted(self) -> bool:
        return self._deleted

    def __repr__(self) -> str:
        ts = self._max_ts_and_offset[0] if self._max_ts_and_offset else -1
        return f"LogSegment(baseOffset={self.base_offset}, size={self.size}, largestRecordTimestamp={ts})"


class _NonMonotonic(Exception):
    pass
