"""The share partitions this broker leads (Kafka 4.2's SharePartitionManager with DelayedShareFetch's reads): the
adapter around the pure ``cluster/share/share_partition.SharePartition`` and ``share_session.ShareSessionCache``.

* One SharePartition per (group, topic id, partition) on the partition's leader, created at first use and
  initialized from the share coordinator (``SharePersister.read``); a start offset of -1 resolves through the
  group's ``share.auto.offset.reset`` (latest: the high watermark, earliest: the log start, by_duration: the first
  offset below the high watermark at or after now minus the duration, else OFFSET_NOT_AVAILABLE and the next fetch
  tries again). A partition no longer led here (or led at a
  new epoch) is dropped and fenced: its waiting fetches wake and answer NOT_LEADER_OR_FOLLOWER. A failed read
  answers its error as Kafka's ``fetchPersisterError`` maps it (COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND, ...;
  a lost connection or an invalid state UNKNOWN_SERVER_ERROR) and leaves the cache, as does a partition whose
  acknowledgement's write answered a fencing error (``fencedSharePartitionHandler``): the next request reads the
  state again. Acknowledgements reach only a cached partition (else UNKNOWN_TOPIC_OR_PARTITION).
* Acknowledgements and releases change the state at once and are answered only after their WriteShareGroupState
  committed (``persist``); lock expiry writes in the background (Kafka ignores the outcome).
* Reads go through ``Log.read`` (a file slice for sendfile); the slice's batch headers (``slice_batches``, up to
  the batch holding ``SharePartition.acquire_read_bound``: the rest of a large read cannot be acquired) are what
  ``SharePartition.acquire`` acquires whole, and the answer's records are the slice cut to the acquired batches:
  no per-record work in Python. A partition with nothing past its next fetch offset is not read.
* Long poll: a ShareFetch parks on the partitions' append waiters (``ReplicaManager.fetch_waiters``) and on this
  manager's own (releases, acknowledgements, lock expiry, a freed window, a lost leadership).
* Share sessions (``ShareSessionCache``) drop with their connection, releasing the member's records.
* Lock-expiry timers: one task waits for the earliest lock deadline of every partition (broker/clock.py's time).
* Metrics (KIP-1103; ``SharePartitionCollector``): counted per request, acknowledgement batch or acquired batch,
  read at scrape time; per-partition gauges from the cached state.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from broker.replication.replica_manager import FetchWaiters
from broker.share.share_coordinator_service import LatencyBuckets
from broker.timeouts import wait_for
from cluster.groups.group_config import GroupConfig, auto_offset_reset, group_settings
from cluster.share.share_partition import (
    AcknowledgeType, AcknowledgementBatch, ShareError, SharePartition, StateBatch, Transition,
    aborted_transaction_batches,
)
from cluster.share.share_session import ShareSession, ShareSessionCache
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import ReadShareGroupStateRequest, WriteShareGroupStateRequest
from protocol.generated.messages import read_share_group_state_request as rsr
from protocol.generated.messages import write_share_group_state_request as wsr
from storage.errors import OffsetOutOfRangeError
from storage.file_records import FileSlice, slice_batches
from storage.log import FetchIsolation

if TYPE_CHECKING:
    from broker.clock import Clock
    from broker.replication.replica_manager import Partition

log = logging.getLogger("odradek.share.fetch")

LOG_OVERHEAD = 12  # a batch's offset and length fields before its batch_length bytes
RECORDS_OFFSET = 61  # a v2 batch's header size: its first record follows
#: how long the timer task sleeps at most without a deadline (a leadership check then)
IDLE_CHECK_S = 1.0
#: the most a ShareFetch's long poll waits, whatever its max_wait_ms (bounded)
MAX_WAIT_S = 60.0
#: an acknowledgement's or release's answers that drop the share partition from the cache (Kafka 4.2's
#: SharePartitionManager.fencedSharePartitionHandler, after fetchPersisterError's mapping)
FENCING_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_STATE_EPOCH,
                            ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


class CountBuckets(LatencyBuckets):
    """A histogram of record counts (SharePartitionMetrics' InFlightBatchMessageCount)."""

    BOUNDS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 5000)


class RatioBuckets(LatencyBuckets):
    """A histogram of percentages (ShareGroupMetrics' RequestTopicPartitionsFetchRatio)."""

    BOUNDS = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)


#: ShareGroupMetrics' ackType tag of each acknowledgement type (Kafka's capitalized AcknowledgeType; Gap uncounted)
ACK_TYPE_NAMES = {AcknowledgeType.ACCEPT: "Accept", AcknowledgeType.RELEASE: "Release",
                  AcknowledgeType.REJECT: "Reject", AcknowledgeType.RENEW: "Renew"}


class _Entry:
    __slots__ = ("sp", "topic", "part", "ready", "error", "tail", "batch_sizes", "leadership_lost")

    def __init__(self, sp: SharePartition, topic: str, part: "Partition") -> None:
        self.sp = sp
        self.topic = topic
        self.part = part
        self.ready: asyncio.Future | None = None
        self.error = ErrorCode.NONE
        self.tail: asyncio.Future | None = None  # the last write sent: writes go out in the order issued
        self.batch_sizes = CountBuckets()  # records of each batch added to the in-flight state
        self.leadership_lost = False  # dropped for a lost leadership (not fenced by its own write)


def _zigzag_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _is_abort_marker(records: FileSlice, pos: int) -> bool:
    """A control batch's first record's key is (version int16, type int16): type 0 is ABORT."""
    buf = os.pread(records.fd, 32, pos + RECORDS_OFFSET)
    try:
        _length, p = _zigzag_varint(buf, 0)
        p += 1  # attributes
        _ts, p = _zigzag_varint(buf, p)
        _od, p = _zigzag_varint(buf, p)
        key_len, p = _zigzag_varint(buf, p)
        if key_len < 4:
            return False
        return int.from_bytes(buf[p + 2:p + 4], "big", signed=True) == 0
    except (IndexError, ValueError):
        return False


def _cut(records: FileSlice, found, first: int, last: int) -> FileSlice | None:
    """The part of a read's slice holding the batches with offsets in ``[first, last]`` (``found``: the slice's
    batches as ``(position, header)``); None if none does."""
    start = end = None
    for pos, h in found:
        if h.last_offset < first:
            continue
        if h.base_offset > last:
            break
        if start is None:
            start = pos
        end = pos + h.batch_length + LOG_OVERHEAD
    if start is None:
        return None
    return FileSlice(records.fd, start, end - start, records.path, records.handle)


class SharePartitionManager:
    """See the module docstring."""

    def __init__(self, node_id: int, config, replicas, persister, clock: "Clock", metadata) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.persister = persister
        self.clock = clock
        self.metadata = metadata
        self.group_config = GroupConfig.from_props(config.values)
        self._settings_image = None  # the image ``_settings`` was worked out from
        self._settings: dict[str, object] = {}
        self.max_in_flight = int(config.get("group.share.partition.max.record.locks") or 2000)
        self.max_delivery = int(config.get("group.share.delivery.count.limit") or 5)
        self.sessions = ShareSessionCache(int(config.get("group.share.max.share.sessions") or 2000))
        self.partitions: dict[tuple[str, bytes, int], _Entry] = {}
        self.waiters = FetchWaiters()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Future | None = None
        self._background: set[asyncio.Future] = set()
        self._next_due: int | None = None  # the earliest lock deadline the timer task sleeps until
        # ShareGroupMetrics: records acknowledged by ackType (RecordAcknowledgementsPerSec), PartitionLoadTimeMs
        self.acknowledged_records = {name: 0 for name in ACK_TYPE_NAMES.values()}
        self.partition_load_time = LatencyBuckets()
        # per group: RequestTopicPartitionsFetchRatio, TopicPartitionsAcquireTimeMs
        self.fetch_ratio: dict[str, RatioBuckets] = {}
        self.acquire_time: dict[str, LatencyBuckets] = {}

    # ---- lifecycle ------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.ensure_future(self._timers())

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._background) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self._task = None

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # ---- settings -------------------------------------------------------------------------------------------
    def settings(self, group_id: str):
        """The group's settings in the current metadata image, worked out once per image (every ShareFetch and
        ShareAcknowledge asks, per partition too)."""
        image = self.metadata.image
        if image is not self._settings_image:
            self._settings_image = image
            self._settings.clear()
        found = self._settings.get(group_id)
        if found is None:
            found = self._settings[group_id] = group_settings(self.group_config, image, group_id)
        return found

    def lock_duration_ms(self, group_id: str) -> int:
        return self.settings(group_id).share_record_lock_duration_ms

    # ---- share partitions -----------------------------------------------------------------------------------
    async def share_partition(self, group_id: str, topic_id: bytes, topic: str, index: int, create: bool = True,
                              wait_s: float | None = None) -> tuple[_Entry | None, "Partition | None", int]:
        """The initialized share partition on this leader, or the error to answer (NOT_LEADER_OR_FOLLOWER, ...).
        A share partition whose state is still being read after ``wait_s`` (None: no limit) is LEADER_NOT_AVAILABLE
        (``maybeInitialize``'s answer while INITIALIZING); its read goes on.

        ``create`` False is SharePartitionManager.acknowledge's lookup: a share partition not cached here (never
        fetched here, or dropped after a failed initialization or a fence) is UNKNOWN_TOPIC_OR_PARTITION, its state
        not read."""
        part, err = self.replicas.leader_partition(topic, index)
        key = (group_id, topic_id, index)
        e = self.partitions.get(key)
        if err:
            if e is not None:
                self._drop(key, e)
            return None, part, err
        if e is not None and (e.part is not part or e.sp.leader_epoch != part.leader_epoch):
            self._drop(key, e)
            e = None
        if e is None and not create:
            return None, part, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if e is None:
            settings = self.settings(group_id)
            sp = SharePartition(group_id, topic_id, index, leader_epoch=part.leader_epoch,
                                max_in_flight_records=self.max_in_flight, max_delivery_count=self.max_delivery,
                                record_lock_duration_ms=settings.share_record_lock_duration_ms)
            e = _Entry(sp, topic, part)
            self.partitions[key] = e
            sp.begin_initialize()
            e.ready = asyncio.ensure_future(self._initialize(e, settings.share_auto_offset_reset))
        if not e.sp.active and e.ready is not None and not e.ready.done():
            await asyncio.wait([e.ready], timeout=wait_s)  # (not cancelled by this request's end)
            if not e.ready.done():
                return None, part, ErrorCode.LEADER_NOT_AVAILABLE
        if self.partitions.get(key) is not e or not e.sp.active:
            # its initialization failed (the read's error as fetchPersisterError maps it; an invalid state
            # UNKNOWN_SERVER_ERROR) or it was fenced meanwhile (NOT_LEADER_OR_FOLLOWER): out of the cache, the next
            # request reads the state again
            if self.partitions.get(key) is e:
                del self.partitions[key]
            return None, part, int(e.error or ErrorCode.UNKNOWN_SERVER_ERROR)
        e.sp.record_lock_duration_ms = self.lock_duration_ms(group_id)
        e.sp.update_log_start_offset(part.log.log_start_offset)
        return e, part, 0

    async def _initialize(self, e: _Entry, reset: str) -> None:
        """``maybeInitialize``: ReadShareGroupState, then the start offset resolved and the state loaded."""
        sp = e.sp
        started = self.clock.monotonic()
        req = ReadShareGroupStateRequest(group_id=sp.group_id, topics=[rsr.ReadStateData(
            topic_id=sp.topic_id, partitions=[rsr.PartitionData(partition=sp.partition,
                                                                leader_epoch=sp.leader_epoch)])])
        key = (sp.group_id, sp.topic_id, sp.partition)
        try:
            resp = await self.persister.read(req)
            if self.partitions.get(key) is not e:
                return  # dropped (fenced) while its state was read: nothing to load
            pr = resp.results[0].partitions[0]
            start = pr.start_offset
            if not pr.error_code and start < 0:
                start = self._reset_offset(e.part, reset)
            batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                       for b in pr.state_batches]
            sp.initialize(start, pr.state_epoch, batches, pr.error_code)
            self.partition_load_time.observe((self.clock.monotonic() - started) * 1000)
            for b in batches:
                e.batch_sizes.observe(b.last_offset - b.first_offset + 1)
            log.info("share partition %s %s-%d initialized: start offset %d, state epoch %d, %d batches",
                     sp.group_id, e.topic, sp.partition, sp.start_offset, sp.state_epoch, len(batches))
        except ShareError as exc:
            e.error = exc.code
            log.warning("share partition %s %s-%d failed to initialize: %s", sp.group_id, e.topic, sp.partition, exc)
        except Exception as exc:  # noqa: BLE001 - the read failed: a later fetch tries again
            sp.fail_initialization()
            # Errors.forException: a Kafka error keeps its code (the reset offset's lookup, say), else unknown
            e.error = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            # by_duration with no record in its window yet fails each fetch until one is written: debug, as
            # Kafka's handleInitializationException logs it
            log.log(logging.DEBUG if e.error == ErrorCode.OFFSET_NOT_AVAILABLE else logging.WARNING,
                    "share partition %s %s-%d: reading its state failed: %r", sp.group_id, e.topic,
                    sp.partition, exc)
        if not sp.active and self.partitions.get(key) is e:
            # handleInitializationException: out of the cache at once; the requests waiting on this read answer
            # its error, the next one reads the state again
            del self.partitions[key]
            self.waiters.wake((e.topic, sp.partition))
        self._after(e)

    def _reset_offset(self, part: "Partition", reset: str) -> int:
        """``share.auto.offset.reset`` for a share partition whose state was never written
        (``SharePartition.startOffsetDuringInitialization``).

        by_duration is ``ShareFetchUtils.offsetForTimestamp``: the first offset below the high watermark
        (READ_UNCOMMITTED's last fetchable offset) whose record is at most the duration old; none yet is
        OFFSET_NOT_AVAILABLE, so the initialization fails, the share partition leaves the cache and the next
        fetch tries again (until such a record is written). latest on a new leader whose high watermark is still
        below its epoch's start offset is OFFSET_NOT_AVAILABLE too, until the high watermark gets there."""
        strategy, duration_ms = auto_offset_reset(reset)
        lg = part.log
        if strategy == "earliest":
            return lg.log_start_offset
        if strategy == "by_duration":
            target = self.clock.now_ms() - duration_ms
            found = lg.fetch_offset_by_timestamp(target)
            if found is None or not 0 <= found.offset < lg.high_watermark:
                raise KafkaError(f"offset for timestamp {target} not found", ErrorCode.OFFSET_NOT_AVAILABLE)
            return found.offset
        if part.epoch_start_offset > lg.high_watermark:
            # offsetForLatestTimestamp: Partition.fetchOffsetForTimestamp's maybeOffsetsError on a new leader whose
            # high watermark has not reached its epoch's first offset (as ListOffsets answers latest)
            raise KafkaError("the high watermark is behind this leader epoch's start", ErrorCode.OFFSET_NOT_AVAILABLE)
        return lg.high_watermark

    def _drop(self, key, e: _Entry) -> None:
        """Leadership lost: the state goes (the next leader reads it from the share coordinator)."""
        e.leadership_lost = True
        self._fence(key, e, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log.info("share partition %s %s-%d dropped: no longer led here at epoch %d", e.sp.group_id, e.topic,
                 e.sp.partition, e.sp.leader_epoch)

    def _fence(self, key, e: _Entry, code: int) -> None:
        """``removeSharePartitionFromCache``: fenced and out of the cache at once (the next request reads the state
        again); requests still holding it answer ``code``."""
        if self.partitions.get(key) is e:
            del self.partitions[key]
        e.sp.mark_fenced()
        e.error = e.error or code
        self.waiters.wake((e.topic, e.sp.partition))

    def check_leadership(self) -> None:
        for key, e in list(self.partitions.items()):
            part = self.replicas.partitions.get((e.topic, e.sp.partition))
            if part is not e.part or not part.is_leader(self.node_id) or part.leader_epoch != e.sp.leader_epoch:
                if e.ready is None or e.ready.done():
                    self._drop(key, e)

    # ---- writes ---------------------------------------------------------------------------------------------
    async def persist(self, e: _Entry, transition: Transition) -> int:
        """Answer code of an acknowledgement or release: its write committed (or rolled back) first."""
        if transition.error:
            return int(transition.error)
        if transition.write is None:
            self._after(e)
            return 0
        return await asyncio.shield(self._write(e, transition.write))

    def _write(self, e: _Entry, write) -> asyncio.Future:
        """Send ``write`` after the partition's earlier writes (the coordinator applies them in order); the future's
        result is the code to answer the acknowledgement or release with."""
        task = asyncio.ensure_future(self._send_write(e, write, e.tail))
        e.tail = task
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _send_write(self, e: _Entry, write, previous: asyncio.Future | None) -> int:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])
        sp = e.sp
        req = WriteShareGroupStateRequest(group_id=sp.group_id, topics=[wsr.WriteStateData(
            topic_id=sp.topic_id, partitions=[wsr.PartitionData(
                partition=sp.partition, state_epoch=write.state_epoch, leader_epoch=write.leader_epoch,
                start_offset=write.start_offset, delivery_complete_count=write.delivery_complete_count,
                state_batches=[wsr.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                              delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                               for b in write.state_batches])])])
        try:
            resp = await self.persister.write(req)
            code = next((p.error_code for t in resp.results for p in t.partitions if p.error_code), 0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - answered as the persister's failure; the state rolls back
            log.warning("writing share state of %s %s-%d failed: %r", sp.group_id, e.topic, sp.partition, exc)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        result = sp.write_completed(write.write_id, code, self.clock.now_ms())
        if code and write.reason == "timeout":
            log.debug("share partition %s %s-%d: the lock-expiry write answered error %d", sp.group_id, e.topic,
                      sp.partition, code)
        if result in FENCING_ERRORS:
            # an acknowledgement's or release's write: a newer leader or state epoch wrote since, or the coordinator
            # knows no such group or partition (fencedSharePartitionHandler): this state is stale; the next request
            # reads it again. A lock expiry's write answers nothing (Kafka logs its failure and keeps the
            # expiry): a stale state is fenced by the next acknowledgement's write.
            self._fence((sp.group_id, sp.topic_id, sp.partition), e, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            log.info("share partition %s %s-%d fenced: its state write answered %s", sp.group_id, e.topic,
                     sp.partition, ErrorCode(code).name)
        self._after(e)
        return int(result)

    def _after(self, e: _Entry) -> None:
        """After any change: wake the fetches waiting on the partition, send the lock-expiry writes, re-arm the
        timer for the next lock deadline."""
        if e.sp.take_woken():
            self.waiters.wake((e.topic, e.sp.partition))
        for w in e.sp.drain_writes():
            self._write(e, w)
        due = e.sp.next_deadline()
        if due is not None and (self._next_due is None or due < self._next_due):
            self._next_due = due
            self._poke()  # only a lock ending before the timer's next wake-up needs it earlier

    async def _timers(self) -> None:
        """Lock expiry at each partition's next deadline; leadership checked at least every ``IDLE_CHECK_S``."""
        while True:
            try:
                self._wake.clear()  # before the deadlines are read: a lock taken meanwhile pokes again
                now = self.clock.now_ms()
                deadlines = [d for e in self.partitions.values() if (d := e.sp.next_deadline()) is not None]
                self._next_due = min(deadlines) if deadlines else None
                delay = IDLE_CHECK_S if not deadlines else min(IDLE_CHECK_S, max(0.0, (min(deadlines) - now) / 1000))
                if delay > 0:
                    try:
                        await wait_for(self._wake.wait(), delay)
                    except asyncio.TimeoutError:
                        pass
                self.expire_locks(self.clock.now_ms())
                self.check_leadership()
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the timers keep running
                log.exception("share partition timers")
                await asyncio.sleep(IDLE_CHECK_S)

    def expire_locks(self, now: int) -> None:
        """``releaseAcquisitionLockOnTimeout`` of every lock due by ``now``: the records change state at once, the
        writes go out in the background (their outcome changes nothing but the start offset)."""
        for e in list(self.partitions.values()):
            d = e.sp.next_deadline()
            if d is not None and d <= now:
                for w in e.sp.on_time(now):
                    self._write(e, w)
                self._after(e)

    # ---- sessions -------------------------------------------------------------------------------------------
    def on_disconnect(self, connection_id: str) -> None:
        """A connection closed: its share session goes and the member's records are released."""
        session = self.sessions.on_disconnect(connection_id)
        if session is not None:
            self._spawn(self.release_session(session))

    async def release_session(self, session: ShareSession) -> None:
        """``releaseSession``: every record the member holds in the session's partitions here becomes Available
        (the delivery not counted), each release written before this returns."""
        now = self.clock.now_ms()
        group, member = session.key.group_id, session.key.member_id
        pending = []
        for tid, index in session.partitions:
            e = self.partitions.get((group, tid, index))
            if e is not None and e.sp.active:
                pending.append(self.persist(e, e.sp.release_acquired_records(member, now)))
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def acknowledge(self, e: _Entry, member_id: str, batches: list[AcknowledgementBatch]) -> int:
        t = e.sp.acknowledge(member_id, batches, self.clock.now_ms())
        code = await self.persist(e, t)
        if not code:
            self._count_acknowledgements(batches)
        return code

    def share_fetch_done(self, group_id: str, requested: int, acquired: int, elapsed_ms: float) -> None:
        """One ShareFetch's read (DelayedShareFetch's metrics): the share of its partitions that acquired records,
        in percent, and the time until they were acquired or the wait ended."""
        if requested <= 0:
            return
        ratio = self.fetch_ratio.get(group_id)
        if ratio is None:
            ratio = self.fetch_ratio[group_id] = RatioBuckets()
            self.acquire_time[group_id] = LatencyBuckets()
        ratio.observe(acquired * 100 // requested)
        self.acquire_time[group_id].observe(elapsed_ms)

    def _count_acknowledgements(self, batches: list[AcknowledgementBatch]) -> None:
        """RecordAcknowledgementsPerSec: a batch's records under its one type, else one per offset's type."""
        counts = self.acknowledged_records
        for b in batches:
            types = b.acknowledge_types
            if len(types) == 1:
                name = ACK_TYPE_NAMES.get(types[0])
                if name is not None:
                    counts[name] += b.last_offset - b.first_offset + 1
            else:
                for t in types:
                    name = ACK_TYPE_NAMES.get(t)
                    if name is not None:
                        counts[name] += 1

    # ---- reads ----------------------------------------------------------------------------------------------
    def acquire(self, e: _Entry, member_id: str, max_bytes: int, min_one: bool, max_records: int, batch_size: int,
                record_limit: bool, read_committed: bool):
        """Read from the next fetch offset and acquire what was read: ``(records slice, acquired, bytes)`` or None.
        Synchronous from the offset to the acquisition, so two fetches never acquire the same records."""
        sp = e.sp
        if not sp.active or not sp.can_acquire_records():
            return None
        lg = e.part.log
        offset = sp.next_fetch_offset()
        if offset >= (lg.last_stable_offset if read_committed else lg.high_watermark) >= lg.log_start_offset:
            return None  # nothing to read yet (a session's drained partitions, on every fetch): no read
        isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
        try:
            info = lg.read(offset, max_bytes, isolation, min_one)
        except OffsetOutOfRangeError:
            if offset < lg.log_start_offset:
                sp.update_log_start_offset(lg.log_start_offset)
                self._after(e)
            return None
        except KafkaError as exc:
            log.warning("share fetch of %s-%d at %d: %s", e.topic, sp.partition, offset, exc)
            return None
        records = info.records
        found = slice_batches(records, sp.acquire_read_bound(offset, max_records))
        if not found:
            return None
        headers = [h for _, h in found]
        aborted = ()
        if read_committed and info.aborted_transactions:
            positions = {id(h): pos for pos, h in found}
            aborted = aborted_transaction_batches(
                headers, [(a.producer_id, a.first_offset) for a in info.aborted_transactions],
                lambda h: _is_abort_marker(records, positions[id(h)]))
        end_before = sp.end_offset if sp.num_in_flight_batches() else -1
        got = sp.acquire(member_id, headers, fetch_offset=offset, max_fetch_records=max_records,
                         batch_size=batch_size, now=self.clock.now_ms(), record_limit=record_limit,
                         aborted_batches=aborted)
        self._after(e)
        if not got.records:
            return None
        for r in got.records:
            if r.first_offset > end_before:  # a batch new to the in-flight state (addBatchToCache)
                e.batch_sizes.observe(r.last_offset - r.first_offset + 1)
        cut = _cut(records, found, got.records[0].first_offset, got.records[-1].last_offset)
        return None if cut is None else (cut, got, cut.length)

    def readable_bytes(self, e: _Entry, max_bytes: int, read_committed: bool) -> int:
        """``DelayedShareFetch.tryComplete``'s measure: the bytes a read from the next fetch offset returns now (no
        acquisition), to hold a fetch back until ``min_bytes`` are there."""
        sp = e.sp
        if not sp.active or not sp.can_acquire_records():
            return 0
        isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
        try:
            return e.part.log.read(sp.next_fetch_offset(), max_bytes, isolation, True).records.length
        except (OffsetOutOfRangeError, KafkaError):
            return 0

    async def wait(self, keys: list[tuple[str, int]], timeout: float) -> bool:
        """Park until an append to, or a share-state change of, one of ``keys`` (True), or ``timeout`` (False)."""
        timeout = min(timeout, MAX_WAIT_S)
        appends = self.replicas.fetch_waiters.register(keys)
        changes = self.waiters.register(keys)
        try:
            done, _ = await asyncio.wait([appends, changes], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            return bool(done)
        finally:
            self.replicas.fetch_waiters.unregister(keys, appends)
            self.waiters.unregister(keys, changes)
            for f in (appends, changes):
                if not f.done():
                    f.cancel()


class SharePartitionCollector:
    """KIP-1103's broker metrics of the share partitions led here, named as broker/observability/metrics.py names
    Kafka's (meters are counters):

    * ``kafka.server:type=ShareGroupMetrics``: RecordAcknowledgementsPerSec{ackType} (records acknowledged, written),
      PartitionLoadTimeMs (ReadShareGroupState until the state is loaded, a histogram in ms) and, per group,
      RequestTopicPartitionsFetchRatio and TopicPartitionsAcquireTimeMs (histograms);
    * ``kafka.server:type=SharePartitionMetrics`` per {group, topic, partition}: InFlightMessageCount,
      InFlightBatchCount (gauges), AcquisitionLockTimeoutPerSec (records whose lock expired) and
      InFlightBatchMessageCount (records of each batch added to the in-flight state, a histogram)."""

    def __init__(self, manager: SharePartitionManager) -> None:
        self.manager = manager

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        mgr = self.manager
        acks = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgements",
                                   "Records acknowledged, by acknowledgement type (RecordAcknowledgementsPerSec)",
                                   labels=["ackType"])
        for name, n in mgr.acknowledged_records.items():
            acks.add_metric([name], n)
        yield acks
        load = mgr.partition_load_time
        lt = HistogramMetricFamily("kafka_server_sharegroupmetrics_partitionloadtimems",
                                   "Time to load a share partition's state (PartitionLoadTimeMs)")
        lt.add_metric([], load.buckets(), load.sum)
        yield lt
        ratio = HistogramMetricFamily("kafka_server_sharegroupmetrics_requesttopicpartitionsfetchratio",
                                      "Percent of a ShareFetch's partitions that acquired records "
                                      "(RequestTopicPartitionsFetchRatio)", labels=["group"])
        acquire = HistogramMetricFamily("kafka_server_sharegroupmetrics_topicpartitionsacquiretimems",
                                        "Time until a ShareFetch acquired records or its wait ended "
                                        "(TopicPartitionsAcquireTimeMs)", labels=["group"])
        for group, h in list(mgr.fetch_ratio.items()):
            ratio.add_metric([group], h.buckets(), h.sum)
            t = mgr.acquire_time[group]
            acquire.add_metric([group], t.buckets(), t.sum)
        yield ratio
        yield acquire
        labels = ["group", "topic", "partition"]
        msgs = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightmessagecount",
                                 "Records in the share partition's in-flight window (InFlightMessageCount)",
                                 labels=labels)
        nb = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightbatchcount",
                               "In-flight batches cached (InFlightBatchCount)", labels=labels)
        timeouts = CounterMetricFamily("kafka_server_sharepartitionmetrics_acquisitionlocktimeout",
                                       "Records whose acquisition lock expired (AcquisitionLockTimeoutPerSec)",
                                       labels=labels)
        sizes = HistogramMetricFamily("kafka_server_sharepartitionmetrics_inflightbatchmessagecount",
                                      "Records of each batch added to the in-flight state (InFlightBatchMessageCount)",
                                      labels=labels)
        for e in list(mgr.partitions.values()):
            sp = e.sp
            if not sp.active:
                continue
            lv = [sp.group_id, e.topic, str(sp.partition)]
            msgs.add_metric(lv, sp.num_in_flight_records())
            nb.add_metric(lv, sp.num_in_flight_batches())
            timeouts.add_metric(lv, sp.lock_timeouts)
            sizes.add_metric(lv, e.batch_sizes.buckets(), e.batch_sizes.sum)
        yield msgs
        yield nb
        yield timeouts
        yield sizes
