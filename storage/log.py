"""A partition log: the policy layer (Kafka's ``UnifiedLog``).

Owns the log start offset, the high watermark (set by the broker), the last stable offset, the
leader-epoch cache, producer state, retention and the flush policy; delegates bytes to
:class:`~storage.local_log.LocalLog`.

Threading: every mutating method and every read takes the log's lock (a ``threading.RLock``), so the
broker's event loop, an executor thread doing recovery/flush/retention and the log cleaner's thread may
share a :class:`Log`.  The lock is held for in-memory work and page-cache writes only; ``fsync`` happens in
:meth:`Log.flush`, which callers should run off the event loop (it holds the lock while syncing, as
Kafka's flush does for the segment list but not for the data).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from struct import error as struct_error
from typing import Iterator, NamedTuple, Sequence

from crc32c import crc32c as _crc32c

from protocol.errors import InvalidRecordError, ProtocolError
from protocol.record_codec import decode_batch
from protocol.records import (
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    BatchHeader,
    check_client_batch,
    set_max_timestamp,
    stamp_batch,
    validate_batch,
)

from . import files
from .checkpoints import LeaderEpochCheckpointFile, PartitionMetadataFile, uuid_to_string
from .config import LogConfig
from .epoch import UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache
from .errors import (
    InconsistentTopicIdError,
    InvalidTimestampError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from .file_records import TimestampAndOffset
from .fileio import FileIO
from .loader import LoadStats, load_log, rebuild_producer_state
from .local_log import LocalLog
from .producer_state import (
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ORIGIN_REPLICATION,
    BatchMetadata,
    CompletedTxn,
    SENTINEL,
    ProducerAppendInfo,
    ProducerStateManager,
    VerificationGuard,
)
from .scheduler import Scheduler
from .segment import FetchDataInfo, LogOffsetMetadata, LogSegment

log = logging.getLogger(__name__)

__all__ = ["Log", "LogAppendInfo", "FetchIsolation", "ORIGIN_CLIENT", "ORIGIN_COORDINATOR", "ORIGIN_REPLICATION",
           "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP",
           "EARLIEST_LOCAL_TIMESTAMP", "LATEST_TIERED_TIMESTAMP"]

# ListOffsetsRequest special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

NO_TIMESTAMP = -1
UNKNOWN_OFFSET = -1
_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
#: the header fields the produce fast path checks: base offset, length, magic, CRC, attributes, last offset delta,
#: max timestamp, producer id, producer epoch, base sequence, records count (partition leader epoch and first
#: timestamp skipped)
_unpack_fast_fields = struct.Struct(">qi4xbIhi8xqqhii").unpack_from
_new_tuple = tuple.__new__
_pack_offset_length_epoch = struct.Struct(">qii").pack_into  # a batch's first 16 bytes: stamped in one call


class FetchIsolation:
    LOG_END = "log_end"             # replicas (followers) read up to the log end offset
    HIGH_WATERMARK = "high_watermark"  # READ_UNCOMMITTED consumers
    TXN_COMMITTED = "txn_committed"    # READ_COMMITTED consumers: up to the last stable offset


def _fsync_path(io: FileIO, path: str) -> None:
    try:
        fd = io.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        io.fsync(fd)
    finally:
        io.close(fd)


class LogAppendInfo(NamedTuple):
    """What an append did (Kafka's ``LogAppendInfo``).  A tuple: the produce fast path builds one per batch."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    valid_bytes: int
    num_batches: int
    last_leader_epoch: int | None = None
    duplicate: bool = False
    headers: Sequence[BatchHeader] = ()  # the batches' headers (the general path; () from the fast path)


class Log:
    """One ``<topic>-<partition>`` directory.  Build with :meth:`Log.open`."""

    def __init__(self, local_log: LocalLog, *, log_start_offset: int, epoch_cache: LeaderEpochFileCache,
                 producer_state: ProducerStateManager, partition_metadata: PartitionMetadataFile,
                 topic_id: bytes | None, load_stats: LoadStats | None = None) -> None:
        self._lock = threading.RLock()
        self.local_log = local_log
        self.log_start_offset = log_start_offset
        self.leader_epoch_cache = epoch_cache
        self.producer_state = producer_state
        self.partition_metadata = partition_metadata
        self.topic_id = topic_id
        self.load_stats = load_stats
        self._high_watermark = LogOffsetMetadata(log_start_offset)
        self._first_unstable_offset: LogOffsetMetadata | None = None
        self.offline = False
        self.offline_reason: str | None = None
        self.on_offline = None  # called with this log when it goes offline (the log manager's record of it)
        self._fast_config: tuple = (None, -1)
        self._update_high_watermark_metadata(self._high_watermark)
        self._maybe_increment_first_unstable_offset()

    # ==== construction ============================================================================
    @classmethod
    def open(cls, dir: str, config: LogConfig, *, now_ms: int, log_start_offset: int = 0, recovery_point: int = 0,
             had_clean_shutdown: bool = False, scheduler: Scheduler | None = None, topic_id: bytes | None = None,
             producer_id_expiration_ms: int = 86400000, max_transaction_timeout_ms: int = 900000,
             file_io: FileIO | None = None, transaction_verification_enabled: bool = False) -> "Log":
        """Open (creating if needed) and load the log in ``dir`` (``UnifiedLog.apply``).

        ``log_start_offset`` and ``recovery_point`` come from the log dir's checkpoints;
        ``had_clean_shutdown`` from its ``.kafka_cleanshutdown`` marker.  Slow after an unclean shutdown:
        call it off the event loop.  ``file_io`` carries every write, fsync, rename and unlink of this log (its
        segments, indexes, checkpoints and producer snapshots); a plain :class:`FileIO` by default.
        """
        topic, partition = files.parse_topic_partition_name(dir)
        os.makedirs(dir, exist_ok=True)
        scheduler = scheduler or Scheduler()
        io = file_io if file_io is not None else FileIO()
        pm = PartitionMetadataFile(os.path.join(dir, files.PARTITION_METADATA_FILE), file_io=io)
        epoch_cache = LeaderEpochFileCache(
            LeaderEpochCheckpointFile(os.path.join(dir, files.LEADER_EPOCH_CHECKPOINT_FILE), file_io=io))
        psm = ProducerStateManager(dir, producer_id_expiration_ms=producer_id_expiration_ms,
                                   max_transaction_timeout_ms=max_transaction_timeout_ms, file_io=io,
                                   transaction_verification_enabled=transaction_verification_enabled)
        stats = LoadStats()
        try:
            segments, offsets = load_log(dir, config, log_start_offset_checkpoint=log_start_offset,
                                         recovery_point_checkpoint=recovery_point,
                                         had_clean_shutdown=had_clean_shutdown, epoch_cache=epoch_cache,
                                         producer_state=psm, scheduler=scheduler, now_ms=now_ms, stats=stats,
                                         file_io=io)
        except OSError as e:
            raise KafkaStorageError(f"Error while loading log {dir}: {e}") from e
        local = LocalLog(dir, config, segments, offsets.recovery_point, offsets.next_offset_metadata, scheduler,
                         topic, partition, now_ms, file_io=io)
        existing_id = None
        if pm.exists():
            try:
                existing_id = pm.read()[1]
            except KafkaStorageError as e:
                log.warning("Ignoring unreadable %s: %s", pm.path, e)
        if topic_id is not None and existing_id is not None and existing_id != topic_id:
            raise InconsistentTopicIdError(
                f"Tried to assign topic ID {uuid_to_string(topic_id)} to log for {topic}-{partition}, but log "
                f"already contained topic ID {uuid_to_string(existing_id)}")
        if topic_id is not None and existing_id is None:
            pm.record(topic_id)
        lg = cls(local, log_start_offset=offsets.log_start_offset, epoch_cache=epoch_cache, producer_state=psm,
                 partition_metadata=pm, topic_id=topic_id or existing_id, load_stats=stats)
        lg._schedule_metadata_flush()
        return lg

    # ==== identity / properties ===================================================================
    @property
    def dir(self) -> str:
        return self.local_log.dir

    @property
    def topic(self) -> str:
        return self.local_log.topic

    @property
    def partition(self) -> int:
        return self.local_log.partition

    @property
    def config(self) -> LogConfig:
        return self.local_log.config

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.local_log.config = config

    @property
    def scheduler(self) -> Scheduler:
        return self.local_log.scheduler

    @property
    def file_io(self) -> FileIO:
        """The file I/O this log was opened with (``Log.open(file_io=...)``)."""
        return self.local_log.file_io

    @property
    def segments(self):
        return self.local_log.segments

    @property
    def log_end_offset(self) -> int:
        return self.local_log.next_offset_metadata.message_offset  # LocalLog.log_end_offset, one call less

    def end_state(self) -> tuple:
        """The offsets a read at the end of the log depends on (log end, high watermark, log start, first unstable
        offset) and whether it is offline: while this stays equal, such a read finds the same nothing. Plain
        attributes, no lock: the fetch path compares it for thousands of idle partitions."""
        fuo = self._first_unstable_offset
        return (self.local_log.next_offset_metadata.message_offset, self._high_watermark.message_offset,
                self.log_start_offset, None if fuo is None else fuo.message_offset, self.offline)

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self.local_log.next_offset_metadata

    @property
    def recovery_point(self) -> int:
        return self.local_log.recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.message_offset

    @property
    def size(self) -> int:
        """Total bytes of all segments."""
        return self.local_log.segments.size_in_bytes()

    @property
    def num_segments(self) -> int:
        return len(self.local_log.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self.local_log.segments.active_segment

    def log_segments(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        return self.local_log.segments.values(from_offset, to_offset)

    @property
    def last_flush_time(self) -> int:
        return self.local_log.last_flushed_time

    def is_empty(self) -> bool:
        return self.log_start_offset == self.log_end_offset

    # ==== errors ==================================================================================
    def _check_online(self) -> None:
        if self.offline:
            raise KafkaStorageError(f"Log for partition {self.topic}-{self.partition} is offline: "
                                    f"{self.offline_reason}")

    def _io_error(self, msg: str, e: BaseException) -> KafkaStorageError:
        """An I/O failure takes this partition offline (Kafka takes the whole log dir offline)."""
        first = not self.offline
        self.offline = True
        if first:  # one line per partition: a later failure of a log already offline adds nothing
            self.offline_reason = f"{msg}: {e}"
            log.error("Partition %s-%d taken offline: %s: %s", self.topic, self.partition, msg, e)
        try:
            self.local_log.close_handlers()
        except Exception:  # noqa: BLE001 - closing must not hide why it went offline
            pass
        if first and self.on_offline is not None:
            self.on_offline(self)
        return KafkaStorageError(f"{msg} for {self.topic}-{self.partition} in dir {self.local_log.parent_dir}: {e}")

    def mark_offline(self, reason: str) -> None:
        with self._lock:
            if not self.offline:
                self.offline = True
                self.offline_reason = reason
                log.error("Partition %s-%d taken offline: %s", self.topic, self.partition, reason)
                try:
                    self.local_log.close_handlers()
                except Exception:  # noqa: BLE001 - closing must not hide why it went offline
                    pass
                if self.on_offline is not None:
                    self.on_offline(self)

    # ==== topic id ================================================================================
    def _maybe_flush_metadata_file(self) -> None:
        self.partition_metadata.maybe_flush()

    def _schedule_metadata_flush(self) -> None:
        """A newly recorded topic id is written by the scheduler (or by the first append, whichever comes first),
        as UnifiedLog's ``scheduleOnce("flush-metadata-file")``: creating a thousand partitions does not wait for
        a thousand fsyncs."""
        if self.partition_metadata._dirty is not None:
            self.scheduler.schedule_once("flush-metadata-file", self._flush_metadata_unless_gone)

    def _flush_metadata_unless_gone(self) -> None:
        if os.path.isdir(self.dir):  # a log deleted before the flush ran has nothing to record
            self._maybe_flush_metadata_file()

    def assign_topic_id(self, topic_id: bytes) -> None:
        with self._lock:
            if self.topic_id is not None:
                if self.topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"Tried to assign topic ID {uuid_to_string(topic_id)} to log for {self.topic}-"
                        f"{self.partition}, but log already contained topic ID {uuid_to_string(self.topic_id)}")
                return
            self.topic_id = topic_id
            self.partition_metadata.record(topic_id)
            self._schedule_metadata_flush()

    # ==== high watermark / LSO ====================================================================
    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark, clamped to ``[log_start_offset, log_end_offset]``; returns the value set."""
        with self._lock:
            if hw < self.log_start_offset:
                meta = LogOffsetMetadata(self.log_start_offset)
            elif hw >= self.log_end_offset:
                meta = self.log_end_offset_metadata
            else:
                meta = LogOffsetMetadata(hw)
            self._update_high_watermark_metadata(meta)
            return meta.message_offset

    def maybe_increment_high_watermark(self, new_hw: LogOffsetMetadata) -> LogOffsetMetadata | None:
        with self._lock:
            if new_hw.message_offset > self.log_end_offset:
                raise ValueError(f"High watermark {new_hw} update exceeds current log end offset "
                                 f"{self.log_end_offset_metadata}")
            old = self._high_watermark
            if old.message_offset < new_hw.message_offset or (
                    old.message_offset == new_hw.message_offset and old.on_older_segment(new_hw)):
                self._update_high_watermark_metadata(new_hw)
                return old
            return None

    def _update_high_watermark_metadata(self, meta: LogOffsetMetadata) -> None:
        if meta.message_offset < 0:
            raise ValueError("High watermark offset should be non-negative")
        self._high_watermark = meta
        self.producer_state.on_high_watermark_updated(meta.message_offset)
        self._maybe_increment_first_unstable_offset()

    def _update_high_watermark_with_log_end_offset(self) -> None:
        end = self.log_end_offset_metadata
        if self._high_watermark.message_offset >= end.message_offset:
            self._update_high_watermark_metadata(end)

    def _fetch_high_watermark_metadata(self) -> LogOffsetMetadata:
        self.local_log.check_if_memory_mapped_buffer_closed()
        meta = self._high_watermark
        if meta.message_offset_only:
            if meta.message_offset == self.log_end_offset:
                meta = self.log_end_offset_metadata
            else:
                meta = self.local_log.convert_to_offset_metadata_or_throw(meta.message_offset)
            self._high_watermark = meta
        return meta

    def _maybe_increment_first_unstable_offset(self) -> None:
        fuo = self.producer_state.first_unstable_offset()
        if fuo is None:
            self._first_unstable_offset = None
        else:
            self._first_unstable_offset = LogOffsetMetadata(max(fuo, self.log_start_offset))

    @property
    def last_stable_offset(self) -> int:
        fuo = self._first_unstable_offset
        if fuo is not None and fuo.message_offset < self.high_watermark:
            return fuo.message_offset
        return self.high_watermark

    def _fetch_last_stable_offset_metadata(self) -> LogOffsetMetadata:
        fuo = self._first_unstable_offset
        if fuo is not None and fuo.message_offset < self.high_watermark:
            if fuo.message_offset_only:
                if fuo.message_offset >= self.log_end_offset:
                    fuo = self.log_end_offset_metadata
                else:
                    fuo = self.local_log.convert_to_offset_metadata_or_throw(fuo.message_offset)
                self._first_unstable_offset = fuo
            return fuo
        return self._fetch_high_watermark_metadata()

    # ==== append ==================================================================================
    def append_as_leader(self, records, leader_epoch: int, now_ms: int, *,
                         origin: str = ORIGIN_CLIENT,
                         validated_headers: list[BatchHeader] | None = None,
                         verification_guard: VerificationGuard = SENTINEL,
                         transaction_version: int = 0) -> LogAppendInfo:
        """Validate and append a produce request's records, assigning offsets and stamping ``leader_epoch``.

        ``records`` should be a ``bytearray`` (or writable memoryview): offsets are written into it in place;
        ``bytes`` is copied once.  Raises :class:`CorruptRecordError` (bad CRC/length/magic),
        :class:`InvalidRecordError`, :class:`RecordTooLargeError`, :class:`RecordBatchTooLargeError`,
        :class:`OutOfOrderSequenceError`, :class:`InvalidProducerEpochError`, :class:`KafkaStorageError`.
        A duplicate idempotent batch is not written; the returned info has ``duplicate=True`` and the
        original offsets.

        ``validated_headers``: the headers :func:`protocol.records.validate_batches` returned for exactly these
        bytes, if the caller already checked them (magic, length, CRC); the CRC is then not computed twice.

        ``verification_guard`` (KIP-890, when the producer state's ``transaction_verification_enabled``): a
        transactional batch from a producer with no transaction open here is taken only with the guard of its
        verification still current (:meth:`maybe_start_transaction_verification`), else
        :class:`InvalidTxnStateError`.

        ``transaction_version``: the WriteTxnMarkers v2 TransactionVersion of a coordinator's marker (KIP-1228):
        from 2 on a marker must carry a strictly higher producer epoch (see ``ProducerAppendInfo``).

        The produce hot path (one batch from a client, plain or an idempotent producer's next in sequence, no
        transaction, CreateTime, no roll; and a coordinator's plain batch, a share-state or offset-commit write:
        what the fast path checks is a client's rules, a superset of a coordinator's) is done right here with as
        little Python as it takes: the usual batch is checked field by field (the rules of :func:`validate_batch`
        and :func:`check_client_batch`), then, under the log lock, the segment's roll check
        (:meth:`LogSegment.can_append_without_roll`), the offsets and epoch stamped in place, the segment's append
        (:meth:`LogSegment.append`: the file, the max timestamp, the index entries) and the producer's entry
        (``ProducerStateEntry.add_batch``) inline.  Anything out of the ordinary goes to :meth:`_append`, which
        does the general work and raises the right error; a batch
        already CRC-checked here is passed on as checked.
        """
        t = type(records)
        if (t is memoryview or t is bytearray) and (origin == ORIGIN_CLIENT or origin == ORIGIN_COORDINATOR):
            n = len(records)
            if validated_headers is None:
                try:
                    (base, length, magic, crc, attrs, delta, max_ts, pid, pepoch, base_seq,
                     count) = _unpack_fast_fields(records, 0)
                except (struct_error, BufferError):  # short, or a view that is not contiguous
                    base = -1
                # magic 2, exactly one batch, compression id <= 4, no control bit, no transaction, base offset 0,
                # count == last_offset_delta + 1 > 0, CRC
                if (base or magic != 2 or length + LOG_OVERHEAD != n or (attrs & 0x37) > 4 or delta < 0
                        or count != delta + 1 or crc != _crc32c((records if t is memoryview
                                                                   else memoryview(records))[21:])):
                    h = validate_batch(records, 0)  # raises for a corrupt batch
                    return self._append(records, origin, True, leader_epoch, now_ms, ignore_record_size=False,
                                        verification_guard=verification_guard, transaction_version=transaction_version,
                                        validated_headers=[h] if h[1] + LOG_OVERHEAD == n else None)
            else:
                if len(validated_headers) != 1:
                    return self._append(records, origin, True, leader_epoch, now_ms, ignore_record_size=False,
                                        verification_guard=verification_guard, validated_headers=validated_headers,
                                        transaction_version=transaction_version)
                (base, length, _, magic, crc, attrs, delta, _, max_ts, pid, pepoch, base_seq,
                 count) = validated_headers[0]
                if base or length + LOG_OVERHEAD != n or attrs & 0x30 or delta < 0 or count != delta + 1:
                    return self._append(records, origin, True, leader_epoch, now_ms, ignore_record_size=False,
                                        verification_guard=verification_guard, validated_headers=validated_headers,
                                        transaction_version=transaction_version)
            lock = self._lock
            lock.acquire()
            try:
                ll = self.local_log
                fc = self._fast_config
                if fc[0] is not ll.config:
                    fc = self._fast_config_for(ll.config)
                seg = ll.segments._state[2]  # LogSegments.active_segment, without the property's call
                offset = ll.next_offset_metadata[0]
                last = offset + delta
                if pid < 0:
                    retained = None
                elif origin != ORIGIN_CLIENT:
                    retained = False  # a coordinator's batch with a producer id: the general path's rules
                else:
                    # an idempotent producer's next batch in order: its entry, same epoch, no transaction open,
                    # base sequence = last sequence + 1 without wrapping (then it cannot be a duplicate of one of
                    # the retained batches either); anything else (False) is ProducerAppendInfo's to judge
                    entry = self.producer_state.producers.get(pid)
                    retained = (entry.batch_metadata if entry is not None and entry.producer_epoch == pepoch
                                and entry.current_txn_first_offset is None and entry.batch_metadata
                                and base_seq == entry.batch_metadata[-1][0] + 1 and base_seq <= _INT_MAX - delta
                                else False)
                # a read-only view cannot take its offsets in place: the general path copies it
                if not (n > fc[1] or max_ts - now_ms > fc[5] or ll.closed or self.offline
                        or self.partition_metadata._dirty is not None or retained is False
                        or (t is memoryview and records.readonly)
                        or not seg.can_append_without_roll(fc[2], fc[3], max_ts, last, n, now_ms)):
                    _pack_offset_length_epoch(records, 0, offset, length, leader_epoch)
                    # LeaderEpochFileCache.isUpdateNeeded: a new epoch (the latest entry never starts past the LEO)
                    if leader_epoch != self.leader_epoch_cache.latest_epoch_value and leader_epoch >= 0:
                        self.leader_epoch_cache.assign(leader_epoch, offset)
                    try:
                        seg.append(last, max_ts, last, records)
                    except OSError as e:
                        raise self._io_error("Error while appending records", e) from e
                    if retained is not None:  # ProducerStateEntry.add_batch (the deque keeps the last five)
                        retained.append(_new_tuple(BatchMetadata, (base_seq + delta, last, delta, max_ts)))
                        entry.last_timestamp = max_ts
                    next_offset = last + 1
                    ll.next_offset_metadata = _new_tuple(LogOffsetMetadata,
                                                         (next_offset, seg.base_offset, seg.log.size))
                    self.producer_state.last_map_offset = next_offset
                    if next_offset - ll.recovery_point >= fc[4]:
                        self._flush(next_offset, False, now_ms)
                    return _new_tuple(LogAppendInfo, (offset, last, max_ts, last, NO_TIMESTAMP,
                                                      self.log_start_offset, n, 1,
                                                      leader_epoch if leader_epoch >= 0 else None, False, ()))
            finally:
                lock.release()
            # checked, but not for the fast path (a roll, a producer id, ...): the general path, told so
            validated_headers = validated_headers or [validate_batch(records, 0, False)]
        return self._append(records, origin, True, leader_epoch, now_ms, ignore_record_size=False,
                            validated_headers=validated_headers, verification_guard=verification_guard,
                            transaction_version=transaction_version)

    def _fast_config_for(self, config: LogConfig) -> tuple:
        """What the produce fast path needs from ``config``, read once per config object:
        ``(config, largest batch it takes (-1: none), segment.ms, segment.bytes, flush.messages,
        message.timestamp.after.max.ms)``.  A batch's max timestamp bounds every record's, so the check
        against the future is exact from the header."""
        if config.message_timestamp_type != "CreateTime" or config.message_timestamp_before_max_ms < _LONG_MAX:
            limit = -1  # LogAppendTime rewrites the batch; a bound on old timestamps needs the first record's
        else:
            limit = min(config.max_message_bytes, config.segment_bytes)
        fc = self._fast_config = (config, limit, config.segment_ms, config.segment_bytes, config.flush_messages,
                                  config.message_timestamp_after_max_ms)
        return fc

    def append_as_follower(self, records, now_ms: int, *,
                           validated_headers: list[BatchHeader] | None = None) -> LogAppendInfo:
        """Append batches whose offsets and epochs were assigned by the leader."""
        return self._append(records, ORIGIN_REPLICATION, False, -1, now_ms, ignore_record_size=True,
                            validated_headers=validated_headers)

    def _analyze(self, buf, origin: str, ignore_record_size: bool, require_monotonic: bool,
                 validated_headers: list[BatchHeader] | None = None) -> tuple[list[BatchHeader], LogAppendInfo]:
        headers: list[BatchHeader] = []
        pos = 0
        n = len(buf)
        pre = iter(validated_headers) if validated_headers is not None else None
        first_offset = UNKNOWN_OFFSET
        last_offset = -1
        monotonic = True
        max_ts = NO_TIMESTAMP
        shallow = -1
        max_message_bytes = self.config.max_message_bytes
        last_epoch = -1
        while pos < n:
            if pre is None:
                h = validate_batch(buf, pos)
            else:
                h = next(pre, None)
                if h is None or h.batch_length + LOG_OVERHEAD + pos > n:
                    raise InvalidRecordError("validated headers do not match the records")
            if origin == ORIGIN_CLIENT:
                check_client_batch(h)
            if not headers:
                first_offset = h.base_offset
            batch_last = h.base_offset + h.last_offset_delta
            if last_offset >= batch_last:
                monotonic = False
            last_offset = batch_last
            last_epoch = h.partition_leader_epoch
            size = h.batch_length + LOG_OVERHEAD
            if not ignore_record_size and size > max_message_bytes:
                raise RecordTooLargeError(
                    f"The record batch size in the append to {self.topic}-{self.partition} is {size} bytes which "
                    f"exceeds the maximum configured value of {max_message_bytes}.")
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                shallow = batch_last
            headers.append(h)
            pos += size
        if require_monotonic and not monotonic:
            raise InvalidRecordError(f"Out of order offsets found in append to {self.topic}-{self.partition}")
        info = LogAppendInfo(first_offset, last_offset, max_ts, shallow, NO_TIMESTAMP, self.log_start_offset,
                             pos, len(headers), last_epoch if last_epoch >= 0 else None, headers=headers)
        return headers, info

    def _validate_timestamps(self, buf, headers: list[BatchHeader], now_ms: int) -> None:
        """``LogValidator.validateTimestamp`` for CreateTime.  The bound on the future is exact from each batch's
        max timestamp; a bound on the past needs every record's timestamp (the first record's is not the
        smallest), so only then are the batch's records decoded, as Kafka does on this path."""
        before = self.config.message_timestamp_before_max_ms
        after = self.config.message_timestamp_after_max_ms
        pos = 0
        for h in headers:
            if before < _LONG_MAX:
                stamps = [r.timestamp for r in decode_batch(buf, pos, verify_crc=False)[1]]
            else:
                stamps = [h.max_timestamp]
            for i, ts in enumerate(stamps):
                if ts >= 0 and (now_ms - ts > before or ts - now_ms > after):
                    err = InvalidTimestampError(
                        f"Timestamp {ts} of message with offset {h.base_offset + i} is out of range. The "
                        f"timestamp should be within [{now_ms - before}, {now_ms + after}]")
                    if before < _LONG_MAX:
                        err.record_errors = [(i, str(err))]
                    raise err
            pos += h.batch_length + LOG_OVERHEAD

    def _append(self, records, origin: str, assign_offsets: bool, leader_epoch: int, now_ms: int,
                ignore_record_size: bool, validated_headers: list[BatchHeader] | None = None,
                verification_guard: VerificationGuard = SENTINEL, transaction_version: int = 0) -> LogAppendInfo:
        if self.offline:
            self._check_online()
        if self.partition_metadata._dirty is not None:
            self._maybe_flush_metadata_file()
        buf = records
        if assign_offsets and not isinstance(records, bytearray):
            with memoryview(records) as mv:
                readonly = mv.readonly
            if readonly:
                buf = bytearray(records)
        headers, info = self._analyze(buf, origin, ignore_record_size, not assign_offsets, validated_headers)
        if info.valid_bytes <= 0:
            return info
        with self._lock:
            self._check_online()
            try:
                return self._append_locked(buf, headers, info, origin, assign_offsets, leader_epoch, now_ms,
                                           verification_guard, transaction_version)
            except OSError as e:
                raise self._io_error("Error while appending records", e) from e

    def _assign_offsets(self, buf, headers: list[BatchHeader], info: LogAppendInfo, origin: str, leader_epoch: int,
                        now_ms: int) -> tuple[list[BatchHeader], LogAppendInfo]:
        """The leader's part of ``LogValidator.validateMessagesAndAssignOffsets`` for v2 batches: check a client's
        CreateTime timestamps against the configured bounds, stamp each batch with its base offset (from the log
        end offset on) and ``leader_epoch`` (and LogAppendTime's timestamp), and return the stamped headers and the
        append info with the assigned offsets."""
        config = self.local_log.config
        if origin == ORIGIN_CLIENT and config.message_timestamp_type == "CreateTime" and (
                config.message_timestamp_before_max_ms < _LONG_MAX
                or config.message_timestamp_after_max_ms < _LONG_MAX):
            self._validate_timestamps(buf, headers, now_ms)  # LogValidator checks CreateTime only
        offset = first = self.local_log.next_offset_metadata.message_offset
        log_append = config.message_timestamp_type == "LogAppendTime"
        pos = 0
        new_headers = []
        max_ts, shallow = NO_TIMESTAMP, -1
        for h in headers:
            stamp_batch(buf, pos, offset, leader_epoch)
            if log_append:
                set_max_timestamp(buf, pos, LOG_APPEND_TIME, now_ms)
                h = _new_tuple(BatchHeader, (offset, h[1], leader_epoch, h[3], h[4], (h[5] & 0x77) | 0x08,
                                             h[6], h[7], now_ms) + h[9:])
            else:
                h = _new_tuple(BatchHeader, (offset, h[1], leader_epoch) + h[3:])
            new_headers.append(h)
            last = offset + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts, shallow = h.max_timestamp, last
            offset = last + 1
            pos += h.batch_length + LOG_OVERHEAD
        headers = new_headers
        info = info._replace(first_offset=first, last_offset=offset - 1, max_timestamp=max_ts,
                             shallow_offset_of_max_timestamp=shallow, headers=headers,
                             log_append_time=now_ms if log_append else info.log_append_time,
                             last_leader_epoch=leader_epoch if leader_epoch >= 0 else None)
        return headers, info

    def _append_locked(self, buf, headers: list[BatchHeader], info: LogAppendInfo, origin: str,
                       assign_offsets: bool, leader_epoch: int, now_ms: int,
                       verification_guard: VerificationGuard = SENTINEL,
                       transaction_version: int = 0) -> LogAppendInfo:
        self.local_log.check_if_memory_mapped_buffer_closed()
        if assign_offsets:
            headers, info = self._assign_offsets(buf, headers, info, origin, leader_epoch, now_ms)
        else:
            first_or_last = info.first_offset if info.first_offset != UNKNOWN_OFFSET else headers[0].last_offset
            if first_or_last < self.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.topic}-{self.partition}. First offset {first_or_last} is "
                    f"less than the next offset {self.log_end_offset}. Log start offset = {self.log_start_offset}",
                    info.first_offset, info.last_offset)

        cache = self.leader_epoch_cache
        for h in headers:
            epoch = h[2]
            if epoch >= 0 and not cache.is_latest(epoch, h[0]):
                cache.assign(epoch, h[0])

        config = self.local_log.config
        if info.valid_bytes > config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {info.valid_bytes} bytes in append to partition {self.topic}-"
                f"{self.partition}, which exceeds the maximum configured segment size of {config.segment_bytes}.")

        segment = self._maybe_roll(info.valid_bytes, info, now_ms)

        if any(h[9] >= 0 for h in headers):
            updated, completed, duplicate = self._analyze_producer_state(headers, buf, origin, verification_guard,
                                                                         transaction_version)
        else:
            updated, completed, duplicate = {}, [], None
        if duplicate is not None:
            return info._replace(
                first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
                log_append_time=duplicate.timestamp if self.config.message_timestamp_type == "LogAppendTime"
                else NO_TIMESTAMP, log_start_offset=self.log_start_offset, duplicate=True)

        data = buf if info.valid_bytes == len(buf) else memoryview(buf)[:info.valid_bytes]
        self.local_log.append(info.last_offset, info.max_timestamp, info.shallow_offset_of_max_timestamp, data,
                              segment)
        if self._high_watermark.message_offset >= self.local_log.next_offset_metadata.message_offset:
            self._update_high_watermark_with_log_end_offset()
        psm = self.producer_state
        if updated or completed:
            for pa in updated.values():
                psm.update(pa)
            # an aborted transaction gets its entry in the segment written to, with the LSO as of its completion
            # (UnifiedLog.append); a failed write takes the log offline with the transaction still open
            for c in completed:
                segment.update_txn_index(c, psm.last_stable_offset(c))
                psm.complete_txn(c)
            self._maybe_increment_first_unstable_offset()
        psm.last_map_offset = info.last_offset + 1
        if self.local_log.unflushed_messages >= config.flush_messages:
            self._flush(self.log_end_offset, False, now_ms)
        return info._replace(log_start_offset=self.log_start_offset)

    def _analyze_producer_state(self, headers: list[BatchHeader], buf, origin: str,
                                verification_guard: VerificationGuard = SENTINEL, transaction_version: int = 0
                                ) -> tuple[dict[int, ProducerAppendInfo], list[CompletedTxn], BatchMetadata | None]:
        updated: dict[int, ProducerAppendInfo] = {}
        psm = self.producer_state
        completed: list[CompletedTxn] = []
        pos = 0
        for h in headers:
            bpos = pos
            pos += h.batch_length + LOG_OVERHEAD
            if h.producer_id < 0:
                continue
            if origin == ORIGIN_CLIENT:
                entry = self.producer_state.last_entry(h.producer_id)
                if entry is not None:
                    dup = entry.find_duplicate_batch(h)
                    if dup is not None:
                        return updated, completed, dup
            transactional = h.is_transactional
            # KIP-890 (UnifiedLog.analyzeAndValidateProducerState): a transactional batch is written only inside a
            # transaction the coordinator knows of: one open here already, or one just verified with the guard
            # that is still current (a stale verification, an abort marker written since, does not count). Only
            # client appends: the group coordinator's transactional offset commits are not verified yet (Kafka's
            # coordinator verifies TxnOffsetCommit with the transaction coordinator first)
            if (transactional and origin == ORIGIN_CLIENT and psm.transaction_verification_enabled
                    and not h.is_control
                    and not self._has_ongoing_transaction(h.producer_id, h.producer_epoch)):
                entry = psm.verification_states.get(h.producer_id)
                if entry is None or not entry.verification_guard.verify(verification_guard):
                    raise InvalidTxnStateError("Record was not part of an ongoing transaction")
            info = updated.get(h.producer_id)
            if info is None:
                info = updated[h.producer_id] = psm.prepare_update(h.producer_id, origin, transaction_version)
            c = info.append(h, buf, bpos)
            if c is not None:
                completed.append(c)
            if transactional:  # a first offset or a completed transaction: the verification is done with
                psm.clear_verification_state_entry(h.producer_id)
        return updated, completed, None

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo, now_ms: int) -> LogSegment:
        segment = self.local_log.segments.active_segment
        config = self.local_log.config
        if segment.should_roll_for(config.segment_ms, config.segment_bytes, info.max_timestamp, info.last_offset,
                                   messages_size, now_ms):
            roll_offset = info.first_offset if info.first_offset != UNKNOWN_OFFSET \
                else info.last_offset - (2**31 - 1)
            return self._roll(roll_offset, now_ms)
        return segment

    def roll(self, now_ms: int, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (``UnifiedLog.roll``)."""
        with self._lock:
            self._check_online()
            try:
                return self._roll(expected_next_offset, now_ms)
            except OSError as e:
                raise self._io_error("Error while rolling log segment", e) from e

    def _roll(self, expected_next_offset: int | None, now_ms: int) -> LogSegment:
        new_segment = self.local_log.roll(expected_next_offset, now_ms)
        # snapshot producer state at the new segment's base offset so recovery can start there
        self.producer_state.update_map_end_offset(new_segment.base_offset)
        snapshot = self.producer_state.take_snapshot(sync=False)
        self._update_high_watermark_with_log_end_offset()
        # flush the rolled segment (and the snapshot) in the background, as Kafka schedules "flush-log"
        base = new_segment.base_offset

        def flush_rolled() -> None:
            if snapshot is not None:
                _fsync_path(self.file_io, snapshot)
            if not self.offline and not self.local_log.closed:
                self.flush_up_to_offset_exclusive(base, now_ms)

        self.scheduler.schedule_once("flush-log", flush_rolled, 0)
        return new_segment

    # ==== epochs ==================================================================================
    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record the leader epoch's start (``Partition.makeLeader``); whether the epoch cache changed.  With
        ``flush=False`` the caller writes ``leader-epoch-checkpoint`` (:meth:`flush_leader_epochs`) before the
        change is relied on."""
        if leader_epoch >= 0:
            return self.leader_epoch_cache.assign(leader_epoch, start_offset, flush)
        return False

    def flush_leader_epochs(self) -> None:
        """Write (and fsync) ``leader-epoch-checkpoint``."""
        self.leader_epoch_cache.flush()

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch, or None if undefined."""
        epoch, offset = self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
        if offset == UNDEFINED_EPOCH_OFFSET:
            return None
        return epoch, offset

    # ==== read ====================================================================================
    def read(self, start_offset: int, max_length: int, isolation: str = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True) -> FetchDataInfo:
        """Read from ``start_offset`` (the batch containing it), at most ``max_length`` bytes, never past the
        isolation bound.  Returns a :class:`FetchDataInfo` whose ``records`` is a :class:`FileSlice`
        (``fd``, ``position``, ``length``) for ``os.sendfile``.

        Under ``FetchIsolation.TXN_COMMITTED`` its ``aborted_transactions`` lists the transactions aborted in the
        range read (FetchResponse's ``AbortedTransaction`` structs, from the segments' transaction indexes); it is
        None for the other isolations.

        Raises :class:`OffsetOutOfRangeError` if ``start_offset`` is below the log start offset or above the
        log end offset, :class:`KafkaStorageError` if the partition is offline.
        """
        with self._lock:
            self._check_online()
            if start_offset < self.log_start_offset:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {start_offset} for partition {self.topic}-{self.partition}, but "
                    f"we only have log segments starting from offset: {self.log_start_offset}.")
            try:
                txn_committed = isolation == FetchIsolation.TXN_COMMITTED
                if isolation == FetchIsolation.LOG_END:
                    bound = self.local_log.next_offset_metadata
                elif txn_committed:
                    bound = self._fetch_last_stable_offset_metadata()
                else:
                    bound = self._fetch_high_watermark_metadata()
                return self.local_log.read(start_offset, max_length, min_one_message, bound, txn_committed)
            except ProtocolError as e:
                if isinstance(e, OffsetOutOfRangeError):
                    raise
                # a corrupt batch on the fetch path: the partition goes offline, others keep serving
                raise self._io_error("Corrupt log data found while reading", e) from e
            except OSError as e:
                raise self._io_error("Error while reading", e) from e

    def read_bytes(self, start_offset: int, max_length: int, isolation: str = FetchIsolation.HIGH_WATERMARK,
                   min_one_message: bool = True) -> bytes:
        """:meth:`read`, returning the bytes (for TLS connections and tests)."""
        info = self.read(start_offset, max_length, isolation, min_one_message)
        return info.records.read()

    def iter_batches(self, start_offset: int = 0, isolation: str = FetchIsolation.LOG_END) -> Iterator[bytes]:
        """Every whole batch from ``start_offset`` on, as bytes (tools, tests, the cleaner's checks)."""
        offset = max(start_offset, self.log_start_offset)
        from protocol.records import iter_batch_positions
        while True:
            try:
                data = self.read_bytes(offset, 1024 * 1024, isolation, True)
            except OffsetOutOfRangeError:
                return
            if not data:
                return
            scan = iter_batch_positions(data)
            advanced = False
            for pos, h in scan:
                yield data[pos:pos + h.batch_length + LOG_OVERHEAD]
                offset = h.base_offset + h.last_offset_delta + 1
                advanced = True
            if not advanced:
                return

    # ==== ListOffsets =============================================================================
    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose timestamp is >= ``target_timestamp`` (``fetchOffsetByTimestamp``),
        or the special values -1 (latest), -2 (earliest), -3 (max timestamp), -4 (earliest local).
        ``None`` if no record has a timestamp that large."""
        with self._lock:
            self._check_online()
            cache = self.leader_epoch_cache
            if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                earliest = cache.earliest_entry()
                epoch = earliest.epoch if earliest is not None and earliest.start_offset <= self.log_start_offset \
                    else None
                return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset, epoch)
            if target_timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset, cache.latest_epoch())
            if target_timestamp == LATEST_TIERED_TIMESTAMP:
                return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
            try:
                if target_timestamp == MAX_TIMESTAMP:
                    segs = self.local_log.segments.values()
                    best = max(segs, key=lambda s: s.max_timestamp_so_far)
                    ts, off = best.read_max_timestamp_and_offset_so_far()
                    if ts < 0:
                        return None
                    pos = best.offset_index.lookup(off)[1]
                    for _, h in best.log.batches_from(pos):
                        if h.max_timestamp == ts:
                            found = best.log.search_for_timestamp(ts, pos, h.base_offset)
                            if found is not None:
                                return TimestampAndOffset(ts, found.offset,
                                                          h.partition_leader_epoch if h.partition_leader_epoch >= 0
                                                          else None)
                            return TimestampAndOffset(ts, h.last_offset, None)
                    return None
                for seg in self.local_log.segments.values():
                    if seg.largest_timestamp() >= target_timestamp:
                        return seg.find_offset_by_timestamp(target_timestamp, self.log_start_offset)
                return None
            except ProtocolError as e:
                raise self._io_error("Corrupt log data found while searching by timestamp", e) from e
            except OSError as e:
                raise self._io_error("Error while fetching offset by timestamp", e) from e

    # ==== log start offset / retention ============================================================
    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str = "client") -> bool:
        """DeleteRecords: advance the log start offset (never past the high watermark)."""
        with self._lock:
            self._check_online()
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_log_start_offset} of partition {self.topic}-"
                    f"{self.partition} since it is larger than the high watermark {self.high_watermark}")
            if new_log_start_offset > self.log_start_offset:
                self._update_log_start_offset(new_log_start_offset)
                log.info("Incremented log start offset of %s-%d to %d due to %s", self.topic, self.partition,
                         new_log_start_offset, reason)
                self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
                self.producer_state.on_log_start_offset_incremented(new_log_start_offset)
                self._maybe_increment_first_unstable_offset()
                return True
            return False

    def _update_log_start_offset(self, offset: int) -> None:
        self.log_start_offset = offset
        if self.high_watermark < offset:
            self.update_high_watermark(offset)
        if self.local_log.recovery_point < offset:
            self.local_log.recovery_point = offset

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: delete whole segments past the log start offset, ``retention.bytes`` and ``retention.ms``
        (the last two only with ``cleanup.policy`` containing ``delete``).  Never the active segment's data
        beyond the high watermark.  Returns the number of segments deleted."""
        with self._lock:
            self._check_online()
            try:
                if self.config.delete:
                    return (self._delete_log_start_offset_breached(now_ms)
                            + self._delete_retention_size_breached(now_ms)
                            + self._delete_retention_ms_breached(now_ms))
                return self._delete_log_start_offset_breached(now_ms)
            except OSError as e:
                raise self._io_error("Error while deleting segments", e) from e

    def _deletable_segments(self, predicate) -> list[LogSegment]:
        segs = self.local_log.segments.values()
        deletable = []
        hw = self.high_watermark
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            is_last_and_empty = nxt is None and seg.size == 0
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if hw >= upper and predicate(seg, nxt) and not is_last_and_empty:
                deletable.append(seg)
            else:
                break
        return deletable

    def _delete_old_segments(self, predicate, reason: str, now_ms: int) -> int:
        deletable = self._deletable_segments(predicate)
        if deletable:
            return self._delete_segments(deletable, reason, now_ms)
        return 0

    def _delete_segments(self, deletable: list[LogSegment], reason: str, now_ms: int) -> int:
        num = len(deletable)
        to_delete = deletable
        if len(self.local_log.segments) == num:
            # always keep one segment: roll first
            new_segment = self._roll(None, now_ms)
            if deletable[-1].base_offset == new_segment.base_offset:
                to_delete = deletable[:-1]
        self.local_log.check_if_memory_mapped_buffer_closed()
        if to_delete:
            new_start = self.local_log.segments.higher_segment(to_delete[-1].base_offset).base_offset
            self.maybe_increment_log_start_offset(new_start, reason)
            log.info("Deleting segments of %s-%d due to %s: %s", self.topic, self.partition, reason, to_delete)
            self.local_log.remove_and_delete_segments(to_delete, True)
        self._delete_producer_snapshots(deletable)
        return num

    def _delete_producer_snapshots(self, segments: list[LogSegment]) -> None:
        marked = [p for p in (self.producer_state.remove_and_mark_snapshot_for_deletion(s.base_offset)
                              for s in segments) if p]
        if marked:
            def delete() -> None:
                for p in marked:
                    try:
                        self.file_io.unlink(p)
                    except FileNotFoundError:
                        pass
            self.scheduler.schedule_once("delete-producer-snapshot", delete, self.config.file_delete_delay_ms)

    def _delete_retention_ms_breached(self, now_ms: int) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0
        return self._delete_old_segments(lambda s, n: now_ms - s.largest_timestamp() > retention_ms,
                                         f"retention time {retention_ms}ms breach", now_ms)

    def _delete_retention_size_breached(self, now_ms: int) -> int:
        retention = self.config.retention_bytes
        size = self.size
        if retention < 0 or size < retention:
            return 0
        diff = [size - retention]

        def should_delete(seg: LogSegment, nxt) -> bool:
            if diff[0] - seg.size >= 0:
                diff[0] -= seg.size
                return True
            return False

        return self._delete_old_segments(should_delete, f"retention size in bytes {retention} breach", now_ms)

    def _delete_log_start_offset_breached(self, now_ms: int) -> int:
        start = self.log_start_offset
        return self._delete_old_segments(lambda s, n: n is not None and n.base_offset <= start,
                                         f"log start offset {start} breach", now_ms)

    # ==== flush ===================================================================================
    def flush(self, now_ms: int, force_flush_active_segment: bool = False) -> None:
        """fsync everything up to the log end offset and advance the recovery point (``UnifiedLog.flush``).

        The data fsyncs run without the log's lock, so appends and reads on other threads go on meanwhile
        (Kafka likewise syncs outside its lock); only the index msyncs and the recovery point update take it.
        """
        self.flush_up_to_offset_exclusive(None, now_ms)

    def flush_up_to_offset_exclusive(self, offset: int | None, now_ms: int) -> None:
        with self._lock:
            self._check_online()
            ll = self.local_log
            if offset is None:
                offset = ll.log_end_offset
            rp = ll.recovery_point
            if offset <= rp:
                return
            segs = ll.segments.values(rp, offset)
            new_segment = any(sg.base_offset >= rp for sg in segs)
        try:
            for sg in segs:
                if not sg.deleted:
                    sg.log.flush()
            if new_segment:
                self.file_io.fsync_dir(self.dir)
        except OSError as e:
            with self._lock:
                raise self._io_error("Error while flushing log", e) from e
        with self._lock:
            if self.offline or self.local_log.closed:
                return
            try:
                for sg in segs:
                    if not sg.deleted and self.local_log.segments.get(sg.base_offset) is sg:
                        sg.offset_index.flush()
                        sg.time_index.flush()
                        sg.txn_index.flush()
                self.local_log.mark_flushed(offset, now_ms)
            except OSError as e:
                raise self._io_error("Error while flushing log", e) from e

    def _flush(self, offset: int, including_offset: bool, now_ms: int) -> None:
        flush_offset = offset + 1 if including_offset else offset
        try:
            if flush_offset > self.local_log.recovery_point:
                self.local_log.flush(flush_offset)
                self.local_log.mark_flushed(offset, now_ms)
        except OSError as e:
            raise self._io_error("Error while flushing log", e) from e

    def maybe_flush_by_time(self, now_ms: int) -> bool:
        """The ``flush.ms`` policy; called periodically by the log manager."""
        if now_ms - self.last_flush_time >= self.config.flush_ms and self.local_log.unflushed_messages > 0:
            self.flush(now_ms)
            return True
        return False

    # ==== truncation (replication) ================================================================
    def truncate_to(self, target_offset: int, now_ms: int) -> bool:
        """Remove every offset >= ``target_offset`` (``UnifiedLog.truncateTo``); True if anything was removed."""
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.topic}-{self.partition} to a negative offset "
                             f"({target_offset}).")
        with self._lock:
            self._check_online()
            try:
                if target_offset >= self.log_end_offset:
                    self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                    return False
                self.local_log.check_if_memory_mapped_buffer_closed()
                if self.local_log.segments.first_segment_base_offset() > target_offset:
                    self._truncate_fully_and_start_at(target_offset, None, now_ms)
                else:
                    deleted = self.local_log.truncate_to(target_offset, now_ms)
                    self._delete_producer_snapshots(deleted)
                    self.leader_epoch_cache.truncate_from_end(target_offset)
                    self.log_start_offset = min(target_offset, self.log_start_offset, self.log_end_offset)
                    rebuild_producer_state(self.producer_state, self.local_log.segments, self.log_start_offset,
                                           target_offset, reload_from_clean_shutdown=False, now_ms=now_ms)
                    if self.high_watermark >= self.log_end_offset:
                        self._update_high_watermark_metadata(self.log_end_offset_metadata)
                    self._maybe_increment_first_unstable_offset()
                return True
            except OSError as e:
                raise self._io_error("Error while truncating log", e) from e

    def truncate_fully_and_start_at(self, new_offset: int, now_ms: int, log_start_offset: int | None = None) -> None:
        with self._lock:
            self._check_online()
            try:
                self._truncate_fully_and_start_at(new_offset, log_start_offset, now_ms)
            except OSError as e:
                raise self._io_error("Error while truncating the entire log", e) from e

    def _truncate_fully_and_start_at(self, new_offset: int, log_start_offset: int | None, now_ms: int) -> None:
        segs = self.local_log.truncate_fully_and_start_at(new_offset, now_ms)
        self._delete_producer_snapshots(segs)
        self.leader_epoch_cache.clear_and_flush()
        self.producer_state.truncate_fully_and_start_at(new_offset)
        self.log_start_offset = new_offset if log_start_offset is None else log_start_offset
        rebuild_producer_state(self.producer_state, self.local_log.segments, self.log_start_offset, new_offset,
                               reload_from_clean_shutdown=False, now_ms=now_ms)
        self._update_high_watermark_metadata(self.log_end_offset_metadata)
        self._maybe_increment_first_unstable_offset()

    # ==== producers ===============================================================================
    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             now_ms: int) -> VerificationGuard:
        """KIP-890: :data:`SENTINEL` when the producer has a transaction open here (nothing to verify), else the guard
        of its verification (created now, or the one in progress), which the append must carry
        (``UnifiedLog.maybeStartTransactionVerification``). An epoch below the producer's here is refused at once,
        without asking the coordinator (KAFKA-18042): :class:`InvalidProducerEpochError`."""
        with self._lock:
            entry = self.producer_state.producers.get(producer_id)
            if entry is not None and epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"Epoch of producer {producer_id} is {epoch}, which is smaller than the last seen epoch "
                    f"{entry.producer_epoch}")
            if self._has_ongoing_transaction(producer_id, epoch):
                return SENTINEL
            return self.producer_state.maybe_create_verification_state_entry(producer_id, sequence, epoch,
                                                                             now_ms).verification_guard

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        """The guard of the producer's verification in progress, or :data:`SENTINEL`."""
        with self._lock:
            entry = self.producer_state.verification_state_entry(producer_id)
            return entry.verification_guard if entry is not None else SENTINEL

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None) -> bool:
        with self._lock:
            return self._has_ongoing_transaction(producer_id, producer_epoch)

    def _has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None) -> bool:
        """A transaction of the producer is open here (with ``producer_epoch``: at that epoch, as Kafka 4 checks,
        since with transactions V2 the next transaction has the next epoch and must be verified / added)."""
        entry = self.producer_state.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None \
            and (producer_epoch is None or entry.producer_epoch == producer_epoch)

    def remove_expired_producers(self, now_ms: int) -> None:
        with self._lock:
            self.producer_state.remove_expired_producers(now_ms)

    def take_producer_snapshot(self) -> None:
        with self._lock:
            self.producer_state.take_snapshot()

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """producer id -> (last data offset or None, producer epoch); the cleaner keeps those batches."""
        with self._lock:
            out = {}
            for pid, e in self.producer_state.producers.items():
                out[pid] = (e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
            return out

    # ==== cleaner support =========================================================================
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list:
        """The ``AbortedTxn`` entries from the segment holding ``start_offset`` on that overlap
        ``[log start offset, upper_bound_offset)`` (``UnifiedLog.collectAbortedTransactions``)."""
        with self._lock:
            return self.local_log.collect_aborted_transactions(self.log_start_offset, start_offset,
                                                               upper_bound_offset)

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        with self._lock:
            self._check_online()
            try:
                deleted = self.local_log.replace_segments(new_segments, old_segments)
                self._delete_producer_snapshots(deleted)
                # byte positions cached in offset metadata may point into a replaced segment
                replaced = {sg.base_offset for sg in old_segments}
                hw = self._high_watermark
                if not hw.message_offset_only and hw.segment_base_offset in replaced:
                    self._high_watermark = LogOffsetMetadata(hw.message_offset)
                fuo = self._first_unstable_offset
                if fuo is not None and not fuo.message_offset_only and fuo.segment_base_offset in replaced:
                    self._first_unstable_offset = LogOffsetMetadata(fuo.message_offset)
            except OSError as e:
                raise self._io_error("Error while replacing segments", e) from e

    # ==== verify ==================================================================================
    def verify(self) -> list[str]:
        """Scrub: check every batch (length, magic, CRC32C, increasing offsets) and every index entry of
        every segment, without changing anything.  Returns a list of problems (empty if clean)."""
        from .verify import verify_segment
        with self._lock:
            self._check_online()
            segs = self.local_log.segments.values()
            sizes = {s.base_offset: (s.size, s.offset_index.entries, s.time_index.entries) for s in segs}
        problems: list[str] = []
        prev_next = None
        for i, s in enumerate(segs):
            nxt_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
            size, entries, time_entries = sizes[s.base_offset]
            seg_problems, prev_next = verify_segment(s, size, prev_next, nxt_base, entries, time_entries)
            problems.extend(seg_problems)
        return problems

    # ==== lifecycle ===============================================================================
    def close(self) -> None:
        """Take a producer snapshot and close every segment (indexes trimmed).  Does not flush: the log
        manager flushes first on a clean shutdown."""
        with self._lock:
            if self.local_log.closed:
                return
            try:
                self.producer_state.take_snapshot()
                self.local_log.close()
            except OSError as e:
                raise self._io_error("Error while closing log", e) from e

    def close_handlers(self) -> None:
        """Release fds and mappings without writing anything (a failed disk, or a simulated crash in tests)."""
        with self._lock:
            self.local_log.close_handlers()

    def delete(self) -> None:
        """Delete every segment and the directory right away."""
        with self._lock:
            segs = self.local_log.delete_all_segments()
            for s in segs:
                self.producer_state.remove_and_mark_snapshot_for_deletion(s.base_offset)
            self.leader_epoch_cache.clear()
            self.local_log.delete_empty_dir()

    def rename_dir(self, name: str) -> None:
        with self._lock:
            try:
                if self.local_log.rename_dir(name):
                    new_dir = self.local_log.dir
                    self.producer_state.log_dir = new_dir
                    self.partition_metadata.path = os.path.join(new_dir, files.PARTITION_METADATA_FILE)
                    if self.leader_epoch_cache.checkpoint is not None:
                        self.leader_epoch_cache.checkpoint = LeaderEpochCheckpointFile(
                            os.path.join(new_dir, files.LEADER_EPOCH_CHECKPOINT_FILE), file_io=self.file_io)
            except OSError as e:
                raise self._io_error("Error while renaming dir", e) from e

    def __repr__(self) -> str:
        return (f"Log(dir={self.dir}, logStartOffset={self.log_start_offset}, logEndOffset={self.log_end_offset}, "
                f"highWatermark={self.high_watermark})")

