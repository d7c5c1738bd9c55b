"""Log compaction (Kafka's ``LogCleaner``, ``LogCleanerManager``, ``Cleaner``).

For a log with ``cleanup.policy`` containing ``compact``:

1. choose the filthiest log whose dirty ratio (bytes after the cleaner checkpoint / total bytes in closed
   segments) exceeds ``min.cleanable.dirty.ratio``, or whose oldest dirty batch is older than
   ``max.compaction.lag.ms``;
2. the dirty section ends at the first of: the active segment, the last stable offset, the first segment
   younger than ``min.compaction.lag.ms``;
3. build a key -> latest offset map over the dirty section (aborted transactions' records left out);
4. rewrite the closed segments from the start of the log up to the end of that map, group by group, into
   ``.cleaned`` segments keeping a record only if it is the latest for its key; offsets never change
   (gaps are fine).  A tombstone (null value) first gets a delete horizon (now + ``delete.retention.ms``,
   stored in the batch's base timestamp with attribute bit 6, as Kafka does) and is dropped by a later
   cleaning once that horizon has passed;
5. swap the cleaned segment in: ``.cleaned`` -> ``.swap`` -> old segments renamed ``.deleted`` -> ``.swap``
   renamed to the final names.  A crash at any point is finished or rolled back by the loader;
6. record the end of the map in ``cleaner-offset-checkpoint``.

Batches holding the last sequence (or, for a marker, the epoch) of an active producer are kept (emptied if need
be), as is the last batch of each cleaning round.

Transactions, as Kafka's ``CleanedTransactionMetadata``: the ``.txnindex`` entries of the log tell which data
batches belong to an aborted transaction; those never enter the offset map and are dropped when cleaned.  A marker
(COMMIT/ABORT control batch) stays while its transaction still has a data batch in the log; once none is left it
gets a delete horizon (now + ``delete.retention.ms``, written into the batch header as for tombstones, KIP-534),
and a pass after the horizon removes it.  Both stay, emptied, while they hold an active producer's last sequence
or epoch.  A cleaned segment's ``.txnindex`` holds the entries of the ABORT markers it keeps whose transaction
still had data when it was cleaned.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from protocol.errors import ProtocolError
from protocol.record_codec import ControlRecordType, Record, build_batch, decode_batch, parse_control_record_type
from protocol.records import LOG_OVERHEAD, BatchScan

from . import files
from .checkpoints import OffsetCheckpointFile
from .config import LogManagerConfig
from .errors import KafkaStorageError
from .fileio import FileIO
from .log import Log
from .segment import LogSegment
from .txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

__all__ = ["LogCleaner", "Cleaner", "LogToClean", "CleanerStats", "CleaningAborted", "CleanedTransactionMetadata"]

TopicPartition = tuple[str, int]
_READ_CHUNK = 4 * 1024 * 1024
_LONG_MAX = 2**63 - 1


class CleaningAborted(Exception):
    """Cleaning of a partition was aborted (truncation, deletion, shutdown)."""


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_messages_read: int = 0
    start_ms: float = field(default_factory=time.monotonic)
    end_ms: float = 0.0

    @property
    def elapsed_secs(self) -> float:
        return max((self.end_ms or time.monotonic()) - self.start_ms, 1e-9)


@dataclass
class LogToClean:
    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    uncleanable_offset: int
    need_compaction_now: bool = False

    def __post_init__(self) -> None:
        self.clean_bytes = sum(s.size for s in self.log.log_segments(-1, self.first_dirty_offset))
        non_active = self.log.segments.non_active_log_segments_from(self.uncleanable_offset)
        first_uncleanable_seg = non_active[0] if non_active else self.log.active_segment
        self.first_uncleanable_offset = first_uncleanable_seg.base_offset
        lo = min(self.first_dirty_offset, self.first_uncleanable_offset)
        self.cleanable_bytes = sum(s.size for s in self.log.log_segments(lo, self.first_uncleanable_offset)) \
            if lo < self.first_uncleanable_offset else 0
        self.total_bytes = self.clean_bytes + self.cleanable_bytes
        self.cleanable_ratio = self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


class OffsetMap:
    """key -> latest offset, bounded like Kafka's ``SkimpyOffsetMap`` (24 bytes per slot)."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(1, memory // 24)
        self.max_size = max(1, int(self.slots * load_factor))
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self._map.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots


class CleanedTransactionMetadata:
    """The transactions the cleaner is inside of as it walks the log in offset order (Kafka's
    ``CleanedTransactionMetadata``): it says which data batches are aborted and which markers may go, and writes the
    kept ABORT markers' entries into the cleaned segment's ``.txnindex``.  Fed the log's ``AbortedTxn`` entries of
    each range before that range's batches."""

    def __init__(self) -> None:
        self.ongoing_committed: set[int] = set()  # producers with a non-aborted transactional batch read
        # producer id -> [its aborted transaction, last offset of a batch of it read (None: none read)]
        self.ongoing_aborted: dict[int, list] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            heapq.heappush(self._aborted, (t.first_offset, t.last_offset, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch_read(self, h, records: list[Record]) -> bool:
        """True if the control batch may be discarded (``onControlBatchRead``)."""
        self._consume_aborted_up_to(h.base_offset + h.last_offset_delta)
        if not records:
            return True  # a control batch emptied by an earlier cleaning
        control_type = parse_control_record_type(records[0].key)
        if control_type == ControlRecordType.ABORT:
            aborted = self.ongoing_aborted.pop(h.producer_id, None)
            if aborted is not None and aborted[1] is not None:  # its data is still there: keep it, indexed
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted[0])
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if h.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(h.producer_id)
                return False
            return True
        return False

    def on_batch_read(self, h) -> bool:
        """True if the data batch belongs to an aborted transaction (``onBatchRead``)."""
        self._consume_aborted_up_to(h.base_offset + h.last_offset_delta)
        if not h.is_transactional:
            return False
        aborted = self.ongoing_aborted.get(h.producer_id)
        if aborted is not None:
            aborted[1] = h.base_offset + h.last_offset_delta
            return True
        self.ongoing_committed.add(h.producer_id)
        return False


class Cleaner:
    """Cleans one log at a time (``Cleaner``).  ``check_done(tp)`` raises :class:`CleaningAborted`."""

    def __init__(self, offset_map_memory: int, load_factor: float = 0.9,
                 check_done: Callable[[TopicPartition], None] = lambda tp: None) -> None:
        self.offset_map = OffsetMap(offset_map_memory, load_factor)
        self.check_done = check_done

    # ---- top level -------------------------------------------------------------------------------
    def clean(self, cleanable: LogToClean, now_ms: int) -> tuple[int, CleanerStats]:
        lg = cleanable.log
        stats = CleanerStats()
        upper = cleanable.first_uncleanable_offset
        self.build_offset_map(lg, cleanable.first_dirty_offset, upper, stats)
        end_offset = self.offset_map.latest_offset + 1
        groups = self.group_segments_by_size(lg.log_segments(0, end_offset) if end_offset > 0 else [],
                                             lg.config.segment_bytes, lg.config.max_index_size, upper)
        active = lg.last_records_of_active_producers()
        txn_metadata = CleanedTransactionMetadata()  # carried from group to group
        for group in groups:
            self.clean_segments(lg, group, now_ms, stats, active, upper, txn_metadata)
        stats.end_ms = time.monotonic()
        return end_offset, stats

    # ---- offset map ------------------------------------------------------------------------------
    def build_offset_map(self, lg: Log, start: int, end: int, stats: CleanerStats) -> None:
        m = self.offset_map
        m.clear()
        dirty = lg.log_segments(start, end) if end > start else []
        nexts = [s.base_offset for s in dirty[1:]] + [end]
        tp = (lg.topic, lg.partition)
        txn_metadata = CleanedTransactionMetadata()
        if dirty:
            txn_metadata.add_aborted_transactions(lg.collect_aborted_transactions(start, end))
        for seg, nxt in zip(dirty, nexts):
            self.check_done(tp)
            if self._build_offset_map_for_segment(tp, seg, start, nxt, stats, txn_metadata):
                break

    def _build_offset_map_for_segment(self, tp: TopicPartition, seg: LogSegment, start: int, next_start: int,
                                      stats: CleanerStats, txn_metadata: CleanedTransactionMetadata) -> bool:
        m = self.offset_map
        position = seg.offset_index.lookup(start)[1]
        size = seg.size
        for data in _read_chunks(seg, position, size):
            self.check_done(tp)
            for pos, h in BatchScan(data):
                stats.map_messages_read += max(h.records_count, 0)
                if h.is_control:
                    txn_metadata.on_control_batch_read(h, decode_batch(data, pos, verify_crc=False)[1])
                elif not txn_metadata.on_batch_read(h):  # an aborted batch's keys stay out of the map
                    _, records = decode_batch(data, pos, verify_crc=False)
                    for r in records:
                        if r.key is not None and r.offset >= start:
                            if len(m) < m.max_size:
                                m.put(r.key, r.offset)
                            else:  # full: the map ends before this record, as Kafka's (even for a known key)
                                return True
                last = h.base_offset + h.last_offset_delta
                if last >= start:
                    m.update_latest_offset(last)
        m.update_latest_offset(next_start - 1)
        return False

    # ---- grouping --------------------------------------------------------------------------------
    @staticmethod
    def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                               first_uncleanable_offset: int) -> list[list[LogSegment]]:
        grouped = []
        segs = list(segments)
        while segs:
            group = [segs.pop(0)]
            log_size = group[0].size
            index_size = group[0].offset_index.size_in_bytes()
            time_index_size = group[0].time_index.size_in_bytes()
            while segs:
                nxt = segs[0]
                last_offset_for_first = (segs[1].base_offset - 1) if len(segs) > 1 else first_uncleanable_offset - 1
                if (log_size + nxt.size <= max_size
                        and index_size + nxt.offset_index.size_in_bytes() <= max_index_size
                        and time_index_size + nxt.time_index.size_in_bytes() <= max_index_size
                        and (nxt.size == 0 or last_offset_for_first - group[-1].base_offset <= 2**31 - 1)):
                    group.append(segs.pop(0))
                    log_size += nxt.size
                    index_size += nxt.offset_index.size_in_bytes()
                    time_index_size += nxt.time_index.size_in_bytes()
                else:
                    break
            grouped.append(group)
        return grouped

    # ---- rewriting -------------------------------------------------------------------------------
    def clean_segments(self, lg: Log, segments: list[LogSegment], now_ms: int, stats: CleanerStats,
                       active_producers: dict[int, tuple[int | None, int]], upper_bound_of_round: int,
                       txn_metadata: CleanedTransactionMetadata) -> None:
        base = segments[0].base_offset
        for p in (files.log_file(lg.dir, base, files.CLEANED_FILE_SUFFIX),
                  files.offset_index_file(lg.dir, base, files.CLEANED_FILE_SUFFIX),
                  files.time_index_file(lg.dir, base, files.CLEANED_FILE_SUFFIX),
                  files.transaction_index_file(lg.dir, base, files.CLEANED_FILE_SUFFIX)):
            try:
                lg.file_io.unlink(p)
            except FileNotFoundError:
                pass
        cleaned = LogSegment.open(lg.dir, base, lg.config, suffix=files.CLEANED_FILE_SUFFIX, now_ms=now_ms,
                                  file_io=lg.file_io)
        tp = (lg.topic, lg.partition)
        txn_metadata.cleaned_index = cleaned.txn_index
        try:
            for i, seg in enumerate(segments):
                # the entries of the whole segment's range: the cleaned index is rebuilt from them
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else seg.read_next_offset()
                txn_metadata.add_aborted_transactions(lg.collect_aborted_transactions(seg.base_offset, upper))
                self._clean_into(tp, seg, cleaned, lg.config.delete_retention_ms, now_ms, stats, active_producers,
                                 upper_bound_of_round, txn_metadata)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified(segments[-1].last_modified())
            self.check_done(tp)
        except Exception:
            # before the swap starts the .cleaned files are only ours: remove them (Kafka does this on abort)
            try:
                cleaned.close_handlers()
                cleaned.delete_if_exists()
            except Exception:  # noqa: BLE001 - cleanup: the original error is raised
                pass
            raise
        # From here on the files may already be .swap or final: never delete them on failure; a failed swap
        # takes the partition offline and the loader completes it on restart.
        log.info("Swapping in cleaned segment %s for segment(s) %s in log %s", cleaned, segments, lg)
        lg.replace_segments([cleaned], segments)

    def _clean_into(self, tp: TopicPartition, source: LogSegment, dest: LogSegment, delete_retention_ms: int,
                    now_ms: int, stats: CleanerStats, active_producers: dict[int, tuple[int | None, int]],
                    upper_bound_of_round: int, txn_metadata: CleanedTransactionMetadata) -> None:
        """Copy what stays of ``source`` into ``dest`` (``cleanInto`` with its ``RecordFilter`` and
        ``MemoryRecords.filterTo``)."""
        m = self.offset_map
        for data in _read_chunks(source, 0, source.size):
            self.check_done(tp)
            out = bytearray()
            max_ts, shallow, max_offset = -1, -1, -1
            for pos, h in BatchScan(data):
                stats.bytes_read += h.batch_length + LOG_OVERHEAD
                stats.messages_read += max(h.records_count, 0)
                last = h.base_offset + h.last_offset_delta
                horizon = h.delete_horizon_ms
                # checkBatchRetention: aborted data goes; a marker once its transaction has no data left and its
                # horizon has passed
                if h.is_control:
                    records = decode_batch(data, pos, verify_crc=False)[1]
                    can_discard = txn_metadata.on_control_batch_read(h, records)
                    discard_records = can_discard and horizon is not None and horizon <= now_ms
                else:
                    can_discard = discard_records = txn_metadata.on_batch_read(h)
                    records = [] if discard_records else decode_batch(data, pos, verify_crc=False)[1]
                is_last_of_producer = False
                if h.producer_id >= 0 and h.producer_id in active_producers:
                    last_data, epoch = active_producers[h.producer_id]
                    if last_data is not None:
                        is_last_of_producer = last == last_data
                    else:
                        is_last_of_producer = h.is_control and h.producer_epoch == epoch
                retain_empty = is_last_of_producer or last + 1 == upper_bound_of_round
                if discard_records:
                    retained: list[Record] = []
                elif h.is_control:
                    retained = records
                else:
                    retained = [r for r in records if self._should_retain_record(m, r, horizon, now_ms)]
                # a kept tombstone, or a marker whose transaction is empty, gets a delete horizon once
                need_horizon = horizon is None and (
                    (h.is_control and can_discard) or any(r.value is None for r in retained))
                stats.messages_written += len(retained)
                if retained and len(retained) == len(records) and not need_horizon:
                    retained_batch = bytes(data[pos:pos + h.batch_length + LOG_OVERHEAD])
                    batch_max_ts = h.max_timestamp
                elif retained:
                    new_horizon = min(now_ms + delete_retention_ms, _LONG_MAX) if need_horizon else horizon
                    retained_batch = build_batch(
                        retained, base_offset=h.base_offset, compression=h.compression,
                        producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                        base_sequence=h.base_sequence, is_transactional=h.is_transactional,
                        is_control=h.is_control, timestamp_type=h.timestamp_type,
                        partition_leader_epoch=h.partition_leader_epoch, last_offset_delta=h.last_offset_delta,
                        delete_horizon_ms=new_horizon,
                        max_timestamp=h.max_timestamp if h.timestamp_type == 1 else None)
                    batch_max_ts = max((r.timestamp for r in retained), default=-1) \
                        if h.timestamp_type == 0 else h.max_timestamp
                elif retain_empty:  # the header alone keeps the producer's sequence and epoch (or the last offset)
                    retained_batch = build_batch(
                        [], base_offset=h.base_offset, producer_id=h.producer_id,
                        producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                        is_transactional=h.is_transactional, is_control=h.is_control,
                        timestamp_type=h.timestamp_type, partition_leader_epoch=h.partition_leader_epoch,
                        last_offset_delta=h.last_offset_delta, max_timestamp=h.max_timestamp)
                    batch_max_ts = h.max_timestamp
                else:
                    continue
                out += retained_batch
                stats.bytes_written += len(retained_batch)
                if batch_max_ts > max_ts:
                    max_ts, shallow = batch_max_ts, last
                max_offset = last
            if out:
                dest.append(max_offset, max_ts, shallow, out)

    @staticmethod
    def _should_retain_record(m: OffsetMap, r: Record, delete_horizon: int | None, now_ms: int) -> bool:
        if r.offset > m.latest_offset:
            return True
        if r.key is None:
            return False  # compacted topics require keys; Kafka drops keyless records here
        found = m.get(r.key)
        latest_for_key = r.offset >= found
        if r.value is not None:
            return latest_for_key
        # a tombstone: keep until its batch's delete horizon has passed
        keep_delete = delete_horizon is None or now_ms < delete_horizon
        return latest_for_key and keep_delete


def _read_chunks(seg: LogSegment, start: int, end: int) -> Iterable[bytes]:
    """Whole batches of ``seg`` in ``[start, end)``, in chunks of about 4 MiB (a batch never splits)."""
    handle = seg.log.handle()  # held while reading
    fd = handle.fd
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(_READ_CHUNK, end - pos), pos)
        scan = BatchScan(chunk)
        consumed = 0
        for off, h in scan:
            consumed = off + h.batch_length + LOG_OVERHEAD
        if consumed == 0:
            head = os.pread(fd, 12, pos)
            if len(head) < 12:
                return
            blen = int.from_bytes(head[8:12], "big", signed=True)
            if blen < 49 or pos + 12 + blen > end:
                return
            chunk = os.pread(fd, blen + 12, pos)
            consumed = len(chunk)
            yield chunk
        else:
            yield chunk[:consumed] if consumed < len(chunk) else chunk
        pos += consumed


class LogCleaner:
    """The cleaner manager and its background thread(s).

    ``logs()`` returns the current ``{(topic, partition): Log}`` map; ``log_dirs`` are the directories whose
    ``cleaner-offset-checkpoint`` files hold each partition's first dirty offset.
    """

    def __init__(self, config: LogManagerConfig, logs: Callable[[], dict[TopicPartition, Log]],
                 log_dirs: Iterable[str], *, file_io: FileIO | None = None) -> None:
        self.config = config
        self._logs = logs
        self._lock = threading.RLock()
        # the checkpoints' file I/O; a cleaned segment is written with its log's (Log.file_io)
        self.file_io = file_io if file_io is not None else FileIO()
        self._checkpoints = {
            os.path.abspath(d): OffsetCheckpointFile(os.path.join(d, files.CLEANER_OFFSET_CHECKPOINT_FILE),
                                                     file_io=self.file_io)
            for d in log_dirs}
        self.in_progress: dict[TopicPartition, str] = {}  # "cleaning" | "aborted" | "paused"
        self._paused_count: dict[TopicPartition, int] = {}
        self.uncleanable: set[TopicPartition] = set()
        threads = max(1, config.log_cleaner_threads)
        self.cleaner = Cleaner(config.log_cleaner_dedupe_buffer_size // threads,
                               config.log_cleaner_io_buffer_load_factor, self._check_done)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.last_stats: CleanerStats | None = None
        self._cond = threading.Condition(self._lock)

    # ---- checkpoints -----------------------------------------------------------------------------
    def add_log_dir(self, d: str) -> None:
        with self._lock:
            self._checkpoints.setdefault(os.path.abspath(d),
                                         OffsetCheckpointFile(os.path.join(d, files.CLEANER_OFFSET_CHECKPOINT_FILE),
                                                              file_io=self.file_io))

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for cp in self._checkpoints.values():
            try:
                out.update(cp.read())
            except KafkaStorageError as e:
                log.error("Failed to access checkpoint file %s: %s", cp.path, e)
        return out

    def update_checkpoints(self, data_dir: str, remove: TopicPartition | None = None,
                           update: tuple[TopicPartition, int] | None = None) -> None:
        with self._lock:
            cp = self._checkpoints.get(os.path.abspath(data_dir))
            if cp is None:
                return
            logs = self._logs()
            current = {tp: o for tp, o in cp.read().items() if tp in logs}
            if remove is not None:
                current.pop(remove, None)
            if update is not None:
                current[update[0]] = update[1]
            cp.write(current)

    def maybe_truncate_checkpoint(self, data_dir: str, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            cp = self._checkpoints.get(os.path.abspath(data_dir))
            if cp is None:
                return
            existing = cp.read()
            if tp in existing and existing[tp] > offset:
                existing[tp] = offset
                cp.write(existing)

    # ---- abort / pause ---------------------------------------------------------------------------
    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop.is_set():
            raise CleaningAborted(f"cleaner shutting down while cleaning {tp}")
        with self._lock:
            if self.in_progress.get(tp) == "aborted":
                raise CleaningAborted(f"cleaning of {tp} aborted")

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float = 60.0) -> None:
        """Abort cleaning of ``tp`` if in progress, and keep it from being cleaned until resumed."""
        with self._cond:
            state = self.in_progress.get(tp)
            if state == "cleaning":
                self.in_progress[tp] = "aborted"
                deadline = time.monotonic() + timeout_s
                while self.in_progress.get(tp) == "aborted" and time.monotonic() < deadline:
                    self._cond.wait(0.05)
            self._paused_count[tp] = self._paused_count.get(tp, 0) + 1
            self.in_progress[tp] = "paused"

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in tps:
                n = self._paused_count.get(tp, 0) - 1
                if n <= 0:
                    self._paused_count.pop(tp, None)
                    if self.in_progress.get(tp) == "paused":
                        del self.in_progress[tp]
                else:
                    self._paused_count[tp] = n
            self._cond.notify_all()

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.abort_and_pause_cleaning(tp)
        self.resume_cleaning([tp])

    def pause_cleaning_for_non_compacted(self) -> list[tuple[TopicPartition, Log]]:
        with self._lock:
            out = []
            for tp, lg in self._logs().items():
                if not lg.config.compact and tp not in self.in_progress:
                    self.in_progress[tp] = "paused"
                    self._paused_count[tp] = self._paused_count.get(tp, 0) + 1
                    out.append((tp, lg))
            return out

    # ---- choosing --------------------------------------------------------------------------------
    def cleanable_offsets(self, lg: Log, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
        """``(first dirty offset, first uncleanable dirty offset, force checkpoint update)``."""
        log_start = lg.log_start_offset
        checkpointed = last_clean_offset if last_clean_offset is not None else log_start
        force = False
        if checkpointed < log_start:
            first_dirty, force = log_start, True
        elif checkpointed > lg.log_end_offset:
            log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger than the log end "
                        "offset %d. Resetting to the log start offset %d.", lg.dir, checkpointed, lg.log_end_offset,
                        log_start)
            first_dirty, force = log_start, True
        else:
            first_dirty = checkpointed
        candidates = [lg.last_stable_offset, lg.active_segment.base_offset]
        lag = max(lg.config.min_compaction_lag_ms, 0)
        if lag > 0:
            for s in lg.segments.non_active_log_segments_from(first_dirty):
                if s.largest_timestamp() > now_ms - lag:
                    candidates.append(s.base_offset)
                    break
        first_uncleanable = min(candidates)
        return first_dirty, max(first_dirty, first_uncleanable), force

    @staticmethod
    def max_compaction_delay(lg: Log, first_dirty: int, now_ms: int) -> int:
        segs = lg.segments.non_active_log_segments_from(first_dirty)
        stamps = [t for t in (s.first_batch_timestamp() for s in segs) if t > 0]
        earliest = min(stamps) if stamps else _LONG_MAX
        lag = max(lg.config.max_compaction_lag_ms, 0)
        clean_until = now_ms - lag
        return clean_until - earliest if earliest < clean_until else 0

    def grab_filthiest_compacted_log(self, now_ms: int) -> LogToClean | None:
        with self._lock:
            last_clean = self.all_cleaner_checkpoints()
            dirty: list[LogToClean] = []
            for tp, lg in self._logs().items():
                if not lg.config.compact or tp in self.in_progress or tp in self.uncleanable or lg.offline:
                    continue
                try:
                    first_dirty, uncleanable, force = self.cleanable_offsets(lg, last_clean.get(tp), now_ms)
                    if force:
                        self.update_checkpoints(lg.local_log.parent_dir, update=(tp, first_dirty))
                    delay = self.max_compaction_delay(lg, first_dirty, now_ms)
                    ltc = LogToClean(tp, lg, first_dirty, uncleanable, delay > 0)
                except Exception as e:  # noqa: BLE001 - LogCleanerManager: uncleanable, not fatal
                    log.warning("Failed to calculate log cleaning stats for partition %s: %s", tp, e)
                    self.uncleanable.add(tp)
                    continue
                if ltc.total_bytes > 0:
                    dirty.append(ltc)
            cleanable = [c for c in dirty if (c.need_compaction_now and c.cleanable_bytes > 0)
                         or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self.in_progress[filthiest.tp] = "cleaning"
            return filthiest

    def deletable_logs(self) -> list[tuple[TopicPartition, Log]]:
        with self._lock:
            out = []
            for tp, lg in self._logs().items():
                if tp not in self.in_progress and lg.config.compact and tp not in self.uncleanable:
                    self.in_progress[tp] = "cleaning"
                    out.append((tp, lg))
            return out

    def _done(self, tps: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in tps:
                if self.in_progress.get(tp) in ("cleaning", "aborted"):
                    if self.in_progress.get(tp) == "aborted":
                        self.in_progress[tp] = "paused"
                    else:
                        del self.in_progress[tp]
            self._cond.notify_all()

    # ---- running ---------------------------------------------------------------------------------
    def clean_log(self, ltc: LogToClean, now_ms: int) -> int:
        """Clean one chosen log and record its new first dirty offset; returns it."""
        end = ltc.first_dirty_offset
        try:
            end, stats = self.cleaner.clean(ltc, now_ms)
            self.last_stats = stats
            log.info("Cleaned log %s: offsets %d..%d, %.1f MB read, %.1f MB written in %.2fs", ltc.log.dir,
                     ltc.first_dirty_offset, end, stats.bytes_read / 1e6, stats.bytes_written / 1e6,
                     stats.elapsed_secs)
        except CleaningAborted:
            pass  # abort_cleaning asked for it (a truncation, a deletion): the log is left as it was
        except KafkaStorageError as e:
            log.warning("Failed to clean up log for %s: %s (the partition is offline)", ltc.tp, e)
        except (OSError, ProtocolError) as e:
            log.error("Failed to clean up log for %s: %s; marking it uncleanable", ltc.tp, e)
            self.uncleanable.add(ltc.tp)
        finally:
            with self._lock:
                if self.in_progress.get(ltc.tp) == "cleaning" and end > ltc.first_dirty_offset:
                    self.update_checkpoints(ltc.log.local_log.parent_dir, update=(ltc.tp, end))
                self._done([ltc.tp])
        return end

    def clean_once(self, now_ms: int) -> bool:
        """One cleaner-thread iteration: clean the filthiest log, then run retention on compacted logs."""
        ltc = self.grab_filthiest_compacted_log(now_ms)
        if ltc is not None:
            self.clean_log(ltc, now_ms)
        deletable = self.deletable_logs()
        try:
            for tp, lg in deletable:
                try:
                    lg.delete_old_segments(now_ms)
                except KafkaStorageError:
                    pass  # the log took itself offline and logged why; the other logs go on
        finally:
            self._done(tp for tp, _ in deletable)
        return ltc is not None

    def force_clean(self, lg: Log, now_ms: int) -> int | None:
        """Clean ``lg`` now regardless of its dirty ratio (tests, admin tools); returns the new dirty offset."""
        tp = (lg.topic, lg.partition)
        with self._lock:
            if tp in self.in_progress:
                return None
            first_dirty, uncleanable, _ = self.cleanable_offsets(lg, self.all_cleaner_checkpoints().get(tp), now_ms)
            ltc = LogToClean(tp, lg, first_dirty, uncleanable)
            if ltc.cleanable_bytes <= 0 and ltc.first_uncleanable_offset <= first_dirty:
                return first_dirty
            self.in_progress[tp] = "cleaning"
        return self.clean_log(ltc, now_ms)

    def start(self, clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._stop.clear()
        for i in range(max(1, self.config.log_cleaner_threads)):
            t = threading.Thread(target=self._run, args=(clock,), name=f"kafka-log-cleaner-thread-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _run(self, clock: Callable[[], int]) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_once(clock())
            except Exception:
                log.exception("Unexpected error in log cleaner thread")
                cleaned = False
            if not cleaned:
                self._stop.wait(self.config.log_cleaner_backoff_ms / 1000.0)

    def shutdown(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads.clear()
