"""The transaction coordinator's marker transport (the sending half of Kafka's TransactionMarkerChannelManager, as
TransactionMarkerChannelManagerTest checks it): one request per destination broker carrying every queued marker,
leaders looked up at each routing, every partition's answer reported (a lost connection as NETWORK_EXCEPTION),
deleted partitions reported as not needing a marker, unreachable leaders waited for, an unloaded partition's
queued markers dropped."""

from __future__ import annotations

import asyncio

from broker.transactions.marker_sender import TxnMarkerSender
from cluster.txn.txn_coordinator import TxnMarkers
from cluster.metadata_image import BrokerInfo, Endpoint, MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import WriteTxnMarkersResponse
from protocol.generated.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
)


def _image(leaders: dict[tuple[str, int], int], live=(1, 2, 3)) -> MetadataImage:
    topics = {}
    for (name, index), leader in leaders.items():
        t = topics.setdefault(name, {})
        t[index] = PartitionInfo(index, (1, 2, 3), (1, 2, 3), leader, 0, 0)
    infos = {n: TopicInfo(n, n.encode().ljust(16, b"\0")[:16], ps) for n, ps in topics.items()}
    brokers = {i: BrokerInfo(i, bytes(16), 1, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + i, 0),), None, False)
               for i in live}
    return MetadataImage(offset=1, topics_by_name=infos, topics_by_id={t.topic_id: t for t in infos.values()},
                         brokers=brokers)


class _Peers:
    """Every broker's answers, scripted per (broker, partition): a list of error codes, the last repeating."""

    def __init__(self, script: dict[tuple[int, tuple[str, int]], list[int]] | None = None) -> None:
        self.script = script or {}
        self.requests: list[tuple[int, object]] = []
        self.down: set[int] = set()

    def client(self, host, port, client_id, peer=None):
        peers = self

        class Client:
            def __init__(self):
                self.host, self.port = host, port

            async def request(self, body, version, timeout_s):
                peers.requests.append((peer, body))
                await asyncio.sleep(0)
                if peer in peers.down:
                    raise ConnectionError("down")
                markers = []
                for m in body.markers:
                    topics = []
                    for t in m.topics:
                        parts = []
                        for i in t.partition_indexes:
                            codes = peers.script.get((peer, (t.name, i)), [0])
                            parts.append(WritableTxnMarkerPartitionResult(
                                partition_index=i, error_code=codes.pop(0) if len(codes) > 1 else codes[0]))
                        topics.append(WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
                    markers.append(WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
                return WriteTxnMarkersResponse(markers=markers)

            async def close(self):
                pass
        return Client()


class _Reports:
    def __init__(self) -> None:
        self.answers: list[tuple[int, str, dict]] = []
        self.not_needed: list[tuple[int, str, frozenset]] = []
        self.changed = asyncio.Event()

    def answered(self, p, markers, errors):
        self.answers.append((p, markers.transactional_id, dict(errors)))
        self.changed.set()

    def skipped(self, p, markers, partitions):
        self.not_needed.append((p, markers.transactional_id, partitions))
        self.changed.set()

    async def until(self, predicate, what: str) -> None:
        for _ in range(500):
            if predicate():
                return
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 0.01)
            except asyncio.TimeoutError:
                pass
        raise AssertionError(f"not reached: {what}: {self.answers} {self.not_needed}")


def _sender(peers: _Peers, image_box: list, reports: _Reports) -> TxnMarkerSender:
    return TxnMarkerSender(1, lambda: image_box[0], "PLAINTEXT", peers, reports.answered, reports.skipped,
                           request_timeout_s=1.0, backoff_s=0.01)


def _markers(tid: str, pid: int, partitions, commit=True, coordinator_epoch=3) -> TxnMarkers:
    return TxnMarkers(tid, pid, 5, coordinator_epoch, commit, frozenset(partitions), 0)


def _sent(peers: _Peers) -> list[tuple[int, list[tuple[int, bool, list]]]]:
    return [(broker, [(m.producer_id, m.transaction_result,
                       sorted((t.name, i) for t in m.topics for i in t.partition_indexes)) for m in body.markers])
            for broker, body in peers.requests]


def test_markers_go_to_each_leader_in_one_request_per_broker_and_every_answer_is_reported():
    async def run():
        peers = _Peers({(2, ("b", 0)): [ErrorCode.NOT_ENOUGH_REPLICAS]})
        image = [_image({("a", 0): 1, ("a", 1): 2, ("b", 0): 2})]
        reports = _Reports()
        sender = _sender(peers, image, reports)
        sender.add(7, _markers("t1", 100, [("a", 0), ("a", 1)]))
        sender.add(9, _markers("t2", 200, [("b", 0)], commit=False))
        await reports.until(lambda: len(reports.answers) == 3, "three answers")
        by_broker = {}
        for broker, markers in _sent(peers):
            by_broker.setdefault(broker, []).extend(markers)
        assert by_broker == {1: [(100, True, [("a", 0)])],
                             2: [(100, True, [("a", 1)]), (200, False, [("b", 0)])]}
        assert len(peers.requests) == 2 and sender.requests_sent == 2  # one request per destination broker
        assert sorted(reports.answers, key=repr) == [(7, "t1", {("a", 0): 0}), (7, "t1", {("a", 1): 0}),
                                           (9, "t2", {("b", 0): ErrorCode.NOT_ENOUGH_REPLICAS})]
        await sender.close()

    asyncio.run(run())


def test_deleted_partitions_need_no_marker_and_a_leaderless_one_waits_for_its_leader():
    async def run():
        peers = _Peers()
        image = [_image({("a", 0): -1})]  # no leader elected yet
        reports = _Reports()
        sender = _sender(peers, image, reports)
        sender.add(4, _markers("t", 7, [("a", 0), ("gone", 0)]))
        assert reports.not_needed == [(4, "t", frozenset({("gone", 0)}))]
        await asyncio.sleep(0.05)
        assert peers.requests == [] and reports.answers == []  # waited, not dropped
        image[0] = _image({("a", 0): 3})
        await reports.until(lambda: reports.answers, "the answer once a leader is known")
        assert _sent(peers) == [(3, [(7, True, [("a", 0)])])] and reports.answers == [(4, "t", {("a", 0): 0})]
        await sender.close()

    asyncio.run(run())


def test_a_broker_that_cannot_be_reached_answers_network_exception_and_a_retry_can_be_delayed():
    async def run():
        peers = _Peers()
        peers.down.add(2)
        image = [_image({("a", 0): 2})]
        reports = _Reports()
        sender = _sender(peers, image, reports)
        markers = _markers("t", 9, [("a", 0)])
        sender.add(1, markers)
        await reports.until(lambda: reports.answers, "an answer")
        assert reports.answers == [(1, "t", {("a", 0): ErrorCode.NETWORK_EXCEPTION})]
        peers.down.clear()
        sender.add(1, markers, delay_s=0.05)  # the coordinator's retry, held back
        await asyncio.sleep(0)
        assert len(peers.requests) == 1
        await reports.until(lambda: len(reports.answers) == 2, "the retry's answer")
        assert reports.answers[1] == (1, "t", {("a", 0): 0})
        await sender.close()

    asyncio.run(run())


def test_an_unloaded_partitions_queued_markers_are_not_sent():
    async def run():
        peers = _Peers()
        image = [_image({("a", 0): -1})]
        reports = _Reports()
        sender = _sender(peers, image, reports)
        sender.add(5, _markers("t", 9, [("a", 0)]))
        sender.add(6, _markers("u", 10, [("a", 0)]), delay_s=0.02)
        sender.drop(5)
        sender.drop(6)
        image[0] = _image({("a", 0): 1})
        await asyncio.sleep(0.1)
        assert peers.requests == [] and reports.answers == []
        await sender.close()

    asyncio.run(run())


def test_should_generate_empty_map_when_no_requests_outstanding_and_count_unknown_destinations():
    """TransactionMarkerChannelManagerTest.shouldGenerateEmptyMapWhenNoRequestsOutstanding and
    shouldSaveForLaterWhenLeaderUnknownButNotAvailable with its UnknownDestinationQueueSize: nothing queued sends
    nothing; a partition without a reachable leader is counted until it is routed; close clears the count
    (testRemoveMetricsOnClose)."""
    async def run():
        peers = _Peers()
        image = [_image({("a", 0): -1, ("b", 0): 2})]
        reports = _Reports()
        sender = _sender(peers, image, reports)
        await asyncio.sleep(0.03)
        assert peers.requests == [] and sender.queued() == 0 and sender.unknown_destination == 0
        sender.add(1, _markers("t", 7, [("a", 0), ("b", 0)]))
        await reports.until(lambda: reports.answers, "b's answer")
        assert sender.unknown_destination == 1  # a waits for its leader
        image[0] = _image({("a", 0): 3, ("b", 0): 2})
        await reports.until(lambda: len(reports.answers) == 2, "a's answer once its leader is known")
        assert sender.unknown_destination == 0
        sender.add(1, _markers("u", 8, [("c", 0)]))  # a topic that no longer exists: not needed, not waiting
        image[0] = _image({("a", 0): -1})
        sender.add(1, _markers("v", 9, [("a", 0)]))
        await asyncio.sleep(0.005)
        assert sender.unknown_destination == 1
        await sender.close()
        assert sender.unknown_destination == 0

    asyncio.run(run())


def test_the_marker_channel_gauges_are_exported_with_kafkas_names():
    """shouldCreateMetricsOnStarting: UnknownDestinationQueueSize and LogAppendRetryQueueSize."""
    from types import SimpleNamespace

    from broker.transactions.txn_service import TxnMarkerChannelCollector

    service = SimpleNamespace(markers=SimpleNamespace(unknown_destination=3),
                              shards={0: SimpleNamespace(complete_retries_queued=2),
                                      1: SimpleNamespace(complete_retries_queued=1)})
    got = {m.name: m.samples[0].value for m in TxnMarkerChannelCollector(service).collect()}
    assert got == {
        "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize": 3,
        "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize": 3}


def test_markers_for_this_broker_go_to_local_and_the_others_over_the_network():
    """A node that set ``local`` (broker/apis/local.py) writes its own partitions' markers in-process; another
    leader's still go through a connection; both answers are reported alike."""
    async def run():
        peers = _Peers()
        local = _Peers({(1, ("a", 0)): [ErrorCode.NOT_ENOUGH_REPLICAS]})
        image = [_image({("a", 0): 1, ("a", 1): 2})]
        reports = _Reports()
        sender = _sender(peers, image, reports)
        sender.local = local.client("in-process", 0, "local", peer=1)
        sender.add(7, _markers("t1", 100, [("a", 0), ("a", 1)]))
        await reports.until(lambda: len(reports.answers) == 2, "two answers")
        assert _sent(local) == [(1, [(100, True, [("a", 0)])])]
        assert _sent(peers) == [(2, [(100, True, [("a", 1)])])]  # no connection to broker 1 itself
        assert sorted(reports.answers, key=repr) == [(7, "t1", {("a", 0): ErrorCode.NOT_ENOUGH_REPLICAS}),
                                                     (7, "t1", {("a", 1): 0})]
        await sender.close()

    asyncio.run(run())
