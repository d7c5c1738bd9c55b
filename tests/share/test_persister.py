"""The persister client (broker/share/persister.py, Kafka's DefaultStatePersister): a request split by the
share-partitions' coordinators (this node's in-process, the others over peer links), the answers merged by topic,
retriable errors (NOT_COORDINATOR, a lost connection) asked again after the coordinator moved, a bounded number of
times, the last error kept."""

from __future__ import annotations

import asyncio

from broker.share.persister import _LOCAL, VERSIONS, SharePersister
from cluster.metadata_image import BrokerInfo, Endpoint, MetadataImage, PartitionInfo, TopicInfo
from cluster.share.share_coordinator import share_coordinator_partition_for, share_partition_key_string
from protocol.errors import ErrorCode
from protocol.generated.messages import InitializeShareGroupStateResponse, ReadShareGroupStateSummaryResponse
from protocol.generated.messages import initialize_share_group_state_request as isq
from protocol.generated.messages import initialize_share_group_state_response as isr
from protocol.generated.messages import read_share_group_state_summary_response as rssr
from protocol.topics import SHARE_GROUP_STATE_TOPIC
from tests.share.share_rpcs import initialize, summary

TID, TID2 = bytes(range(1, 17)), bytes(range(2, 18))
GROUP = "g"
STATE_PARTITIONS = 6


def _image(leaders: dict[int, int]) -> MetadataImage:
    """``__share_group_state`` partition p led by ``leaders.get(p, 1)``; brokers 1-3 on PLAINTEXT."""
    state = TopicInfo(SHARE_GROUP_STATE_TOPIC, b"\x05" * 16, {
        p: PartitionInfo(p, (1, 2, 3), (1, 2, 3), leaders.get(p, 1), 0, 0) for p in range(STATE_PARTITIONS)})
    brokers = {n: BrokerInfo(n, bytes([n]) * 16, 1, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + n, 0),), None, False)
               for n in (1, 2, 3)}
    return MetadataImage(offset=1, topics_by_name={SHARE_GROUP_STATE_TOPIC: state},
                         topics_by_id={state.topic_id: state}, brokers=brokers)


class _Service:
    """This node's share coordinator: the persister calls its methods in-process, as the handlers do; each call is
    logged as node 1's request (at the version the persister would send it)."""

    def __init__(self, answer=None, log=None) -> None:
        self._coordinator = _Client(1, answer, log)
        for api, method in _LOCAL.items():
            setattr(self, method, self._call(api))

    def _call(self, api: str):
        async def call(req):
            return await self._coordinator.request(req, VERSIONS[api], None)
        return call

    async def ensure_topic(self) -> None:
        return None

    def partition_for(self, key: str) -> int:
        return share_coordinator_partition_for(key, STATE_PARTITIONS)


class _Client:
    """A coordinator: answers each partition with ``answer(node, topic id, partition)`` (an error code, or a
    ConnectionError to raise for the whole request)."""

    def __init__(self, node: int, answer, log: list) -> None:
        self.node, self.host, self.port = node, "127.0.0.1", 9000 + node
        self._answer = answer
        self._log = log

    async def request(self, message, version, timeout_s):
        self._log.append((self.node, message.API_KEY, version,
                          sorted((bytes(t.topic_id), p.partition) for t in message.topics for p in t.partitions)))
        codes = {(bytes(t.topic_id), p.partition): self._answer(self.node, bytes(t.topic_id), p.partition)
                 for t in message.topics for p in t.partitions}
        if any(isinstance(c, Exception) for c in codes.values()):
            raise ConnectionError("lost")
        if message.API_KEY == 87:
            return ReadShareGroupStateSummaryResponse(results=[rssr.ReadStateSummaryResult(
                topic_id=t.topic_id, partitions=[rssr.PartitionResult(
                    partition=p.partition, error_code=codes[(bytes(t.topic_id), p.partition)], start_offset=self.node)
                    for p in t.partitions]) for t in message.topics])
        return InitializeShareGroupStateResponse(results=[isr.InitializeStateResult(topic_id=t.topic_id, partitions=[
            isr.PartitionResult(partition=p.partition, error_code=codes[(bytes(t.topic_id), p.partition)])
            for p in t.partitions]) for t in message.topics])

    async def close(self) -> None:
        return None


class _Links:
    def __init__(self, answer, log) -> None:
        self._answer, self._log = answer, log

    def client(self, host, port, client_id, peer=None):
        return _Client(peer, self._answer, self._log)


def _coordinator_of(tid: bytes, partition: int) -> int:
    return share_coordinator_partition_for(share_partition_key_string(GROUP, tid, partition), STATE_PARTITIONS)


def _persister(answer, leaders: dict[int, int], log: list) -> tuple[SharePersister, dict]:
    box = {"image": _image(leaders)}
    p = SharePersister(1, lambda: box["image"], "PLAINTEXT", _Links(answer, log), _Service(answer, log), 1.0,
                       max_attempts=3, backoff_s=0.001, backoff_max_s=0.002)
    p.local = _NoRequests()  # set by the node: this node's own coordinator is called in-process, not through it
    return p, box


class _NoRequests:
    async def request(self, message, version, timeout_s):
        raise AssertionError("this node's coordinator is called directly, not through a request")


def _request(partitions: dict[bytes, list[int]]):
    req = initialize(GROUP, TID, 0)
    req.topics = [isq.InitializeStateData(topic_id=t, partitions=[isq.PartitionData(partition=p, state_epoch=1,
                                                                                     start_offset=-1) for p in ps])
                  for t, ps in partitions.items()]
    return req


def test_split_by_coordinator_and_merged_by_topic():
    async def scenario():
        parts = {TID: [0, 1, 2, 3], TID2: [0, 1]}
        # each __share_group_state partition led by node 1 + (p % 3): the keys spread over the three brokers
        leaders = {p: 1 + p % 3 for p in range(STATE_PARTITIONS)}
        log: list = []
        persister, _ = _persister(lambda node, t, p: 0, leaders, log)
        r = await persister.initialize(_request(parts))
        assert [(t.topic_id, [p.partition for p in t.partitions], {p.error_code for p in t.partitions})
                for t in r.results] == [(TID, [0, 1, 2, 3], {0}), (TID2, [0, 1], {0})]
        sent = {node: tps for node, _, _, tps in log}
        expected: dict[int, list] = {}
        for t, ps in parts.items():
            for p in ps:
                expected.setdefault(leaders[_coordinator_of(t, p)], []).append((t, p))
        assert sent == {n: sorted(v) for n, v in expected.items()}
        assert len(log) == len(expected)  # one request per coordinator
    asyncio.run(scenario())


def test_retriable_errors_are_asked_again_where_the_coordinator_moved():
    async def scenario():
        log: list = []
        moved = _coordinator_of(TID, 0)
        state = {"calls": 0}

        def answer(node, t, p):
            if node == 1:  # the old coordinator: moved away
                state["calls"] += 1
                return ErrorCode.NOT_COORDINATOR
            return 0
        persister, box = _persister(answer, {}, log)
        original_route = persister._route

        async def route(*args):  # the next metadata image names node 2 as the leader
            if state["calls"]:
                box["image"] = _image({moved: 2})
            return await original_route(*args)
        persister._route = route
        r = await persister.read_summary(summary(GROUP, TID, 0))
        (t,) = r.results
        (p,) = t.partitions
        assert (p.error_code, p.start_offset) == (0, 2)  # answered by node 2
        assert [n for n, *_ in log] == [1, 2]
        assert log[0][1:3] == (87, 1)  # ReadShareGroupStateSummary at v1
    asyncio.run(scenario())


def test_attempts_are_bounded_and_the_last_error_kept():
    async def scenario():
        log: list = []
        leaders = {_coordinator_of(TID, 0): 3}
        persister, _ = _persister(lambda node, t, p: ConnectionError("down") if node == 3 else 0, leaders, log)
        r = await persister.initialize(_request({TID: [0]}))
        (t,) = r.results
        (p,) = t.partitions
        assert p.error_code == ErrorCode.NETWORK_EXCEPTION
        assert len(log) == 3  # max_attempts
        persister2, _ = _persister(lambda node, t, p: ErrorCode.FENCED_STATE_EPOCH, {}, log)
        r = await persister2.initialize(_request({TID: [0]}))
        assert r.results[0].partitions[0].error_code == ErrorCode.FENCED_STATE_EPOCH  # not retriable: asked once
        assert len(log) == 4
    asyncio.run(scenario())


def test_a_topic_the_coordinator_has_not_seen_yet_is_asked_again():
    """PersisterStateManager's handlers retry UNKNOWN_TOPIC_OR_PARTITION (KAFKA-19455: the share coordinator's
    metadata image may lag the topic's creation); after the attempts it is the partition's answer."""
    async def scenario():
        log: list = []
        state = {"calls": 0}

        def answer(node, t, p):
            state["calls"] += 1
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if state["calls"] == 1 else 0
        persister, _ = _persister(answer, {}, log)
        r = await persister.initialize(_request({TID: [0]}))
        assert r.results[0].partitions[0].error_code == 0 and len(log) == 2
        never, _ = _persister(lambda node, t, p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, {}, log)
        r = await never.initialize(_request({TID: [0]}))
        assert r.results[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert len(log) == 2 + 3  # max_attempts
    asyncio.run(scenario())
