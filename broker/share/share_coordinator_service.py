"""The share coordinator's adapter: asyncio, the ``__share_group_state`` log, timers (Kafka's ShareCoordinatorService
over the CoordinatorRuntime, for one broker), run as ``broker/groups/group_service.py`` runs the group coordinator.

``cluster.share.share_coordinator`` holds the state machine (one :class:`ShareCoordinatorShard` per
``__share_group_state`` partition this broker leads); this module

* maps a share-partition key ``group:topicId:partition`` to its partition (``abs(java hashCode) % partitions``)
  and creates ``__share_group_state`` on first use (``share.coordinator.state.topic.num.partitions``,
  ``.replication.factor``, ``.min.isr`` as its ``min.insync.replicas``, cleanup.policy=delete, retention.ms=-1:
  the coordinator prunes it itself);
* loads a partition by replaying its records into a fresh shard (an undecodable record skipped and logged), and
  unloads it when this broker no longer leads it at the epoch it was loaded at;
* splits each request by share-partition and runs each key on its shard on the event loop thread: the records
  are appended at once (acks=all), replayed into the shard at their offsets, and the answer waits for the commit
  (``share.coordinator.write.timeout.ms``); a key led elsewhere answers NOT_COORDINATOR;
* gives deleted topics' share-partitions tombstones (onTopicsDeleted);
* every ``share.coordinator.state.topic.prune.interval.ms`` advances each led partition's log start offset to the
  shard's last redundant offset (at most the high watermark), as Kafka's record pruning does with DeleteRecords,
  and every ``share.coordinator.cold.partition.snapshot.interval.ms`` snapshots partitions nobody writes, so they
  do not hold the pruning back.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import logging
from typing import TYPE_CHECKING, Any, Callable

from broker.timeouts import wait_for
from cluster.groups.group_records import UnknownRecordType
from cluster.groups.share_state_records import decode_share_state_record
from cluster.share.share_coordinator import (
    Result, ShareCoordinatorConfig, ShareCoordinatorShard, share_coordinator_partition_for,
    share_partition_key_string,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import (
    CreateTopicsRequest, DeleteShareGroupStateResponse, InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse, ReadShareGroupStateSummaryResponse, WriteShareGroupStateResponse,
)
from protocol.generated.messages import delete_share_group_state_response as dsr
from protocol.generated.messages import initialize_share_group_state_response as isr
from protocol.generated.messages import read_share_group_state_response as rsr
from protocol.generated.messages import read_share_group_state_summary_response as rssr
from protocol.generated.messages import write_share_group_state_response as wsr
from protocol.generated.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from protocol.record_codec import Record, build_batch, decode_batch
from protocol.topics import SHARE_GROUP_STATE_TOPIC
from storage.log import ORIGIN_COORDINATOR

if TYPE_CHECKING:
    from broker.clock import Clock
    from broker.config import BrokerConfig
    from broker.controlplane.controller_channel import ControllerChannel
    from broker.quorum.metadata_publisher import MetadataPublisher
    from broker.replication.replica_manager import ReplicaManager

log = logging.getLogger("odradek.share")

LEADERSHIP_CHECK_MS = 1000

# each API's response class, its per-topic result class and per-partition result class
_SHAPES = {
    "write": (WriteShareGroupStateResponse, wsr.WriteStateResult, wsr.PartitionResult),
    "read": (ReadShareGroupStateResponse, rsr.ReadStateResult, rsr.PartitionResult),
    "summary": (ReadShareGroupStateSummaryResponse, rssr.ReadStateSummaryResult, rssr.PartitionResult),
    "initialize": (InitializeShareGroupStateResponse, isr.InitializeStateResult, isr.PartitionResult),
    "delete": (DeleteShareGroupStateResponse, dsr.DeleteStateResult, dsr.PartitionResult),
}
_VERB = {"write": "write", "read": "read", "summary": "read summary of", "initialize": "initialize",
         "delete": "delete"}


class ShareServiceError(Exception):
    """A key the coordinator cannot take here: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE (or an append's error, mapped as Kafka's handleOperationException)."""

    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode(code).name)
        self.code = code


class ShareCoordinatorService:
    def __init__(self, node_id: int, config: "BrokerConfig", metadata: "MetadataPublisher",
                 replicas: "ReplicaManager", controller: "ControllerChannel", clock: "Clock") -> None:
        self.node_id = node_id
        self.broker_config = config
        self.metadata = metadata
        self.replicas = replicas
        self.controller = controller
        self.clock = clock
        self.config = ShareCoordinatorConfig.from_props(config.values)
        self.write_timeout_s = int(config.get("share.coordinator.write.timeout.ms", 5000)) / 1000
        self.prune_interval_ms = int(config.get("share.coordinator.state.topic.prune.interval.ms", 300_000))
        self.shards: dict[int, ShareCoordinatorShard] = {}
        self._epochs: dict[int, int] = {}  # loaded partition -> the leader epoch it was loaded at
        self._published = None  # the newest image published to this service
        self._loading: dict[int, asyncio.Future] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._create_lock: asyncio.Lock | None = None
        self._image_seen = None
        self._led: tuple[Any, dict[int, int]] = (None, {})  # (image, ``_led_partitions`` of it)
        self._writes: set[asyncio.Task] = set()
        self._pruned: dict[int, int] = {}  # partition -> the log start offset last set by pruning
        self._last_write: dict[int, asyncio.Future] = {}  # partition -> the commit of its latest append
        self.writes_total = 0  # requests that wrote state (share-coordinator-metrics write-total)
        self.write_latency = LatencyBuckets()  # WriteShareGroupState answered, written state committed (write-latency)
        self.last_pruned_offset: dict[int, int] = {}  # partition -> log start offset set by pruning
        self.active = False

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._create_lock = asyncio.Lock()
        self.active = True
        if self.metadata.image.topic(SHARE_GROUP_STATE_TOPIC) is not None:
            await self._sync_leadership()
        self._task = asyncio.ensure_future(self._timers())

    async def stop(self) -> None:
        self.active = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5)
            self._task = None
        for task in list(self._writes):
            task.cancel()
        for p in list(self.shards):
            self._unload(p)

    # ---- partitions ------------------------------------------------------------------------------
    def num_partitions(self) -> int:
        topic = self.metadata.image.topic(SHARE_GROUP_STATE_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return int(self.broker_config.get("share.coordinator.state.topic.num.partitions"))

    def partition_for(self, key: str) -> int:
        """ShareCoordinatorService.partitionFor of a ``group:topicId:partition`` key."""
        return share_coordinator_partition_for(key, self.num_partitions())

    async def ensure_topic(self) -> None:
        """Create ``__share_group_state`` as Kafka's AutoTopicCreationManager does for the share coordinator."""
        if self.metadata.image.topic(SHARE_GROUP_STATE_TOPIC) is not None:
            return
        async with self._create_lock:
            if self.metadata.image.topic(SHARE_GROUP_STATE_TOPIC) is not None:
                return
            config = self.broker_config
            # never capped (Kafka): with fewer live brokers the creation fails and FindCoordinator answers
            # COORDINATOR_NOT_AVAILABLE until the cluster has them
            configs = {"cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
                       "min.insync.replicas": str(int(config.get("share.coordinator.state.topic.min.isr"))),
                       "segment.bytes": str(int(config.get("share.coordinator.state.topic.segment.bytes")))}
            request = CreateTopicsRequest(topics=[CreatableTopic(
                name=SHARE_GROUP_STATE_TOPIC,
                num_partitions=int(config.get("share.coordinator.state.topic.num.partitions")),
                replication_factor=int(config.get("share.coordinator.state.topic.replication.factor")),
                assignments=[], configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
            res = await self.controller.call(request)
            err = res.topics[0]
            if err.error_code and err.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.error("could not create %s: %s", SHARE_GROUP_STATE_TOPIC, err.error_message)
                raise ShareServiceError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            log.info("created %s with %d partitions", SHARE_GROUP_STATE_TOPIC, self.num_partitions())
        await self._sync_leadership()

    async def on_new_metadata_image(self, image) -> None:
        """Publisher step: shards of partitions no longer led at their load epoch are unloaded; the others see the
        image, and the share-partitions of topics gone from it get tombstones (onTopicsDeleted)."""
        previous = self._published
        self._published = image
        led = self._led_partitions()
        for p in list(self.shards):
            if led.get(p) != self._epochs.get(p):
                self._unload(p)
        deleted: set[bytes] = set()
        if previous is not None and self.shards and \
                previous.topics_by_id is not image.topics_by_id:
            deleted = {tid for tid in previous.topics_by_id if tid not in image.topics_by_id}
        for p, shard in list(self.shards.items()):
            shard.on_new_metadata_image(image)
            if deleted:
                self._write_later(p, shard.topics_deleted(deleted), "topics deleted")
        if self._wake is not None and image.topic(SHARE_GROUP_STATE_TOPIC) is not None:
            self._wake.set()

    def _led_partitions(self) -> dict[int, int]:
        """Partition -> leader epoch, for the partitions this broker leads in the newest image it was given (worked
        out once per image: every request asks)."""
        image = self._published or self.metadata.image
        if self._led[0] is image:
            return self._led[1]
        topic = image.topic(SHARE_GROUP_STATE_TOPIC)
        led = {} if topic is None else {p: info.leader_epoch for p, info in topic.partitions.items()
                                        if info.leader == self.node_id}
        self._led = (image, led)
        return led

    async def _sync_leadership(self) -> None:
        """Load the partitions this broker leads (again at a new leader epoch), unload the ones it lost."""
        image = self._published or self.metadata.image
        if image is self._image_seen:
            return
        self._image_seen = image
        led = self._led_partitions()
        for p in list(self.shards):
            if led.get(p) != self._epochs.get(p):
                self._unload(p)
        for p in sorted(set(led) - set(self.shards)):
            try:
                await self.load(p)
            except Exception as exc:  # noqa: BLE001 - one partition's failure must not stop the others
                log.warning("could not load %s-%d: %s", SHARE_GROUP_STATE_TOPIC, p, exc)

    async def load(self, p: int) -> ShareCoordinatorShard:
        if p in self.shards:
            return self.shards[p]
        fut = self._loading.get(p)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._loading[p] = fut
        try:
            part = self.replicas.get(SHARE_GROUP_STATE_TOPIC, p)
            epoch = self._led_partitions().get(p)
            if part is None or epoch is None:
                raise ShareServiceError(ErrorCode.NOT_COORDINATOR)
            shard = ShareCoordinatorShard(self.config)
            shard.on_new_metadata_image(self._published or self.metadata.image)
            start = self.clock.monotonic()
            n = await asyncio.to_thread(_replay_log, shard, part.log)
            if self._led_partitions().get(p) != epoch or self.replicas.get(SHARE_GROUP_STATE_TOPIC, p) is not part:
                raise ShareServiceError(ErrorCode.NOT_COORDINATOR)  # moved while its log was replayed
            self.shards[p] = shard
            self._epochs[p] = epoch
            log.info("loaded %s-%d: %d records, %d share-partitions in %.0f ms", SHARE_GROUP_STATE_TOPIC, p, n,
                     len(shard.state), (self.clock.monotonic() - start) * 1000)
            fut.set_result(shard)
            return shard
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            self._loading.pop(p, None)

    def _unload(self, p: int) -> None:
        if self.shards.pop(p, None) is not None:
            log.info("unloaded %s-%d", SHARE_GROUP_STATE_TOPIC, p)
        self._epochs.pop(p, None)
        self._pruned.pop(p, None)
        self._last_write.pop(p, None)
        self.last_pruned_offset.pop(p, None)

    async def _shard(self, p: int) -> ShareCoordinatorShard:
        """``p``'s shard if this broker leads ``p`` (loaded now if needed), else NOT_COORDINATOR."""
        shard = self.shards.get(p)
        led = self._led_partitions()
        if shard is not None and led.get(p) != self._epochs.get(p):
            self._unload(p)
            shard = None
        if shard is None:
            if p not in led:
                raise ShareServiceError(ErrorCode.NOT_COORDINATOR)
            if p in self._loading:
                raise ShareServiceError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            try:
                shard = await self.load(p)
            except ShareServiceError:
                raise
            except Exception:  # noqa: BLE001 - its log could not be read: the client retries
                raise ShareServiceError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from None
        return shard

    # ---- requests ----------------------------------------------------------------------------------
    async def write_state(self, req) -> WriteShareGroupStateResponse:
        start = self.clock.monotonic()
        try:
            return await self._per_key("write", req, lambda s, r, now: s.write_state(r, now))
        finally:
            self.write_latency.observe((self.clock.monotonic() - start) * 1000)

    async def read_state(self, req) -> ReadShareGroupStateResponse:
        return await self._per_key("read", req, lambda s, r, now: s.read_state(r, now))

    async def read_state_summary(self, req) -> ReadShareGroupStateSummaryResponse:
        return await self._per_key("summary", req, lambda s, r, now: s.read_state_summary(r))

    async def initialize_state(self, req) -> InitializeShareGroupStateResponse:
        return await self._per_key("initialize", req, lambda s, r, now: s.initialize_state(r, now))

    async def delete_state(self, req) -> DeleteShareGroupStateResponse:
        return await self._per_key("delete", req, lambda s, r, now: s.delete_state(r))

    async def _per_key(self, api: str, req, op: Callable[[ShareCoordinatorShard, Any, int], Result]):
        """ShareCoordinatorService's request handling: empty topics, empty partitions or an empty group id answer
        an empty response; an inactive coordinator COORDINATOR_NOT_AVAILABLE for every partition; else each
        share-partition runs on its own shard and the answers are merged by topic."""
        response_cls, topic_cls, part_cls = _SHAPES[api]
        if not req.topics or any(not t.partitions for t in req.topics) or not req.group_id:
            log.error("share coordinator: %s request with no topics, partitions or group id", api)
            return response_cls(results=[])
        if not self.active:
            return response_cls(results=[topic_cls(topic_id=t.topic_id, partitions=[
                part_cls(partition=p.partition, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         error_message="Share coordinator is not available.") for p in t.partitions])
                for t in req.topics])
        try:
            await self.ensure_topic()
        except ShareServiceError as exc:
            return response_cls(results=[topic_cls(topic_id=t.topic_id, partitions=[
                part_cls(partition=p.partition, error_code=exc.code) for p in t.partitions]) for t in req.topics])
        if len(req.topics) == 1 and len(req.topics[0].partitions) == 1:  # already one key's request
            t = req.topics[0]
            calls = [self._one_key(api, req, op, t.topic_id, t.partitions[0].partition)]
        else:
            calls = []
            for t in req.topics:
                for p in t.partitions:
                    single = copy.copy(req)
                    topic = copy.copy(t)
                    topic.partitions = [p]
                    single.topics = [topic]
                    calls.append(self._one_key(api, single, op, t.topic_id, p.partition))
        by_topic: dict[bytes, Any] = {}
        # one share partition (a share partition's write or read): awaited here, no task in between
        results = [await calls[0]] if len(calls) == 1 else await asyncio.gather(*calls)
        for part_result in results:
            tid, pr = part_result
            if tid not in by_topic:
                by_topic[tid] = topic_cls(topic_id=tid, partitions=[])
            by_topic[tid].partitions.append(pr)
        return response_cls(results=list(by_topic.values()))

    async def _one_key(self, api: str, single, op, topic_id, partition: int) -> tuple[bytes, Any]:
        _, _, part_cls = _SHAPES[api]
        key = share_partition_key_string(single.group_id, bytes(topic_id), partition)
        try:
            p = self.partition_for(key)
            shard = await self._shard(p)
            res = op(shard, single, self.clock.now_ms())
            committed = self._append(p, shard, res)
            if res.records:
                self.writes_total += 1
            if committed is None:
                # nothing written: the answer may still show state whose write is not committed yet; it waits for
                # that (CoordinatorRuntime completes an operation once the last written offset is committed)
                committed = self._last_write.get(p)
                if committed is not None and committed.done():
                    committed = None
            if committed is not None:
                await wait_for(asyncio.shield(committed), self.write_timeout_s)
        except Exception as exc:  # noqa: BLE001 - every failure becomes this partition's error
            code = _operation_error(exc)
            if not isinstance(exc, ShareServiceError):
                log.info("share coordinator: %s of %s failed: %r", api, key, exc)
            return topic_id, part_cls(partition=partition, error_code=code,
                                      error_message=f"Unable to {_VERB[api]} share group state: "
                                                    f"{ErrorCode(code).name}")
        return topic_id, res.response.results[0].partitions[0]

    def _append(self, p: int, shard: ShareCoordinatorShard, res: Result) -> asyncio.Future | None:
        """Append the result's records (one batch, acks=all) and replay them into the shard at their offsets;
        the commit future (None: nothing to wait for). Raises the append's error, nothing replayed."""
        if not res.records:
            return None
        part = self.replicas.get(SHARE_GROUP_STATE_TOPIC, p)
        if part is None or not part.is_leader(self.node_id):
            raise KafkaError("not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if len(part.info.isr) < part.log.config.min_insync_replicas:
            raise KafkaError("too few in-sync replicas", ErrorCode.NOT_ENOUGH_REPLICAS)
        now = self.clock.now_ms()
        batch = build_batch([Record(k, v, timestamp=now) for k, v in (r.encode() for r in res.records)])
        appended = self.replicas.append(part, bytearray(batch), now, origin=ORIGIN_COORDINATOR)
        for i, record in enumerate(res.records):
            shard.replay(record, appended.info.first_offset + i)
        if appended.committed is not None:
            self._last_write[p] = appended.committed
        return appended.committed

    def _write_later(self, p: int, res: Result, what: str) -> None:
        """A write nobody waits for (tombstones of deleted topics, cold snapshots): appended now, replayed, its
        commit failure logged (a new leader replays only what was committed)."""
        if not res.records or self.shards.get(p) is None:
            return
        shard = self.shards[p]
        try:
            committed = self._append(p, shard, res)
        except Exception as exc:  # noqa: BLE001 - logged; the shard is unchanged
            log.warning("share coordinator: writing %s to %s-%d failed: %s", what, SHARE_GROUP_STATE_TOPIC, p, exc)
            return
        if committed is None:
            return

        async def until_committed() -> None:
            try:
                await wait_for(asyncio.shield(committed), self.write_timeout_s)
            except Exception as exc:  # noqa: BLE001 - logged; a new leader replays what was committed
                log.warning("share coordinator: %s on %s-%d not committed: %r", what, SHARE_GROUP_STATE_TOPIC, p, exc)

        task = asyncio.ensure_future(until_committed())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    # ---- timers: leadership, pruning, cold snapshots -------------------------------------------------
    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _timers(self) -> None:
        last_check = last_prune = last_cold = self.clock.now_ms()
        while True:
            try:
                self._wake.clear()
                handle = asyncio.get_running_loop().call_later(LEADERSHIP_CHECK_MS / 1000, self._wake.set)
                try:
                    await self._wake.wait()
                finally:
                    handle.cancel()
                now = self.clock.now_ms()
                if now - last_cold >= self.config.cold_partition_snapshot_interval_ms:
                    last_cold = now
                    for p, shard in list(self.shards.items()):
                        self._write_later(p, shard.snapshot_cold_partitions(now), "cold partition snapshots")
                if now - last_prune >= self.prune_interval_ms:
                    last_prune = now
                    self.prune()
                if (self._published or self.metadata.image) is not self._image_seen \
                        or now - last_check >= LEADERSHIP_CHECK_MS:
                    last_check = now
                    await self._sync_leadership()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the timer task must survive a bad partition
                log.exception("share coordinator timer task error")
                await asyncio.sleep(0.1)

    def prune(self) -> dict[int, int]:
        """Advance each loaded partition's log start offset to its shard's last redundant offset when the high
        watermark has passed it (Kafka's performRecordPruning with DeleteRecords); partition -> new start."""
        done = {}
        for p, shard in list(self.shards.items()):
            offset = shard.last_redundant_offset()
            part = self.replicas.get(SHARE_GROUP_STATE_TOPIC, p)
            if offset is None or part is None or not part.is_leader(self.node_id):
                continue
            if offset <= self._pruned.get(p, 0) or offset > part.log.high_watermark:
                continue  # nothing new, or the snapshot that makes it redundant is not committed yet
            try:
                if part.log.maybe_increment_log_start_offset(offset, "share coordinator record pruning"):
                    done[p] = offset
                    self.last_pruned_offset[p] = offset
                self._pruned[p] = offset
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("pruning %s-%d to %d failed: %s", SHARE_GROUP_STATE_TOPIC, p, offset, exc)
        return done



class LatencyBuckets:
    """A histogram's cumulative buckets, count and sum (ms), for a collector to expose at scrape time."""

    BOUNDS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)

    def __init__(self) -> None:
        self.counts = [0] * len(self.BOUNDS)
        self.count = 0
        self.sum = 0.0

    def observe(self, ms: float) -> None:
        """One value: counted in its own bucket only (``buckets`` sums them up at scrape time)."""
        self.count += 1
        self.sum += ms
        i = bisect.bisect_left(self.BOUNDS, ms)
        if i < len(self.counts):
            self.counts[i] += 1

    def buckets(self) -> list[tuple[str, int]]:
        out, n = [], 0
        for b, c in zip(self.BOUNDS, self.counts):
            n += c
            out.append((str(float(b)), n))
        return out + [("+Inf", self.count)]


class ShareCoordinatorCollector:
    """kafka.server:type=share-coordinator-metrics (ShareCoordinatorMetrics), named as
    broker/observability/metrics.py names Kafka's metrics: write-total (the requests that wrote state; Kafka's
    write-rate is its rate), write-latency (each WriteShareGroupState until its answer, as a histogram in ms:
    Kafka's write-latency-avg and -max are windowed statistics of it) and last-pruned-offset per
    ``__share_group_state`` partition this broker leads."""

    def __init__(self, service: ShareCoordinatorService) -> None:
        self.service = service

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        writes = CounterMetricFamily("kafka_server_share_coordinator_metrics_write",
                                     "Share-state writes by the share coordinator (write-total)")
        writes.add_metric([], self.service.writes_total)
        yield writes
        lat = self.service.write_latency
        latency = HistogramMetricFamily("kafka_server_share_coordinator_metrics_write_latency_ms",
                                        "Time to answer a WriteShareGroupState, its state written (write-latency)")
        latency.add_metric([], lat.buckets(), lat.sum)
        yield latency
        pruned = GaugeMetricFamily("kafka_server_share_coordinator_metrics_last_pruned_offset",
                                   "The offset below which the share-group state topic partition was pruned",
                                   labels=["topic", "partition"])
        for p, offset in sorted(self.service.last_pruned_offset.items()):
            pruned.add_metric([SHARE_GROUP_STATE_TOPIC, str(p)], offset)
        yield pruned


def _operation_error(exc: Exception) -> int:
    """ShareCoordinatorService's ``handleOperationException`` (CoordinatorOperationExceptionHelper, Kafka 4.2) over
    ``Errors.forException``: a failed append the persister should retry elsewhere becomes COORDINATOR_NOT_AVAILABLE
    or NOT_COORDINATOR, NETWORK_EXCEPTION COORDINATOR_LOAD_IN_PROGRESS, a batch too large UNKNOWN_SERVER_ERROR; any
    other Kafka error keeps its code (not a catch-all), any other exception is UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, ShareServiceError):
        return exc.code
    if isinstance(exc, asyncio.TimeoutError):  # the write timeout: REQUEST_TIMED_OUT
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    code = getattr(exc, "code", None)
    if not isinstance(code, int) or isinstance(code, bool):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND as NOT_ENOUGH_REPLICAS: odradek's (Kafka passes it on; the persister would
    # not retry it and the share partition would answer UNKNOWN_SERVER_ERROR)
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


def _replay_log(shard: ShareCoordinatorShard, log_) -> int:
    """Replay every record of a ``__share_group_state`` partition into ``shard`` (off the event loop), from its
    log start offset (pruning left only what the latest snapshots need); an undecodable record is skipped."""
    n = 0
    for raw in log_.iter_batches(0):
        header, records = decode_batch(raw)
        if header.attributes & 0x20:  # control batch
            continue
        for r in records:
            if r.key is None:
                continue
            try:
                rec = decode_share_state_record(bytes(r.key), None if r.value is None else bytes(r.value))
            except UnknownRecordType as exc:
                # CoordinatorLoaderImpl: an unknown record type is ignored with a warning
                log.warning("%s while loading %s-%d at offset %s. Ignoring it. It could be a left over from an "
                            "aborted upgrade.", exc, log_.topic, log_.partition, r.offset)
                continue
            except Exception as exc:  # noqa: BLE001
                log.warning("skipping undecodable record at %s-%d offset %s: %s", log_.topic, log_.partition,
                            r.offset, exc)
                continue
            shard.replay(rec, r.offset)
            n += 1
    return n


def error_response(api: str, req, code: int, message: str | None = None):
    """Every partition of ``req`` answered ``code`` (the requests' getErrorResponse)."""
    response_cls, topic_cls, part_cls = _SHAPES[api]
    message = message if message is not None else ErrorCode(code).name
    return response_cls(results=[topic_cls(topic_id=t.topic_id, partitions=[
        part_cls(partition=p.partition, error_code=code, error_message=message) for p in t.partitions])
        for t in req.topics])
