"""KIP-890 part 1 on the partition leader: asking a transactional id's coordinator whether partitions are in its
open transaction before their first transactional batch is appended (Kafka's AddPartitionsToTxnManager).

``verify_transaction`` sends the question to the coordinator node (the leader of the id's ``__transaction_state``
partition, ``TxnService.partition_for``; COORDINATOR_NOT_AVAILABLE for every partition when there is none alive)
as one transaction of an AddPartitionsToTxn v4+ request with ``verify_only``. Questions to one node are batched:
one request in flight per node, the next one carrying everything queued meanwhile. One question per transactional
id is queued at a time; a second one (Kafka's three cases):

* with a higher producer epoch fences the queued one: INVALID_PRODUCER_EPOCH for it;
* with the same epoch (the producer retrying) replaces it: NETWORK_EXCEPTION for the queued one;
* with a lower epoch is fenced itself: INVALID_PRODUCER_EPOCH, not queued.

The answer, as Kafka's completion handler maps it (the callback gets the partitions NOT verified, with their error;
an empty map means all are in the transaction): a lost connection or a timeout NETWORK_EXCEPTION for every
partition; a top-level error for every partition (CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE); per
partition, PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (what producers expect here) and TRANSACTION_ABORTABLE as
INVALID_TXN_STATE for Produce v10 and older (``generic_error`` false). A transaction the answer does not name gets
NETWORK_EXCEPTION (Kafka would never call it back).

Transactions V2 (KIP-890 part 2; Kafka's TransactionSupportedOperation ADD_PARTITION): for a Produce v12+ or a
TxnOffsetCommit v5 at ``transaction.version`` 2 the question is an add (``add_partition``: ``verify_only`` false):
the coordinator adds the partitions to the transaction (recording the client's TV2) instead of only checking them.

A question to this node itself goes to ``local`` (broker/apis/local.py: the same handler, in-process) when the node
set one, not through a loopback connection.

Difference from Kafka, on purpose: the old-client mapping of TRANSACTION_ABORTABLE follows each question's own
Produce version (Kafka takes the version of the first question queued for the node).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Callable

from broker.network.peer_links import PeerLinks
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from protocol.generated.messages import AddPartitionsToTxnRequest
from protocol.generated.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.topics import TRANSACTION_STATE_TOPIC

log = logging.getLogger("odradek.txn_verifier")

# v4+ carry transactions from brokers (verify_only); v5 may answer TRANSACTION_ABORTABLE
ADD_PARTITIONS_TO_TXN_VERSION = 5

TopicPartition = tuple[str, int]
Callback = Callable[[dict[TopicPartition, int]], None]


@dataclass
class _Question:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    callback: Callback
    generic_error: bool
    add_partition: bool = False  # TV2: add the partitions (verify_only false)


@dataclass
class _NodeQueue:
    questions: dict[str, _Question] = field(default_factory=dict)  # by transactional id, in arrival order


class TxnVerifier:
    """Verification questions of this broker's Produce handling, batched per coordinator node."""

    def __init__(self, node_id: int, image: Callable[[], MetadataImage], listener: str, links: PeerLinks,
                 partition_for: Callable[[str], int], request_timeout_s: float) -> None:
        self.node_id = node_id
        self._image = image
        self._listener = listener
        self._links = links
        self._partition_for = partition_for
        self._timeout_s = request_timeout_s
        self._queues: dict[int, _NodeQueue] = {}  # node -> questions not sent yet
        self._wake: dict[int, asyncio.Event] = {}
        self._senders: dict[int, asyncio.Task] = {}
        self._clients: dict[int, object] = {}
        self.local = None  # this node's own requests handled in-process (LocalRequests), set by the node
        self.requests_sent = 0

    # ---- asking -------------------------------------------------------------------------------------
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition], generic_error: bool,
                     add_partition: bool = False) -> dict[TopicPartition, int]:
        """The partitions not verified (or, ``add_partition``, not added), with their error (empty: every one is
        in the transaction)."""
        fut = asyncio.get_running_loop().create_future()

        def done(errors: dict[TopicPartition, int]) -> None:
            if not fut.done():
                fut.set_result(errors)
        self.verify_transaction(transactional_id, producer_id, producer_epoch, partitions, done, generic_error,
                                add_partition)
        return await fut

    async def add_or_verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            partitions: list[TopicPartition], generic_error: bool, add_partition: bool, config,
                            monotonic: Callable[[], float]) -> dict[TopicPartition, int]:
        """:meth:`verify`; an add refused with CONCURRENT_TRANSACTIONS (the producer's previous transaction still
        writing its markers) is asked again every ``add.partitions.to.txn.retry.backoff.ms`` for up to
        ``add.partitions.to.txn.retry.backoff.max.ms`` (ReplicaManager, KAFKA-18654), and a count."""
        errors = await self.verify(transactional_id, producer_id, producer_epoch, partitions, generic_error,
                                   add_partition)
        if not add_partition:
            return errors
        backoff = max(1, int(config.get("add.partitions.to.txn.retry.backoff.ms"))) / 1000
        deadline = monotonic() + int(config.get("add.partitions.to.txn.retry.backoff.max.ms")) / 1000
        for _ in range(1000):
            again = [tp for tp, code in errors.items() if code == ErrorCode.CONCURRENT_TRANSACTIONS]
            if not again or monotonic() + backoff > deadline:
                break
            await asyncio.sleep(backoff)
            retried = await self.verify(transactional_id, producer_id, producer_epoch, again, generic_error, True)
            errors = {tp: code for tp, code in errors.items() if tp not in again}
            errors.update(retried)
        return errors

    def verify_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: list[TopicPartition], callback: Callback, generic_error: bool,
                           add_partition: bool = False) -> None:
        """Kafka's ``verifyTransaction``: ``callback`` is called once, with the partitions not verified."""
        node = self.coordinator_node(transactional_id)
        if node is None:
            callback(dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        self._add(node, _Question(transactional_id, producer_id, producer_epoch, tuple(partitions), callback,
                                  generic_error, add_partition))

    def coordinator_node(self, transactional_id: str) -> int | None:
        """The alive leader of the id's ``__transaction_state`` partition with an endpoint on the listener."""
        image = self._image()
        topic = image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        info = topic.partitions.get(self._partition_for(transactional_id))
        if info is None or info.leader < 0:
            return None
        broker = image.brokers.get(info.leader)
        if broker is None or broker.fenced or broker.endpoint(self._listener) is None:
            return None
        return info.leader

    def _add(self, node: int, q: _Question) -> None:
        queue = self._queues.setdefault(node, _NodeQueue())
        old = queue.questions.get(q.transactional_id)
        if old is not None and (old.producer_id, old.producer_epoch) == (q.producer_id, q.producer_epoch):
            # one producer's pipelined Produce requests (Kafka reads a connection's requests one at a time, odradek
            # concurrently): asked together, each told about its own partitions
            queue.questions[q.transactional_id] = _merged(old, q)
            self._sender(node).set()
            return
        if old is not None:
            if old.producer_epoch <= q.producer_epoch:
                # fenced by a newer epoch, or the same producer retrying: the queued question gives way
                code = (ErrorCode.INVALID_PRODUCER_EPOCH if old.producer_epoch < q.producer_epoch
                        else ErrorCode.NETWORK_EXCEPTION)
                del queue.questions[q.transactional_id]
                _call(old, dict.fromkeys(old.partitions, code))
            else:
                _call(q, dict.fromkeys(q.partitions, ErrorCode.INVALID_PRODUCER_EPOCH))
                return
        queue.questions[q.transactional_id] = q
        self._sender(node).set()

    def queued(self) -> int:
        return sum(len(q.questions) for q in self._queues.values())

    async def close(self) -> None:
        tasks = list(self._senders.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.close()
        for queue in self._queues.values():
            for q in queue.questions.values():
                _call(q, dict.fromkeys(q.partitions, ErrorCode.NETWORK_EXCEPTION))
        self._queues.clear()

    # ---- sending ------------------------------------------------------------------------------------
    def _sender(self, node: int) -> asyncio.Event:
        wake = self._wake.get(node)
        if wake is None:
            wake = self._wake[node] = asyncio.Event()
        task = self._senders.get(node)
        if task is None or task.done():
            self._senders[node] = asyncio.ensure_future(self._send_loop(node, wake))
        return wake

    async def _send_loop(self, node: int, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            wake.clear()
            queue = self._queues.pop(node, None)
            if queue is None or not queue.questions:
                continue
            questions = list(queue.questions.values())
            try:
                await self._send(node, questions)
            except asyncio.CancelledError:
                for q in questions:
                    _call(q, dict.fromkeys(q.partitions, ErrorCode.NETWORK_EXCEPTION))
                raise
            except Exception:  # noqa: BLE001 - a bug here must not stop every later question to this node
                log.exception("verifying transactions with broker %d failed", node)
                for q in questions:
                    _call(q, dict.fromkeys(q.partitions, ErrorCode.NETWORK_EXCEPTION))

    async def _send(self, node: int, questions: list[_Question]) -> None:
        if node == self.node_id and self.local is not None:
            client = self.local
        else:
            broker = self._image().brokers.get(node)
            endpoint = broker.endpoint(self._listener) if broker is not None else None
            if endpoint is None:
                _all(questions, ErrorCode.NETWORK_EXCEPTION)
                return
            client = self._client(node, endpoint.host, endpoint.port)
        request = AddPartitionsToTxnRequest(transactions=[_transaction(q) for q in questions])
        self.requests_sent += 1
        try:
            response = await client.request(request, ADD_PARTITIONS_TO_TXN_VERSION, self._timeout_s)
        except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
            log.info("AddPartitionsToTxn (verify) to broker %d failed: %r", node, exc)
            _all(questions, ErrorCode.NETWORK_EXCEPTION)
            return
        if response.error_code:
            log.warning("AddPartitionsToTxn (verify) to broker %d answered %s", node,
                        ErrorCode(response.error_code).name)
            # clients are not shown CLUSTER_AUTHORIZATION_FAILED: the verification did not complete
            code = (ErrorCode.INVALID_TXN_STATE if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    else response.error_code)
            _all(questions, code)
            return
        by_id = {q.transactional_id: q for q in questions}
        for result in response.results_by_transaction:
            q = by_id.pop(result.transactional_id, None)
            if q is None:
                continue
            unverified: dict[TopicPartition, int] = {}
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    code = p.partition_error_code
                    if code == ErrorCode.NONE:
                        continue
                    if code == ErrorCode.PRODUCER_FENCED:  # producers expect INVALID_PRODUCER_EPOCH here
                        code = ErrorCode.INVALID_PRODUCER_EPOCH
                    elif code == ErrorCode.TRANSACTION_ABORTABLE and not q.generic_error:
                        code = ErrorCode.INVALID_TXN_STATE  # Produce v10 and older do not know it
                    unverified[(topic.name, p.partition_index)] = code
            _call(q, unverified)
        _all(list(by_id.values()), ErrorCode.NETWORK_EXCEPTION)

    def _client(self, node: int, host: str, port: int):
        client = self._clients.get(node)
        if client is None or (client.host, client.port) != (host, port):
            if client is not None:
                asyncio.ensure_future(client.close())
            client = self._clients[node] = self._links.client(
                host, port, f"txn-verifier-{self.node_id}-{node}", peer=node)
        return client


def _merged(old: _Question, new: _Question) -> _Question:
    """One question for two of the same producer (id and epoch), answering each with its own partitions, each
    TRANSACTION_ABORTABLE as its own Produce version shows it."""
    def split(errors: dict[TopicPartition, int]) -> None:
        for q in (old, new):
            _call(q, {tp: ErrorCode.INVALID_TXN_STATE if code == ErrorCode.TRANSACTION_ABORTABLE and not q.generic_error
                      else code for tp, code in errors.items() if tp in q.partitions})
    return _Question(old.transactional_id, old.producer_id, old.producer_epoch,
                     tuple(dict.fromkeys(old.partitions + new.partitions)), split, True,
                     old.add_partition or new.add_partition)


def _call(q: _Question, errors: dict[TopicPartition, int]) -> None:
    try:
        q.callback(errors)
    except Exception:  # noqa: BLE001 - one caller's failure must not lose the others' answers
        log.exception("verification callback of %s failed", q.transactional_id)


def _all(questions: list[_Question], code: int) -> None:
    for q in questions:
        _call(q, dict.fromkeys(q.partitions, code))


def _transaction(q: _Question) -> AddPartitionsToTxnTransaction:
    by_topic: dict[str, list[int]] = {}
    for topic, index in q.partitions:
        by_topic.setdefault(topic, []).append(index)
    return AddPartitionsToTxnTransaction(
        transactional_id=q.transactional_id, producer_id=q.producer_id, producer_epoch=q.producer_epoch,
        verify_only=not q.add_partition,
        topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
