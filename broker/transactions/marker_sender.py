"""The transaction coordinator's marker sender (Kafka's TransactionMarkerChannelManager and
TransactionMarkerRequestCompletionHandler), for one broker.

Once a transaction's PrepareCommit or PrepareAbort is committed, its COMMIT or ABORT marker must reach every
partition the transaction wrote to. ``add`` takes a transaction's markers (``PendingMarkers``); one task per
destination broker sends WriteTxnMarkers requests carrying every marker queued for that broker at the time, one
request in flight per broker; the partitions' leaders come from the metadata image at each send.

Per partition, as Kafka's completion handler decides: NONE is done; UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT and KAFKA_STORAGE_ERROR are retried
(with the leader of the moment); INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED end the sending of the
whole transaction (a newer producer or coordinator has taken over); UNSUPPORTED_FOR_MESSAGE_FORMAT and
UNSUPPORTED_VERSION drop the partition. A partition of a deleted topic (no leader in the image, or no topic) is
dropped. A lost connection or a request timeout retries every marker of it. Before each send, and after each
answer, ``is_current`` says whether this coordinator still owns the transaction at the markers' coordinator epoch
(not unloaded, not moved on): if not, its markers are dropped and ``done`` resolves False.

``done`` resolves True once every partition is acknowledged or dropped: the coordinator then writes
CompleteCommit / CompleteAbort.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Callable

from broker.network.peer_links import PeerLinks
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from protocol.generated.messages import WriteTxnMarkersRequest
from protocol.generated.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic

log = logging.getLogger("odradek.txn_markers")

WRITE_TXN_MARKERS_VERSION = 1  # v2 carries the transaction version (KIP-1228, transactions V2: not built)

RETRIABLE = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                       ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
DROPPED = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


@dataclasses.dataclass(eq=False)
class PendingMarkers:
    """One transaction's markers still to be written, as its Prepare* record decided them."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: set[tuple[str, int]]  # not acknowledged yet
    done: asyncio.Future = dataclasses.field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def finish(self, completed: bool) -> None:
        if not self.done.done():
            self.done.set_result(completed)


class TxnMarkerSender:
    """Markers of the transactions this broker coordinates, sent to the partitions' leaders."""

    def __init__(self, node_id: int, image: Callable[[], MetadataImage], listener: str, links: PeerLinks,
                 is_current: Callable[[PendingMarkers], bool], request_timeout_s: float, backoff_s: float) -> None:
        self.node_id = node_id
        self._image = image
        self._listener = listener
        self._links = links
        self._is_current = is_current
        self._timeout_s = request_timeout_s
        self._backoff_s = backoff_s
        self._queues: dict[int, list[tuple[PendingMarkers, set[tuple[str, int]]]]] = {}  # broker -> to send
        self._wake: dict[int, asyncio.Event] = {}
        self._senders: dict[int, asyncio.Task] = {}
        self._clients: dict[int, object] = {}
        self._retry_unknown: list[tuple[PendingMarkers, set[tuple[str, int]]]] = []  # leader known, broker not
        self._retry_task: asyncio.Task | None = None

    def add(self, pending: PendingMarkers) -> None:
        """Queue a transaction's markers (all its partitions)."""
        if not pending.partitions:
            pending.finish(True)
            return
        self._route(pending, set(pending.partitions))

    def pending_count(self) -> int:
        return sum(len(q) for q in self._queues.values()) + len(self._retry_unknown)

    async def close(self) -> None:
        tasks = [*self._senders.values(), *([self._retry_task] if self._retry_task is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.close()
        for queue in [*self._queues.values(), self._retry_unknown]:
            for pending, _ in queue:
                pending.finish(False)
        self._queues.clear()
        self._retry_unknown.clear()

    def _route(self, pending: PendingMarkers, partitions: set[tuple[str, int]]) -> None:
        """Queue ``partitions`` of ``pending`` for their leaders now (addTxnMarkersToBrokerQueue)."""
        if not self._is_current(pending):
            log.info("%s: no longer coordinated here at coordinator epoch %d; its markers are not sent",
                     pending.transactional_id, pending.coordinator_epoch)
            pending.finish(False)
            return
        image = self._image()
        by_leader: dict[int, set[tuple[str, int]]] = {}
        waiting: set[tuple[str, int]] = set()
        for tp in partitions:
            topic = image.topic(tp[0])
            info = topic.partitions.get(tp[1]) if topic is not None else None
            if info is None:
                log.info("%s: %s-%d no longer exists: its marker is skipped", pending.transactional_id, *tp)
                pending.partitions.discard(tp)
                continue
            broker = image.brokers.get(info.leader)
            if info.leader < 0 or broker is None or broker.fenced or broker.endpoint(self._listener) is None:
                waiting.add(tp)  # no reachable leader right now: looked at again after a backoff
                continue
            by_leader.setdefault(info.leader, set()).add(tp)
        for leader, tps in by_leader.items():
            self._queues.setdefault(leader, []).append((pending, tps))
            self._sender(leader).set()
        if waiting:
            self._retry_unknown.append((pending, waiting))
            if self._retry_task is None or self._retry_task.done():
                self._retry_task = asyncio.ensure_future(self._retry_later())
        self._maybe_done(pending)

    def _maybe_done(self, pending: PendingMarkers) -> None:
        if not pending.partitions:
            pending.finish(True)

    async def _retry_later(self) -> None:
        while self._retry_unknown:
            await asyncio.sleep(self._backoff_s)
            entries, self._retry_unknown = self._retry_unknown, []
            for pending, tps in entries:
                if not pending.done.done():
                    self._route(pending, tps & pending.partitions)

    def _sender(self, broker_id: int) -> asyncio.Event:
        wake = self._wake.get(broker_id)
        if wake is None:
            wake = self._wake[broker_id] = asyncio.Event()
        task = self._senders.get(broker_id)
        if task is None or task.done():
            self._senders[broker_id] = asyncio.ensure_future(self._send_loop(broker_id, wake))
        return wake

    async def _send_loop(self, broker_id: int, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            wake.clear()
            batch, self._queues[broker_id] = self._queues.get(broker_id, []), []
            batch = [(p, tps & p.partitions) for p, tps in batch if not p.done.done()]
            batch = [(p, tps) for p, tps in batch if tps]
            current = []
            for pending, tps in batch:
                if self._is_current(pending):
                    current.append((pending, tps))
                else:
                    pending.finish(False)
            if not current:
                continue
            try:
                await self._send(broker_id, current)
            except Exception:  # noqa: BLE001 - a bug here must not stop every later marker to this broker
                log.exception("sending transaction markers to broker %d failed", broker_id)
                for pending, tps in current:
                    self._route_later(pending, tps)

    async def _send(self, broker_id: int, batch: list[tuple[PendingMarkers, set[tuple[str, int]]]]) -> None:
        broker = self._image().brokers.get(broker_id)
        endpoint = broker.endpoint(self._listener) if broker is not None else None
        if endpoint is None:
            for pending, tps in batch:
                self._route_later(pending, tps)
            return
        client = self._client(broker_id, endpoint.host, endpoint.port)
        request = WriteTxnMarkersRequest(markers=[_marker(p, tps) for p, tps in batch])
        try:
            response = await client.request(request, WRITE_TXN_MARKERS_VERSION, self._timeout_s)
        except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %r; retrying", broker_id, exc)
            for pending, tps in batch:
                self._route_later(pending, tps)
            return
        # one answer per producer id (WriteTxnMarkersResponse.errorsByProducerId); a producer id has one
        # transaction at a time, so it names the pending entry
        errors: dict[int, dict[tuple[str, int], int]] = {}
        for m in response.markers:
            per = errors.setdefault(m.producer_id, {})
            for t in m.topics:
                for p in t.partitions:
                    per[(t.name, p.partition_index)] = p.error_code
        for pending, tps in batch:
            self._handle_answer(broker_id, pending, tps, errors.get(pending.producer_id, {}))

    def _handle_answer(self, broker_id: int, pending: PendingMarkers, sent: set[tuple[str, int]],
                       errors: dict[tuple[str, int], int]) -> None:
        if not self._is_current(pending):
            pending.finish(False)
            return
        retry: set[tuple[str, int]] = set()
        for tp in sent:
            code = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code == ErrorCode.NONE:
                pending.partitions.discard(tp)
            elif code in RETRIABLE:
                log.info("%s: the marker for %s-%d failed with error %d at broker %d; retrying",
                         pending.transactional_id, *tp, code, broker_id)
                retry.add(tp)
            elif code in FENCED:
                log.info("%s: the marker for %s-%d failed with error %d: the producer or coordinator epoch moved on; "
                         "no more markers are sent for this transaction", pending.transactional_id, *tp, code)
                pending.finish(False)
                return
            elif code in DROPPED:
                pending.partitions.discard(tp)
            else:  # Kafka throws IllegalStateException: a bug or a broken peer; retried here, and said loudly
                log.error("%s: the marker for %s-%d failed with unexpected error %d at broker %d; retrying",
                          pending.transactional_id, *tp, code, broker_id)
                retry.add(tp)
        if retry:
            self._route_later(pending, retry)
        self._maybe_done(pending)

    def _route_later(self, pending: PendingMarkers, tps: set[tuple[str, int]]) -> None:
        """Queued again after a backoff, to the leaders of that moment."""
        self._retry_unknown.append((pending, tps))
        if self._retry_task is None or self._retry_task.done():
            self._retry_task = asyncio.ensure_future(self._retry_later())

    def _client(self, broker_id: int, host: str, port: int):
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != (host, port):
            if client is not None:
                asyncio.ensure_future(client.close())
            client = self._clients[broker_id] = self._links.client(
                host, port, f"txn-marker-sender-{self.node_id}-{broker_id}", peer=broker_id)
        return client


def _marker(pending: PendingMarkers, partitions: set[tuple[str, int]]) -> WritableTxnMarker:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return WritableTxnMarker(producer_id=pending.producer_id, producer_epoch=pending.producer_epoch,
                             transaction_result=pending.commit, coordinator_epoch=pending.coordinator_epoch,
                             topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                     for t, ps in by_topic.items()])
