"""All partition logs of a broker's log dirs (Kafka's ``LogManager``).

Per log dir: ``meta.properties``, ``.lock``, ``.kafka_cleanshutdown``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` (high watermarks; Kafka's ReplicaManager
writes it), ``cleaner-offset-checkpoint``; one ``<topic>-<partition>`` directory per log.

Lifecycle::

    lm = LogManager(LogManagerConfig(log_dirs=(...)), broker_props={...}, topic_configs={...})
    lm.startup(now_ms)                  # loads every log; slow after an unclean shutdown: run off the event loop
    lg = lm.get_or_create_log("t", 0, now_ms=...)
    ...                                 # lg.append_as_leader / lg.read / lg.update_high_watermark
    lm.maintenance(now_ms)              # periodically: retention, flush.ms, checkpoints, delayed deletes
    lm.shutdown(now_ms)                 # flush, close, checkpoints, clean-shutdown marker

``start_background()`` runs :meth:`maintenance` and the log cleaner in daemon threads instead.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping

from protocol.topics import METADATA_TOPIC

from . import files
from .checkpoints import CleanShutdownFile, MetaProperties, OffsetCheckpointFile, random_uuid
from .cleaner import LogCleaner
from .config import LogConfig, LogManagerConfig
from .errors import KafkaStorageError, LogNotLoadedError
from .fileio import FileIO
from .log import Log
from .handles import IDLE_RELEASE_MS, INACTIVE_SEGMENT_FILES, INDEX_MAPPINGS, DescriptorBudget, descriptor_budget
from .scheduler import Scheduler

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


__all__ = ["LogManager"]


class LogManager:
    def __init__(self, config: LogManagerConfig, broker_props: Mapping[str, Any] | None = None,
                 topic_configs: Mapping[str, Mapping[str, Any]] | None = None, *,
                 scheduler: Scheduler | None = None, broker_epoch: int = -1, file_io: FileIO | None = None) -> None:
        self.config = config
        # every write, fsync, rename and unlink of these log dirs (logs, checkpoints, markers, the cleaner's)
        self.file_io = file_io if file_io is not None else FileIO()
        self.broker_props = dict(broker_props or {})
        self.topic_overrides: dict[str, dict[str, Any]] = {t: dict(c) for t, c in (topic_configs or {}).items()}
        self.default_config = LogConfig.from_props({}, self.broker_props)
        self.scheduler = scheduler or Scheduler()
        self.broker_epoch = broker_epoch
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.live_log_dirs: list[str] = []
        self.offline_log_dirs: dict[str, str] = {}
        self._logs: dict[TopicPartition, Log] = {}
        # partitions whose logs could not be opened or failed since (KAFKA_STORAGE_ERROR until a restart) and why;
        # replaced, never changed in place, so a handler may iterate it while a loading thread adds one
        self.offline_partitions: dict[TopicPartition, str] = {}
        self._offline_lock = threading.Lock()  # taken alone: a log going offline calls in holding its own lock
        # the checkpointed (recovery point, log start, high watermark) of partitions that failed to load: kept in
        # the checkpoint files, which otherwise list only the logs open here
        self._unloaded: dict[TopicPartition, tuple[str, int | None, int | None, int | None]] = {}
        # partition logs RLIMIT_NOFILE leaves room for (None: no limit) and how many hold a descriptor now
        self._log_slots: int | None = None
        self._logs_holding = 0
        self._lock = threading.RLock()
        self._dirs_to_sync: set[str] = set()  # log dirs with new partition directories not yet fsynced
        self._dir_locks: dict[str, int] = {}
        self._had_clean_shutdown: dict[str, bool] = {}
        self._load_completed: dict[str, bool] = {}
        self._recovery_checkpoints: dict[str, OffsetCheckpointFile] = {}
        self._log_start_checkpoints: dict[str, OffsetCheckpointFile] = {}
        self._hw_checkpoints: dict[str, OffsetCheckpointFile] = {}
        self.meta_properties: dict[str, MetaProperties] = {}
        self.cleaner: LogCleaner | None = None
        self._last_retention_ms: int | None = None
        self._last_recovery_checkpoint_ms: int | None = None
        self._last_start_checkpoint_ms: int | None = None
        self._last_producer_expiration_ms: int | None = None
        self._last_handle_release_ms: int | None = None
        self._last_flush_check_ms: int | None = None
        # partitions whose logs are still loading; None until start-up has listed the log dirs
        self._loading: set[TopicPartition] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ==== configs =================================================================================
    def config_for(self, topic: str) -> LogConfig:
        return LogConfig.from_props(self.topic_overrides.get(topic, {}), self.broker_props)

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> None:
        """Replace a topic's overrides (``IncrementalAlterConfigs``) and apply them to its logs."""
        cfg = LogConfig.from_props(overrides, self.broker_props)  # validates
        with self._lock:
            self.topic_overrides[topic] = dict(overrides)
            for (t, _), lg in self._logs.items():
                if t == topic:
                    lg.update_config(cfg)

    # ==== startup =================================================================================
    def startup(self, now_ms: int, on_loaded: Callable[[TopicPartition], None] | None = None) -> None:
        """Lock and load every log dir: take ``.lock``, check ``meta.properties``, load every partition.

        Each log is usable (:meth:`get_log`) as soon as it is loaded, while others still load, and ``on_loaded`` is
        called with its partition (from this thread); :meth:`get_or_create_log` of one still loading raises
        :class:`LogNotLoadedError`."""
        for d in self.log_dirs:
            try:
                self._init_dir(d)
                self.live_log_dirs.append(d)
            except (OSError, KafkaStorageError, ValueError) as e:
                log.error("Failed to create or validate data directory %s: %s", d, e)
                self.offline_log_dirs[d] = str(e)
        if not self.live_log_dirs:
            raise KafkaStorageError("Shutting down the broker because none of the specified log dirs from "
                                    f"{self.log_dirs} can be created or validated")
        self._load_logs(now_ms, on_loaded)
        if self.config.log_cleaner_enable:
            self.cleaner = LogCleaner(self.config, self.current_logs, self.live_log_dirs, file_io=self.file_io)

    def _init_dir(self, d: str) -> None:
        os.makedirs(d, exist_ok=True)
        lock_path = os.path.join(d, ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageError(f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another "
                                    f"process or thread is using this directory.")
        self._dir_locks[d] = fd
        mp_path = os.path.join(d, files.META_PROPERTIES_FILE)
        if os.path.exists(mp_path):
            mp = MetaProperties.read(mp_path)
            if self.config.cluster_id is not None and mp.cluster_id not in (None, self.config.cluster_id):
                raise KafkaStorageError(f"Invalid cluster.id in {mp_path}. Expected {self.config.cluster_id}, but "
                                        f"read {mp.cluster_id}")
            if mp.node_id is not None and mp.node_id != self.config.node_id:
                raise KafkaStorageError(f"Stored node id {mp.node_id} doesn't match previous node id "
                                        f"{self.config.node_id} in {mp_path}.")
            if mp.directory_id is None:
                mp = MetaProperties(mp.version, mp.cluster_id, mp.node_id, random_uuid())
                mp.write(mp_path, file_io=self.file_io)
        else:
            mp = MetaProperties(1, self.config.cluster_id, self.config.node_id, random_uuid())
            mp.write(mp_path, file_io=self.file_io)
        self.meta_properties[d] = mp
        io = self.file_io
        self._recovery_checkpoints[d] = OffsetCheckpointFile(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT_FILE),
                                                             file_io=io)
        self._log_start_checkpoints[d] = OffsetCheckpointFile(os.path.join(d, files.LOG_START_OFFSET_CHECKPOINT_FILE),
                                                              file_io=io)
        self._hw_checkpoints[d] = OffsetCheckpointFile(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT_FILE),
                                                       file_io=io)
        # the cleaner creates its own checkpoint file; create it here too so a fresh dir has Kafka's full layout
        OffsetCheckpointFile(os.path.join(d, files.CLEANER_OFFSET_CHECKPOINT_FILE), file_io=io)

    def _read_checkpoint(self, cp: OffsetCheckpointFile, what: str) -> dict[TopicPartition, int]:
        try:
            return cp.read()
        except KafkaStorageError as e:
            log.warning("Error occurred while reading %s file %s, resetting to empty: %s", what, cp.path, e)
            return {}

    def _load_logs(self, now_ms: int, on_loaded: Callable[[TopicPartition], None] | None = None) -> None:
        """List every log dir, then load the partitions in ``num.recovery.threads.per.data.dir`` threads per dir; each
        log is registered (with its checkpointed high watermark) as it completes."""
        jobs = []
        pools = []
        dirs = []
        for d in self.live_log_dirs:
            marker = CleanShutdownFile(d, file_io=self.file_io)
            had_clean = marker.exists()
            if had_clean:
                marker.delete()
            self._had_clean_shutdown[d] = had_clean
            recovery_points = self._read_checkpoint(self._recovery_checkpoints[d], "recovery-point-offset-checkpoint")
            log_starts = self._read_checkpoint(self._log_start_checkpoints[d], "log-start-offset-checkpoint")
            hws = self._read_checkpoint(self._hw_checkpoints[d], "replication-offset-checkpoint")
            listed = []
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith(files.DELETE_DIR_SUFFIX):
                    self.scheduler.schedule_once("delete-dir", lambda p=path: _rmtree(p), 0)
                    continue
                if name.endswith((files.FUTURE_DIR_SUFFIX, files.STRAY_DIR_SUFFIX)):
                    log.warning("Ignoring %s: future/stray logs are not supported", path)
                    continue
                try:
                    tp = files.parse_topic_partition_name(name)
                except ValueError:
                    continue
                if tp[0] == METADATA_TOPIC:
                    continue  # the KRaft metadata log belongs to the quorum, not to the LogManager
                listed.append((tp, path))
            with self._lock:
                self._loading = (self._loading or set()) | {tp for tp, _ in listed}
            dirs.append((d, had_clean, recovery_points, log_starts, hws, listed))
        # how many logs the descriptor limit has room for, known before the first one opens
        self.log_descriptor_budget(sum(len(listed) for *_, listed in dirs))
        for d, had_clean, recovery_points, log_starts, hws, listed in dirs:
            pool = concurrent.futures.ThreadPoolExecutor(max(1, self.config.num_recovery_threads_per_data_dir),
                                                         thread_name_prefix=f"log-recovery-{d}")
            pools.append(pool)
            for tp, path in listed:
                kept = (d, recovery_points.get(tp), log_starts.get(tp), hws.get(tp))
                jobs.append((kept, tp, path, hws.get(tp), pool.submit(self._load_log, path, tp, had_clean,
                                                                      recovery_points, log_starts, now_ms)))
            self._load_completed[d] = False
        with self._lock:
            if self._loading is None:
                self._loading = set()
        dirs_ok = {d: True for d in self.live_log_dirs}
        by_future = {job[-1]: job for job in jobs}
        try:
            for fut in concurrent.futures.as_completed(by_future):
                kept, tp, path, hw, _ = by_future[fut]
                if self._register_loaded(tp, path, hw, fut):
                    if on_loaded is not None:
                        on_loaded(tp)
                else:
                    dirs_ok[kept[0]] = False
                    with self._lock:
                        self._unloaded[tp] = kept
        finally:
            for pool in pools:
                pool.shutdown(wait=True)
            with self._lock:
                self._loading = set()
        for d in self.live_log_dirs:
            self._load_completed[d] = dirs_ok[d]

    def _register_loaded(self, tp: TopicPartition, path: str, hw: int | None,
                         fut: concurrent.futures.Future) -> bool:
        """Make a loaded log usable (False if its load failed: the partition is offline, the others go on)."""
        try:
            lg = fut.result()
            if hw is not None:
                lg.update_high_watermark(hw)  # Kafka's ReplicaManager reads it when it becomes leader/follower
        except Exception as e:  # noqa: BLE001 - any failure of one partition's load takes only it offline
            # one line per partition: a storage error says all there is to say; anything else is a bug, traced
            log.error("Error while loading log dir %s for partition %s-%d; the partition is offline: %s",
                      path, tp[0], tp[1], e, exc_info=not isinstance(e, KafkaStorageError))
            with self._lock:
                self._set_offline(tp, str(e))
                self._loading.discard(tp)
            return False
        with self._lock:
            self._loading.discard(tp)
            if tp in self._logs:
                log.error("Duplicate log directories for %s-%d are found in both %s and %s", tp[0], tp[1],
                          self._logs[tp].dir, path)
                self._set_offline(tp, "duplicate log directories")
                lg.close_handlers()
                self._give_log_slot()
                return False
            self._logs[tp] = lg
            lg.on_offline = self._log_went_offline
        return True

    def _load_log(self, path: str, tp: TopicPartition, had_clean: bool, recovery_points: dict,
                  log_starts: dict, now_ms: int) -> Log:
        self._take_log_slot(tp)
        try:
            cfg = self.config_for(tp[0])
            return Log.open(path, cfg, now_ms=now_ms, log_start_offset=log_starts.get(tp, 0),
                            recovery_point=recovery_points.get(tp, 0), had_clean_shutdown=had_clean,
                            scheduler=self.scheduler, producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                            max_transaction_timeout_ms=self.config.transaction_max_timeout_ms, file_io=self.file_io,
                            transaction_verification_enabled=self.config.transaction_partition_verification_enable)
        except BaseException:
            self._give_log_slot()
            raise

    # ==== offline partitions and descriptors =========================================================
    def _set_offline(self, tp: TopicPartition, reason: str) -> None:
        with self._offline_lock:
            self.offline_partitions = {**self.offline_partitions, tp: reason}

    def _log_went_offline(self, lg: Log) -> None:
        """An open log failed (an I/O error): its partition is offline as one that never opened."""
        self._set_offline((lg.topic, lg.partition), lg.offline_reason or "offline")

    def _take_log_slot(self, tp: TopicPartition) -> None:
        """Count one more log holding a descriptor, or refuse it (KAFKA_STORAGE_ERROR) when RLIMIT_NOFILE has no
        room left for it beside the rest (:func:`storage.handles.descriptor_budget`)."""
        with self._lock:
            if self._log_slots is not None and self._logs_holding >= self._log_slots:
                raise KafkaStorageError(
                    f"Not enough file descriptors to open the log of {tp[0]}-{tp[1]}: RLIMIT_NOFILE leaves room for "
                    f"{self._log_slots} partition logs")
            self._logs_holding += 1

    def _give_log_slot(self) -> None:
        with self._lock:
            self._logs_holding -= 1

    # ==== lookup / create / delete ================================================================
    def current_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def all_logs(self) -> list[Log]:
        return list(self.current_logs().values())

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs_by_topic(self, topic: str) -> list[Log]:
        return [lg for (t, _), lg in self.current_logs().items() if t == topic]

    def _next_log_dir(self) -> str:
        """The live dir with the fewest partitions (``LogManager.nextLogDirs``)."""
        if len(self.live_log_dirs) == 1:
            return self.live_log_dirs[0]
        counts = {d: 0 for d in self.live_log_dirs}
        for lg in self._logs.values():
            parent = os.path.dirname(lg.dir)
            if parent in counts:
                counts[parent] += 1
        return min(self.live_log_dirs, key=lambda d: (counts[d], self.live_log_dirs.index(d)))

    def is_loading(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s log may still be loading (start-up has not listed the dirs yet, or has not loaded it)."""
        loading = self._loading
        return loading is None or tp in loading

    def get_or_create_log(self, topic: str, partition: int, *, now_ms: int, topic_id: bytes | None = None,
                          config: LogConfig | None = None) -> Log:
        tp = (topic, partition)
        with self._lock:
            lg = self._logs.get(tp)
            if lg is not None:
                if topic_id is not None:
                    lg.assign_topic_id(topic_id)
                return lg
            if self._loading is None or tp in self._loading:
                raise LogNotLoadedError(f"the log of {topic}-{partition} is still loading")
            if tp in self.offline_partitions:
                raise KafkaStorageError(f"Partition {topic}-{partition} is offline: {self.offline_partitions[tp]}")
            d = self._next_log_dir()
            path = os.path.join(d, files.log_dir_name(topic, partition))
            try:
                self._take_log_slot(tp)
            except KafkaStorageError as e:
                self._set_offline(tp, str(e))  # nothing created: a start with room creates it
                log.error("Error while creating log for %s-%d in dir %s; the partition is offline: %s", topic,
                          partition, d, e)
                raise
            try:
                os.makedirs(path, exist_ok=True)
                self._sync_dir_later(d)
                lg = Log.open(path, config or self.config_for(topic), now_ms=now_ms, had_clean_shutdown=True,
                              scheduler=self.scheduler, topic_id=topic_id,
                              producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                              max_transaction_timeout_ms=self.config.transaction_max_timeout_ms, file_io=self.file_io,
                            transaction_verification_enabled=self.config.transaction_partition_verification_enable)
            except BaseException as e:
                self._give_log_slot()
                if not isinstance(e, OSError):
                    raise
                # out of descriptors, a full or failed disk: the partition goes offline (KAFKA_STORAGE_ERROR), once
                self._set_offline(tp, str(e))
                log.error("Error while creating log for %s-%d in dir %s; the partition is offline: %s", topic,
                          partition, d, e)
                raise KafkaStorageError(f"Error while creating log for {topic}-{partition} in dir {d}: {e}") from e
            self._logs[tp] = lg
            lg.on_offline = self._log_went_offline
            log.info("Created log for partition %s-%d in %s", topic, partition, path)
            return lg

    def _sync_dir_later(self, d: str) -> None:
        """New partition directories' entries are fsynced by the scheduler, one fsync per log dir for a whole
        CreateTopics (creating a partition writes no data; its first flush makes its own files durable)."""
        with self._lock:
            first = not self._dirs_to_sync
            self._dirs_to_sync.add(d)
        if first:
            self.scheduler.schedule_once("flush-log-dirs", self._sync_dirs)

    def _sync_dirs(self) -> None:
        with self._lock:
            dirs, self._dirs_to_sync = self._dirs_to_sync, set()
        for d in dirs:
            try:
                self.file_io.fsync_dir(d)
            except OSError as e:
                log.error("Error while flushing log dir %s: %s", d, e)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the partition's directory to ``<topic>-<partition>.<uuid>-delete``, delete it later."""
        tp = (topic, partition)
        with self._lock:
            lg = self._logs.pop(tp, None)
            self._unloaded.pop(tp, None)
            if tp in self.offline_partitions:
                with self._offline_lock:
                    self.offline_partitions = {k: v for k, v in self.offline_partitions.items() if k != tp}
        if lg is None:
            return False
        if self.cleaner is not None:
            self.cleaner.abort_and_pause_cleaning(tp)
        parent = os.path.dirname(lg.dir)
        new_name = files.log_delete_dir_name(topic, partition)
        try:
            lg.rename_dir(new_name)
        except KafkaStorageError:
            pass
        if self.cleaner is not None:
            self.cleaner.update_checkpoints(parent, remove=tp)
            self.cleaner.resume_cleaning([tp])
        self.checkpoint_recovery_offsets_in_dir(parent)
        self.checkpoint_log_start_offsets_in_dir(parent)
        self.checkpoint_high_watermarks_in_dir(parent)
        # the files stay open until then (Kafka's asyncDelete): a Fetch answer still being sent from a file slice
        # reads the old bytes, never a reused descriptor
        delay = lg.config.file_delete_delay_ms
        self.scheduler.schedule_once("delete-log", lambda: self._close_and_remove(lg), delay)
        return True

    def _close_and_remove(self, lg: Log) -> None:
        _close_and_remove(lg)
        self._give_log_slot()

    def truncate_to(self, offsets: Mapping[TopicPartition, int], now_ms: int) -> None:
        """Truncate partitions (replication), pausing the cleaner on them meanwhile."""
        affected_dirs = set()
        for tp, offset in offsets.items():
            lg = self.get_log(*tp)
            if lg is None:
                continue
            if self.cleaner is not None:
                self.cleaner.abort_and_pause_cleaning(tp)
            try:
                if lg.truncate_to(offset, now_ms):
                    affected_dirs.add(os.path.dirname(lg.dir))
                    if self.cleaner is not None:
                        self.cleaner.maybe_truncate_checkpoint(os.path.dirname(lg.dir), tp,
                                                               lg.active_segment.base_offset)
            finally:
                if self.cleaner is not None:
                    self.cleaner.resume_cleaning([tp])
        for d in affected_dirs:
            self.checkpoint_recovery_offsets_in_dir(d)

    # ==== checkpoints =============================================================================
    def _logs_in_dir(self, d: str) -> dict[TopicPartition, Log]:
        return {tp: lg for tp, lg in self.current_logs().items() if os.path.dirname(lg.dir) == d}

    # An offline partition keeps its entries: those it was loaded with, or its log's last (a recovery point moves
    # only after a flush that succeeded); dropping them would lose its log start offset at the next start.
    def _unloaded_in_dir(self, d: str, field: int) -> dict[TopicPartition, int]:
        with self._lock:
            return {tp: kept[field] for tp, kept in self._unloaded.items() if kept[0] == d and kept[field] is not None}

    def checkpoint_recovery_offsets_in_dir(self, d: str) -> None:
        cp = self._recovery_checkpoints.get(d)
        if cp is not None:
            cp.write({**self._unloaded_in_dir(d, 1),
                      **{tp: lg.recovery_point for tp, lg in self._logs_in_dir(d).items()}})

    def checkpoint_log_start_offsets_in_dir(self, d: str) -> None:
        cp = self._log_start_checkpoints.get(d)
        if cp is not None:
            out = self._unloaded_in_dir(d, 2)
            for tp, lg in self._logs_in_dir(d).items():
                first = lg.segments.first_segment_base_offset()
                if first is not None and lg.log_start_offset > first:
                    out[tp] = lg.log_start_offset
            cp.write(out)

    def checkpoint_high_watermarks_in_dir(self, d: str) -> None:
        cp = self._hw_checkpoints.get(d)
        if cp is not None:
            cp.write({**self._unloaded_in_dir(d, 3),
                      **{tp: lg.high_watermark for tp, lg in self._logs_in_dir(d).items()}})

    def checkpoint_all(self) -> None:
        for d in self.live_log_dirs:
            self.checkpoint_recovery_offsets_in_dir(d)
            self.checkpoint_log_start_offsets_in_dir(d)
            self.checkpoint_high_watermarks_in_dir(d)

    # ==== periodic work ===========================================================================
    def cleanup_logs(self, now_ms: int) -> int:
        """Retention for logs that are not compacted (compacted ones are handled by the cleaner)."""
        total = 0
        if self.cleaner is not None:
            deletable = self.cleaner.pause_cleaning_for_non_compacted()
        else:
            deletable = [(tp, lg) for tp, lg in self.current_logs().items() if not lg.config.compact]
        try:
            for tp, lg in deletable:
                if lg.offline:
                    continue
                try:
                    total += lg.delete_old_segments(now_ms)
                except KafkaStorageError as e:
                    log.error("Retention failed for %s-%d: %s", tp[0], tp[1], e)
        finally:
            if self.cleaner is not None:
                self.cleaner.resume_cleaning(tp for tp, _ in deletable)
        return total

    def flush_dirty_logs(self, now_ms: int) -> None:
        for lg in self.all_logs():
            if lg.offline:
                continue
            try:
                lg.maybe_flush_by_time(now_ms)
            except KafkaStorageError as e:
                log.error("Flush failed for %s: %s", lg.dir, e)

    def maintenance(self, now_ms: int) -> None:
        """Run whatever periodic work is due at ``now_ms`` (Kafka's scheduled tasks)."""
        c = self.config
        self.scheduler.run_due()
        if self._last_retention_ms is None or now_ms - self._last_retention_ms >= c.log_retention_check_interval_ms:
            self._last_retention_ms = now_ms
            self.cleanup_logs(now_ms)
        # Kafka's kafka-log-flusher: every log.flush.scheduler.interval.ms (default never again: with thousands of
        # logs a walk every maintenance tick is most of an idle broker's CPU)
        if self._last_flush_check_ms is None or now_ms - self._last_flush_check_ms >= c.log_flush_scheduler_interval_ms:
            self._last_flush_check_ms = now_ms
            self.flush_dirty_logs(now_ms)
        if self._last_recovery_checkpoint_ms is None or \
                now_ms - self._last_recovery_checkpoint_ms >= c.log_flush_offset_checkpoint_interval_ms:
            self._last_recovery_checkpoint_ms = now_ms
            for d in self.live_log_dirs:
                self.checkpoint_recovery_offsets_in_dir(d)
                self.checkpoint_high_watermarks_in_dir(d)
        if self._last_start_checkpoint_ms is None or \
                now_ms - self._last_start_checkpoint_ms >= c.log_flush_start_offset_checkpoint_interval_ms:
            self._last_start_checkpoint_ms = now_ms
            for d in self.live_log_dirs:
                self.checkpoint_log_start_offsets_in_dir(d)
        if self._last_producer_expiration_ms is None or \
                now_ms - self._last_producer_expiration_ms >= c.producer_id_expiration_check_interval_ms:
            self._last_producer_expiration_ms = now_ms
            for lg in self.all_logs():
                if not lg.offline:
                    lg.remove_expired_producers(now_ms)
        if self._last_handle_release_ms is None or now_ms - self._last_handle_release_ms >= IDLE_RELEASE_MS // 2:
            self._last_handle_release_ms = now_ms
            INACTIVE_SEGMENT_FILES.release_idle()
            INDEX_MAPPINGS.release_idle()

    # ==== descriptors =============================================================================
    def log_descriptor_budget(self, partitions: int | None = None) -> DescriptorBudget:
        """Log what ``partitions`` logs (the open ones by default) may hold open against ``RLIMIT_NOFILE``, raising
        the soft limit to the hard one when the budget does not fit (Kafka leaves that to ``ulimit -n``), and
        bound the logs that may open to what fits beside the rest (``log_slots``)."""
        with self._lock:
            budget = descriptor_budget(len(self._logs) if partitions is None else partitions, self._logs_holding)
            self._log_slots = budget.log_slots
        line = (f"File descriptors: {budget.partitions} partitions hold one each (their active segments), inactive "
                f"segments at most {budget.inactive_segments} more, {budget.reserved} kept for connections and "
                f"the rest: {budget.needed} of RLIMIT_NOFILE {budget.soft_limit} (hard {budget.hard_limit})")
        if budget.raised_from is not None:
            line += f", raised from {budget.raised_from}"
        if budget.log_slots is not None and budget.partitions > budget.log_slots:
            log.warning("%s: too few; %d open already, room for %d partition logs: the others go offline "
                        "(KAFKA_STORAGE_ERROR)", line, budget.in_use, budget.log_slots)
        elif budget.needed > budget.soft_limit:
            log.warning("%s: too few; partitions that cannot open their files go offline", line)
        else:
            log.info("%s", line)
        return budget

    def start_background(self, clock: Callable[[], int] = lambda: int(time.time() * 1000),
                         interval_s: float = 0.5) -> None:
        """Run :meth:`maintenance` every ``interval_s`` and the log cleaner in daemon threads."""
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.maintenance(clock())
                except Exception:
                    log.exception("Log manager maintenance failed")

        self._thread = threading.Thread(target=loop, name="kafka-log-manager", daemon=True)
        self._thread.start()
        if self.cleaner is not None:
            self.cleaner.start(clock)

    # ==== shutdown ================================================================================
    def shutdown(self, now_ms: int) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.cleaner is not None:
            self.cleaner.shutdown()
        all_ok = {d: True for d in self.live_log_dirs}
        for lg in self.all_logs():
            d = os.path.dirname(lg.dir)
            if lg.offline:
                all_ok[d] = False
                continue
            try:
                lg.flush(now_ms, force_flush_active_segment=True)
                lg.close()
            except KafkaStorageError as e:
                log.error("Error while closing %s: %s", lg.dir, e)
                all_ok[d] = False
        for d in self.live_log_dirs:
            try:
                self.checkpoint_recovery_offsets_in_dir(d)
                self.checkpoint_log_start_offsets_in_dir(d)
                self.checkpoint_high_watermarks_in_dir(d)
            except KafkaStorageError as e:
                log.error("Error writing checkpoints in %s: %s", d, e)
                all_ok[d] = False
                continue
            if all_ok[d] and (self._had_clean_shutdown.get(d) or self._load_completed.get(d)):
                CleanShutdownFile(d, file_io=self.file_io).write(self.broker_epoch)
        self.scheduler.run_all()
        for d, fd in self._dir_locks.items():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            except OSError:
                pass
        self._dir_locks.clear()

    def close_without_checkpoints(self) -> None:
        """Drop every fd and mapping without writing anything (tests simulating a crash)."""
        self._stop.set()
        if self.cleaner is not None:
            self.cleaner.shutdown()
        for lg in self.all_logs():
            lg.close_handlers()
        for fd in self._dir_locks.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._dir_locks.clear()


def _close_and_remove(lg: Log) -> None:
    try:
        lg.close()
    except KafkaStorageError:
        pass
    _rmtree(lg.dir)


def _rmtree(path: str) -> None:
    import shutil
    shutil.rmtree(path, ignore_errors=True)
