"""The transaction coordinator's marker sender (Kafka's TransactionMarkerChannelManager and its completion handler,
as TransactionMarkerChannelManagerTest and TransactionMarkerRequestCompletionHandlerTest check them): one request
per destination broker carrying every queued marker, leaders looked up at each send, retriable errors retried
against the leader of the moment, fenced epochs end the transaction's sending, deleted partitions are skipped, and
a coordinator that no longer owns the transaction stops."""

from __future__ import annotations

import asyncio

from broker.transactions.marker_sender import PendingMarkers, TxnMarkerSender
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


def _sender(peers: _Peers, image_box: list, current=lambda p: True) -> TxnMarkerSender:
    return TxnMarkerSender(1, lambda: image_box[0], "PLAINTEXT", peers, current, request_timeout_s=1.0,
                           backoff_s=0.01)


def _pending(tid: str, pid: int, partitions, commit=True, coordinator_epoch=3) -> PendingMarkers:
    return PendingMarkers(tid, pid, 5, commit, coordinator_epoch, set(partitions))


def _sent(peers: _Peers) -> list[tuple[int, list[tuple[int, bool, list]]]]:
    return [(broker, [(m.producer_id, m.transaction_result,
                       sorted((t.name, i) for t in m.topics for i in t.partition_indexes)) for m in body.markers])
            for broker, body in peers.requests]


def test_markers_go_to_each_leader_in_one_request_per_broker_and_complete_when_all_are_acknowledged():
    async def run():
        peers = _Peers()
        image = [_image({("a", 0): 1, ("a", 1): 2, ("b", 0): 2})]
        sender = _sender(peers, image)
        one = _pending("t1", 100, [("a", 0), ("a", 1)])
        two = _pending("t2", 200, [("b", 0)], commit=False)
        sender.add(one)
        sender.add(two)
        assert await asyncio.wait_for(one.done, 5) and await asyncio.wait_for(two.done, 5)
        by_broker = {}
        for broker, markers in _sent(peers):
            by_broker.setdefault(broker, []).extend(markers)
        assert by_broker == {1: [(100, True, [("a", 0)])],
                             2: [(100, True, [("a", 1)]), (200, False, [("b", 0)])]}
        assert len(peers.requests) == 2  # one request per destination broker
        await sender.close()

    asyncio.run(run())


def test_retriable_errors_are_retried_against_the_new_leader_and_deleted_partitions_skipped():
    async def run():
        peers = _Peers({(1, ("a", 0)): [ErrorCode.NOT_LEADER_OR_FOLLOWER, 0],
                        (2, ("a", 1)): [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS, 0]})
        image = [_image({("a", 0): 1, ("a", 1): 2, ("gone", 0): 3})]
        sender = _sender(peers, image)
        pending = _pending("t", 7, [("a", 0), ("a", 1), ("gone", 0)])
        image[0] = _image({("a", 0): 1, ("a", 1): 2})  # "gone" deleted before the first send
        sender.add(pending)
        for _ in range(200):  # a leader change while a marker is being retried
            if any(broker == 1 for broker, _ in peers.requests):
                break
            await asyncio.sleep(0.005)
        image[0] = _image({("a", 0): 3, ("a", 1): 2})
        assert await asyncio.wait_for(pending.done, 5) is True
        sent = _sent(peers)
        assert (3, [(7, True, [("a", 0)])]) in sent  # retried at the new leader
        assert sum(1 for b, ms in sent if b == 2) == 3 and not pending.partitions
        assert all(("gone", 0) not in m[2] for _, ms in sent for m in ms)
        await sender.close()

    asyncio.run(run())


def test_a_fenced_epoch_ends_the_transactions_sending_and_a_coordinator_that_moved_on_stops():
    async def run():
        peers = _Peers({(1, ("a", 0)): [ErrorCode.TRANSACTION_COORDINATOR_FENCED]})
        image = [_image({("a", 0): 1, ("a", 1): 2})]
        sender = _sender(peers, image)
        fenced = _pending("t", 7, [("a", 0), ("a", 1)])
        sender.add(fenced)
        assert await asyncio.wait_for(fenced.done, 5) is False

        owned = {"u": True}
        sender = _sender(_Peers(), image, current=lambda p: owned[p.transactional_id])
        moved = _pending("u", 8, [("a", 0)])
        owned["u"] = False  # the txn partition was unloaded (a new leader of __transaction_state)
        sender.add(moved)
        assert await asyncio.wait_for(moved.done, 5) is False
        await sender.close()

    asyncio.run(run())


def test_a_broker_that_cannot_be_reached_gets_the_markers_once_it_can():
    async def run():
        peers = _Peers()
        peers.down.add(2)
        image = [_image({("a", 0): 2})]
        sender = _sender(peers, image)
        pending = _pending("t", 9, [("a", 0)])
        sender.add(pending)
        for _ in range(200):
            if len(peers.requests) >= 2:
                break
            await asyncio.sleep(0.005)
        assert not pending.done.done() and len(peers.requests) >= 2  # retried, not given up
        peers.down.clear()
        assert await asyncio.wait_for(pending.done, 5) is True
        assert sender.pending_count() == 0
        await sender.close()

    asyncio.run(run())
