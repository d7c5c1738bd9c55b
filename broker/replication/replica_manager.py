"""Partitions this broker hosts, kept in step with the metadata image (Kafka's ReplicaManager).

The image says which partitions exist, who leads them and at which epoch; this module opens or
deletes the logs to match, and holds the per-partition state the data path needs: the leader epoch,
an ordered append queue and the long-poll waiters.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
from typing import Any, Callable, Generator, Mapping, NamedTuple, Protocol

from broker.loop_turns import ITEMS_PER_TURN, at_once, in_turns
from broker.replication.replica_selector import FollowerView, ReplicaSelector, preferred_read_replica
from broker.replication.replica_state import FollowerState, leader_high_watermark, may_join_isr, out_of_sync_replicas
from cluster.image_diff import ImageDiff, TopicPartition, diff_images
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode, KafkaError
from storage.config import ConfigError, LogConfig
from storage.errors import InconsistentTopicIdError, KafkaStorageError, LogNotLoadedError
from storage.log import ORIGIN_CLIENT, Log, LogAppendInfo
from storage.log_manager import LogManager
from storage.producer_state import SENTINEL, VerificationGuard


class AppendMetrics(Protocol):
    """What the append path counts (BrokerTopicMetrics: MessagesIn, BytesIn, BytesRejected, FailedProduce)."""

    def produced(self, topic: str, records: int, size: int) -> None: ...

    def rejected(self, topic: str, size: int) -> None: ...

log = logging.getLogger("odradek.replica_manager")


class AppendQueue:
    """Keeps appends to one partition in request-arrival order even when a handler awaits in between.

    A handler takes its ticket synchronously when it starts (before any await), then waits for the
    previous ticket before appending and releases its own afterwards.
    """

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail: asyncio.Future | None = None

    def ticket(self) -> tuple[asyncio.Future | None, asyncio.Future]:
        prev = self._tail
        me = asyncio.get_running_loop().create_future()
        self._tail = me
        return (prev if prev is not None and not prev.done() else None), me


@dataclasses.dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: bytes
    log: Log
    info: PartitionInfo
    appends: AppendQueue = dataclasses.field(default_factory=AppendQueue)
    # as the leader: each follower's position (Kafka's remoteReplicasMap), reset for every new leader epoch
    followers: dict[int, FollowerState] = dataclasses.field(default_factory=dict)
    followers_epoch: int = -1
    epoch_start_offset: int = 0  # the first offset of this leader epoch
    # an ISR change sent to the controller (AlterPartition) and the partition epoch it was based on; until an
    # image moves past that epoch, the maximal ISR (both) counts for the high watermark (KIP-497)
    pending_isr: tuple[int, ...] | None = None
    pending_from_epoch: int = -1
    follower_lag: int = -1  # as a follower: the leader's high watermark minus our log end, at the last fetch

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.info.isr
        return self.info.isr + tuple(r for r in self.pending_isr if r not in self.info.isr)

    @property
    def leader_epoch(self) -> int:
        return self.info.leader_epoch

    def is_leader(self, node_id: int) -> bool:
        return self.info.leader == node_id


class FetchWaiters:
    """Long-poll fetches parked until an append to one of their partitions (Kafka's DelayedFetch purgatory)."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}

    def __len__(self) -> int:
        return len({f for fs in self._waiters.values() for f in fs})

    def register(self, keys: list[tuple[str, int]]) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        for k in keys:
            self._waiters.setdefault(k, set()).add(fut)
        return fut

    def unregister(self, keys: list[tuple[str, int]], fut: asyncio.Future) -> None:
        for k in keys:
            s = self._waiters.get(k)
            if s is not None:
                s.discard(fut)
                if not s:
                    del self._waiters[k]

    def wake(self, key: tuple[str, int]) -> None:
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)


class CommitWaiters:
    """Appends waiting for the high watermark to pass them (Kafka's DelayedProduce purgatory, keyed by offset)."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = {}

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    def register(self, key: tuple[str, int], last_offset: int) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append((last_offset, fut))
        return fut

    def advance(self, key: tuple[str, int], high_watermark: int) -> None:
        waiting = self._waiters.get(key)
        if not waiting:
            return
        keep = []
        for last_offset, fut in waiting:
            if last_offset < high_watermark:
                if not fut.done():
                    fut.set_result(None)
            elif not fut.done():
                keep.append((last_offset, fut))
        if keep:
            self._waiters[key] = keep
        else:
            del self._waiters[key]

    def fail(self, key: tuple[str, int], code: int) -> None:
        """The partition moved away (deleted, or led elsewhere): its waiters get ``code``."""
        for _, fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_exception(KafkaError("partition is no longer led here", code))


class ReplicaChanges(NamedTuple):
    """What one image changed on this broker: the partitions looked at (opened, updated, stopped or deleted: the
    only ones whose hosting, leadership or epoch can have moved) and the brokers whose registration changed."""

    partitions: frozenset[TopicPartition]
    brokers: frozenset[int]


class AppendResult(NamedTuple):
    info: LogAppendInfo
    committed: asyncio.Future | None  # None: already below the high watermark; else done when it is


_EPOCH_FLUSH_THREADS = 16


def _flush_leader_epochs(logs: list[Log]) -> None:
    """Write the leader-epoch checkpoints of partitions that became leaders, before the apply returns (Kafka writes
    each in ``makeLeader``). Each write is two fsyncs; a broker taking thousands of leaderships at once (a restart)
    writes them from several threads, which the file system's journal commits together."""
    def flush(lg: Log) -> None:
        try:
            lg.flush_leader_epochs()
        except OSError as exc:  # the entry stays in memory; the next write of this cache retries it
            log.error("%s-%d: could not write its leader-epoch checkpoint: %s", lg.topic, lg.partition, exc)

    if len(logs) <= 1:
        for lg in logs:
            flush(lg)
        return
    with concurrent.futures.ThreadPoolExecutor(min(_EPOCH_FLUSH_THREADS, len(logs)),
                                               thread_name_prefix="leader-epoch-flush") as pool:
        list(pool.map(flush, logs))


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager, now_ms: Callable[[], int],
                 metrics: AppendMetrics | None = None, replica_lag_time_max_ms: int = 30000) -> None:
        self.node_id = node_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.image = MetadataImage()  # the last image applied: broker fencing for ISR eligibility
        # sends an ISR change to the controller (set by the node when it is part of a quorum)
        self.alter_isr: Callable[[Partition, tuple[int, ...]], None] | None = None
        # DeleteRecords waiting for every live replica's log start (DelayedDeleteRecords): (offset, future)
        self.low_watermark_waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = {}
        self.isr_shrinks = 0  # committed ISR changes this broker asked for (IsrShrinksPerSec, IsrExpandsPerSec)
        self.isr_expands = 0
        self.failed_isr_updates = 0  # answered with an error (FailedIsrUpdatesPerSec)
        self.alter_partition_requests = 0  # AlterPartition requests sent, and the partition changes they carried
        self.alter_partition_changes = 0
        self.log_manager = log_manager
        self.now_ms = now_ms
        self.metrics = metrics
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_waiters = FetchWaiters()
        self.commit_waiters = CommitWaiters()
        self.loading = False  # partition logs still being loaded / recovered at start-up
        self._stopped: list[tuple[str, int]] = []  # out of the table, their logs deleted by the next apply_image
        # partitions an apply_image took up and did not finish (it raised: a log that failed to open, say): the
        # next image's apply looks at them again, whether or not they changed
        self._unapplied: set[tuple[str, int]] = set()

    def append(self, part: Partition, records, now_ms: int, origin: str = ORIGIN_CLIENT,
               verification_guard: VerificationGuard = SENTINEL, transaction_version: int = 0) -> AppendResult:
        """The one append path (Produce and the group coordinator): append as leader, count it, move the
        high watermark as the replication policy allows, wake long-poll fetches.

        Synchronous, so callers keep their own arrival order. ``committed`` is what acks=all waits on:
        the high-watermark policy alone decides when it completes.
        """
        if self.partitions.get((part.topic, part.index)) is not part or not part.is_leader(self.node_id):
            # stopped (moved away or deleted) or led elsewhere since the caller looked it up
            raise KafkaError("partition is no longer led here", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            info = part.log.append_as_leader(records, part.leader_epoch, now_ms, origin=origin,
                                             verification_guard=verification_guard,
                                             transaction_version=transaction_version)
        except KafkaError:
            if self.metrics is not None and origin == ORIGIN_CLIENT:
                self.metrics.rejected(part.topic, len(records))
            raise
        if self.metrics is not None and origin == ORIGIN_CLIENT and not info.duplicate:
            self.metrics.produced(part.topic, info.last_offset - info.first_offset + 1, info.valid_bytes)
        self.maybe_advance_high_watermark(part)
        key = (part.topic, part.index)
        self.fetch_waiters.wake(key)
        if part.log.high_watermark > info.last_offset:
            return AppendResult(info, None)
        return AppendResult(info, self.commit_waiters.register(key, info.last_offset))

    def missing_error(self, topic: str | None = None, index: int = -1) -> int:
        """The error for a partition not hosted here: retriable NOT_LEADER_OR_FOLLOWER while logs load, or when the
        metadata has it on other brokers (moved away: the client must refresh its metadata)."""
        t = self.image.topic(topic) if topic is not None else None
        if topic is not None and (topic, index) in self.log_manager.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.loading or (t is not None and index in t.partitions):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    @property
    def offline_partitions(self) -> Mapping[TopicPartition, str]:
        """The partitions hosted here whose logs are offline (could not be opened, or failed since) and why."""
        return self.log_manager.offline_partitions

    def _diff(self, image: MetadataImage, diff: ImageDiff | None) -> ImageDiff:
        """The changes from the last image applied here to ``image`` (``diff`` when it is that)."""
        if diff is None or diff.prev is not self.image or diff.image is not image:
            return diff_images(self.image, image)
        return diff

    def _candidates(self, diff: ImageDiff) -> list[TopicPartition]:
        """The partitions ``diff`` may move here (the changed ones this broker hosted or hosts), and the ones an
        earlier apply did not finish (their log failed to open, say): every other hosted partition is as the last
        image applied left it."""
        changed = diff.local_changes(self.node_id).partitions
        if not self._unapplied:
            return sorted(changed)
        # a partition whose log is still loading is skipped without a look: start-up applies images while
        # thousands load, and each apply would otherwise try them all again
        return sorted(changed | {tp for tp in self._unapplied if not self.log_manager.is_loading(tp)})

    def stop_partitions(self, image: MetadataImage, diff: ImageDiff | None = None) -> ReplicaChanges:
        """Kafka's stopPartitions, on the event loop before ``apply_image`` deletes their logs: partitions ``image``
        no longer places here (a reassignment moved them away, the topic was deleted) leave the table at once, so
        no append or follower write reaches a log being deleted; acks=all appends waiting on them fail with
        NOT_LEADER_OR_FOLLOWER. Only the partitions that changed since the last image applied (``diff``) are
        looked at. Returns the ones stopped."""
        diff = self._diff(image, diff)
        stopped = []
        for tp in self._candidates(diff):
            part = self.partitions.get(tp)
            if part is None:
                continue
            topic = image.topics_by_id.get(part.topic_id)
            info = topic.partitions.get(tp[1]) if topic is not None else None
            if info is None or self.node_id not in info.replicas:
                del self.partitions[tp]
                self._stopped.append(tp)
                stopped.append(tp)
                self.commit_waiters.fail(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                self.fetch_waiters.wake(tp)  # parked fetches answer now (completeDelayedFetchOrProduceRequests)
                log.info("stopped partition %s-%d: %s", *tp, "no longer a replica" if info else "deleted")
        return ReplicaChanges(frozenset(stopped), diff.brokers)

    def apply_image(self, image: MetadataImage, diff: ImageDiff | None = None) -> ReplicaChanges:
        """Open logs for partitions hosted here, delete logs of removed topics, refresh topic configs: for the
        partitions and configs that changed since the last image applied (``diff``; without one, the changes
        from ``self.image``, all of ``image`` the first time). Returns what it looked at, for ``after_image``
        and the fetchers.

        Blocking (file system): called off the event loop, before the image is published to handlers.
        """
        diff = self._diff(image, diff)
        self.image = image
        todo = self._candidates(diff)
        self._unapplied.update(todo)  # until done: an exception below leaves them for the next image
        stopped, self._stopped = self._stopped, []
        for tp in stopped:  # out of the table already (stop_partitions)
            self.log_manager.delete_log(*tp)
            log.info("deleted partition %s-%d", *tp)
        wanted: dict[TopicPartition, tuple[TopicInfo, PartitionInfo]] = {}
        for tp in todo:
            topic = image.topics_by_name.get(tp[0])
            info = topic.partitions.get(tp[1]) if topic is not None else None
            if info is not None and self.node_id in info.replicas:
                wanted[tp] = (topic, info)
            elif tp in self.partitions:
                self.partitions.pop(tp)
                self.commit_waiters.fail(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                self.log_manager.delete_log(*tp)
                log.info("deleted partition %s-%d", *tp)
                self._unapplied.discard(tp)
            else:
                self._unapplied.discard(tp)
        configured = {name for name in diff.topic_configs if self._hosts(image.topic(name))}
        for name in sorted(configured):
            self._refresh_topic_config(image, name)
        now = self.now_ms()
        skipped: set[TopicPartition] = set()
        new_epochs: list[Log] = []  # leaders whose leader-epoch checkpoint must be written before this returns
        for tp, (topic, info) in wanted.items():
            if topic.name not in configured:
                configured.add(topic.name)
                self._refresh_topic_config(image, topic.name)
            try:
                self._apply_partition(tp, topic, info, now, new_epochs)
            except LogNotLoadedError:
                skipped.add(tp)  # still loading at start-up: applied once loaded (it stays in _unapplied)
                continue
            except KafkaStorageError:
                skipped.add(tp)  # offline (the log manager logged why): the others go on, it answers
                self._unapplied.discard(tp)  # KAFKA_STORAGE_ERROR until a restart, as Kafka's offline logs do
                continue
            self._unapplied.discard(tp)
        _flush_leader_epochs(new_epochs)
        if not self._unapplied:
            self._unapplied = set()  # a set keeps the table it grew to: iterating an emptied one still walks it
        return ReplicaChanges(frozenset(todo).difference(skipped).union(stopped), diff.brokers)

    @property
    def waiting_for_logs(self) -> bool:
        """Partitions placed here not applied yet, whose logs are loaded now (start-up applies them as they become
        ready). Read under the metadata lock: ``apply_image`` changes the unapplied set in a thread."""
        return any(not self.log_manager.is_loading(tp) for tp in self._unapplied)

    def _hosts(self, topic: TopicInfo | None) -> bool:
        return topic is not None and any(self.node_id in p.replicas for p in topic.partitions.values())

    def _refresh_topic_config(self, image: MetadataImage, name: str) -> None:
        overrides = dict(image.topic_config(name))
        if self.log_manager.topic_overrides.get(name, {}) != overrides:
            try:
                self.log_manager.update_topic_config(name, overrides)
            except ConfigError as exc:
                log.error("topic %s has an invalid config in the metadata log: %s", name, exc)

    def _apply_partition(self, tp: TopicPartition, topic: TopicInfo, info: PartitionInfo, now: int,
                         new_epochs: list[Log]) -> None:
        """One partition hosted here, as ``image`` has it: its log open, its leadership and epoch, its followers."""
        part = self.partitions.get(tp)
        if part is not None and part.topic_id != topic.topic_id:
            # the topic was deleted and created again under the same name between two images
            self.partitions.pop(tp)
            self.log_manager.delete_log(*tp)
            part = None
        lg = part.log if part is not None else self._open_log(tp, topic.topic_id, now)
        latest_epoch = lg.latest_epoch
        if info.leader == self.node_id and latest_epoch is not None and latest_epoch > info.leader_epoch:
            # leader epochs only grow, so an image naming us leader at an epoch our log has passed is stale:
            # leading at it would re-stamp the epoch cache over newer entries. Decided before the partition
            # is visible (handlers run on the event loop meanwhile): it never leads at the stale epoch.
            log.error("%s-%d: not leading at epoch %d: the log already holds epoch %d; waiting for newer "
                      "metadata", tp[0], tp[1], info.leader_epoch, latest_epoch)
            info = dataclasses.replace(info, leader=-1)  # no leader
        if part is None:
            part = Partition(tp[0], tp[1], topic.topic_id, lg, info)
            self.partitions[tp] = part
        else:
            part.info = info
        if part.pending_isr is not None and info.partition_epoch > part.pending_from_epoch:
            part.pending_isr = None  # the change (or a newer one) is committed
        if info.leader == self.node_id:
            if part.log.latest_epoch != info.leader_epoch and \
                    part.log.maybe_assign_epoch_start_offset(info.leader_epoch, part.log.log_end_offset, flush=False):
                new_epochs.append(part.log)
            if part.followers_epoch != info.leader_epoch:
                # Partition.makeLeader: followers' positions are unknown until they fetch in this epoch;
                # ISR members count as caught up now (resetReplicaState)
                part.followers = {r: FollowerState(last_caught_up_ms=now if r in info.isr else 0)
                                  for r in info.replicas if r != self.node_id}
                part.followers_epoch = info.leader_epoch
                before = part.log.end_offset_for_epoch(info.leader_epoch - 1) if info.leader_epoch > 0 else None
                part.epoch_start_offset = before[1] if before is not None else 0
            elif set(part.followers) != set(info.replicas) - {self.node_id}:
                # replicas added by a reassignment in this epoch (updateAssignmentAndIsr): the others keep
                # their positions, the new ones start unknown
                part.followers = {r: part.followers.get(r) or FollowerState()
                                  for r in info.replicas if r != self.node_id}
        else:
            part.followers = {}
            part.followers_epoch = -1

    def _open_log(self, tp: tuple[str, int], topic_id: bytes, now: int) -> Log:
        try:
            return self.log_manager.get_or_create_log(tp[0], tp[1], now_ms=now, topic_id=topic_id)
        except InconsistentTopicIdError as exc:
            # a stray log of an older topic with this name (Kafka's LogManager.findStrayReplicas): drop it
            log.warning("deleting stray log of %s-%d: %s", tp[0], tp[1], exc)
            self.log_manager.delete_log(*tp)
            return self.log_manager.get_or_create_log(tp[0], tp[1], now_ms=now, topic_id=topic_id)

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1, require_leader: bool = True
                         ) -> tuple[Partition | None, int]:
        """The partition if this broker leads it at the client's epoch, else the error Kafka answers:
        unknown (or NOT_LEADER_OR_FOLLOWER while loading), NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH
        (client behind), UNKNOWN_LEADER_EPOCH (client ahead). ``current_leader_epoch`` -1 skips the check.
        ``require_leader`` False also takes a follower's replica (``localLogWithEpochOrThrow``: KIP-392 reads)."""
        part = self.partitions.get((topic, index))
        if part is None:
            return None, self.missing_error(topic, index)
        if require_leader and not part.is_leader(self.node_id):
            return part, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if 0 <= current_leader_epoch != part.leader_epoch:
            return part, (ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < part.leader_epoch
                          else ErrorCode.UNKNOWN_LEADER_EPOCH)
        return part, 0

    def preferred_read_replica(self, part: Partition, selector: ReplicaSelector, client_rack: str | None,
                               fetch_offset: int, listener: str) -> int | None:
        """``findPreferredReadReplica`` on the leader for a consumer (KIP-392): the replica it should fetch from
        instead, or None. The candidates' racks are those of brokers the image has unfenced with an endpoint on
        the client's ``listener``. Without a client rack the (rack-aware) selector always keeps the leader."""
        if not client_rack:
            return None
        racks = {}
        for r in part.info.replicas:
            b = self.image.brokers.get(r)
            if b is not None and not b.fenced and b.endpoint(listener) is not None:
                racks[r] = b.rack
        followers = {r: FollowerView(s.log_end_offset, s.log_start_offset, s.last_caught_up_ms)
                     for r, s in part.followers.items()}
        return preferred_read_replica(selector, part.topic, part.index, client_rack, part.info.leader,
                                      part.log.log_end_offset, followers, part.info.isr, racks, fetch_offset,
                                      self.now_ms())

    def topic_log_config(self, topic: str, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """The topic's effective log config: its overrides from the image (``overrides``) over the broker's
        defaults, also on a broker that hosts none of its partitions."""
        if overrides is None:
            return self.log_manager.config_for(topic)
        return LogConfig.from_props(dict(overrides), self.log_manager.broker_props)

    def maybe_advance_high_watermark(self, part: Partition) -> bool:
        """The leader's high-watermark policy (``Partition.maybeIncrementLeaderHW``): the smallest log end
        offset of the ISR and of the followers caught up enough to join it; never backwards. Completes
        waiting appends; True when it moved."""
        if not part.is_leader(self.node_id):
            return False
        lg = part.log
        before = lg.high_watermark
        hw = leader_high_watermark(lg.log_end_offset, part.followers, part.maximal_isr, self.now_ms(),
                                   self.replica_lag_time_max_ms, self.isr_eligible)
        if hw > before:
            lg.update_high_watermark(hw)
        self.commit_waiters.advance((part.topic, part.index), lg.high_watermark)
        return lg.high_watermark > before

    def isr_eligible(self, broker_id: int) -> bool:
        """``Partition.isReplicaIsrEligible`` (KRaft): registered, unfenced, not shutting down."""
        broker = self.image.brokers.get(broker_id)
        return broker is not None and broker.active

    def record_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int, log_start_offset: int,
                              leader_end_offset: int, broker_epoch: int) -> None:
        """``Partition.updateFollowerFetchState``: the follower has everything below ``fetch_offset``; the
        high watermark may move, which completes acks=all appends and wakes consumers parked at it."""
        state = part.followers.get(replica_id)
        if state is None:
            return
        before, start_before = state.log_end_offset, state.log_start_offset
        state.update_fetch(fetch_offset, log_start_offset, self.now_ms(), leader_end_offset, broker_epoch)
        if state.log_start_offset != start_before:
            self._complete_low_watermark_waiters(part)
        self._maybe_expand_isr(part, replica_id, state)
        if before != fetch_offset and self.maybe_advance_high_watermark(part):
            self.fetch_waiters.wake((part.topic, part.index))

    def record_quiet_follower_fetch(self, part: Partition, replica_id: int, broker_epoch: int, leader_end: int,
                                    fetch_ms: int) -> bool:
        """``record_follower_fetch`` for an in-sync follower fetching again at the leader's end of a partition
        where nothing moved since (a fetch session's quiet partition): it is caught up now, and that is all such
        a fetch changes. False when more could follow (not in the ISR, an ISR change pending, another position
        or broker epoch): the partition is read and recorded in full."""
        state = part.followers.get(replica_id)
        if (state is None or part.pending_isr is not None or state.broker_epoch != broker_epoch
                or state.log_end_offset != leader_end or replica_id not in part.info.isr):
            return False
        # update_fetch of a fetch at the leader's end that moves nothing else, inlined: thousands per fetch
        state.last_fetch_ms = fetch_ms
        if fetch_ms > state.last_caught_up_ms:
            state.last_caught_up_ms = fetch_ms
        return True

    def low_watermark(self, part: Partition) -> int:
        """``Partition.lowWatermarkIfLeader``: the smallest log start offset of the leader and of the followers
        on live (unfenced) brokers; -1 until each of them has fetched in this leader epoch."""
        low = part.log.log_start_offset
        for replica_id, state in part.followers.items():
            broker = self.image.brokers.get(replica_id)
            if broker is not None and not broker.fenced:
                low = min(low, state.log_start_offset)
        return low

    def wait_for_low_watermark(self, part: Partition, offset: int) -> asyncio.Future | None:
        """DeleteRecords: a future done once every live replica has moved its log start to ``offset`` (None:
        already)."""
        if self.low_watermark(part) >= offset:
            return None
        fut = asyncio.get_running_loop().create_future()
        self.low_watermark_waiters.setdefault((part.topic, part.index), []).append((offset, fut))
        return fut

    def _complete_low_watermark_waiters(self, part: Partition) -> None:
        key = (part.topic, part.index)
        waiting = self.low_watermark_waiters.get(key)
        if not waiting:
            return
        low = self.low_watermark(part)
        keep = [(o, f) for o, f in waiting if not f.done() and o > low]
        for o, f in waiting:
            if o <= low and not f.done():
                f.set_result(low)
        if keep:
            self.low_watermark_waiters[key] = keep
        else:
            del self.low_watermark_waiters[key]

    def after_image(self, changes: ReplicaChanges | None = None) -> None:
        """On the event loop once an image is applied: led partitions' high watermarks may move (the ISR may
        have shrunk to the leader; after an unclean restart the checkpointed one is stale); acks=all appends
        waiting on a partition led elsewhere now fail with NOT_LEADER_OR_FOLLOWER.

        ``changes`` (from ``apply_image``): only the partitions it changed, unless a broker's registration changed
        (fencing moves who may count for the high watermark: every led partition); None: every partition."""
        at_once(self._after_image(changes))

    async def after_image_in_turns(self, changes: ReplicaChanges | None = None) -> None:
        """``after_image`` giving the event loop a turn every ``ITEMS_PER_TURN`` partitions: a change of thousands
        of partitions (a large CreateTopics, a broker fenced or back) does not hold requests up meanwhile."""
        await in_turns(self._after_image(changes))

    def _after_image(self, changes: ReplicaChanges | None) -> Generator[None, None, None]:
        if changes is None or changes.brokers:
            parts = list(self.partitions.values())
        else:
            parts = [p for tp in sorted(changes.partitions) if (p := self.partitions.get(tp)) is not None]
        for n, part in enumerate(parts):
            if n and n % ITEMS_PER_TURN == 0:
                yield
            key = (part.topic, part.index)
            if not part.is_leader(self.node_id):  # DelayedProduce: leadership moved while acks=all waited
                self.commit_waiters.fail(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif self.maybe_advance_high_watermark(part):
                self.fetch_waiters.wake(key)

    def _maybe_expand_isr(self, part: Partition, replica_id: int, state: FollowerState) -> None:
        """``Partition.maybeExpandIsr``: an eligible follower that has caught up joins the ISR."""
        if (self.alter_isr is None or part.pending_isr is not None or replica_id in part.info.isr
                or not may_join_isr(state, part.log.high_watermark, part.epoch_start_offset)
                or not self._isr_eligible_with_epoch(replica_id, state.broker_epoch)):
            return
        self._submit_isr(part, part.info.isr + (replica_id,))

    def maybe_shrink_isr(self) -> None:
        """``Partition.maybeShrinkIsr`` for every led partition (Kafka's isr-expiration task): followers that
        have not caught up within ``replica.lag.time.max.ms`` leave the ISR (never the leader itself)."""
        at_once(self._shrink_isr())

    async def maybe_shrink_isr_in_turns(self) -> None:
        """``maybe_shrink_isr`` giving the event loop a turn every ``ITEMS_PER_TURN`` partitions looked at or 100
        shrunk (each is logged): followers slow to create thousands of new logs are dropped by the thousand."""
        await in_turns(self._shrink_isr())

    def _shrink_isr(self) -> Generator[None, None, None]:
        if self.alter_isr is None:
            return
        now = self.now_ms()
        shrunk = 0
        for n, part in enumerate(list(self.partitions.values())):
            if n and n % ITEMS_PER_TURN == 0:
                yield
            if not part.is_leader(self.node_id) or part.pending_isr is not None \
                    or self.partitions.get((part.topic, part.index)) is not part:
                continue
            lagging = out_of_sync_replicas(part.log.log_end_offset, part.followers, part.info.isr, now,
                                           self.replica_lag_time_max_ms)
            if lagging:
                log.info("%s-%d: shrinking the ISR from %s: %s out of sync", part.topic, part.index,
                         list(part.info.isr), sorted(lagging))
                self._submit_isr(part, tuple(r for r in part.info.isr if r not in lagging))
                shrunk += 1
                if shrunk % 100 == 0:
                    yield

    def _submit_isr(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        assert self.alter_isr is not None
        part.pending_isr = new_isr
        part.pending_from_epoch = part.info.partition_epoch
        self.alter_isr(part, new_isr)

    def isr_change_failed(self, part: Partition) -> None:
        """The controller refused the change or could not be reached: the next fetch or expiry check retries."""
        part.pending_isr = None

    def _isr_eligible_with_epoch(self, broker_id: int, fetched_broker_epoch: int) -> bool:
        """``isReplicaIsrEligible`` with ``isBrokerEpochIsrEligible``: the broker epoch of its fetches is the
        registered one (or -1: an older fetch version)."""
        broker = self.image.brokers.get(broker_id)
        return (broker is not None and broker.active
                and (fetched_broker_epoch == -1 or fetched_broker_epoch == broker.broker_epoch))
