"""The group coordinator's adapter: asyncio, the ``__consumer_offsets`` log, timers (Kafka's
GroupCoordinatorService + CoordinatorRuntime for one broker).

``cluster.groups.group_coordinator`` holds the state machines (one :class:`GroupCoordinatorShard` per
``__consumer_offsets`` partition this broker leads); this module

* maps a group to its partition (``abs(java hashCode) % partitions``) and creates the
  ``__consumer_offsets`` topic on first use (compacted, ``offsets.topic.num.partitions``);
* loads a partition by replaying its records into a fresh shard, and unloads it when this broker no
  longer leads it (checked against the metadata image by the timer task);
* runs each request through the shard on the event loop thread (no locks: one thread owns the state),
  appends the records of the result to the partition log *before* answering, then resolves the
  futures of delayed JoinGroup/SyncGroup responses;
* writes a TxnOffsetCommit as the producer's transactional batch and the COMMIT / ABORT markers the
  transaction coordinator sends for ``__consumer_offsets`` (KIP-447), applying each to the shard once appended;
* wakes the shards' timers (session and rebalance timeouts, the initial rebalance delay, offset
  expiration) from one task that sleeps until the earliest deadline;
* sends a result's share-state requests (``res.share_state``) once its records are committed, through the share
  persister (broker/share/persister.py): an InitializeShareGroupState whose outcome moves the partitions to
  initialized, or back to uninitialized with the error as the heartbeat's answer (GroupCoordinatorService
  .persisterInitialize); DeleteGroups deletes a share group's share state first (``delete_group``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable

from cluster.groups.group_classic import GroupError
from cluster.groups.group_config import GroupConfig
from cluster.groups.group_coordinator import GroupCoordinatorShard, ReqCtx, Result
from cluster.groups.group_records import UnknownRecordType, decode_record, partition_for
from cluster.groups.group_share import InitializeShareState
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import CreateTopicsRequest, ListOffsetsRequest, ReadShareGroupStateSummaryRequest
from protocol.generated.messages import delete_share_group_offsets_response as dsgor
from protocol.generated.messages import describe_share_group_offsets_response as dsgo
from protocol.generated.messages import list_offsets_request as lo_req
from protocol.generated.messages import read_share_group_state_summary_request as rssq
from protocol.generated.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch, decode_batch, parse_end_txn_marker
from protocol.topics import GROUP_METADATA_TOPIC
from storage.log import ORIGIN_COORDINATOR

if TYPE_CHECKING:
    from broker.clock import Clock
    from broker.config import BrokerConfig
    from broker.controlplane.controller_channel import ControllerChannel
    from broker.quorum.metadata_publisher import MetadataPublisher
    from broker.replication.replica_manager import ReplicaManager

log = logging.getLogger("odradek.groups")

LEADERSHIP_CHECK_MS = 1000
LIST_OFFSETS_VERSION = 7  # the share group lag's end offsets (Kafka's PartitionMetadataClient asks the leader)


class GroupService:
    def __init__(self, node_id: int, config: "BrokerConfig", metadata: "MetadataPublisher",
                 replicas: "ReplicaManager", controller: "ControllerChannel", clock: "Clock") -> None:
        self.node_id = node_id
        self.broker_config = config
        self.metadata = metadata
        self.replicas = replicas
        self.controller = controller
        self.clock = clock
        self.config = GroupConfig.from_props(config.values)
        self.shards: dict[int, GroupCoordinatorShard] = {}
        self._epochs: dict[int, int] = {}  # loaded partition -> the leader epoch it was loaded at
        self._published = None  # the newest image published to this service (``metadata.image`` lags it in publish)
        self._loading: dict[int, asyncio.Future] = {}
        self._waiters: dict[int, asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._create_lock: asyncio.Lock | None = None
        self._image_seen = None
        self._finishing: set[asyncio.Task] = set()  # timer results waiting for their commit
        self.persister = None  # the share persister (broker/share/persister.py), set by the node
        self.share_rebalances_unloaded = 0  # share-group-rebalance-count of shards no longer loaded
        self.active = False

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._create_lock = asyncio.Lock()
        self.active = True
        if self.metadata.image.topic(GROUP_METADATA_TOPIC) is not None:
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
        for fut in self._waiters.values():
            if not fut.done():
                fut.cancel()
        self._waiters.clear()

    # ---- partitions ------------------------------------------------------------------------------
    def num_partitions(self) -> int:
        topic = self.metadata.image.topic(GROUP_METADATA_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return int(self.broker_config.get("offsets.topic.num.partitions"))

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions())

    async def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` as Kafka's AutoTopicCreationManager does for the coordinator."""
        if self.metadata.image.topic(GROUP_METADATA_TOPIC) is not None:
            return
        async with self._create_lock:
            if self.metadata.image.topic(GROUP_METADATA_TOPIC) is not None:
                return
            config = self.broker_config
            # never capped (Kafka): with fewer live brokers the creation fails and FindCoordinator answers
            # COORDINATOR_NOT_AVAILABLE until the cluster has them
            rf = int(config.get("offsets.topic.replication.factor"))
            # max.message.bytes: a group's metadata record holds every member's assignment; Kafka caps
            # it at 1 MiB (SyncGroup then fails), odradek lets it grow to the request size limit
            configs = {"cleanup.policy": "compact", "compression.type": "producer",
                       "segment.bytes": str(int(config.get("offsets.topic.segment.bytes"))),
                       "max.message.bytes": str(max(int(config.get("message.max.bytes")),
                                                    int(config.get("socket.request.max.bytes"))))}
            request = CreateTopicsRequest(topics=[CreatableTopic(
                name=GROUP_METADATA_TOPIC, num_partitions=int(config.get("offsets.topic.num.partitions")),
                replication_factor=rf, assignments=[],
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
            res = await self.controller.call(request)
            err = res.topics[0]
            if err.error_code and err.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.error("could not create %s: %s", GROUP_METADATA_TOPIC, err.error_message)
                raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            log.info("created %s with %d partitions", GROUP_METADATA_TOPIC, self.num_partitions())
        await self._sync_leadership()

    async def on_new_metadata_image(self, image) -> None:
        """Publisher step: every loaded shard sees the committed image before handlers do, and a shard whose
        partition this broker no longer leads at the epoch it was loaded at is unloaded before then (Kafka's
        onResignation): a broker back from a pause must not answer OffsetFetch from offsets its successor has
        moved on from. Loading (a log replay) is left to the timer task, woken here."""
        self._published = image
        led = self._led_partitions()
        for p in list(self.shards):
            if led.get(p) != self._epochs.get(p):
                self._unload(p)
        for shard in self.shards.values():
            shard.on_new_metadata_image(image)
        if self._wake is not None and image.topic(GROUP_METADATA_TOPIC) is not None:
            self._wake.set()

    def _led_partitions(self) -> dict[int, int]:
        """Partition -> leader epoch, for the partitions this broker leads in the newest image it was given."""
        topic = (self._published or self.metadata.image).topic(GROUP_METADATA_TOPIC)
        if topic is None:
            return {}
        return {p: info.leader_epoch for p, info in topic.partitions.items() if info.leader == self.node_id}

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
            await self.load(p)

    async def load(self, p: int) -> GroupCoordinatorShard:
        if p in self.shards:
            return self.shards[p]
        fut = self._loading.get(p)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._loading[p] = fut
        try:
            part = self.replicas.get(GROUP_METADATA_TOPIC, p)
            epoch = self._led_partitions().get(p)
            if part is None or epoch is None:
                raise GroupError(ErrorCode.NOT_COORDINATOR)
            shard = GroupCoordinatorShard(p, self.config, _random_uuid)
            shard.on_new_metadata_image(self.metadata.image)
            start = self.clock.monotonic()
            n = await asyncio.to_thread(_replay_log, shard, part.log)
            if self._led_partitions().get(p) != epoch:
                raise GroupError(ErrorCode.NOT_COORDINATOR)  # moved while its log was replayed
            res = shard.on_loaded(self.clock.now_ms())
            self.shards[p] = shard
            self._epochs[p] = epoch
            await self._apply(p, res)
            if n:
                log.info("loaded %s-%d: %d records, %d groups in %.0f ms", GROUP_METADATA_TOPIC, p, n,
                         len(shard.groups), (self.clock.monotonic() - start) * 1000)
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
        if shard is not None:
            self.share_rebalances_unloaded += shard.share.rebalances
            self._resolve(shard.on_unloaded().completions)
            log.debug("unloaded %s-%d", GROUP_METADATA_TOPIC, p)

    def _current_shard(self, p: int) -> GroupCoordinatorShard | None:
        """``p``'s loaded shard if this broker still leads ``p`` at the epoch it was loaded at; else it is
        unloaded (led no more, or again at a newer epoch: what it holds may be stale) and None."""
        shard = self.shards.get(p)
        if shard is not None and self._led_partitions().get(p) != self._epochs.get(p):
            self._unload(p)
            return None
        return shard

    async def shard_for(self, group_id: str) -> tuple[int, GroupCoordinatorShard]:
        if not self.active:
            raise GroupError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.replicas.loading
                             else ErrorCode.COORDINATOR_NOT_AVAILABLE)
        await self.ensure_topic()
        p = self.partition_for(group_id)
        shard = self._current_shard(p)
        if shard is None:
            if p in self._led_partitions():
                shard = await self.load(p)
            else:
                raise GroupError(ErrorCode.NOT_COORDINATOR)
        return p, shard

    # ---- running operations ------------------------------------------------------------------------
    def new_waiter(self) -> tuple[int, asyncio.Future]:
        token = next(self._tokens)
        fut = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        return token, fut

    def forget(self, token: int) -> None:
        self._waiters.pop(token, None)

    def _resolve(self, completions) -> None:
        for token, resp in completions:
            fut = self._waiters.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(resp)

    async def _apply(self, p: int, res: Result) -> Result:
        """Write the result's records, then release its answers once the write is committed
        (CoordinatorRuntime: a response waits for the high watermark to pass its records)."""
        committed = self._write_records(p, res)
        if committed is not None:
            try:
                await committed
            except Exception as exc:  # noqa: BLE001 - a failed commit becomes a coordinator error
                self._fail(p, res, exc)
        if res.share_state and res.error is None:
            await self._send_share_state(p, res)
        self._resolve(res.completions)
        self._poke()
        return res

    # ---- share state (KIP-932) -----------------------------------------------------------------------
    async def _send_share_state(self, p: int, res: Result) -> None:
        """The result's share-state requests, sent once its records are committed."""
        for item in res.share_state:
            if isinstance(item, InitializeShareState):
                code = await self._initialize_share_state(p, item)
                if code and type(res.response).__name__ == "ShareGroupHeartbeatResponse":
                    # persisterInitialize: the heartbeat is answered with the persister's error
                    res.response = type(res.response)(error_code=code, error_message=MESSAGES.get(ErrorCode(code)))

    async def _initialize_share_state(self, p: int, item: InitializeShareState) -> int:
        """InitializeShareGroupState through the persister, then the partitions marked initialized, or all of
        them uninitialized on any partition's error (handlePersisterInitializeResponse); the error (0: none)."""
        if self.persister is None:
            return ErrorCode.NONE
        try:
            resp = await self.persister.initialize(item.to_request())
            code = next((pr.error_code for t in resp.results for pr in t.partitions if pr.error_code), 0)
        except Exception as exc:  # noqa: BLE001 - the group retries initializing at a later heartbeat
            log.warning("initializing share group state of %s failed: %r", item.group_id, exc)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        if code:
            log.error("could not initialize share group state of %s: %s", item.group_id, ErrorCode(code).name)
        shard = self._current_shard(p)
        if shard is None:
            return code or ErrorCode.NOT_COORDINATOR  # moved meanwhile: the new coordinator asks again
        op = GroupCoordinatorShard.share_group_uninitialized if code else GroupCoordinatorShard.share_group_initialized
        await self._apply(p, op(shard, item.group_id, item.partitions(), self.clock.now_ms()))
        return code

    async def delete_group(self, group_id: str) -> list[tuple[str, int]]:
        """DeleteGroups of one group (GroupCoordinatorService.deleteGroups): a share group's share state is deleted
        through the persister first (sharePartitionDeleteRequests, deleteShareGroups), and the group only if that
        succeeded; (group id, error) pairs."""
        res = await self.run(group_id, GroupCoordinatorShard.share_group_delete_requests, [group_id])
        if res.error is not None:
            raise res.error
        request, code = res.response.get(group_id, (None, 0))
        if code:
            return [(group_id, code)]
        if request is not None and self.persister is not None:
            try:
                resp = await self.persister.delete(request.to_request())
                code = next((pr.error_code for t in resp.results for pr in t.partitions if pr.error_code), 0)
            except Exception as exc:  # noqa: BLE001 - the group stays; DeleteGroups can be retried
                log.warning("deleting share group state of %s failed: %r", group_id, exc)
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            if code:
                log.error("could not delete share group state of %s: %s", group_id, ErrorCode(code).name)
                return [(group_id, code)]
        res = await self.run(group_id, GroupCoordinatorShard.delete_groups, [group_id])
        if res.error is not None:
            raise res.error
        return list(res.response)

    # ---- Describe/Alter/DeleteShareGroupOffsets (KIP-932 admin) ----------------------------------------
    async def describe_share_group_offsets(self, group_id: str, topics) -> Any:
        """GroupCoordinatorService.describeShareGroupOffsets (``topics``: the request's, name and partitions) or
        describeShareGroupAllOffsets (``topics`` None: the group's initialized partitions): each partition's start
        offset and leader epoch from the share coordinators' ReadShareGroupStateSummary (-1 and 0 where the
        persister answers an error: no data, as OffsetFetch), and its lag (v1, KIP-1226): the partition's end
        offset (ListOffsets LATEST, read_uncommitted, at its leader) - start offset - delivery complete count,
        -1 while either is uninitialized; a topic unknown to the image is answered start offset -1."""
        if not self.active or self.persister is None:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        image = self.metadata.image
        missing, wanted = [], {}  # wanted: topic id -> (name, partitions)
        if topics is None:
            _, shard = await self.shard_for(group_id)
            for tid, parts in sorted(shard.share_group_initialized_partitions(group_id).items()):
                info = image.topics_by_id.get(tid)
                if info is not None:
                    wanted[tid] = (info.name, sorted(parts))
        else:
            for name, parts in topics:
                info = image.topic(name)
                if info is None:
                    missing.append(dsgo.DescribeShareGroupOffsetsResponseTopic(
                        topic_name=name, topic_id=bytes(16), partitions=[
                            dsgo.DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=-1)
                            for p in parts]))
                else:
                    wanted[info.topic_id] = (name, list(parts))
        out = dsgo.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=[])
        if wanted:
            summary = await self.persister.read_summary(ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[
                rssq.ReadStateSummaryData(topic_id=t, partitions=[rssq.PartitionData(partition=p) for p in ps])
                for t, (_, ps) in wanted.items()]))
            lag_of = [(wanted[bytes(r.topic_id)][0], pr.partition) for r in summary.results for pr in r.partitions
                      if _lag_known(pr)]
            ends = await self._latest_offsets(lag_of)
            for r in summary.results:
                name = wanted[bytes(r.topic_id)][0]
                parts = []
                for pr in r.partitions:
                    if not _lag_known(pr):
                        ok = pr.error_code == 0
                        parts.append(dsgo.DescribeShareGroupOffsetsResponsePartition(
                            partition_index=pr.partition, start_offset=pr.start_offset if ok else -1,
                            leader_epoch=pr.leader_epoch if ok else 0, lag=-1))
                        continue
                    end, code = ends[(name, pr.partition)]
                    if code:
                        parts.append(dsgo.DescribeShareGroupOffsetsResponsePartition(
                            partition_index=pr.partition, error_code=code, error_message=MESSAGES.get(ErrorCode(code))))
                    else:
                        parts.append(dsgo.DescribeShareGroupOffsetsResponsePartition(
                            partition_index=pr.partition, start_offset=pr.start_offset, leader_epoch=pr.leader_epoch,
                            lag=end - pr.start_offset - pr.delivery_complete_count))
                out.topics.append(dsgo.DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=r.topic_id,
                                                                            partitions=parts))
        out.topics.extend(missing)
        return out

    async def _latest_offsets(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """Each partition's end offset from its leader, as Kafka's NetworkPartitionMetadataClient: one ListOffsets
        (LATEST, read_uncommitted) per leader; (offset, error) per partition, LEADER_NOT_AVAILABLE without one."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        image = self.metadata.image
        for name, p in tps:
            info = image.topic(name)
            part = info.partitions.get(p) if info is not None else None
            if part is None or part.leader < 0:
                out[(name, p)] = (-1, ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                by_leader.setdefault(part.leader, []).append((name, p))

        async def ask(node: int, parts: list[tuple[str, int]]) -> None:
            topics: dict[str, list] = {}
            for name, p in parts:
                topics.setdefault(name, []).append(lo_req.ListOffsetsPartition(partition_index=p, timestamp=-1))
            req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
                lo_req.ListOffsetsTopic(name=n, partitions=ps) for n, ps in topics.items()])
            try:
                client = self.persister.client_for(node)
                if client is None:
                    raise ConnectionError(f"broker {node} has no endpoint")
                resp = await client.request(req, LIST_OFFSETS_VERSION,
                                            int(self.broker_config.get("request.timeout.ms")) / 1000)
                for t in resp.topics:
                    for pr in t.partitions:
                        out[(t.name, pr.partition_index)] = (pr.offset, pr.error_code)
            except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
                log.info("ListOffsets at broker %d for share group lag failed: %r", node, exc)
            for tp in parts:
                out.setdefault(tp, (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        await asyncio.gather(*(ask(n, ps) for n, ps in by_leader.items()))
        return out

    async def alter_share_group_offsets(self, group_id: str, topics) -> Any:
        """GroupCoordinatorService.alterShareGroupOffsets: the shard's records (the bumped epoch, the partitions
        initializing) are committed, then the share coordinators initialize the partitions at their new start
        offsets (persisterInitialize); success marks them initialized, a partition's error is its answer (the
        others keep theirs) and nothing is uninitialized; a failed call answers every partition with its error."""
        res = await self.run(group_id, GroupCoordinatorShard.share_group_alter_offsets, group_id, topics)
        if res.error is not None:
            raise res.error
        response, init = res.response
        if init is None or self.persister is None:
            return response
        try:
            result = await self.persister.initialize(init.to_request())
        except Exception as exc:  # noqa: BLE001 - every partition answered with the error
            log.error("Unable to initialize share group state for %s while altering share group offsets: %r",
                      group_id, exc)
            for t in response.responses:
                for p in t.partitions:
                    p.error_code, p.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)
            return response
        errors = {(bytes(t.topic_id), pr.partition): pr for t in result.results for pr in t.partitions
                  if pr.error_code}
        if not errors:
            p, shard = await self.shard_for(group_id)
            await self._apply(p, shard.share_group_initialized(group_id, init.partitions(), self.clock.now_ms()))
            return response
        for t in response.responses:
            for part in t.partitions:
                err = errors.get((bytes(t.topic_id), part.partition_index))
                if part.error_code == 0 and err is not None:
                    part.error_code, part.error_message = err.error_code, err.error_message
        return response

    async def delete_share_group_offsets(self, group_id: str, topic_names: list[str]) -> tuple[int, str | None, list]:
        """GroupCoordinatorService.deleteShareGroupOffsets: (top-level error, its message, topic results). The
        eligible topics move to deleting, their share state is deleted through the persister, and the topics
        deleted leave ``deleting``; a topic whose deletion failed is answered with its first partition's error."""
        res = await self.run(group_id, GroupCoordinatorShard.share_group_delete_offsets_initiate, group_id,
                             topic_names)
        if isinstance(res.error, GroupError):
            return res.error.code, res.error.message, []
        errors, request = res.response
        errors = list(errors)
        if request is None:
            return 0, None, errors
        try:
            result = await self.persister.delete(request.to_request())
        except Exception as exc:  # noqa: BLE001 - the top-level error
            log.error("Failed to delete share group state of %s: %r", group_id, exc)
            return ErrorCode.UNKNOWN_SERVER_ERROR, str(exc), []
        image = self.metadata.image
        done: dict[bytes, str] = {}
        for t in result.results:
            tid = bytes(t.topic_id)
            info = image.topics_by_id.get(tid)
            name = info.name if info is not None else None
            bad = next((pr for pr in t.partitions if pr.error_code), None)
            if bad is not None:
                errors.append(dsgor.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=tid, error_code=bad.error_code,
                    error_message=MESSAGES.get(ErrorCode(bad.error_code))))
            else:
                done[tid] = name
        if not done:
            return 0, None, errors
        res = await self.run(group_id, GroupCoordinatorShard.share_group_delete_offsets_complete, group_id, done)
        if isinstance(res.error, GroupError):
            return res.error.code, res.error.message, []
        return 0, None, list(res.response) + errors

    def _write_records(self, p: int, res: Result) -> asyncio.Future | None:
        """Append at once, so the log keeps the order of the shard's state changes; the commit comes later."""
        if not res.records:
            return None
        try:
            return self._write(p, res.records)
        except Exception as exc:  # noqa: BLE001 - any storage failure becomes a coordinator error
            self._fail(p, res, exc)
            return None

    def _fail(self, p: int, res: Result, exc: Exception) -> None:
        code = _append_error(exc)
        log.error("writing %d group records to %s-%d failed: %s", len(res.records), GROUP_METADATA_TOPIC, p, exc)
        for _, resp in res.completions:
            if hasattr(resp, "error_code"):
                resp.error_code = code
        if res.error is None:
            res.error = GroupError(code)

    def _finish_later(self, p: int, res: Result) -> None:
        committed = self._write_records(p, res)
        if committed is None and not res.share_state:
            self._resolve(res.completions)
            return

        async def finish() -> None:
            if committed is not None:
                try:
                    await committed
                except Exception as exc:  # noqa: BLE001 - a failed commit becomes a coordinator error
                    self._fail(p, res, exc)
            if res.share_state and res.error is None:
                await self._send_share_state(p, res)
            self._resolve(res.completions)
            self._poke()

        task = asyncio.ensure_future(finish())
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    def _write(self, p: int, records, producer_id: int = -1, producer_epoch: int = -1) -> asyncio.Future | None:
        """Append one batch; with a producer id it is that producer's transactional batch (as Kafka's
        CoordinatorRuntime builds it: base sequence 0), checked against the log's producer state."""
        part = self._leader_partition(p)
        ts = self.clock.now_ms()
        kv = [Record(k, v, timestamp=ts) for k, v in (r.encode() for r in records)]
        if producer_id >= 0:
            batch = build_batch(kv, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                                is_transactional=True)
        else:
            batch = build_batch(kv)
        return self.replicas.append(part, bytearray(batch), ts, origin=ORIGIN_COORDINATOR).committed

    def _leader_partition(self, p: int):
        part = self.replicas.get(GROUP_METADATA_TOPIC, p)
        if part is None or not part.is_leader(self.node_id):
            raise GroupError(ErrorCode.NOT_COORDINATOR)
        return part

    # ---- transactions (KIP-447) ----------------------------------------------------------------------
    async def commit_transactional_offsets(self, ctx: ReqCtx, req) -> Result:
        """TxnOffsetCommit (CoordinatorRuntime.scheduleTransactionalWriteOperation): the offsets are written as
        the producer's transactional batch and become pending in the shard once appended, so a fenced
        producer (the log's INVALID_PRODUCER_EPOCH) leaves no trace; answered once committed."""
        p, shard = await self.shard_for(req.group_id)
        res = shard.commit_transactional_offsets(ctx, req, self.clock.now_ms())
        if res.error is not None or not res.records:
            self._poke()
            return res
        try:
            committed = self._write(p, res.records, res.producer_id, res.producer_epoch)
        except Exception as exc:  # noqa: BLE001 - the append's error is the answer
            self._fail(p, res, exc)
            return res
        if self.shards.get(p) is shard:
            shard.replay_transactional(res.records, res.producer_id)
        if committed is not None:
            try:
                await committed
            except Exception as exc:  # noqa: BLE001 - a failed commit becomes a coordinator error
                self._fail(p, res, exc)
        return res

    async def complete_transaction(self, p: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                                   commit: bool, timeout_s: float, transaction_version: int = 0) -> None:
        """A WriteTxnMarkers marker for ``__consumer_offsets``-``p`` (GroupCoordinatorService.completeTransaction):
        written by the coordinator in order with its other writes, then applied to the shard's pending
        offsets (committed or dropped); ``transaction_version`` as for any partition (KIP-1228's epoch check).
        Raises GroupError / KafkaError."""
        if not self.active:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if p in self._loading:
            raise GroupError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        shard = self._current_shard(p)
        if shard is None:
            raise GroupError(ErrorCode.NOT_COORDINATOR)
        part = self._leader_partition(p)
        now = self.clock.now_ms()
        batch = build_end_txn_marker_batch(commit=commit, producer_id=producer_id, producer_epoch=producer_epoch,
                                           coordinator_epoch=coordinator_epoch, timestamp=now)
        committed = self.replicas.append(part, bytearray(batch), now, origin=ORIGIN_COORDINATOR,
                                         transaction_version=transaction_version).committed
        shard.replay_end_transaction_marker(producer_id, commit)
        self._poke()
        if committed is not None:
            await asyncio.wait_for(asyncio.shield(committed), timeout_s)

    async def run(self, group_id: str, op: Callable[..., Result], *args) -> Result:
        """Run ``op(shard, *args, now_ms)`` (a GroupCoordinatorShard method) on the group's shard
        and apply the result."""
        p, shard = await self.shard_for(group_id)
        res = op(shard, *args, self.clock.now_ms())
        return await self._apply(p, res)

    async def run_delayed(self, group_id: str, op: Callable[..., Result], ctx: ReqCtx, req) -> Any:
        """JoinGroup / SyncGroup: the answer arrives through a completion, maybe after a rebalance."""
        p, shard = await self.shard_for(group_id)
        token, fut = self.new_waiter()
        try:
            res = op(shard, ctx, req, token, self.clock.now_ms())
            await self._apply(p, res)
            if res.error is not None and not fut.done():
                raise res.error
            return await fut
        finally:
            self.forget(token)

    async def run_on_shard(self, p: int, fn) -> Result:
        """Run ``fn(shard, now_ms)`` (which returns a Result) on partition ``p``'s shard."""
        shard = self.shards.get(p)
        if shard is None:
            raise GroupError(ErrorCode.NOT_COORDINATOR)
        return await self._apply(p, fn(shard, self.clock.now_ms()))

    def all_shards(self) -> list[tuple[int, GroupCoordinatorShard]]:
        return sorted(self.shards.items())

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
                        # written now; answered when committed, without holding up other shards' timers
                        self._finish_later(p, shard.poll(now))
                if now - last_check >= LEADERSHIP_CHECK_MS:
                    last_check = now
                    await self._sync_leadership()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the timer task must survive a bad group
                log.exception("group coordinator timer task error")
                await asyncio.sleep(0.1)


class GroupCoordinatorCollector:
    """kafka.server:type=group-coordinator-metrics (GroupCoordinatorMetrics, KIP-848/KIP-932), named as
    broker/observability/metrics.py names Kafka's metrics, over the groups of the shards this broker has loaded:
    group-count per protocol (classic, consumer, share), share-group-count per state (Empty, Stable, Dead) and
    share-group-rebalance-count (heartbeats that bumped a share group's epoch; Kafka's share-group-rebalance-rate
    is its rate)."""

    def __init__(self, service: GroupService) -> None:
        self.service = service

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        by_type = {"classic": 0, "consumer": 0, "share": 0}
        share_states = {"Empty": 0, "Stable": 0, "Dead": 0}
        rebalances = self.service.share_rebalances_unloaded
        for _, shard in self.service.all_shards():  # a copy: scraped on the HTTP server's thread
            rebalances += shard.share.rebalances
            for group in list(shard.groups.values()):
                by_type[group.type] = by_type.get(group.type, 0) + 1
                if group.type == "share":
                    share_states[group.state_string()] = share_states.get(group.state_string(), 0) + 1
        count = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                                  "The total number of groups using each protocol (group-count)", labels=["protocol"])
        for protocol, n in by_type.items():
            count.add_metric([protocol], n)
        yield count
        share = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                                  "The number of share groups in each state (share-group-count)", labels=["state"])
        for state, n in share_states.items():
            share.add_metric([state], n)
        yield share
        rb = CounterMetricFamily("kafka_server_group_coordinator_metrics_share_group_rebalance",
                                 "The total number of share group rebalances (share-group-rebalance-count)")
        rb.add_metric([], rebalances)
        yield rb


def _lag_known(pr) -> bool:
    """shouldComputeSharePartitionLag: a summary without error, its start offset and delivery count initialized."""
    return pr.error_code == 0 and pr.start_offset != -1 and pr.delivery_complete_count != -1


def _random_uuid() -> str:
    return str(uuid.uuid4())


def _append_error(exc: Exception) -> int:
    """GroupMetadataManager.appendGroupMetadataErrorToResponseError."""
    if isinstance(exc, GroupError):
        return exc.code
    code = getattr(exc, "code", None)
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_TXN_STATE,
                ErrorCode.TRANSACTION_COORDINATOR_FENCED):
        return code  # a transactional write's producer-state check: the client's answer as is
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _replay_log(shard: GroupCoordinatorShard, log_) -> int:
    """Replay every record of a ``__consumer_offsets`` partition into ``shard`` (off the event loop), as
    Kafka's CoordinatorLoaderImpl: a transactional batch's offsets stay pending until their producer's
    marker, which commits or drops them; those of transactions still open at the end stay pending."""
    n = 0
    for raw in log_.iter_batches(0):
        header, records = decode_batch(raw)
        shard.next_offset = header.base_offset + header.last_offset_delta + 1
        if header.attributes & 0x20:  # control batch: a transaction marker
            for r in records:
                try:
                    marker = parse_end_txn_marker(r)
                except Exception:  # noqa: BLE001 - not an end marker
                    continue
                shard.replay_end_transaction_marker(header.producer_id, marker.is_commit)
                shard.next_offset = header.base_offset + header.last_offset_delta + 1
            continue
        producer_id = header.producer_id if header.attributes & 0x10 else -1
        for r in records:
            if r.key is None:
                continue
            try:
                rec = decode_record(r.key, r.value)
            except UnknownRecordType as exc:
                # CoordinatorLoaderImpl: an unknown record type is ignored with a warning
                log.warning("%s while loading %s-%d at offset %s. Ignoring it. It could be a left over from an "
                            "aborted upgrade.", exc, log_.topic, log_.partition, r.offset)
                continue
            except Exception as exc:  # noqa: BLE001
                log.warning("skipping undecodable record at %s-%d offset %s: %s", log_.topic, log_.partition,
                            r.offset, exc)
                continue
            shard.replay(rec, r.offset, producer_id)
            n += 1
    shard.next_offset = max(shard.next_offset, log_.log_end_offset)
    return n


def req_ctx(ctx) -> ReqCtx:
    """The request's client id, host and API version as the coordinator sees them."""
    return ReqCtx(client_id=ctx.client_id or "", client_host=client_host(ctx), api_version=ctx.version)


def client_host(ctx) -> str:
    """Kafka reports the client's ``InetAddress.toString()``: "/127.0.0.1", "/0:0:0:0:0:0:0:1"."""
    try:
        addr = ipaddress.ip_address(ctx.client_host)
    except ValueError:
        return "/" + ctx.client_host
    if addr.version == 6:
        return "/" + ":".join(format(int(g, 16), "x") for g in addr.exploded.split(":"))
    return "/" + str(addr)
