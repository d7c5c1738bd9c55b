"""Startup of one partition log (Kafka's ``LogLoader`` and ``UnifiedLog.rebuildProducerState``).

:func:`load_log` runs :meth:`LogLoader.load`, whose phases are named as Kafka's:

1. ``remove_temp_files_and_collect_swap_files``: remove ``.deleted`` and ``.cleaned`` files; drop ``.swap``
   files at or above the smallest ``.cleaned`` offset (an unfinished split).
2. ``complete_swap_operations``: finish interrupted swaps: delete the segments a swap replaces, rename
   ``.swap`` files into place.
3. ``load_segment_files``: load segments in ascending order; delete orphaned indexes; sanity-check indexes and
   rebuild those that fail (missing, wrong size, entries outside the log; a ``.txnindex`` that is torn or holds an
   entry below its segment) with ``recover_segment``, which rebuilds the transaction index with the producer state
   at the segment's start.
4. ``recover_log``: without the clean-shutdown marker, recover every segment from the recovery point on:
   CRC-check every batch, rebuild indexes, truncate at the first invalid byte and delete every later segment;
   then ``delete_segments_if_log_start_greater_than_log_end``, and make sure there is an active segment.
5. Rebuild the leader-epoch cache's ends and the producer state (from the latest snapshot plus the log).

Damage found on the way (a torn or corrupt tail, a missing or corrupt index, an orphaned index, segments behind the
log start) is repaired and told in one WARNING line per log once it is loaded (``LoadStats.problems``): a start
after a crash of thousands of partitions says which were damaged and what was done, each once.
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from protocol.errors import ProtocolError
from protocol.records import LOG_OVERHEAD

from . import files
from .config import LogConfig
from .epoch import LeaderEpochFileCache
from .errors import CorruptIndexError, InvalidOffsetError, LogSegmentOffsetOverflowError
from .fileio import FileIO
from .producer_state import ProducerStateManager
from .scheduler import Scheduler
from .segment import LogOffsetMetadata, LogSegment
from .segments import LogSegments

log = logging.getLogger(__name__)

_SNAPSHOT_DELETE_SUFFIX = ".checkpoint.deleted"

__all__ = ["load_log", "LogLoader", "LoadedLogOffsets", "LoadStats", "rebuild_producer_state"]


class LoadedLogOffsets(NamedTuple):
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata


class LoadStats:
    """What the loader did (for logs, metrics and tests)."""

    def __init__(self) -> None:
        self.recovered_segments = 0
        self.recovered_bytes = 0
        self.truncated_bytes = 0
        self.deleted_segments = 0
        self.rebuilt_indexes = 0
        self.swaps_completed = 0
        self.problems: list[str] = []  # the damage found and what was done about it


def load_log(dir: str, config: LogConfig, *, log_start_offset_checkpoint: int, recovery_point_checkpoint: int,
             had_clean_shutdown: bool, epoch_cache: LeaderEpochFileCache | None,
             producer_state: ProducerStateManager, scheduler: Scheduler, now_ms: int,
             stats: LoadStats | None = None, file_io: FileIO | None = None) -> tuple[LogSegments, LoadedLogOffsets]:
    """Load the log in ``dir``: its segments and the offsets it starts with (``LogLoader.load``)."""
    return LogLoader(dir, config, log_start_offset_checkpoint=log_start_offset_checkpoint,
                     recovery_point_checkpoint=recovery_point_checkpoint, had_clean_shutdown=had_clean_shutdown,
                     epoch_cache=epoch_cache, producer_state=producer_state, scheduler=scheduler, now_ms=now_ms,
                     stats=stats, file_io=file_io).load()


class LogLoader:
    """Kafka's ``LogLoader``: one partition directory's startup, phase by phase (the module docstring's steps).

    Used once: build it, call :meth:`load`.  Nothing reads the log meanwhile, so the phases delete files at once.
    """

    def __init__(self, dir: str, config: LogConfig, *, log_start_offset_checkpoint: int,
                 recovery_point_checkpoint: int, had_clean_shutdown: bool,
                 epoch_cache: LeaderEpochFileCache | None, producer_state: ProducerStateManager,
                 scheduler: Scheduler, now_ms: int, stats: LoadStats | None = None,
                 file_io: FileIO | None = None) -> None:
        self.dir = dir
        self.file_io = file_io if file_io is not None else FileIO()
        self.config = config
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.had_clean_shutdown = had_clean_shutdown
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state
        self.scheduler = scheduler
        self.now_ms = now_ms
        self.stats = stats or LoadStats()
        self.segments = LogSegments()
        # base offsets of every .log file in the directory: a segment recovered while the segments are still being
        # loaded is bounded by the next one, which is not in ``segments`` yet
        self._all_bases: list[int] = []
        self._names: list[str] | None = None  # the directory's regular files, sorted (listed once per change)

    def _files(self) -> list[str]:
        """The directory's regular files, sorted: one ``scandir`` (no ``stat`` per name) until a phase changes it."""
        if self._names is None:
            with os.scandir(self.dir) as it:
                self._names = sorted(e.name for e in it if e.is_file())
        return self._names

    def _changed(self) -> None:
        self._names = None

    def load(self) -> tuple[LogSegments, LoadedLogOffsets]:
        """Every phase in Kafka's order; returns the segments and the log start offset, recovery point and log end."""
        swap_files = self.remove_temp_files_and_collect_swap_files()
        self.complete_swap_operations(swap_files)
        self.load_segment_files()
        recovery_point, next_offset = self.recover_log()
        segments = self.segments
        if self.stats.problems:
            log.warning("Recovered damaged log %s: %s", self.dir, "; ".join(self.stats.problems))
        # the active segment keeps its file open and gets room for more index entries
        segments.last_segment.log.keep_open()
        segments.last_segment.resize_indexes(self.config.max_index_size)

        # the cache's tail may hold epochs past the recovered end, and its head (the earliest epoch may not
        # have been flushed before a hard failure) epochs below the log start offset
        checkpoint = self.log_start_offset_checkpoint
        if self.epoch_cache is not None:
            self.epoch_cache.truncate_from_end(next_offset)
        new_log_start = max(checkpoint, segments.first_segment.base_offset)
        if self.epoch_cache is not None:
            self.epoch_cache.truncate_from_start(checkpoint)

        # segment recovery used producer state managers of its own: this one is built here, from scratch
        producer_state = self.producer_state
        if not producer_state.is_empty():
            raise RuntimeError("Producer state must be empty during log initialization")
        producer_state.remove_stray_snapshots(segments.base_offsets())
        rebuild_producer_state(producer_state, segments, new_log_start, next_offset,
                               reload_from_clean_shutdown=self.had_clean_shutdown, now_ms=self.now_ms)
        active = segments.last_segment
        return segments, LoadedLogOffsets(new_log_start, recovery_point,
                                          LogOffsetMetadata(next_offset, active.base_offset, active.size))

    # ---- phase 1: temporary files and swaps --------------------------------------------------------
    def remove_temp_files_and_collect_swap_files(self) -> list[str]:
        """Delete what an interrupted operation left behind and return the ``.swap`` files worth finishing.

        ``.deleted`` files were on their way out already (a producer snapshot's ``.checkpoint.deleted`` is the
        metadata log's, which handles its own).  ``.cleaned`` files are a cleaning that never reached its swap.
        A ``.swap`` file at or above the smallest ``.cleaned`` offset belongs to a split that did not finish
        (KAFKA-6264), so it goes too; the others are swaps to complete.
        """
        swap_files, cleaned_files = [], []
        min_cleaned = None
        for name in self._files():
            path = os.path.join(self.dir, name)
            if name.endswith(files.DELETED_FILE_SUFFIX) and not name.endswith(_SNAPSHOT_DELETE_SUFFIX):
                log.debug("Deleting stray temporary file %s", path)
                self._delete_if_exists(path)
            elif name.endswith(files.CLEANED_FILE_SUFFIX):
                off = _offset_or_none(name)
                if off is not None:
                    min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
                cleaned_files.append(path)
            elif name.endswith(files.SWAP_FILE_SUFFIX):
                swap_files.append(path)
        valid = self._delete_swap_files_of_unfinished_splits(swap_files, min_cleaned)
        for p in cleaned_files:
            log.debug("Deleting stray .clean file %s", p)
            self._delete_if_exists(p)
        return valid

    def _delete_swap_files_of_unfinished_splits(self, swap_files: list[str], min_cleaned: int | None) -> list[str]:
        """The ``.swap`` files below ``min_cleaned`` (all of them if None); those at or above it are deleted."""
        valid = []
        for p in swap_files:
            off = _offset_or_none(os.path.basename(p))
            if off is None:
                continue
            if min_cleaned is not None and off >= min_cleaned:
                log.debug("Deleting invalid swap file %s minCleanedFileOffset: %s", p, min_cleaned)
                self._delete_if_exists(p)
            else:
                valid.append(p)
        return valid

    def complete_swap_operations(self, swap_files: list[str]) -> None:
        """Finish swaps a crash interrupted (compaction, a split): the cleaner renamed the new segments ``.swap``
        before touching the old ones, so the ``.swap`` files are complete.  Delete the segments they replace (every
        file whose offset lies in the range the swapped-in segments cover), then rename the ``.swap`` files into
        place, as :meth:`LocalLog.replace_segments <storage.local_log.LocalLog.replace_segments>` would have."""
        covered = self._swap_offset_range(swap_files)
        if covered is not None:
            self._delete_swapped_out_files(*covered)
        for name in self._files():
            if name.endswith(files.SWAP_FILE_SUFFIX):
                p = os.path.join(self.dir, name)
                log.info("Recovering file %s by renaming from .swap files.", name)
                self.file_io.rename(p, files.replace_suffix(p, files.SWAP_FILE_SUFFIX, ""))
                self._changed()
                self.stats.swaps_completed += 1
        if swap_files:
            self.file_io.fsync_dir(self.dir)

    def _swap_offset_range(self, swap_files: list[str]) -> tuple[int, int] | None:
        """``[smallest base offset, largest next offset)`` of the swapped-in ``.log`` files, or None if none."""
        min_swap, max_swap = None, None
        for swap in swap_files:
            if not files.is_log_file(files.replace_suffix(swap, files.SWAP_FILE_SUFFIX, "")):
                continue
            base = files.offset_from_file_name(os.path.basename(swap))
            seg = LogSegment.open(self.dir, base, self.config, file_already_exists=True,
                                  suffix=files.SWAP_FILE_SUFFIX, now_ms=self.now_ms, file_io=self.file_io)
            try:
                log.info("Found log file %s from interrupted swap operation, which is recoverable from .swap files "
                         "by renaming.", swap)
                nxt = seg.read_next_offset()
            except ProtocolError:
                nxt = base
            finally:
                seg.close_handlers()
            min_swap = base if min_swap is None else min(min_swap, base)
            max_swap = nxt if max_swap is None else max(max_swap, nxt)
        return None if min_swap is None else (min_swap, max_swap)

    def _delete_swapped_out_files(self, min_swap: int, max_swap: int) -> None:
        """Delete every segment file (not ``.swap``) whose offset lies in ``[min_swap, max_swap)``: compacted or
        split, but not yet renamed ``.deleted`` when the broker stopped."""
        for name in self._files():
            path = os.path.join(self.dir, name)
            if name.endswith(files.SWAP_FILE_SUFFIX):
                continue
            off = _offset_or_none(name)
            if off is not None and min_swap <= off < max_swap:
                log.info("Deleting segment files %s that is compacted but has not been deleted yet.", name)
                self.file_io.unlink(path)
                self._changed()

    # ---- phase 2: segment files ------------------------------------------------------------------
    def load_segment_files(self) -> None:
        """Open every segment in ascending order (a segment's transactional data may depend on earlier ones) and
        delete index files without a log.  A segment whose indexes are missing or fail their checks is recovered
        now; one that :meth:`recover_log` will recover anyway only needs its index files to exist."""
        names = self._files()
        present = set(names)
        self._all_bases = [b for b in (_offset_or_none(n) for n in names if files.is_log_file(n)) if b is not None]
        recover_from = None if self.had_clean_shutdown else _floor_base(names, self.recovery_point_checkpoint)
        for name in names:
            if files.is_index_file(name):
                self._delete_orphaned_index(name, present)
            elif files.is_log_file(name):
                base = _offset_or_none(name)
                if base is not None:
                    self.segments.add(self._load_segment(base, recover_from is not None and base >= recover_from,
                                                         present))

    def _delete_orphaned_index(self, name: str, present: set[str]) -> None:
        """An index file whose ``.log`` is gone (deleted first by an interrupted deletion) is useless."""
        off = _offset_or_none(name)
        if off is not None and os.path.basename(files.log_file(self.dir, off)) not in present:
            path = os.path.join(self.dir, name)
            self._problem(f"deleted the orphaned index file {name}, which has no log file")
            self._delete_if_exists(path)

    def _load_segment(self, base: int, will_recover: bool, present: set[str]) -> LogSegment:
        """Open one segment; rebuild its indexes (by recovering it) if they are missing or corrupt."""
        time_index_newly_created = os.path.basename(files.time_index_file(self.dir, base)) not in present
        # an inactive segment is opened on its first use: a start-up reads only what it recovers and the active tail
        seg = LogSegment.open(self.dir, base, self.config, file_already_exists=True, now_ms=self.now_ms,
                              file_io=self.file_io, lazy=base != self._all_bases[-1])
        try:
            if will_recover:
                # recovered by recover_log anyway; only make sure the index files exist
                if os.path.basename(files.offset_index_file(self.dir, base)) not in present:
                    raise FileNotFoundError(files.offset_index_file(self.dir, base))
                if time_index_newly_created:
                    seg.time_index.resize(0)
            else:
                seg.sanity_check(time_index_newly_created,
                                 os.path.basename(files.transaction_index_file(self.dir, base)) in present)
        except FileNotFoundError:
            # an unflushed segment is recovered anyway: its indexes are rebuilt then, nothing to tell
            if self.had_clean_shutdown or base < self.recovery_point_checkpoint:
                self._problem(f"no offset index for segment {base}: recovered the segment and rebuilt its indexes")
            self.stats.rebuilt_indexes += 1
            self._note_truncation(seg, self.recover_segment(seg))
        except CorruptIndexError as e:
            self._problem(f"corrupt index of segment {base} ({e}): recovered the segment and rebuilt its indexes")
            self.stats.rebuilt_indexes += 1
            self._note_truncation(seg, self.recover_segment(seg))
        return seg

    def _problem(self, text: str) -> None:
        self.stats.problems.append(text)

    def _note_truncation(self, seg: LogSegment, truncated: int, later_deleted: int = 0) -> None:
        """A recovery cut ``truncated`` bytes off ``seg`` (nothing to tell for 0)."""
        if truncated > 0:
            why = seg.recovery_problem or "an incomplete batch at its end"
            text = (f"segment {seg.base_offset} had {why}: truncated to offset {seg.read_next_offset()} "
                    f"({truncated} bytes)")
            if later_deleted:
                text += f", deleted the {later_deleted} later segments"
            self._problem(text)

    def recover_segment(self, segment: LogSegment) -> int:
        """Re-validate one segment batch by batch and rebuild its indexes; returns the bytes cut off its end.

        It gets a producer state manager of its own, rebuilt up to the segment's base offset (the final one is
        built from scratch once every segment is in place), and a snapshot is taken at its end so the next segment's
        recovery does not scan this one again.
        """
        psm = ProducerStateManager(self.dir, producer_id_expiration_ms=self.producer_state.producer_id_expiration_ms,
                                   max_transaction_timeout_ms=self.producer_state.max_transaction_timeout_ms,
                                   file_io=self.file_io)
        rebuild_producer_state(psm, self.segments, self.log_start_offset_checkpoint, segment.base_offset,
                               reload_from_clean_shutdown=False, now_ms=self.now_ms)
        size_before = segment.size
        nxt = self.segments.higher_segment(segment.base_offset)
        if nxt is None:
            later = [b for b in self._all_bases if b > segment.base_offset]
            nxt_base = later[0] if later else None
        else:
            nxt_base = nxt.base_offset
        truncated = segment.recover(psm, self.epoch_cache, max_batch_size=None, next_segment_base=nxt_base)
        psm.take_snapshot()
        self.stats.recovered_segments += 1
        self.stats.recovered_bytes += size_before
        self.stats.truncated_bytes += truncated
        return truncated

    # ---- phase 3: recovery -----------------------------------------------------------------------
    def recover_log(self) -> tuple[int, int]:
        """After an unclean shutdown, recover the segments the recovery point does not cover; make sure there is an
        active segment.  Returns ``(recovery point, next offset)``.

        The recovery point moves to the log end only after a clean shutdown that changed nothing: advancing it here
        would let a crash before the next flush skip recovering data that was never synced.
        """
        if not self.had_clean_shutdown:
            self._recover_unflushed_segments()
        log_end = self.delete_segments_if_log_start_greater_than_log_end()
        if self.segments.is_empty:
            # no segment left: a new, empty active segment starts at the log start offset
            self.segments.add(LogSegment.open(self.dir, self.log_start_offset_checkpoint, self.config,
                                              now_ms=self.now_ms, init_file_size=self.config.init_file_size,
                                              preallocate=self.config.preallocate, file_io=self.file_io))
        if self.had_clean_shutdown and log_end is not None:
            return log_end, log_end
        next_offset = log_end if log_end is not None else self.segments.last_segment.read_next_offset()
        return min(self.recovery_point_checkpoint, next_offset), next_offset

    def _recover_unflushed_segments(self) -> None:
        """Recover every segment from the recovery point on; at the first one that had to be cut, every later
        segment goes: data after a torn or corrupt batch cannot be trusted to follow it."""
        it = iter(self.segments.values(self.recovery_point_checkpoint, None))
        for seg in it:
            log.info("Recovering unflushed segment %d of %s", seg.base_offset, self.dir)
            try:
                truncated = self.recover_segment(seg)
            except (InvalidOffsetError, OSError, LogSegmentOffsetOverflowError) as e:
                truncated = seg.truncate_to(seg.base_offset, self.now_ms)  # Kafka: deleted, an empty one made
                seg.recovery_problem = f"an invalid offset ({e})"
            if truncated > 0:
                rest = list(it)
                self._note_truncation(seg, truncated, len(rest))
                self.remove_and_delete_segments(rest)
                self.stats.deleted_segments += len(rest)
                break

    def delete_segments_if_log_start_greater_than_log_end(self) -> int | None:
        """The log end offset if it is at or past the checkpointed log start offset, else None after deleting every
        segment: segment files were deleted behind the broker's back, and the log restarts at its start offset."""
        if self.segments.is_empty:
            return None
        end = self.segments.last_segment.read_next_offset()
        if end >= self.log_start_offset_checkpoint:
            return end
        self._problem(f"deleted all segments because the log end offset {end} is smaller than the log start offset "
                      f"{self.log_start_offset_checkpoint}")
        self.remove_and_delete_segments(self.segments.values())
        if self.epoch_cache is not None:
            self.epoch_cache.clear_and_flush()
        self.producer_state.truncate_fully_and_start_at(self.log_start_offset_checkpoint)
        return None

    def remove_and_delete_segments(self, to_delete: list[LogSegment]) -> None:
        """Drop segments and their producer snapshots.  During loading nothing reads the log yet, so files are
        deleted right away (after the ``.deleted`` rename, as a later deletion would be)."""
        for s in to_delete:
            self.segments.remove(s.base_offset)
            s.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
        if to_delete:
            self.file_io.fsync_dir(self.dir)
        for s in to_delete:
            s.delete_if_exists()
            self.producer_state.remove_and_mark_snapshot_for_deletion(s.base_offset)
            self._delete_if_exists(files.producer_snapshot_file(self.dir, s.base_offset) + files.DELETED_FILE_SUFFIX)

    def _delete_if_exists(self, path: str) -> None:
        self._changed()
        try:
            self.file_io.unlink(path)
        except FileNotFoundError:
            pass  # already gone: deleting is what was wanted (Files.deleteIfExists)


def _offset_or_none(name: str) -> int | None:
    """The offset a segment file's name starts with, or None for a name that does not start with one."""
    try:
        return files.offset_from_file_name(name)
    except ValueError:
        return None


def _floor_base(sorted_names: list[str], offset: int) -> int:
    """Base offset of the segment that holds ``offset`` (the largest ``.log`` base <= offset), or 0."""
    best = 0
    for n in sorted_names:
        if files.is_log_file(n):
            b = _offset_or_none(n)
            if b is not None and b <= offset:
                best = b
    return best


def rebuild_producer_state(psm: ProducerStateManager, segments: LogSegments, log_start_offset: int,
                           last_offset: int, *, reload_from_clean_shutdown: bool, now_ms: int) -> None:
    """``UnifiedLog.rebuildProducerState``: latest snapshot at or below ``last_offset`` plus a scan of the log
    from there (batch headers only; control batches are decoded for their COMMIT/ABORT marker)."""
    offsets_to_snapshot: list[int | None] = []
    if not segments.is_empty:
        last_base = segments.last_segment.base_offset
        lower = segments.lower_segment(last_base)
        offsets_to_snapshot.append(lower.base_offset if lower is not None else None)
        offsets_to_snapshot.append(last_base)
    offsets_to_snapshot.append(last_offset)

    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for off in offsets_to_snapshot:
            if off is not None:
                psm.update_map_end_offset(off)
                psm.take_snapshot()
        return

    is_empty_before = psm.is_empty() and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, now_ms)
    if last_offset > psm.map_end_offset and not is_empty_before:
        seg_of_last = segments.floor_segment(last_offset)
        for seg in segments.values(psm.map_end_offset, last_offset):
            start = max(seg.base_offset, psm.map_end_offset, log_start_offset)
            psm.update_map_end_offset(start)
            if seg.base_offset in offsets_to_snapshot:
                psm.take_snapshot()
            max_position = seg.size
            if seg is seg_of_last:
                lop = seg.translate_offset(last_offset)
                max_position = lop.position if lop is not None else seg.size
            start_pos_info = seg.translate_offset(start)
            if start_pos_info is None:
                continue
            psm.load_producers_from_batches(_batches_with_bytes(seg, start_pos_info.position, max_position))
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot()


def _batches_with_bytes(seg: LogSegment, start: int, end: int):
    for pos, h in seg.log.batches_from(start, end):
        if h.producer_id < 0:
            continue
        if h.is_control:
            yield h, seg.log.read(pos, h.batch_length + LOG_OVERHEAD), 0
        else:
            yield h, None, 0
