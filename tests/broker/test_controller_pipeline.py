"""The controller's decisions are pipelined (issue 31, item 2; QuorumController's write events): a request is
decided against every record decided before it, committed or not, its batch is appended and the next request is
decided while it commits. The rules:

* each decision sees the records decided before it (two changes to one partition; the broker epoch is the offset
  of the registration record);
* losing the leadership fails every batch in flight (NOT_CONTROLLER on the controller listener) and the next
  leader decides from what was committed;
* a request that waited past its deadline is not decided;
* the local broker's requests go through the same queue as remote ones.

The quorum here is a fake whose commits the test releases one at a time, so "in flight" is exact.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from broker.clock import SYSTEM_CLOCK
from broker.controlplane.controller_channel import QuorumControllerChannel
from broker.controlplane.controller_listener.controller_rpc import run_on_active_controller
from broker.quorum.raft_driver import NotLeaderError
from cluster.controller import Controller
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AlterPartitionRequest, BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest,
)
from protocol.generated.messages.alter_partition_request import BrokerState, PartitionData, TopicData
from protocol.generated.messages.broker_registration_request import Listener
from protocol.generated.messages.create_topics_request import CreatableReplicaAssignment, CreatableTopic

CLUSTER_ID = "q1-cluster-id-000000"


class _Driver:
    def __init__(self) -> None:
        self.epoch = 1
        self.leader_id = 1
        self.failure = None
        self.changed = asyncio.Event()

    def leader_change(self):
        return self.changed


class _Quorum:
    """A leader whose batches commit only when the test says (``commit_next``) or all fail (``lose_leadership``)."""

    def __init__(self) -> None:
        self.driver = _Driver()
        self.clock = SYSTEM_CLOCK
        self.image = MetadataImage()
        self.end_offset = 0
        self.in_flight: list[tuple[list, int, asyncio.Future]] = []  # (records, last offset, committed)
        self.appended_while_in_flight = 0
        self.auto_commit = False

    @property
    def is_active(self) -> bool:
        return self.driver.leader_id == 1

    def quorum_view(self):
        return None

    async def ready_to_decide(self) -> None:
        if not self.is_active:
            raise NotLeaderError("not the leader")

    async def append(self, records, wait_published=True):
        await asyncio.sleep(0)  # a real append waits for the Raft driver's lock and the log's flush
        if not self.is_active:
            raise NotLeaderError("not the leader")
        if self.in_flight:
            self.appended_while_in_flight += 1
        last = self.end_offset + len(records) - 1
        self.end_offset = last + 1
        fut = asyncio.get_running_loop().create_future()
        self.in_flight.append((records, last, fut))

        async def committed():
            await fut
            return self.image

        task = asyncio.ensure_future(committed())
        if self.auto_commit:
            self.commit_next()
        return task, last

    async def commit(self, records):
        task, _ = await self.append(records)
        if not self.auto_commit:
            self.commit_next()
        return await task

    def commit_next(self) -> None:
        records, last, fut = self.in_flight.pop(0)
        self.image = self.image.apply(records, last)
        fut.set_result(None)

    def commit_all(self) -> None:
        """Everything appended commits at once (one high watermark move), applied as one delta."""
        done, self.in_flight = self.in_flight, []
        self.image = self.image.apply_batches([(records, last) for records, last, _ in done])
        for _, _, fut in done:
            fut.set_result(None)

    def lose_leadership(self) -> None:
        """A new epoch led elsewhere: the uncommitted batches are gone (the new leader truncates them)."""
        for _, _, fut in self.in_flight:
            fut.set_exception(NotLeaderError("leadership lost before the commit"))
        self.in_flight.clear()
        self.end_offset = self.image.offset + 1
        self.driver.epoch += 1
        self.driver.leader_id = 2

    def lead_again(self) -> None:
        self.driver.epoch += 1
        self.driver.leader_id = 1


def _channel(quorum: _Quorum, timeout_ms: int = 30000) -> QuorumControllerChannel:
    controller = Controller(1, {"num.partitions": 1, "broker.session.timeout.ms": 9000}, random.Random(3))
    return QuorumControllerChannel(controller, quorum, {}, CLUSTER_ID, {1: ("127.0.0.1", 0)}, node_id=1,
                                   timeout_ms=timeout_ms)


def _registration(broker_id: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=bytes([broker_id]) * 16,
                                     listeners=[Listener(name="PLAINTEXT", host="h", port=9092)], features=[],
                                     rack=None, log_dirs=[], previous_broker_epoch=-1)


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _started(quorum: _Quorum) -> QuorumControllerChannel:
    """A channel whose activation (the bootstrap records) has committed."""
    channel = _channel(quorum)
    quorum.auto_commit = True
    await channel.decide(BrokerHeartbeatRequest(broker_id=9, broker_epoch=0), 4)  # activates; STALE, no records
    quorum.auto_commit = False
    return channel


def test_registrations_pipelined_get_the_offsets_of_their_own_records():
    async def run():
        quorum = _Quorum()
        channel = await _started(quorum)
        first = asyncio.ensure_future(channel.decide(_registration(1), 4))
        second = asyncio.ensure_future(channel.decide(_registration(2), 4))
        await _settle()
        assert len(quorum.in_flight) == 2 and quorum.appended_while_in_flight == 1  # decided before any commit
        offsets = [last for _, last, _ in quorum.in_flight]
        assert not first.done() and not second.done()  # answered only once committed
        quorum.commit_next()
        quorum.commit_next()
        a, b = await first, await second
        assert (a.error_code, b.error_code) == (0, 0)
        assert [a.broker_epoch, b.broker_epoch] == offsets  # each the offset of its RegisterBrokerRecord
        assert quorum.image.brokers[1].broker_epoch == a.broker_epoch
        assert quorum.image.brokers[2].broker_epoch == b.broker_epoch

    asyncio.run(run())


def _alter(topic_id: bytes, broker_epoch: int, partition_epoch: int, isr) -> AlterPartitionRequest:
    return AlterPartitionRequest(broker_id=1, broker_epoch=broker_epoch, topics=[TopicData(
        topic_id=topic_id, partitions=[PartitionData(
            partition_index=0, leader_epoch=0, partition_epoch=partition_epoch, leader_recovery_state=0,
            new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=-1) for r in isr])])])


async def _three_brokers_and_a_topic(quorum: _Quorum, channel: QuorumControllerChannel) -> tuple[dict, bytes]:
    quorum.auto_commit = True
    epochs = {}
    for i in (1, 2, 3):
        epochs[i] = (await channel.decide(_registration(i), 4)).broker_epoch
        await channel.decide(BrokerHeartbeatRequest(broker_id=i, broker_epoch=epochs[i],
                                                    current_metadata_offset=10**9), 4)
    await channel.decide(CreateTopicsRequest(topics=[CreatableTopic(
        name="t", num_partitions=-1, replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3])])], timeout_ms=1000), 7)
    quorum.auto_commit = False
    topic = quorum.image.topic("t")
    assert topic is not None and topic.partitions[0].leader == 1, topic
    return epochs, topic.topic_id


def test_a_second_change_to_a_partition_sees_the_first_before_it_commits():
    async def run():
        quorum = _Quorum()
        channel = await _started(quorum)
        epochs, topic_id = await _three_brokers_and_a_topic(quorum, channel)
        part = quorum.image.topics_by_id[topic_id].partitions[0]
        assert sorted(part.isr) == [1, 2, 3]
        shrink = asyncio.ensure_future(channel.decide(_alter(topic_id, epochs[1], part.partition_epoch, (1, 2)), 3))
        stale = asyncio.ensure_future(channel.decide(_alter(topic_id, epochs[1], part.partition_epoch, (1, 3)), 3))
        newer = asyncio.ensure_future(channel.decide(_alter(topic_id, epochs[1], part.partition_epoch + 1, (1,)),
                                                     3))
        await _settle()
        assert len(quorum.in_flight) == 2  # the shrink and the one based on it; the stale one changed nothing
        assert stale.done() and stale.result().topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION
        quorum.commit_next()
        quorum.commit_next()
        assert (await shrink).topics[0].partitions[0].isr == [1, 2]
        assert (await newer).topics[0].partitions[0].isr == [1]
        assert quorum.image.topics_by_id[topic_id].partitions[0].isr == (1,)
        assert quorum.image.topics_by_id[topic_id].partitions[0].partition_epoch == part.partition_epoch + 2

    asyncio.run(run())


def test_a_failover_with_batches_in_flight_fails_them_all_and_the_next_leader_starts_from_the_committed():
    async def run():
        quorum = _Quorum()
        channel = await _started(quorum)
        epochs, topic_id = await _three_brokers_and_a_topic(quorum, channel)
        part = quorum.image.topics_by_id[topic_id].partitions[0]

        class Ctx:
            controller = channel
            version = 3
            principal, client_host = "User:node", "127.0.0.1"  # a node without an authorizer: all allowed
            authorize_cluster = staticmethod(lambda operation: True)

        remote = asyncio.ensure_future(run_on_active_controller(Ctx, _alter(topic_id, epochs[1], part.partition_epoch,
                                                                            (1, 2))))
        local = asyncio.ensure_future(channel.decide(_registration(4), 4))
        await _settle()
        assert len(quorum.in_flight) == 2
        quorum.lose_leadership()
        assert (await remote).error_code == ErrorCode.NOT_CONTROLLER
        with pytest.raises(NotLeaderError):
            await local
        assert 4 not in quorum.image.brokers and quorum.image.topics_by_id[topic_id].partitions[0].isr == part.isr
        # leading again: decisions start from the committed image (the lost shrink is not assumed)
        quorum.lead_again()
        again = asyncio.ensure_future(channel.decide(_alter(topic_id, epochs[1], part.partition_epoch, (1, 3)), 3))
        await _settle()
        quorum.auto_commit = True
        while quorum.in_flight:
            quorum.commit_next()
        answer = (await again).topics[0].partitions[0]
        assert (answer.error_code, answer.isr) == (0, [1, 3])
        assert quorum.image.topics_by_id[topic_id].partitions[0].partition_epoch == part.partition_epoch + 1

    asyncio.run(run())


def test_a_request_that_waited_past_its_deadline_is_not_decided():
    async def run():
        quorum = _Quorum()
        channel = await _started(quorum)
        async with channel._lock:  # a long decision ahead of it
            late = asyncio.ensure_future(channel.decide(_registration(5), 4,
                                                        deadline=SYSTEM_CLOCK.monotonic() + 0.05))
            await asyncio.sleep(0.1)
        with pytest.raises(asyncio.TimeoutError):
            await late
        assert not quorum.in_flight and 5 not in quorum.image.brokers

        class Ctx:
            controller = channel
            version = 4
            principal, client_host = "User:node", "127.0.0.1"  # a node without an authorizer: all allowed
            authorize_cluster = staticmethod(lambda operation: True)

        channel.timeout_ms = 50
        async with channel._lock:
            remote = asyncio.ensure_future(run_on_active_controller(Ctx, _registration(6)))
            await asyncio.sleep(0.1)
        assert (await remote).error_code == ErrorCode.REQUEST_TIMED_OUT
        assert not quorum.in_flight

    asyncio.run(run())


def test_the_local_broker_waits_in_the_same_queue():
    async def run():
        quorum = _Quorum()
        channel = await _started(quorum)
        remote = asyncio.ensure_future(channel.decide(_registration(2), 4))
        local = asyncio.ensure_future(channel.call(_registration(1)))
        await _settle()
        assert [r[0].broker_id for r, _, _ in quorum.in_flight] == [2, 1]  # in arrival order, one queue
        quorum.commit_next()
        quorum.commit_next()
        assert (await remote).broker_epoch < (await local).broker_epoch

    asyncio.run(run())


def test_an_alter_partition_of_ten_thousand_partitions_with_bad_entries_is_one_batch_with_per_partition_errors():
    """Issue 31's bad input: 10,000 ISR changes plus unknown, deleted-topic, repeated and stale entries in one
    request: each bad entry gets its own error, the good ones commit as one batch, the repeat changes nothing."""
    n = 10_000

    async def run():
        quorum = _Quorum()
        channel = await _started(quorum)
        quorum.auto_commit = True
        for i in (1, 2, 3):
            epoch = (await channel.decide(_registration(i), 4)).broker_epoch
            await channel.decide(BrokerHeartbeatRequest(broker_id=i, broker_epoch=epoch,
                                                        current_metadata_offset=10**9), 4)
        for name, count in (("big", n), ("small", 1)):  # 10,000 partitions per request at most (Kafka's cap)
            created = await channel.decide(CreateTopicsRequest(topics=[
                CreatableTopic(name=name, num_partitions=-1, replication_factor=-1, assignments=[
                    CreatableReplicaAssignment(partition_index=p, broker_ids=[1, 2, 3]) for p in range(count)])],
                timeout_ms=10000), 7)
            assert created.topics[0].error_code == 0
        big, small = quorum.image.topic("big"), quorum.image.topic("small")
        broker_epoch = quorum.image.brokers[1].broker_epoch
        first = await channel.decide(_alter(small.topic_id, broker_epoch, 0, [1, 2]), 3)  # small is now epoch 1
        assert first.topics[0].partitions[0].error_code == 0

        def entry(index, partition_epoch=0):
            return PartitionData(partition_index=index, leader_epoch=0, partition_epoch=partition_epoch,
                                 leader_recovery_state=0,
                                 new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=-1) for r in (1, 2)])

        request = AlterPartitionRequest(broker_id=1, broker_epoch=broker_epoch, topics=[
            TopicData(topic_id=big.topic_id, partitions=[entry(p) for p in range(n)] + [entry(0), entry(n)]),
            TopicData(topic_id=small.topic_id, partitions=[entry(0, partition_epoch=0)]),  # stale
            TopicData(topic_id=b"\x99" * 16, partitions=[entry(0)]),  # a deleted (unknown) topic
        ])
        quorum.auto_commit = False
        answer = asyncio.ensure_future(channel.decide(request, 3))
        for _ in range(500):  # decided in a thread (thousands of partitions): bounded wait for its append
            if quorum.in_flight:
                break
            await asyncio.sleep(0.02)
        await _settle()
        assert len(quorum.in_flight) == 1 and len(quorum.in_flight[0][0]) == n  # one batch, one record each
        quorum.commit_next()
        response = await answer
        codes = [[p.error_code for p in t.partitions] for t in response.topics]
        assert codes[0][:n] == [0] * n
        assert codes[0][n:] == [ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert codes[1:] == [[ErrorCode.INVALID_UPDATE_VERSION], [ErrorCode.UNKNOWN_TOPIC_ID]]
        after = quorum.image.topic("big").partitions
        assert {(tuple(p.isr), p.partition_epoch) for p in after.values()} == {((1, 2), 1)}
        assert quorum.image.topic("small").partitions[0].partition_epoch == 1

    asyncio.run(run())
