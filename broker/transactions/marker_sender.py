"""The transaction coordinator's marker transport (the sending half of Kafka's TransactionMarkerChannelManager), for
one broker.

Once a transaction's PrepareCommit or PrepareAbort is committed, its COMMIT or ABORT marker must reach every
partition the transaction wrote to. ``add`` takes a transaction's markers (``cluster.txn.txn_coordinator.TxnMarkers``)
and splits them by the partitions' leaders in the metadata image of the moment; one task per destination broker
sends WriteTxnMarkers requests carrying every marker queued for that broker, one request in flight per broker.

What an answer means is the coordinator's to decide (``TxnCoordinatorShard.markers_written``: done, retried,
fenced): each partition's error goes to ``answered``, a lost connection or a timeout as NETWORK_EXCEPTION for every
partition of the request. A partition whose topic or partition no longer exists (no leader to ask: deleted) goes to
``not_needed``. A partition whose leader is known but not reachable now (fenced, no endpoint, no leader elected yet)
waits ``backoff_s`` and is routed again. ``delay_s`` holds markers back before they are routed (a retry after a
retriable error, so a partition that keeps answering NOT_ENOUGH_REPLICAS is not asked in a tight loop).

Markers for the partitions this broker leads go to ``local`` (broker/apis/local.py: the same handler, in-process)
when the node set one, not through a loopback connection: the producer's next transaction waits for them
(AddPartitionsToTxn answers CONCURRENT_TRANSACTIONS until the Complete* record is written).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from broker.network.peer_links import PeerLinks
from cluster.metadata_image import MetadataImage
from cluster.txn.txn_coordinator import TxnMarkers
from protocol.errors import ErrorCode
from protocol.generated.messages import WriteTxnMarkersRequest
from protocol.generated.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic

log = logging.getLogger("odradek.txn_markers")

WRITE_TXN_MARKERS_VERSION = 2  # v2 carries the client's transaction version (KIP-1228): the leader's epoch check

TopicPartition = tuple[str, int]
# (the __transaction_state partition the markers belong to, the markers, the partitions of this send)
Entry = tuple[int, TxnMarkers, frozenset[TopicPartition]]


class TxnMarkerSender:
    """Markers of the transactions this broker coordinates, sent to the partitions' leaders."""

    def __init__(self, node_id: int, image: Callable[[], MetadataImage], listener: str, links: PeerLinks,
                 answered: Callable[[int, TxnMarkers, dict[TopicPartition, int]], None],
                 not_needed: Callable[[int, TxnMarkers, frozenset[TopicPartition]], None],
                 request_timeout_s: float, backoff_s: float) -> None:
        self.node_id = node_id
        self._image = image
        self._listener = listener
        self._links = links
        self._answered = answered
        self._not_needed = not_needed
        self._timeout_s = request_timeout_s
        self._backoff_s = backoff_s
        self._queues: dict[int, list[Entry]] = {}  # destination broker -> entries to send
        self._wake: dict[int, asyncio.Event] = {}
        self._senders: dict[int, asyncio.Task] = {}
        self._clients: dict[int, object] = {}
        self._later: set[asyncio.TimerHandle] = set()
        self._dropped: set[int] = set()  # txn partitions unloaded since their markers were queued
        self.local = None  # this broker's own requests handled in-process (LocalRequests), set by the node
        self.requests_sent = 0
        self.unknown_destination = 0  # partitions waiting for a reachable leader (UnknownDestinationQueueSize)

    def add(self, txn_partition: int, markers: TxnMarkers, delay_s: float = 0.0) -> None:
        """Queue ``markers`` (all their partitions) for their leaders, now or after ``delay_s``."""
        self._dropped.discard(txn_partition)
        if delay_s > 0:
            handle = asyncio.get_running_loop().call_later(delay_s, self._route_later, txn_partition, markers,
                                                           markers.partitions)
            self._later.add(handle)
            return
        self._route(txn_partition, markers, markers.partitions)

    def drop(self, txn_partition: int) -> None:
        """The coordinator of ``txn_partition`` is unloaded: its queued markers are not sent (answers to those in
        flight are still reported; the unloaded shard ignores them)."""
        self._dropped.add(txn_partition)
        for broker_id, queue in self._queues.items():
            self._queues[broker_id] = [e for e in queue if e[0] != txn_partition]

    def queued(self) -> int:
        return sum(len(q) for q in self._queues.values())

    async def close(self) -> None:
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        self.unknown_destination = 0
        tasks = list(self._senders.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.close()
        self._queues.clear()

    def _route_later(self, txn_partition: int, markers: TxnMarkers, partitions: frozenset[TopicPartition],
                     waited: bool = False) -> None:
        self._later = {h for h in self._later if not h.cancelled() and h.when() > asyncio.get_running_loop().time()}
        if waited:
            self.unknown_destination -= len(partitions)
        if txn_partition not in self._dropped:
            self._route(txn_partition, markers, partitions)

    def _route(self, txn_partition: int, markers: TxnMarkers, partitions: frozenset[TopicPartition]) -> None:
        """Split ``partitions`` by their leaders now (TransactionMarkerChannelManager.addTxnMarkersToBrokerQueue)."""
        image = self._image()
        by_leader: dict[int, set[TopicPartition]] = {}
        gone: set[TopicPartition] = set()
        waiting: set[TopicPartition] = set()
        for tp in partitions:
            topic = image.topic(tp[0])
            info = topic.partitions.get(tp[1]) if topic is not None else None
            if info is None:
                gone.add(tp)
                continue
            broker = image.brokers.get(info.leader)
            if info.leader < 0 or broker is None or broker.fenced or broker.endpoint(self._listener) is None:
                waiting.add(tp)  # Kafka's queue for an unknown broker: looked at again later
                continue
            by_leader.setdefault(info.leader, set()).add(tp)
        for leader, tps in by_leader.items():
            self._queues.setdefault(leader, []).append((txn_partition, markers, frozenset(tps)))
            self._sender(leader).set()
        if waiting:
            self.unknown_destination += len(waiting)
            handle = asyncio.get_running_loop().call_later(self._backoff_s, self._route_later, txn_partition,
                                                           markers, frozenset(waiting), True)
            self._later.add(handle)
        if gone:
            log.info("%s: partitions %s no longer exist: their markers are skipped", markers.transactional_id,
                     sorted(gone))
            self._not_needed(txn_partition, markers, frozenset(gone))

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
            if not batch:
                continue
            try:
                await self._send(broker_id, batch)
            except Exception:  # noqa: BLE001 - a bug here must not stop every later marker to this broker
                log.exception("sending transaction markers to broker %d failed", broker_id)
                self._report_all(batch, ErrorCode.NETWORK_EXCEPTION)

    async def _send(self, broker_id: int, batch: list[Entry]) -> None:
        if broker_id == self.node_id and self.local is not None:
            client = self.local
        else:
            broker = self._image().brokers.get(broker_id)
            endpoint = broker.endpoint(self._listener) if broker is not None else None
            if endpoint is None:
                self._report_all(batch, ErrorCode.NETWORK_EXCEPTION)
                return
            client = self._client(broker_id, endpoint.host, endpoint.port)
        request = WriteTxnMarkersRequest(markers=[_marker(m, tps) for _, m, tps in batch])
        self.requests_sent += 1
        try:
            response = await client.request(request, WRITE_TXN_MARKERS_VERSION, self._timeout_s)
        except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %r; the coordinator retries", broker_id, exc)
            self._report_all(batch, ErrorCode.NETWORK_EXCEPTION)
            return
        # one answer per producer id (WriteTxnMarkersResponse.errorsByProducerId): a producer id has one
        # transaction at a time, so it names the entry
        errors: dict[int, dict[TopicPartition, int]] = {}
        for m in response.markers:
            per = errors.setdefault(m.producer_id, {})
            for t in m.topics:
                for p in t.partitions:
                    per[(t.name, p.partition_index)] = p.error_code
        for txn_partition, markers, tps in batch:
            got = errors.get(markers.producer_id, {})
            # a partition the answer does not name: Kafka's IllegalStateException; retried here
            self._answered(txn_partition, markers, {tp: got.get(tp, ErrorCode.NETWORK_EXCEPTION) for tp in tps})

    def _report_all(self, batch: list[Entry], code: int) -> None:
        for txn_partition, markers, tps in batch:
            self._answered(txn_partition, markers, dict.fromkeys(tps, code))

    def _client(self, broker_id: int, host: str, port: int):
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != (host, port):
            if client is not None:
                asyncio.ensure_future(client.close())
            client = self._clients[broker_id] = self._links.client(
                host, port, f"txn-marker-sender-{self.node_id}-{broker_id}", peer=broker_id)
        return client


def _marker(markers: TxnMarkers, partitions: frozenset[TopicPartition]) -> WritableTxnMarker:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return WritableTxnMarker(producer_id=markers.producer_id, producer_epoch=markers.producer_epoch,
                             transaction_result=markers.committed, coordinator_epoch=markers.coordinator_epoch,
                             transaction_version=markers.transaction_version,
                             topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                     for t, ps in by_topic.items()])
