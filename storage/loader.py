"""Startup of one partition log (Kafka's ``LogLoader.load`` and ``UnifiedLog.rebuildProducerState``).

1. Remove ``.deleted`` and ``.cleaned`` files; drop ``.swap`` files at or above the smallest ``.cleaned``
   offset (an unfinished split); finish interrupted swaps: delete the segments a swap replaces, rename
   ``.swap`` files into place.
2. Load segments in ascending order; delete orphaned indexes; sanity-check indexes and rebuild those that
   fail (missing, wrong size, entries outside the log).
3. Without the clean-shutdown marker, recover every segment from the recovery point on: CRC-check every
   batch, rebuild indexes, truncate at the first invalid byte and delete every later segment.
4. Rebuild the leader-epoch cache's tail and the producer state (from the latest snapshot plus the log).
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from protocol.errors import ProtocolError
from protocol.records import LOG_OVERHEAD

from . import files, fileio
from .config import LogConfig
from .epoch import LeaderEpochFileCache
from .errors import CorruptIndexError, InvalidOffsetError, LogSegmentOffsetOverflowError
from .producer_state import ProducerStateManager
from .scheduler import Scheduler
from .segment import LogOffsetMetadata, LogSegment
from .segments import LogSegments

log = logging.getLogger(__name__)

_SNAPSHOT_DELETE_SUFFIX = ".checkpoint.deleted"

__all__ = ["load_log", "LoadedLogOffsets", "rebuild_producer_state"]


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


def load_log(dir: str, config: LogConfig, *, log_start_offset_checkpoint: int, recovery_point_checkpoint: int,
             had_clean_shutdown: bool, epoch_cache: LeaderEpochFileCache | None,
             producer_state: ProducerStateManager, scheduler: Scheduler, now_ms: int,
             stats: LoadStats | None = None) -> tuple[LogSegments, LoadedLogOffsets]:
    stats = stats or LoadStats()
    segments = LogSegments()
    swap_files = _remove_temp_files_and_collect_swap_files(dir)

    # finish interrupted swaps
    min_swap, max_swap = None, None
    for swap in swap_files:
        unswapped = files.replace_suffix(swap, files.SWAP_FILE_SUFFIX, "")
        if not files.is_log_file(unswapped):
            continue
        base = files.offset_from_file_name(os.path.basename(swap))
        seg = LogSegment.open(dir, base, config, file_already_exists=True, suffix=files.SWAP_FILE_SUFFIX,
                              now_ms=now_ms)
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
    if min_swap is not None:
        for name in os.listdir(dir):
            path = os.path.join(dir, name)
            if not os.path.isfile(path) or name.endswith(files.SWAP_FILE_SUFFIX):
                continue
            try:
                off = files.offset_from_file_name(name)
            except ValueError:
                continue
            if min_swap <= off < max_swap:
                log.info("Deleting segment files %s that is compacted but has not been deleted yet.", name)
                fileio.current.unlink(path)
    for name in sorted(os.listdir(dir)):
        if name.endswith(files.SWAP_FILE_SUFFIX) and os.path.isfile(os.path.join(dir, name)):
            p = os.path.join(dir, name)
            log.info("Recovering file %s by renaming from .swap files.", name)
            fileio.current.rename(p, files.replace_suffix(p, files.SWAP_FILE_SUFFIX, ""))
            stats.swaps_completed += 1
    if swap_files:
        fileio.current.fsync_dir(dir)

    def recover_segment(segment: LogSegment) -> int:
        psm = ProducerStateManager(dir, producer_id_expiration_ms=producer_state.producer_id_expiration_ms,
                                   max_transaction_timeout_ms=producer_state.max_transaction_timeout_ms)
        rebuild_producer_state(psm, segments, log_start_offset_checkpoint, segment.base_offset,
                               reload_from_clean_shutdown=False, now_ms=now_ms)
        size_before = segment.size
        nxt = segments.higher_segment(segment.base_offset)
        if nxt is None:
            later = [b for b in all_bases if b > segment.base_offset]
            nxt_base = later[0] if later else None
        else:
            nxt_base = nxt.base_offset
        truncated = segment.recover(psm, epoch_cache, max_batch_size=None, next_segment_base=nxt_base)
        psm.take_snapshot()
        stats.recovered_segments += 1
        stats.recovered_bytes += size_before
        stats.truncated_bytes += truncated
        return truncated

    # load segment files in ascending order
    names = sorted(n for n in os.listdir(dir) if os.path.isfile(os.path.join(dir, n)))
    all_bases = []
    for n in names:
        if files.is_log_file(n):
            try:
                all_bases.append(files.offset_from_file_name(n))
            except ValueError:
                pass
    for name in names:
        path = os.path.join(dir, name)
        if files.is_index_file(name):
            try:
                off = files.offset_from_file_name(name)
            except ValueError:
                continue
            if not os.path.exists(files.log_file(dir, off)):
                log.warning("Found an orphaned index file %s, with no corresponding log file.", path)
                try:
                    fileio.current.unlink(path)
                except FileNotFoundError:
                    pass
        elif files.is_log_file(name):
            try:
                base = files.offset_from_file_name(name)
            except ValueError:
                continue
            time_index_newly_created = not os.path.exists(files.time_index_file(dir, base))
            seg = LogSegment.open(dir, base, config, file_already_exists=True, now_ms=now_ms)
            will_recover = not had_clean_shutdown and base >= _floor_base(names, recovery_point_checkpoint)
            try:
                if will_recover:
                    # recovered below anyway; only make sure the index files exist
                    if not os.path.exists(files.offset_index_file(dir, base)):
                        raise FileNotFoundError(files.offset_index_file(dir, base))
                    if time_index_newly_created:
                        seg.time_index.resize(0)
                else:
                    seg.sanity_check(time_index_newly_created)
            except FileNotFoundError:
                if had_clean_shutdown or base < recovery_point_checkpoint:
                    log.error("Could not find offset index file corresponding to log file %s, recovering segment "
                              "and rebuilding index files...", seg.log.path)
                stats.rebuilt_indexes += 1
                recover_segment(seg)
            except CorruptIndexError as e:
                log.warning("Found a corrupted index file corresponding to log file %s due to %s, recovering "
                            "segment and rebuilding index files...", seg.log.path, e)
                stats.rebuilt_indexes += 1
                recover_segment(seg)
            segments.add(seg)

    # recover the unflushed tail
    if not had_clean_shutdown:
        unflushed = segments.values(recovery_point_checkpoint, None)
        it = iter(unflushed)
        for seg in it:
            log.info("Recovering unflushed segment %d of %s", seg.base_offset, dir)
            try:
                truncated = recover_segment(seg)
            except (InvalidOffsetError, OSError, LogSegmentOffsetOverflowError) as e:
                log.warning("Found invalid offset during recovery (%s). Deleting the corrupt segment and creating "
                            "an empty one with starting offset %d", e, seg.base_offset)
                truncated = seg.truncate_to(seg.base_offset, now_ms)
            if truncated > 0:
                rest = list(it)
                log.warning("Corruption found in segment %d of %s, truncating to offset %d; deleting %d later "
                            "segments", seg.base_offset, dir, seg.read_next_offset(), len(rest))
                _remove_and_delete_segments(dir, segments, rest, producer_state)
                stats.deleted_segments += len(rest)
                break

    # deleteSegmentsIfLogStartGreaterThanLogEnd
    log_end: int | None = None
    if not segments.is_empty:
        end = segments.last_segment.read_next_offset()
        if end >= log_start_offset_checkpoint:
            log_end = end
        else:
            log.warning("Deleting all segments because logEndOffset (%d) is smaller than logStartOffset %d.",
                        end, log_start_offset_checkpoint)
            _remove_and_delete_segments(dir, segments, segments.values(), producer_state)
            if epoch_cache is not None:
                epoch_cache.clear_and_flush()
            producer_state.truncate_fully_and_start_at(log_start_offset_checkpoint)
    if segments.is_empty:
        segments.add(LogSegment.open(dir, log_start_offset_checkpoint, config, now_ms=now_ms,
                                     init_file_size=config.init_file_size, preallocate=config.preallocate))
    if had_clean_shutdown and log_end is not None:
        recovery_point, next_offset = log_end, log_end
    else:
        next_offset = log_end if log_end is not None else segments.last_segment.read_next_offset()
        recovery_point = min(recovery_point_checkpoint, next_offset)

    # the active segment gets room for more index entries
    segments.last_segment.resize_indexes(config.max_index_size)

    if epoch_cache is not None:
        epoch_cache.truncate_from_end(next_offset)
    new_log_start = max(log_start_offset_checkpoint, segments.first_segment.base_offset)
    if epoch_cache is not None:
        epoch_cache.truncate_from_start(log_start_offset_checkpoint)

    if not producer_state.is_empty():
        raise RuntimeError("Producer state must be empty during log initialization")
    producer_state.remove_stray_snapshots(segments.base_offsets())
    rebuild_producer_state(producer_state, segments, new_log_start, next_offset,
                           reload_from_clean_shutdown=had_clean_shutdown, now_ms=now_ms)
    active = segments.last_segment
    return segments, LoadedLogOffsets(new_log_start, recovery_point,
                                      LogOffsetMetadata(next_offset, active.base_offset, active.size))


def _floor_base(sorted_names: list[str], offset: int) -> int:
    """Base offset of the segment that holds ``offset`` (the largest ``.log`` base <= offset), or 0."""
    best = 0
    for n in sorted_names:
        if files.is_log_file(n):
            try:
                b = files.offset_from_file_name(n)
            except ValueError:
                continue
            if b <= offset:
                best = b
    return best


def _remove_temp_files_and_collect_swap_files(dir: str) -> list[str]:
    swap_files, cleaned_files = [], []
    min_cleaned = None
    for name in os.listdir(dir):
        path = os.path.join(dir, name)
        if not os.path.isfile(path):
            continue
        if name.endswith(files.DELETED_FILE_SUFFIX) and not name.endswith(_SNAPSHOT_DELETE_SUFFIX):
            log.debug("Deleting stray temporary file %s", path)
            try:
                fileio.current.unlink(path)
            except FileNotFoundError:
                pass
        elif name.endswith(files.CLEANED_FILE_SUFFIX):
            try:
                off = files.offset_from_file_name(name)
            except ValueError:
                off = None
            if off is not None:
                min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
            cleaned_files.append(path)
        elif name.endswith(files.SWAP_FILE_SUFFIX):
            swap_files.append(path)
    valid = []
    for p in swap_files:
        try:
            off = files.offset_from_file_name(os.path.basename(p))
        except ValueError:
            continue
        if min_cleaned is not None and off >= min_cleaned:
            log.debug("Deleting invalid swap file %s minCleanedFileOffset: %s", p, min_cleaned)
            try:
                fileio.current.unlink(p)
            except FileNotFoundError:
                pass
        else:
            valid.append(p)
    for p in cleaned_files:
        log.debug("Deleting stray .clean file %s", p)
        try:
            fileio.current.unlink(p)
        except FileNotFoundError:
            pass
    return valid


def _remove_and_delete_segments(dir: str, segments: LogSegments, to_delete: list[LogSegment],
                                producer_state: ProducerStateManager) -> None:
    """During loading nothing reads the log yet, so files are deleted right away (after the .deleted rename)."""
    for s in to_delete:
        segments.remove(s.base_offset)
        s.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
    if to_delete:
        fileio.current.fsync_dir(dir)
    for s in to_delete:
        s.delete_if_exists()
        producer_state.remove_and_mark_snapshot_for_deletion(s.base_offset)
        try:
            fileio.current.unlink(files.producer_snapshot_file(dir, s.base_offset) + files.DELETED_FILE_SUFFIX)
        except FileNotFoundError:
            pass


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
