"""The persister client (Kafka's Persister / DefaultStatePersister with PersisterStateManager): how a broker reads and
writes share-partition state kept by the share coordinators.

A request names share-partitions of one group; each belongs to the coordinator leading its ``__share_group_state``
partition (``group:topicId:partition`` hashed, as ShareCoordinatorService.partitionFor). The persister splits the
request by coordinator, sends one request per coordinator at once (to this node's own coordinator in-process,
straight through the service's method as the handler calls it: no request context and no timeout of its own,
the service bounds its commit wait by ``share.coordinator.write.timeout.ms``; to the others over this node's peer
links), merges the answers by topic and asks again, after a backoff, for the partitions answered with a
retriable error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a lost connection or
timeout, UNKNOWN_TOPIC_OR_PARTITION): the coordinator moved, is loading or has not seen the topic yet. After
``max_attempts`` a partition keeps its last error.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import TYPE_CHECKING, Any, Callable

from broker.share.share_coordinator_service import _SHAPES, ShareServiceError
from cluster.share.share_coordinator import share_partition_key_string
from protocol.errors import ErrorCode
from protocol.topics import SHARE_GROUP_STATE_TOPIC

if TYPE_CHECKING:
    from broker.network.peer_links import PeerLinks
    from broker.share.share_coordinator_service import ShareCoordinatorService
    from cluster.metadata_image import MetadataImage

log = logging.getLogger("odradek.share.persister")

# UNKNOWN_TOPIC_OR_PARTITION: the coordinator's metadata image may not have the topic yet (KAFKA-19455)
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
# the version each API is sent at (both ends are this software: the newest)
VERSIONS = {"initialize": 0, "read": 0, "write": 1, "delete": 0, "summary": 1}

# the service's method each API's handler calls (broker/apis/k83_*..k87_*), for this node's own coordinator
_LOCAL = {"initialize": "initialize_state", "read": "read_state", "write": "write_state", "delete": "delete_state",
          "summary": "read_state_summary"}

TopicPartition = tuple[bytes, int]


class SharePersister:
    """``initialize`` / ``read`` / ``write`` / ``delete`` / ``read_summary``: a whole request's answer, every
    partition answered (its coordinator's answer or its last error)."""

    def __init__(self, node_id: int, image: Callable[[], "MetadataImage"], listener: str, links: "PeerLinks",
                 service: "ShareCoordinatorService", request_timeout_s: float, max_attempts: int = 5,
                 backoff_s: float = 1.0, backoff_max_s: float = 30.0) -> None:
        # Kafka's PersisterStateManager: REQUEST_BACKOFF_MS 1 s doubling to REQUEST_BACKOFF_MAX_MS 30 s, 5 attempts
        # (1+2+4+8 s between them: a share coordinator's failover, seconds, is ridden through, not answered as an error)
        self.node_id = node_id
        self._image = image
        self._listener = listener
        self._links = links
        self._service = service
        self._timeout_s = request_timeout_s
        self.max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._clients: dict[int, Any] = {}
        self.local = None  # this node's own requests handled in-process (LocalRequests), set by the node
        self.requests_sent = 0

    async def initialize(self, req):
        return await self._run("initialize", req)

    async def read(self, req):
        return await self._run("read", req)

    async def write(self, req):
        return await self._run("write", req)

    async def delete(self, req):
        return await self._run("delete", req)

    async def read_summary(self, req):
        return await self._run("summary", req)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    # ---- one request -------------------------------------------------------------------------------
    async def _run(self, api: str, req):
        response_cls, topic_cls, part_cls = _SHAPES[api]
        pending: dict[TopicPartition, Any] = {}
        order: list[TopicPartition] = []
        for t in req.topics:
            for p in t.partitions:
                tp = (bytes(t.topic_id), p.partition)
                if tp not in pending:
                    order.append(tp)
                pending[tp] = (t, p)
        answers: dict[TopicPartition, Any] = {}
        backoff = self._backoff_s
        for attempt in range(self.max_attempts):
            if attempt:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)
            by_node = await self._route(api, req.group_id, pending, answers)
            sends = [self._send(api, req, node, {tp: pending[tp] for tp in tps}, answers)
                     for node, tps in by_node.items()]
            if len(sends) == 1:
                await sends[0]  # one coordinator (a share partition's write): no task in between
            else:
                await asyncio.gather(*sends)
            pending = {tp: v for tp, v in pending.items() if answers[tp].error_code in RETRIABLE}
            if not pending:
                break
        by_topic: dict[bytes, Any] = {}
        for tid, partition in order:
            if tid not in by_topic:
                by_topic[tid] = topic_cls(topic_id=tid, partitions=[])
            by_topic[tid].partitions.append(answers[(tid, partition)])
        return response_cls(results=list(by_topic.values()))

    async def _route(self, api: str, group_id: str, pending: dict, answers: dict) -> dict[int, list[TopicPartition]]:
        """The coordinator node of each pending partition; those without one answered COORDINATOR_NOT_AVAILABLE."""
        _, _, part_cls = _SHAPES[api]
        try:
            await self._service.ensure_topic()
        except ShareServiceError as exc:
            for tp in pending:
                answers[tp] = part_cls(partition=tp[1], error_code=exc.code)
            return {}
        image = self._image()
        topic = image.topic(SHARE_GROUP_STATE_TOPIC)
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            node = -1
            if topic is not None:
                info = topic.partitions.get(self._service.partition_for(share_partition_key_string(group_id, *tp)))
                if info is not None and info.leader >= 0:
                    broker = image.brokers.get(info.leader)
                    if broker is not None and not broker.fenced and broker.endpoint(self._listener) is not None:
                        node = info.leader
            if node < 0:
                answers[tp] = part_cls(partition=tp[1], error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            else:
                by_node.setdefault(node, []).append(tp)
        return by_node

    async def _send(self, api: str, req, node: int, parts: dict, answers: dict) -> None:
        _, _, part_cls = _SHAPES[api]
        if len(parts) == 1 and len(req.topics) == 1 and len(req.topics[0].partitions) == 1:
            sub = req  # the request is this one partition's (a share partition's write or read)
        else:
            sub = copy.copy(req)
            topics: dict[bytes, Any] = {}
            for (tid, _), (t, p) in parts.items():
                if tid not in topics:
                    topics[tid] = copy.copy(t)
                    topics[tid].partitions = []
                topics[tid].partitions.append(p)
            sub.topics = list(topics.values())
        for tp in parts:
            answers.pop(tp, None)  # an earlier attempt's retriable error
        self.requests_sent += 1
        try:
            if node == self.node_id and self.local is not None:
                # this node's coordinator: its handler's call without the request around it (issue 30: the
                # context and the timeout were a tenth of every piggy-backed acknowledgement's write)
                response = await getattr(self._service, _LOCAL[api])(sub)
            else:
                client = self._client(node)
                if client is None:
                    raise ConnectionError(f"broker {node} has no endpoint on {self._listener}")
                response = await client.request(sub, VERSIONS[api], self._timeout_s)
        except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
            log.info("%s share group state at broker %d failed: %r", api, node, exc)
            for tp in parts:
                answers[tp] = part_cls(partition=tp[1], error_code=ErrorCode.NETWORK_EXCEPTION,
                                       error_message=str(exc) or type(exc).__name__)
            return
        for result in response.results:
            for pr in result.partitions:
                tp = (bytes(result.topic_id), pr.partition)
                if tp in parts:
                    answers[tp] = pr
        for tp in parts:
            if tp not in answers:
                answers[tp] = part_cls(partition=tp[1], error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                       error_message="The coordinator did not answer for this partition.")

    def client_for(self, node: int):
        """A client to broker ``node`` (this node's own requests in-process), or None without an endpoint: the group
        coordinator asks partition leaders for their end offsets through it (DescribeShareGroupOffsets' lag)."""
        return self._client(node)

    def _client(self, node: int):
        if node == self.node_id and self.local is not None:
            return self.local
        broker = self._image().brokers.get(node)
        endpoint = broker.endpoint(self._listener) if broker is not None else None
        if endpoint is None:
            return None
        client = self._clients.get(node)
        if client is None or (client.host, client.port) != (endpoint.host, endpoint.port):
            if client is not None:
                asyncio.ensure_future(client.close())
            client = self._clients[node] = self._links.client(
                endpoint.host, endpoint.port, f"share-persister-{self.node_id}-{node}", peer=node)
        return client
