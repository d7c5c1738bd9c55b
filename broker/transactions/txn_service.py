"""The transaction coordinator's adapter: asyncio, the ``__transaction_state`` log, producer ids, markers and timers
around the pure state machines of ``cluster.txn.txn_coordinator`` (Kafka's TransactionCoordinator with
TransactionStateManager's I/O and TransactionMarkerChannelManager, for one broker).

* a transactional id maps to partition ``abs(java hashCode) % transaction.state.log.num.partitions``; the topic is
  created on first use (compacted, uncompressed, ``transaction.state.log.replication.factor``,
  ``transaction.state.log.min.isr`` as its ``min.insync.replicas``, ``transaction.state.log.segment.bytes``);
* a partition this broker leads is loaded by replaying its records into a fresh shard, its coordinator epoch the
  partition's leader epoch; a new leader epoch reloads it, losing the leadership unloads it (checked at every
  metadata image and every second);
* a shard's writes are appended at once, in order, acks=all, and reported when committed (or failed); answers wait
  for that (write-then-answer); markers go through ``TxnMarkerSender`` and their answers back to the shard;
* producer ids come from this broker's block (``next_producer_id``), a few kept at hand: the shard takes them
  synchronously;
* one task wakes the shards' timers (aborting timed-out transactions, expiring idle ids, retrying Complete*).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from broker.transactions.marker_sender import TxnMarkerSender
from broker.transactions.verifier import TxnVerifier
from broker.timeouts import wait_for
from cluster.txn.txn_coordinator import Result, TxnConfig, TxnCoordinatorShard, TxnMarkers, TxnWrite
from cluster.txn.txn_log import partition_for
from cluster.txn.txn_metadata import TransactionVersion
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import CreateTopicsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from protocol.record_codec import Record, build_batch, decode_batch
from protocol.topics import TRANSACTION_STATE_TOPIC
from storage.log import ORIGIN_COORDINATOR

if TYPE_CHECKING:
    from broker.clock import Clock
    from broker.config import BrokerConfig
    from broker.controlplane.controller_channel import ControllerChannel
    from broker.network.peer_links import PeerLinks
    from broker.quorum.metadata_publisher import MetadataPublisher
    from broker.replication.replica_manager import ReplicaManager

log = logging.getLogger("odradek.txn")

LEADERSHIP_CHECK_MS = 1000
PRODUCER_IDS_AT_HAND = 8  # fetched ahead from this broker's block: new transactional ids take one each
MARKER_RETRY_BACKOFF_S = 0.1  # a marker answered with a retriable error is sent again after this (retry.backoff.ms)
# A WriteTxnMarkers request unanswered this long is sent again (at most ``request.timeout.ms``): a marker lost on a
# broken link reaches its leader within seconds of the link healing, not a whole request timeout later. A leader
# still replicating the first copy appends the second as a marker with no open transaction, which changes nothing.
MARKER_REQUEST_TIMEOUT_MS = 5000


class TxnServiceError(Exception):
    """A request the coordinator cannot take here: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE."""

    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode(code).name)
        self.code = code


class TxnService:
    def __init__(self, node_id: int, config: "BrokerConfig", metadata: "MetadataPublisher",
                 replicas: "ReplicaManager", controller: "ControllerChannel", clock: "Clock", links: "PeerLinks",
                 next_producer_id: Callable[[], Awaitable[int]], listener: str) -> None:
        self.node_id = node_id
        self.broker_config = config
        self.metadata = metadata
        self.replicas = replicas
        self.controller = controller
        self.clock = clock
        self.config = TxnConfig.from_props(config.values)
        self._next_producer_id = next_producer_id
        self.shards: dict[int, TxnCoordinatorShard] = {}
        self._epochs: dict[int, int] = {}  # partition -> the leader epoch its shard was loaded at
        self._loading: dict[int, asyncio.Future] = {}
        self._waiters: dict[int, asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._ids: collections.deque[int] = collections.deque()
        self._refilling: asyncio.Task | None = None
        self._writes: set[asyncio.Task] = set()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._create_lock: asyncio.Lock | None = None
        self._image_seen = None
        self.active = False
        self.markers = TxnMarkerSender(node_id, lambda: self.metadata.image, listener, links, self._markers_answered,
                                       self._markers_not_needed,
                                       min(int(config.get("request.timeout.ms")), MARKER_REQUEST_TIMEOUT_MS) / 1000,
                                       MARKER_RETRY_BACKOFF_S)
        # KIP-890: this broker's questions, as a partition leader, to transactional ids' coordinators
        self.verifier = TxnVerifier(node_id, lambda: self.metadata.image, listener, links, self.partition_for,
                                    int(config.get("request.timeout.ms")) / 1000)
        enabled = config.get("transaction.partition.verification.enable", True)
        self.verification_enabled = enabled if isinstance(enabled, bool) else str(enabled).strip().lower() == "true"

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._create_lock = asyncio.Lock()
        self.active = True
        self._refill_ids()
        if self.metadata.image.topic(TRANSACTION_STATE_TOPIC) is not None:
            await self._sync_leadership()
        self._task = asyncio.ensure_future(self._timers())

    async def stop(self) -> None:
        self.active = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5)
            self._task = None
        for p in list(self.shards):
            self._unload(p)
        await self.markers.close()
        await self.verifier.close()
        for task in [*self._writes, *([self._refilling] if self._refilling is not None else [])]:
            task.cancel()
        for fut in self._waiters.values():
            if not fut.done():
                fut.cancel()
        self._waiters.clear()

    # ---- partitions ------------------------------------------------------------------------------
    def num_partitions(self) -> int:
        topic = self.metadata.image.topic(TRANSACTION_STATE_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self.config.transaction_log_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions())

    def _transaction_version(self) -> TransactionVersion:
        return TransactionVersion(min(int(self.metadata.image.features.get("transaction.version", 0)), 2))

    @property
    def transaction_version(self) -> TransactionVersion:
        """The finalized ``transaction.version``: from TV_2 on, Produce v12+ and TxnOffsetCommit v5 add their
        partitions to the transaction (KIP-890 part 2)."""
        return self._transaction_version()

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` as Kafka's AutoTopicCreationManager does for the coordinator."""
        if self.metadata.image.topic(TRANSACTION_STATE_TOPIC) is not None:
            return
        async with self._create_lock:
            if self.metadata.image.topic(TRANSACTION_STATE_TOPIC) is not None:
                return
            config = self.broker_config
            # never capped (Kafka): with fewer live brokers the creation fails and FindCoordinator answers
            # COORDINATOR_NOT_AVAILABLE until the cluster has them
            configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                       "min.insync.replicas": str(int(config.get("transaction.state.log.min.isr"))),
                       "segment.bytes": str(int(config.get("transaction.state.log.segment.bytes"))),
                       "unclean.leader.election.enable": "false"}
            request = CreateTopicsRequest(topics=[CreatableTopic(
                name=TRANSACTION_STATE_TOPIC, num_partitions=self.config.transaction_log_num_partitions,
                replication_factor=int(config.get("transaction.state.log.replication.factor")), assignments=[],
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
            res = await self.controller.call(request)
            err = res.topics[0]
            if err.error_code and err.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.error("could not create %s: %s", TRANSACTION_STATE_TOPIC, err.error_message)
                raise TxnServiceError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC, self.num_partitions())
        await self._sync_leadership()

    async def on_new_metadata_image(self, image) -> None:
        """Publisher step: the shards follow the finalized ``transaction.version``; leadership moves are looked
        at by the timer task (loading replays a log: not inside the publish)."""
        version = self._transaction_version()
        for shard in self.shards.values():
            shard.transaction_version_level = version
        if self._wake is not None and image.topic(TRANSACTION_STATE_TOPIC) is not None:
            self._wake.set()

    def _led_partitions(self) -> dict[int, int]:
        """Partition -> leader epoch, for the partitions this broker leads."""
        topic = self.metadata.image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return {}
        return {p: info.leader_epoch for p, info in topic.partitions.items() if info.leader == self.node_id}

    async def _sync_leadership(self) -> None:
        """Load the partitions this broker leads (again at a new leader epoch), unload the ones it lost."""
        image = self.metadata.image
        if image is self._image_seen:
            return
        self._image_seen = image
        led = self._led_partitions()
        for p in list(self.shards):
            if led.get(p) != self._epochs.get(p):
                self._unload(p)
        for p in sorted(set(led) - set(self.shards)):
            try:
                await self.load(p, led[p])
            except Exception as exc:  # noqa: BLE001 - one partition's failure must not stop the others
                log.warning("could not load %s-%d: %s", TRANSACTION_STATE_TOPIC, p, exc)

    async def load(self, p: int, leader_epoch: int) -> TxnCoordinatorShard:
        if p in self.shards:
            return self.shards[p]
        fut = self._loading.get(p)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._loading[p] = fut
        try:
            part = self.replicas.get(TRANSACTION_STATE_TOPIC, p)
            if part is None or not part.is_leader(self.node_id):
                raise TxnServiceError(ErrorCode.NOT_COORDINATOR)
            shard = TxnCoordinatorShard(p, self.config, self._take_producer_id, self.num_partitions(),
                                        self._transaction_version())
            start = self.clock.monotonic()
            records = await asyncio.to_thread(_read_records, part.log)
            if self.replicas.get(TRANSACTION_STATE_TOPIC, p) is not part or part.leader_epoch != leader_epoch:
                raise TxnServiceError(ErrorCode.NOT_COORDINATOR)  # moved while its log was read
            res = shard.load(leader_epoch, records, self.clock.now_ms())
            self.shards[p] = shard
            self._epochs[p] = leader_epoch
            self._handle(p, shard, res)
            log.info("loaded %s-%d at coordinator epoch %d: %d records, %d transactional ids in %.0f ms",
                     TRANSACTION_STATE_TOPIC, p, leader_epoch, len(records), len(shard.transactions),
                     (self.clock.monotonic() - start) * 1000)
            fut.set_result(shard)
            self._poke()
            return shard
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            self._loading.pop(p, None)

    def _unload(self, p: int) -> None:
        shard = self.shards.pop(p, None)
        self._epochs.pop(p, None)
        self.markers.drop(p)
        if shard is not None:
            self._resolve(shard.unload(self.clock.now_ms()).completions)
            log.info("unloaded %s-%d", TRANSACTION_STATE_TOPIC, p)

    async def shard_for(self, transactional_id: str) -> tuple[int, TxnCoordinatorShard]:
        if not self.active:
            raise TxnServiceError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.replicas.loading
                                  else ErrorCode.COORDINATOR_NOT_AVAILABLE)
        await self.ensure_topic()
        p = self.partition_for(transactional_id)
        shard = self.shards.get(p)
        if shard is None:
            led = self._led_partitions()
            if p not in led:
                raise TxnServiceError(ErrorCode.NOT_COORDINATOR)
            try:
                shard = await self.load(p, led[p])
            except TxnServiceError:
                raise
            except Exception:  # noqa: BLE001 - its log could not be read: the client retries
                raise TxnServiceError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from None
        return p, shard

    def loaded_shards(self) -> list[TxnCoordinatorShard]:
        return [s for _, s in sorted(self.shards.items())]

    def any_loading(self) -> bool:
        return bool(self._loading) or any(p not in self.shards for p in self._led_partitions())

    # ---- running requests --------------------------------------------------------------------------
    async def run(self, transactional_id: str, call: Callable[..., Result], *args) -> Any:
        """``call(shard, *args, now_ms, token=...)`` (a TxnCoordinatorShard method) on the id's shard; its outcome,
        once the records it wrote are committed."""
        p, shard = await self.shard_for(transactional_id)
        token = next(self._tokens)
        fut = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        try:
            res = call(shard, *args, self.clock.now_ms(), token=token)
            self._handle(p, shard, res)
            if res.response is not None:
                return res.response
            return await fut
        finally:
            self._waiters.pop(token, None)

    async def on_shard(self, transactional_id: str, call: Callable[[TxnCoordinatorShard], Any]) -> Any:
        """A read of the id's shard (DescribeTransactions, verification): no records, no waiting."""
        _, shard = await self.shard_for(transactional_id)
        return call(shard)

    def _resolve(self, completions) -> None:
        for token, outcome in completions:
            fut = self._waiters.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(outcome)

    def _handle(self, p: int, shard: TxnCoordinatorShard, res: Result, retry: bool = False) -> None:
        """What a shard's result asks for: writes appended now (in order), answers released, markers sent."""
        for write in res.writes:
            self._write(p, shard, write)
        self._resolve(res.completions)
        for markers in res.markers:
            self.markers.add(p, markers, MARKER_RETRY_BACKOFF_S if retry else 0.0)
        if res.needs_producer_ids:
            self._refill_ids()
        self._poke()

    def _write(self, p: int, shard: TxnCoordinatorShard, write: TxnWrite) -> None:
        """Append at once (the log keeps the order of the shard's state changes), acks=all; reported once
        committed, or failed, to the shard."""
        committed = None
        try:
            part = self.replicas.get(TRANSACTION_STATE_TOPIC, p)
            if part is None or not part.is_leader(self.node_id):
                raise KafkaError("not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if len(part.info.isr) < part.log.config.min_insync_replicas:
                raise KafkaError("too few in-sync replicas", ErrorCode.NOT_ENOUGH_REPLICAS)
            now = self.clock.now_ms()
            batch = build_batch([Record(key, value, timestamp=now) for key, value in
                                 (r.encode() for r in write.records)])
            committed = self.replicas.append(part, bytearray(batch), now, origin=ORIGIN_COORDINATOR).committed
        except KafkaError as exc:
            code = int(exc.code)
        except Exception:  # noqa: BLE001 - any storage failure is reported as the coordinator's error
            log.exception("appending to %s-%d failed", TRANSACTION_STATE_TOPIC, p)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        else:
            code = ErrorCode.NONE
        if code or committed is None:
            self._completed(p, shard, write.write_id, code)
            return
        task = asyncio.ensure_future(self._until_committed(p, shard, write.write_id, committed))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _until_committed(self, p: int, shard: TxnCoordinatorShard, write_id: int, committed) -> None:
        timeout_s = int(self.broker_config.get("request.timeout.ms")) / 1000
        try:
            await wait_for(asyncio.shield(committed), timeout_s)
            code = ErrorCode.NONE
        except asyncio.TimeoutError:
            code = ErrorCode.REQUEST_TIMED_OUT
        except KafkaError as exc:
            code = int(exc.code)
        self._completed(p, shard, write_id, code)

    def _completed(self, p: int, shard: TxnCoordinatorShard, write_id: int, code: int) -> None:
        self._handle(p, shard, shard.write_completed(write_id, code, self.clock.now_ms()))

    def _markers_answered(self, p: int, markers: TxnMarkers, errors: dict) -> None:
        shard = self.shards.get(p)
        if shard is not None:
            self._handle(p, shard, shard.markers_written(markers.transactional_id, markers.coordinator_epoch,
                                                         errors, self.clock.now_ms()), retry=True)

    def _markers_not_needed(self, p: int, markers: TxnMarkers, partitions: frozenset) -> None:
        shard = self.shards.get(p)
        if shard is not None:
            self._handle(p, shard, shard.markers_not_needed(markers.transactional_id, markers.coordinator_epoch,
                                                            partitions, self.clock.now_ms()))

    # ---- producer ids ------------------------------------------------------------------------------
    def _take_producer_id(self) -> int | None:
        pid = self._ids.popleft() if self._ids else None
        if len(self._ids) < PRODUCER_IDS_AT_HAND // 2:
            self._refill_ids()
        return pid

    def _refill_ids(self) -> None:
        if self._refilling is None or self._refilling.done():
            self._refilling = asyncio.ensure_future(self._refill())

    async def _refill(self) -> None:
        try:
            while len(self._ids) < PRODUCER_IDS_AT_HAND:
                self._ids.append(await self._next_producer_id())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the controller is away: the next request asks again
            log.info("could not get producer ids: %s", exc)

    # ---- timers ------------------------------------------------------------------------------------
    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _timers(self) -> None:
        last_check = 0
        while True:
            try:
                self._wake.clear()
                deadlines = [d for d in (s.next_deadline() for s in self.shards.values()) if d is not None]
                now = self.clock.now_ms()
                timeout = LEADERSHIP_CHECK_MS
                if deadlines:
                    timeout = min(timeout, max(0, min(deadlines) - now))
                handle = asyncio.get_running_loop().call_later(timeout / 1000, self._wake.set)
                try:
                    await self._wake.wait()
                finally:
                    handle.cancel()
                now = self.clock.now_ms()
                for p, shard in list(self.shards.items()):
                    d = shard.next_deadline()
                    if d is not None and d <= now and self.shards.get(p) is shard:
                        self._handle(p, shard, shard.poll(now))
                if self.metadata.image is not self._image_seen or now - last_check >= LEADERSHIP_CHECK_MS:
                    last_check = now
                    await self._sync_leadership()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the timer task must survive a bad transaction
                log.exception("transaction coordinator timer task error")
                await asyncio.sleep(0.1)


def _read_records(log_) -> list[tuple[bytes, bytes | None]]:
    """Every ``(key, value)`` of a ``__transaction_state`` partition, in log order (off the event loop)."""
    out = []
    for raw in log_.iter_batches(0):
        header, records = decode_batch(raw)
        if header.attributes & 0x20:  # control batch
            continue
        for r in records:
            if r.key is not None:
                out.append((bytes(r.key), None if r.value is None else bytes(r.value)))
    return out


class TxnMarkerChannelCollector:
    """kafka.coordinator.transaction:type=TransactionMarkerChannelManager's gauges: UnknownDestinationQueueSize
    (marker partitions waiting for a reachable leader) and LogAppendRetryQueueSize (Complete* writes waiting to be
    appended again), named as broker/observability/metrics.py names Kafka's metrics."""

    def __init__(self, service: TxnService) -> None:
        self.service = service

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        unknown = GaugeMetricFamily(
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize",
            "Marker partitions waiting for a reachable leader (UnknownDestinationQueueSize)")
        unknown.add_metric([], self.service.markers.unknown_destination)
        yield unknown
        retries = GaugeMetricFamily(
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize",
            "Transaction completions waiting to be appended again (LogAppendRetryQueueSize)")
        retries.add_metric([], sum(s.complete_retries_queued for s in list(self.service.shards.values())))
        yield retries

