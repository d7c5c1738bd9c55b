"""The mechanism layer of a partition log (Kafka's ``LocalLog``): the directory, the segment list, the log end
offset, the recovery point, rolling, reading across segments with a byte-position bound, truncation, and
crash-safe segment deletion and replacement.  Policy (log start offset, high watermark, retention,
producer state, epochs) lives in :mod:`storage.log`.
"""

from __future__ import annotations

import logging
import os
from typing import Iterable

from . import files
from .config import LogConfig
from .errors import KafkaStorageError, OffsetOutOfRangeError
from .fileio import FileIO
from .file_records import FileSlice
from .scheduler import Scheduler
from .segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from .segments import LogSegments

log = logging.getLogger(__name__)
_new_meta = tuple.__new__

__all__ = ["LocalLog"]


class LocalLog:
    def __init__(self, dir: str, config: LogConfig, segments: LogSegments, recovery_point: int,
                 next_offset_metadata: LogOffsetMetadata, scheduler: Scheduler, topic: str, partition: int,
                 now_ms: int = 0, *, file_io: FileIO | None = None) -> None:
        self.dir = dir
        self.file_io = file_io if file_io is not None else FileIO()
        self.config = config
        self.segments = segments
        self.recovery_point = recovery_point
        self.next_offset_metadata = next_offset_metadata
        self.scheduler = scheduler
        self.topic = topic
        self.partition = partition
        self.last_flushed_time = now_ms
        self.closed = False  # Kafka's isMemoryMappedBufferClosed

    @property
    def parent_dir(self) -> str:
        return os.path.dirname(self.dir)

    @property
    def name(self) -> str:
        return os.path.basename(self.dir)

    def check_if_memory_mapped_buffer_closed(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"The memory mapped buffer for log of {self.topic}-{self.partition} "
                                    "is already closed")

    # ---- offsets ---------------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self.next_offset_metadata.message_offset

    def update_log_end_offset(self, end_offset: int) -> None:
        active = self.segments.active_segment
        self.next_offset_metadata = LogOffsetMetadata(end_offset, active.base_offset, active.size)
        if self.recovery_point > end_offset:
            self.recovery_point = end_offset

    def mark_flushed(self, offset: int, now_ms: int) -> None:
        self.check_if_memory_mapped_buffer_closed()
        # a flush scheduled before a truncation must not put the recovery point past the log end
        offset = min(offset, self.log_end_offset)
        if offset > self.recovery_point:
            self.recovery_point = offset
            self.last_flushed_time = now_ms

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def flush(self, offset: int) -> None:
        """fsync every segment holding offsets in ``[recovery_point, offset)``; does not move the recovery point."""
        current = self.recovery_point
        if current <= offset:
            to_flush = self.segments.values(current, offset)
            for s in to_flush:
                s.flush()
            if any(s.base_offset >= current for s in to_flush):
                self.file_io.fsync_dir(self.dir)

    # ---- append / read ---------------------------------------------------------------------------
    def append(self, last_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int, records,
               active: LogSegment | None = None) -> None:
        if active is None:
            active = self.segments.active_segment
        active.append(last_offset, largest_timestamp, shallow_offset_of_max_timestamp, records)
        end = last_offset + 1
        self.next_offset_metadata = _new_meta(LogOffsetMetadata, (end, active.base_offset, active.log.size))
        if self.recovery_point > end:
            self.recovery_point = end

    def read(self, start_offset: int, max_length: int, min_one_message: bool,
             max_offset_metadata: LogOffsetMetadata, include_aborted_txns: bool = False) -> FetchDataInfo:
        """``LocalLog.read``; with ``include_aborted_txns`` (READ_COMMITTED) the result also lists the aborted
        transactions overlapping what it returns (an empty list for an empty read at the bound)."""
        end_meta = self.next_offset_metadata
        end_offset = end_meta.message_offset
        segment = self.segments.floor_segment(start_offset)
        if start_offset > end_offset or segment is None:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.topic}-{self.partition}, "
                f"but we only have log segments upto {end_offset}.")
        if start_offset == max_offset_metadata.message_offset:
            return self._empty(max_offset_metadata, include_aborted_txns)
        if start_offset > max_offset_metadata.message_offset:
            return self._empty(self.convert_to_offset_metadata_or_throw(start_offset), include_aborted_txns)
        while segment is not None:
            if segment.base_offset < max_offset_metadata.segment_base_offset:
                max_position: int | None = segment.size
            elif segment.base_offset == max_offset_metadata.segment_base_offset and \
                    not max_offset_metadata.message_offset_only:
                max_position = max_offset_metadata.relative_position
            else:
                max_position = None
            info = segment.read(start_offset, max_length, max_position, min_one_message)
            if info is not None:
                if include_aborted_txns:
                    info = self._add_aborted_transactions(start_offset, segment, info)
                return info
            segment = self.segments.higher_segment(segment.base_offset)
        # beyond the end of the last segment although in range: all later messages were deleted (Kafka answers
        # this one without an aborted-transactions list even for READ_COMMITTED)
        return FetchDataInfo(self.next_offset_metadata, FileSlice(-1, 0, 0))

    @staticmethod
    def _empty(meta: LogOffsetMetadata, include_aborted_txns: bool = False) -> FetchDataInfo:
        return FetchDataInfo(meta, FileSlice(-1, 0, 0), False, [] if include_aborted_txns else None)

    def _add_aborted_transactions(self, start_offset: int, segment: LogSegment, info: FetchDataInfo) -> FetchDataInfo:
        """``addAbortedTransactions``: the range read ends at the offset index's upper bound for the bytes returned,
        else at the next segment's base offset or the log end; the read's records are not looked at (sendfile)."""
        upper = segment.fetch_upper_bound_offset(info.fetch_offset_metadata.relative_position, info.records.length)
        if upper is None:
            nxt = self.segments.higher_segment(segment.base_offset)
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
        aborted = [t.as_aborted_transaction() for t in self._collect_aborted(start_offset, upper, segment)]
        return info._replace(aborted_transactions=aborted)

    def _collect_aborted(self, start_offset: int, upper_bound_offset: int, starting: LogSegment) -> list:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from ``starting`` on through
        later segments until a segment's search is complete (``LocalLog.collectAbortedTransactions``)."""
        out = []
        segment: LogSegment | None = starting
        while segment is not None:
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            out += result.aborted_transactions
            if result.is_complete:
                break
            segment = self.segments.higher_segment(segment.base_offset)
        return out

    def collect_aborted_transactions(self, log_start_offset: int, base_offset: int, upper_bound_offset: int) -> list:
        """``AbortedTxn`` entries overlapping ``[log_start_offset, upper_bound_offset)`` from the segment holding
        ``base_offset`` on (``LocalLog.collectAbortedTransactions``, the cleaner's)."""
        segment = self.segments.floor_segment(base_offset)
        return [] if segment is None else self._collect_aborted(log_start_offset, upper_bound_offset, segment)

    def convert_to_offset_metadata_or_throw(self, offset: int) -> LogOffsetMetadata:
        info = self.read(offset, 1, False, self.next_offset_metadata)
        return info.fetch_offset_metadata

    # ---- roll ------------------------------------------------------------------------------------
    def roll(self, expected_next_offset: int | None, now_ms: int) -> LogSegment:
        self.check_if_memory_mapped_buffer_closed()
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments.active_segment
        if self.segments.contains(new_offset):
            if active is not None and active.base_offset == new_offset and active.size == 0:
                log.warning("Trying to roll a new log segment with start offset %d while it already exists and is "
                            "active with size 0", new_offset)
                seg = self.create_and_delete_segment(new_offset, active, True, now_ms)
                self.update_log_end_offset(self.next_offset_metadata.message_offset)
                return seg
            raise KafkaStorageError(f"Trying to roll a new log segment for {self.topic}-{self.partition} with start "
                                    f"offset {new_offset} while it already exists.")
        if active is not None and new_offset < active.base_offset:
            raise KafkaStorageError(f"Trying to roll a new log segment with start offset {new_offset} lower than "
                                    f"start offset of the active segment {active}")
        for p in (files.log_file(self.dir, new_offset), files.offset_index_file(self.dir, new_offset),
                  files.time_index_file(self.dir, new_offset), files.transaction_index_file(self.dir, new_offset)):
            if os.path.exists(p):
                log.warning("Newly rolled segment file %s already exists; deleting it first", p)
                self.file_io.unlink(p)
        if active is not None:
            active.on_become_inactive_segment()
        seg = LogSegment.open(self.dir, new_offset, self.config, now_ms=now_ms,
                              init_file_size=self.config.init_file_size, preallocate=self.config.preallocate,
                              file_io=self.file_io)
        self.segments.add(seg)
        self.update_log_end_offset(self.next_offset_metadata.message_offset)
        log.info("Rolled new log segment at offset %d for %s-%d", new_offset, self.topic, self.partition)
        return seg

    # ---- deletion --------------------------------------------------------------------------------
    def remove_and_delete_segments(self, to_delete: Iterable[LogSegment], async_delete: bool = True) -> None:
        to_delete = list(to_delete)
        for s in to_delete:
            self.segments.remove(s.base_offset)
        self.delete_segment_files(to_delete, async_delete)

    def delete_segment_files(self, to_delete: Iterable[LogSegment], async_delete: bool = True) -> None:
        """Rename to ``.deleted`` now, delete after ``file.delete.delay.ms`` (``LocalLog.deleteSegmentFiles``)."""
        to_delete = list(to_delete)
        for s in to_delete:
            if not s.has_suffix(files.DELETED_FILE_SUFFIX):
                s.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
        if to_delete:
            self.file_io.fsync_dir(self.dir)

        def delete() -> None:
            for s in to_delete:
                s.delete_if_exists()

        if async_delete:
            self.scheduler.schedule_once("delete-file", delete, self.config.file_delete_delay_ms)
        else:
            delete()

    def create_and_delete_segment(self, new_offset: int, to_delete: LogSegment, async_delete: bool,
                                  now_ms: int) -> LogSegment:
        if new_offset == to_delete.base_offset:
            to_delete.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
        seg = LogSegment.open(self.dir, new_offset, self.config, now_ms=now_ms,
                              init_file_size=self.config.init_file_size, preallocate=self.config.preallocate,
                              file_io=self.file_io)
        self.segments.add(seg)
        if new_offset != to_delete.base_offset:
            self.segments.remove(to_delete.base_offset)
        self.delete_segment_files([to_delete], async_delete)
        return seg

    def delete_all_segments(self) -> list[LogSegment]:
        segs = self.segments.values()
        self.remove_and_delete_segments(segs, async_delete=False)
        self.closed = True
        return segs

    # ---- truncation ------------------------------------------------------------------------------
    def truncate_fully_and_start_at(self, new_offset: int, now_ms: int) -> list[LogSegment]:
        self.check_if_memory_mapped_buffer_closed()
        segs = self.segments.values()
        if segs:
            self.remove_and_delete_segments(segs[:-1], True)
            self.create_and_delete_segment(new_offset, segs[-1], True, now_ms)
        self.update_log_end_offset(new_offset)
        return segs

    def truncate_to(self, target_offset: int, now_ms: int) -> list[LogSegment]:
        deletable = [s for s in self.segments.values() if s.base_offset > target_offset]
        self.remove_and_delete_segments(deletable, True)
        active = self.segments.active_segment
        active.log.keep_open()  # the active segment again if later ones went
        truncated = active.truncate_to(target_offset, now_ms)
        # Kafka sets the log end offset to the target even when that cuts a batch in two (the batch goes
        # whole); odradek keeps it consistent with the data: the end of the last remaining batch.
        end = target_offset
        if truncated > 0:
            end = min(target_offset, active.read_next_offset())
        self.update_log_end_offset(end)
        return deletable

    # ---- replacement (log cleaner) ---------------------------------------------------------------
    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment],
                         is_recovered_swap_file: bool = False) -> list[LogSegment]:
        """Swap cleaned segments in, crash-safely (``LocalLog.replaceSegments``):

        1. ``.cleaned`` -> ``.swap`` (a crash now: the loader finishes the swap);
        2. old segments -> ``.deleted`` (async delete);
        3. ``.swap`` -> final names; fsync the directory.
        """
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        old_sorted = sorted((s for s in old_segments if self.segments.contains(s.base_offset)),
                            key=lambda s: s.base_offset)
        for s in reversed(new_sorted):
            if not is_recovered_swap_file:
                s.change_file_suffixes(files.CLEANED_FILE_SUFFIX, files.SWAP_FILE_SUFFIX)
        self.file_io.fsync_dir(self.dir)
        for s in reversed(new_sorted):
            self.segments.add(s)
        new_bases = {s.base_offset for s in new_sorted}
        deleted_not_replaced = []
        for s in old_sorted:
            if s.base_offset != new_sorted[0].base_offset:
                self.segments.remove(s.base_offset)
            self.delete_segment_files([s], True)
            if s.base_offset not in new_bases:
                deleted_not_replaced.append(s)
        for s in new_sorted:
            s.change_file_suffixes(files.SWAP_FILE_SUFFIX, "")
        self.file_io.fsync_dir(self.dir)
        return deleted_not_replaced

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        self.check_if_memory_mapped_buffer_closed()
        self.segments.close()
        self.closed = True

    def close_handlers(self) -> None:
        self.segments.close_handlers()
        self.closed = True

    def rename_dir(self, name: str) -> bool:
        new_dir = os.path.join(self.parent_dir, name)
        self.file_io.rename(self.dir, new_dir)
        self.file_io.fsync_dir(self.parent_dir)
        if new_dir != self.dir:
            self.dir = new_dir
            for s in self.segments.values():
                s.update_parent_dir(new_dir)
            return True
        return False

    def delete_empty_dir(self) -> None:
        if not self.segments.is_empty:
            raise RuntimeError(f"Can not delete directory when {len(self.segments)} segments are still present")
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)
