"""The leader's verification questions to transaction coordinators (broker/transactions/verifier.py), as Kafka's
AddPartitionsToTxnManagerTest checks AddPartitionsToTxnManager.

PORTED (AddPartitionsToTxnManagerTest): testAddTxnData, testGenerateRequests, testTransactionCoordinatorResolution,
testAddPartitionsToTxnHandlerErrorHandling (the disconnect, top-level, mixed and TRANSACTION_ABORTABLE cases; the
authentication and version-mismatch answers have no counterpart between odradek brokers). Not ported:
testAddPartitionsToTxnManagerMetrics (no such metrics).
"""

from __future__ import annotations

import asyncio

from broker.transactions.verifier import ADD_PARTITIONS_TO_TXN_VERSION, TxnVerifier
from cluster.metadata_image import BrokerInfo, Endpoint, MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode as E
from protocol.generated.messages import AddPartitionsToTxnResponse
from protocol.generated.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
)
from protocol.topics import TRANSACTION_STATE_TOPIC

TPS = [("foo", 1), ("foo", 2), ("foo", 3)]
PARTITION_FOR = {"txn1": 0, "txn2": 1, "txn3": 0}


def _image(leaders: dict[int, int], live=(0, 1, 2), fenced=()) -> MetadataImage:
    parts = {p: PartitionInfo(p, (0, 1, 2), (0, 1, 2), leader, 0, 0) for p, leader in leaders.items()}
    topics = {TRANSACTION_STATE_TOPIC: TopicInfo(TRANSACTION_STATE_TOPIC, b"t" * 16, parts)} if leaders else {}
    brokers = {i: BrokerInfo(i, bytes(16), 1, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + i, 0),), None, i in fenced)
               for i in live}
    return MetadataImage(offset=1, topics_by_name=topics, topics_by_id={t.topic_id: t for t in topics.values()},
                         brokers=brokers)


class _Peers:
    """Requests held until the test answers them: ``pending`` is (node, request, future) in sending order."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, object, asyncio.Future]] = []

    def client(self, host, port, client_id, peer=None):
        peers = self

        class Client:
            def __init__(self):
                self.host, self.port = host, port

            async def request(self, body, version, timeout_s):
                assert version == ADD_PARTITIONS_TO_TXN_VERSION
                fut = asyncio.get_running_loop().create_future()
                peers.pending.append((peer, body, fut))
                return await fut

            async def close(self):
                pass
        return Client()

    def take(self, node: int):
        for i, (n, body, fut) in enumerate(self.pending):
            if n == node:
                del self.pending[i]
                return body, fut
        raise AssertionError(f"no request to {node}: {[(n, _ids(b)) for n, b, _ in self.pending]}")


def _ids(body) -> list[tuple[str, int, int, bool]]:
    return [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only) for t in body.transactions]


def _verifier(image: MetadataImage, peers: _Peers, partition_for=PARTITION_FOR) -> TxnVerifier:
    return TxnVerifier(7, lambda: image, "PLAINTEXT", peers, partition_for.__getitem__, 5.0)


class _Errors(dict):
    def __call__(self, errors):
        self.clear()
        self.update(errors)
        self.calls = getattr(self, "calls", 0) + 1


def _answer(per_txn: dict[str, dict[tuple[str, int], int]]) -> AddPartitionsToTxnResponse:
    results = []
    for txn_id, errors in per_txn.items():
        by_topic: dict[str, list] = {}
        for (topic, p), code in errors.items():
            by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                                    partition_error_code=code))
        results.append(AddPartitionsToTxnResult(transactional_id=txn_id, topic_results=[
            AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]))
    return AddPartitionsToTxnResponse(results_by_transaction=results)


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_add_txn_data():
    """AddPartitionsToTxnManagerTest.testAddTxnData, but a second question of the same producer and epoch joins the
    queued one instead of failing it."""
    async def run():
        peers = _Peers()
        v = _verifier(_image({0: 0, 1: 1}), peers)
        t1, t2, t3 = _Errors(), _Errors(), _Errors()
        v.verify_transaction("txn1", 1, 0, TPS, t1, False)
        v.verify_transaction("txn2", 2, 0, TPS, t2, False)
        v.verify_transaction("txn3", 3, 0, TPS, t3, False)
        same, newer, older = _Errors(), _Errors(), _Errors()
        # the same producer and epoch: asked together with the queued one (Kafka answers the queued one
        # NETWORK_EXCEPTION: it reads a connection's requests one at a time, so a second one is a client's retry;
        # odradek reads pipelined Produce requests concurrently, and both are the producer's)
        v.verify_transaction("txn1", 1, 0, TPS, same, False)
        assert t1 == {} and same == {}  # not answered yet
        v.verify_transaction("txn1", 1, 1, TPS, newer, False)  # a newer epoch fences the queued one(s)
        assert t1 == same == dict.fromkeys(TPS, E.INVALID_PRODUCER_EPOCH)
        v.verify_transaction("txn1", 1, 0, TPS, older, False)  # an older one is fenced itself, not queued
        assert older == dict.fromkeys(TPS, E.INVALID_PRODUCER_EPOCH)
        await _turns()
        body, _ = peers.take(0)
        assert _ids(body) == [("txn3", 3, 0, True), ("txn1", 1, 1, True)]  # insertion order
        assert [(t.name, t.partitions) for t in body.transactions[0].topics] == [("foo", [1, 2, 3])]
        body, _ = peers.take(1)
        assert _ids(body) == [("txn2", 2, 0, True)]
        await v.close()
    asyncio.run(run())


def test_generate_requests():
    """AddPartitionsToTxnManagerTest.testGenerateRequests: one request in flight per node."""
    async def run():
        peers = _Peers()
        v = _verifier(_image({0: 0, 1: 1, 2: 2}), peers, {"txn1": 0, "txn2": 1, "txn3": 2})
        errors = _Errors()
        v.verify_transaction("txn1", 1, 0, TPS, errors, False)
        v.verify_transaction("txn2", 2, 0, TPS, errors, False)
        await _turns()
        assert sorted(n for n, _, _ in peers.pending) == [0, 1]
        v.verify_transaction("txn2", 2, 0, TPS, errors, False)
        v.verify_transaction("txn3", 3, 0, TPS, errors, False)
        await _turns()
        # node 1 has a request in flight: only node 2's goes out
        assert sorted(n for n, _, _ in peers.pending) == [0, 1, 2]
        body, fut = peers.take(1)
        assert _ids(body) == [("txn2", 2, 0, True)]
        assert [n for n, _, _ in peers.pending].count(1) == 0
        fut.set_exception(ConnectionError("lost"))  # completed: the queued one can go
        await _turns()
        body, _ = peers.take(1)
        assert _ids(body) == [("txn2", 2, 0, True)]
        body, _ = peers.take(2)
        assert _ids(body) == [("txn3", 3, 0, True)]
        await v.close()
    asyncio.run(run())


def test_transaction_coordinator_resolution():
    """AddPartitionsToTxnManagerTest.testTransactionCoordinatorResolution: no __transaction_state, no leader, a
    leader not alive: COORDINATOR_NOT_AVAILABLE at once."""
    async def run():
        for image in (_image({}), _image({0: -1}), _image({0: 0}, live=(1, 2)), _image({0: 0}, fenced=(0,))):
            peers = _Peers()
            v = _verifier(image, peers)
            errors = _Errors()
            v.verify_transaction("txn1", 1, 0, TPS, errors, False)
            assert errors == dict.fromkeys(TPS, E.COORDINATOR_NOT_AVAILABLE)
            await _turns()
            assert peers.pending == []
            await v.close()
    asyncio.run(run())


def test_add_partitions_to_txn_handler_error_handling():
    """AddPartitionsToTxnManagerTest.testAddPartitionsToTxnHandlerErrorHandling"""
    async def run():
        peers = _Peers()
        v = _verifier(_image({0: 0}), peers, {"txn1": 0, "txn2": 0})
        t1, t2 = _Errors(), _Errors()

        async def round_trip(answer, generic: bool = False):
            v.verify_transaction("txn1", 1, 0, TPS, t1, generic)
            v.verify_transaction("txn2", 2, 0, TPS, t2, generic)
            await _turns()
            _, fut = peers.take(0)
            if isinstance(answer, BaseException):
                fut.set_exception(answer)
            else:
                fut.set_result(answer)
            await _turns()

        await round_trip(ConnectionError("disconnected"))
        assert t1 == t2 == dict.fromkeys(TPS, E.NETWORK_EXCEPTION)
        await round_trip(asyncio.TimeoutError())
        assert t1 == t2 == dict.fromkeys(TPS, E.NETWORK_EXCEPTION)
        await round_trip(AddPartitionsToTxnResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED))
        assert t1 == t2 == dict.fromkeys(TPS, E.INVALID_TXN_STATE)
        await round_trip(AddPartitionsToTxnResponse(error_code=E.NOT_COORDINATOR))  # any other: as it is
        assert t1 == t2 == dict.fromkeys(TPS, E.NOT_COORDINATOR)

        mixed = _answer({"txn1": dict.fromkeys(TPS, E.PRODUCER_FENCED),
                         "txn2": {("foo", 1): E.NONE, ("foo", 2): E.INVALID_TXN_STATE, ("foo", 3): E.NONE}})
        await round_trip(mixed)
        assert t1 == dict.fromkeys(TPS, E.INVALID_PRODUCER_EPOCH)
        assert t2 == {("foo", 2): E.INVALID_TXN_STATE}

        abortable = _answer({"txn1": dict.fromkeys(TPS, E.TRANSACTION_ABORTABLE),
                             "txn2": {("foo", 1): E.NONE, ("foo", 2): E.TRANSACTION_ABORTABLE, ("foo", 3): E.NONE}})
        await round_trip(abortable, generic=False)  # Produce v10 and older
        assert t1 == dict.fromkeys(TPS, E.INVALID_TXN_STATE)
        assert t2 == {("foo", 2): E.INVALID_TXN_STATE}
        await round_trip(abortable, generic=True)
        assert t1 == dict.fromkeys(TPS, E.TRANSACTION_ABORTABLE)
        assert t2 == {("foo", 2): E.TRANSACTION_ABORTABLE}

        # all verified: an empty map; a transaction the answer leaves out: NETWORK_EXCEPTION, not forgotten
        await round_trip(_answer({"txn1": dict.fromkeys(TPS, E.NONE)}))
        assert (t1, t2) == ({}, dict.fromkeys(TPS, E.NETWORK_EXCEPTION))
        await v.close()
    asyncio.run(run())


def test_close_answers_the_queued_questions():
    """Stopping the broker: questions not answered get NETWORK_EXCEPTION (odradek's own)."""
    async def run():
        peers = _Peers()
        v = _verifier(_image({0: 0}), peers)
        t1 = _Errors()
        got = asyncio.ensure_future(v.verify("txn1", 1, 0, TPS, False))
        await _turns()
        v.verify_transaction("txn3", 3, 0, TPS, t1, False)  # queued behind the one in flight
        await v.close()
        assert await got == dict.fromkeys(TPS, E.NETWORK_EXCEPTION)
        assert t1 == dict.fromkeys(TPS, E.NETWORK_EXCEPTION)
    asyncio.run(run())


def test_one_producers_pipelined_questions_are_asked_together_and_each_answered_for_its_partitions():
    """Two questions of one producer (id and epoch) queued together: one transaction in the request with both
    partition sets; each caller gets its own partitions' errors, TRANSACTION_ABORTABLE as its Produce version
    shows it (INVALID_TXN_STATE up to v10)."""
    async def run():
        peers = _Peers()
        v = _verifier(_image({0: 0, 1: 1}), peers)
        first, second, third = _Errors(), _Errors(), _Errors()
        v.verify_transaction("txn1", 1, 0, [("foo", 1)], first, False)
        await _turns()
        body, fut = peers.take(0)  # in flight: the next two wait for it, together
        v.verify_transaction("txn1", 1, 0, [("foo", 2)], second, False)
        v.verify_transaction("txn1", 1, 0, [("foo", 3), ("foo", 2)], third, True)
        fut.set_result(_answer({"txn1": {("foo", 1): E.NONE}}))
        await _turns()
        assert first == {} and first.calls == 1
        body, fut = peers.take(0)
        assert _ids(body) == [("txn1", 1, 0, True)]
        assert [(t.name, sorted(t.partitions)) for t in body.transactions[0].topics] == [("foo", [2, 3])]
        fut.set_result(_answer({"txn1": {("foo", 2): E.TRANSACTION_ABORTABLE, ("foo", 3): E.NONE}}))
        await _turns()
        assert second == {("foo", 2): E.INVALID_TXN_STATE} and second.calls == 1
        assert third == {("foo", 2): E.TRANSACTION_ABORTABLE} and third.calls == 1
        await v.close()
    asyncio.run(run())


class _Config(dict):
    get = dict.__getitem__


def test_an_add_is_sent_without_verify_only_and_concurrent_transactions_is_retried_on_the_server_side():
    """Transactions V2 (TransactionSupportedOperation ADD_PARTITION): the question is an add (``verify_only`` false);
    CONCURRENT_TRANSACTIONS (the previous transaction's markers still out) is asked again after the backoff, only
    for the partitions that got it (KAFKA-18654); TRANSACTION_ABORTABLE stays itself for a v12+ producer. A plain
    verification is not retried."""
    async def run():
        peers = _Peers()
        v = _verifier(_image({0: 0}), peers)
        cfg = _Config({"add.partitions.to.txn.retry.backoff.ms": 1, "add.partitions.to.txn.retry.backoff.max.ms": 5000})
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(v.add_or_verify("txn1", 1, 0, TPS, True, True, cfg, loop.time))
        await _turns()
        body, fut = peers.take(0)
        assert _ids(body) == [("txn1", 1, 0, False)]
        fut.set_result(_answer({"txn1": {TPS[0]: E.CONCURRENT_TRANSACTIONS, TPS[1]: E.NONE,
                                         TPS[2]: E.CONCURRENT_TRANSACTIONS}}))
        for _ in range(200):  # the retry, after the 1 ms backoff
            await asyncio.sleep(0.005)
            if peers.pending:
                break
        body, fut = peers.take(0)
        assert _ids(body) == [("txn1", 1, 0, False)]
        assert [(t.name, t.partitions) for t in body.transactions[0].topics] == [("foo", [1, 3])]
        fut.set_result(_answer({"txn1": {TPS[0]: E.NONE, TPS[2]: E.TRANSACTION_ABORTABLE}}))
        assert await task == {TPS[2]: E.TRANSACTION_ABORTABLE}

        task = asyncio.ensure_future(v.add_or_verify("txn1", 1, 0, TPS, True, False, cfg, loop.time))
        await _turns()
        body, fut = peers.take(0)
        assert _ids(body) == [("txn1", 1, 0, True)]
        fut.set_result(_answer({"txn1": dict.fromkeys(TPS, E.CONCURRENT_TRANSACTIONS)}))
        assert await task == dict.fromkeys(TPS, E.CONCURRENT_TRANSACTIONS)
        assert not peers.pending
        await v.close()
    asyncio.run(run())


def test_an_add_gives_up_on_concurrent_transactions_at_the_retry_limit():
    """Past ``add.partitions.to.txn.retry.backoff.max.ms`` the producer gets CONCURRENT_TRANSACTIONS (its Produce
    answers it as the retriable NOT_ENOUGH_REPLICAS)."""
    async def run():
        peers = _Peers()
        v = _verifier(_image({0: 0}), peers)
        cfg = _Config({"add.partitions.to.txn.retry.backoff.ms": 20, "add.partitions.to.txn.retry.backoff.max.ms": 0})
        task = asyncio.ensure_future(v.add_or_verify("txn1", 1, 0, TPS[:1], True, True, cfg,
                                                     asyncio.get_running_loop().time))
        await _turns()
        _, fut = peers.take(0)
        fut.set_result(_answer({"txn1": {TPS[0]: E.CONCURRENT_TRANSACTIONS}}))
        assert await task == {TPS[0]: E.CONCURRENT_TRANSACTIONS}
        assert not peers.pending
        await v.close()
    asyncio.run(run())


def test_a_question_to_this_node_goes_to_local():
    """With ``local`` set (broker/apis/local.py), a question for a transactional id this node coordinates is
    handled in-process; one for another coordinator still goes over a connection."""
    async def run():
        peers, local = _Peers(), _Peers()
        v = _verifier(_image({0: 7, 1: 1}, live=(1, 7)), peers)  # txn1 -> partition 0, led by this node (7)
        v.local = local.client("in-process", 0, "local", peer=7)
        mine, theirs = _Errors(), _Errors()
        v.verify_transaction("txn1", 1, 0, TPS, mine, False)
        v.verify_transaction("txn2", 2, 0, TPS, theirs, False)
        await _turns()
        body, fut = local.take(7)
        assert _ids(body) == [("txn1", 1, 0, True)]
        assert [n for n, _, _ in peers.pending] == [1]  # no connection to this node itself
        fut.set_result(_answer({"txn1": {TPS[0]: E.NONE, TPS[1]: E.TRANSACTION_ABORTABLE, TPS[2]: E.NONE}}))
        await _turns()
        assert mine == {TPS[1]: E.INVALID_TXN_STATE} and mine.calls == 1
        peers.take(1)[1].set_result(_answer({"txn2": dict.fromkeys(TPS, E.NONE)}))
        await _turns()
        assert theirs == {} and theirs.calls == 1
        await v.close()
    asyncio.run(run())
