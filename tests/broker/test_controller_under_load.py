"""The controller under load (issue 31): every commit takes 100 ms while 2,000 ISR changes are queued, sent the
worst way (one AlterPartition per partition, all at once, from three brokers, the controller's own among them).
No broker is fenced and every heartbeat is answered within half the session: decisions are pipelined against
uncommitted state, and a heartbeat's arrival counts before it waits.

The quorum is tests/broker/test_controller_pipeline.py's fake: here it commits everything appended every 100 ms,
as a Raft leader whose followers fetch every 100 ms would.
"""

from __future__ import annotations

import asyncio
import random

from broker.clock import SYSTEM_CLOCK
from broker.controlplane.controller_channel import QuorumControllerChannel
from cluster.controller import Controller
from protocol.generated.messages import (
    AlterPartitionRequest, BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest,
)
from protocol.generated.messages.alter_partition_request import BrokerState, PartitionData, TopicData
from protocol.generated.messages.broker_registration_request import Listener
from protocol.generated.messages.create_topics_request import CreatableReplicaAssignment, CreatableTopic
from tests.broker.test_controller_pipeline import _Quorum

CLUSTER_ID = "q1-cluster-id-000000"
SESSION_MS = 4000
HEARTBEAT_S = 1.0
COMMIT_S = 0.1
CHANGES = 2000


async def _commit_every(quorum: _Quorum, seconds: float) -> None:
    while True:
        await asyncio.sleep(seconds)
        quorum.commit_all()


def _registration(broker_id: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=bytes([broker_id]) * 16,
                                     listeners=[Listener(name="PLAINTEXT", host="h", port=9092)], features=[],
                                     rack=None, log_dirs=[], previous_broker_epoch=-1)


def test_two_thousand_queued_isr_changes_with_slow_commits_fence_no_one():
    async def run():
        quorum = _Quorum()
        controller = Controller(1, {"broker.session.timeout.ms": SESSION_MS}, random.Random(5))
        channel = QuorumControllerChannel(controller, quorum, {}, CLUSTER_ID, {1: ("127.0.0.1", 0)}, node_id=1,
                                          timeout_ms=30000)
        committer = asyncio.ensure_future(_commit_every(quorum, COMMIT_S))
        duties = asyncio.ensure_future(channel.run_active_controller_duties(0.05))
        try:
            epochs = {b: (await channel.decide(_registration(b), 4)).broker_epoch for b in (2, 3)}
            epochs[1] = (await channel.call(_registration(1))).broker_epoch

            async def heartbeat(b: int) -> float:
                started = SYSTEM_CLOCK.monotonic()
                request = BrokerHeartbeatRequest(broker_id=b, broker_epoch=epochs[b], current_metadata_offset=10**9)
                if b == 1:  # the controller's own broker: the local path, with its own timeout
                    reply = await channel.call(request, timeout_ms=SESSION_MS // 2, connection="heartbeats")
                else:
                    reply = await channel.decide(request, 4)
                assert reply.error_code == 0
                return SYSTEM_CLOCK.monotonic() - started

            for b in (1, 2, 3):
                await heartbeat(b)
            assignments = [CreatableReplicaAssignment(partition_index=p, broker_ids=[1 + p % 3, 1 + (p + 1) % 3,
                                                                                     1 + (p + 2) % 3])
                           for p in range(CHANGES)]
            created = await channel.decide(CreateTopicsRequest(topics=[CreatableTopic(
                name="t", num_partitions=-1, replication_factor=-1, assignments=assignments)], timeout_ms=60000), 7)
            assert created.topics[0].error_code == 0
            topic = quorum.image.topic("t")

            def shrink(p: int) -> AlterPartitionRequest:
                info = topic.partitions[p]
                return AlterPartitionRequest(broker_id=info.leader, broker_epoch=epochs[info.leader], topics=[
                    TopicData(topic_id=topic.topic_id, partitions=[PartitionData(
                        partition_index=p, leader_epoch=info.leader_epoch, partition_epoch=info.partition_epoch,
                        leader_recovery_state=0,
                        new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=epochs[r])
                                             for r in info.replicas[:2]])])])

            async def send(p: int):
                request = shrink(p)
                if request.broker_id == 1:
                    return await channel.call(request, timeout_ms=120000)
                return await channel.decide(request, 3)

            changes = [asyncio.ensure_future(send(p)) for p in range(CHANGES)]
            latencies = []
            while not all(c.done() for c in changes):
                latencies += await asyncio.gather(*(heartbeat(b) for b in (1, 2, 3)))
                await asyncio.sleep(HEARTBEAT_S)
            answers = [await c for c in changes]
            assert all(a.topics[0].partitions[0].error_code == 0 for a in answers)
            wrong = {p.partition: p.isr for p in quorum.image.topic("t").partitions.values() if len(p.isr) != 2}
            assert not wrong, list(wrong.items())[:5]
            assert not any(b.fenced for b in quorum.image.brokers.values()), "a broker was fenced"
            assert max(latencies) < SESSION_MS / 2000, latencies
            assert controller.contacts.max_gap_ms < SESSION_MS / 2
        finally:
            for t in (committer, duties):
                t.cancel()
            await asyncio.gather(committer, duties, return_exceptions=True)

    asyncio.run(run())
