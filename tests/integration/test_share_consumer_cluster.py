"""confluent-kafka ``ShareConsumer``s on a 3-node cluster (RF 3): three consumers of one share group on a topic of
6 partitions, led by different nodes, each partition's share state read from and written to the share coordinator
of its ``__share_group_state`` partition (another node, often): every record is accepted exactly once, each
consumer gets records and, once the group is stable, ShareGroupDescribe shows each member 2 of the 6 partitions;
then, on topics of one partition (RF 3), a released record returns with delivery count + 1, a rejected one never,
and a consumer that stops polling loses its records after the 2 s lock. A ShareFetch sent to a broker that does not
lead the partition answers NOT_LEADER_OR_FOLLOWER with the leader and its endpoint. The kill -9 of a partition's
leader: every record still consumed, none after its acceptance was answered; also at Kafka's default timers.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.embedded_cluster import KAFKA_DEFAULT_TIMERS, EmbeddedCluster
from protocol.errors import ErrorCode as E
from protocol.generated.messages import MetadataRequest, ShareFetchRequest, ShareGroupDescribeRequest
from protocol.generated.messages import share_fetch_request as sfr
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from tests.kafka_wire import KafkaWire
from tests.integration.test_share_consumer import (
    SHARE_OVERRIDES, check_lock_expiry, check_release_and_reject, group_configs, poll_records, produce, share_consumer,
)
from tests.integration.test_share_groups_cluster import coordinator

TOPIC, GROUP = "share-cluster-records", "share-cluster-consumers"
PARTITIONS, RECORDS = 6, 1200
DEADLINE_S = 90


def test_three_share_consumers_accept_every_record_once(tmp_path):
    with EmbeddedCluster(brokers=3, data_dir=tmp_path, overrides=SHARE_OVERRIDES) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        group_configs(c.bootstrap_servers, GROUP)
        produce(c.bootstrap_servers, TOPIC, RECORDS, size=100, partitions=PARTITIONS)
        consumers = [share_consumer(c.bootstrap_servers, GROUP, TOPIC) for _ in range(3)]
        seen: dict[tuple[int, int], int] = {}
        by_consumer: list[set[int]] = [set() for _ in consumers]

        def poll_all(timeout: float) -> None:
            for i, sc in enumerate(consumers):
                for m in poll_records(sc, timeout):
                    key = (m.partition(), m.offset())
                    seen[key] = seen.get(key, 0) + 1
                    by_consumer[i].add(m.partition())

        try:
            end = time.monotonic() + DEADLINE_S
            while len(seen) < RECORDS and time.monotonic() < end:
                poll_all(0.2)
            assignment = settled_assignment(c, GROUP, len(consumers), lambda: poll_all(0.1))
            for sc in consumers:
                sc.commit_sync(30)  # the last poll's records accepted
        finally:
            for sc in consumers:
                sc.close()
        assert len(seen) == RECORDS, f"{len(seen)} of {RECORDS} records consumed"
        twice = {k: n for k, n in seen.items() if n > 1}
        assert not twice, f"records delivered more than once: {sorted(twice)[:20]}"
        assert all(by_consumer), [sorted(s) for s in by_consumer]
        # the SimpleAssignor's share: each of the three members 2 of the 6 partitions, together all of them
        assert sorted(len(ps) for ps in assignment.values()) == [2, 2, 2], assignment
        assert set().union(*assignment.values()) == set(range(PARTITIONS)), assignment

        leader = c.leader_of(TOPIC, 0)
        other = next(n for n in c.broker_ports if n != leader)
        with KafkaWire(c.broker_ports[other], timeout=10) as w:
            (meta,) = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])).topics
            resp = w.call(78, 1, ShareFetchRequest(
                group_id=GROUP, member_id="0b5e4f1a-8c2d-4e7f-9a6b-3c1d2e0f4a5b", share_session_epoch=0,
                max_wait_ms=0, min_bytes=1, max_records=10, batch_size=10,
                topics=[sfr.FetchTopic(topic_id=meta.topic_id, partitions=[sfr.FetchPartition(partition_index=0)])]))
        (p,) = resp.responses[0].partitions
        assert (p.error_code, p.current_leader.leader_id) == (E.NOT_LEADER_OR_FOLLOWER, leader)
        assert [(n.node_id, n.port) for n in resp.node_endpoints] == [(leader, c.broker_ports[leader])]

        for topic in ("share-cluster-explicit", "share-cluster-lock"):
            admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        check_release_and_reject(c.bootstrap_servers, "share-cluster-explicit", "share-cluster-ex")
        check_lock_expiry(c.bootstrap_servers, "share-cluster-lock", "share-cluster-lock")


def settled_assignment(c: EmbeddedCluster, group: str, members: int, keep_polling, timeout: float = 30.0
                       ) -> dict[str, set[int]]:
    """Each member's partitions as ShareGroupDescribe (API 77, at the group's coordinator) shows them once the group
    is stable: ``members`` members, each at the assignment epoch with partitions; ``keep_polling`` between tries
    (confluent-kafka's ShareConsumer has no ``assignment()``)."""
    with KafkaWire(c.broker_ports[coordinator(c, group)], timeout=10) as w:
        end = time.monotonic() + timeout
        while True:
            (d,) = w.call(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups
            if d.error_code == 0 and len(d.members) == members and all(
                    m.member_epoch == d.assignment_epoch and m.assignment.topic_partitions for m in d.members):
                return {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions}
                        for m in d.members}
            assert time.monotonic() < end, f"the group did not settle in {timeout} s: {d}"
            keep_polling()


@pytest.mark.parametrize("timers", ["fast failover", "Kafka's defaults"])
def test_share_consumers_continue_after_a_partition_leader_is_killed(tmp_path, timers):
    """kill -9 of the leader of a partition while two share consumers read 3 partitions (RF 3): the new leader reads
    the share state from the share coordinators (moved too, when the dead node led them) and every record is still
    consumed; no record is delivered after its acceptance was answered (the acknowledgement commit callback without
    an error). Acknowledgements the dead node's coordinators could not write are answered with an error and those
    records come back, as acquisitions (never persisted) held on the dead leader may.

    Once with the share tests' timers (SHARE_OVERRIDES' 1 s heartbeat, the group's 2 s lock, FAST_FAILOVER), once
    with 3,000 records at Kafka's: KAFKA_DEFAULT_TIMERS (a broker fenced after 9 s), the group.share.* defaults
    (heartbeat 5 s) and the group's lock at its default 30 s."""
    topic, group = "share-kill", "share-kill-consumers"
    fast = timers == "fast failover"
    records = 900 if fast else 3000
    everything = {(p, o) for p in range(3) for o in range(records // 3)}
    overrides = SHARE_OVERRIDES if fast else KAFKA_DEFAULT_TIMERS
    with EmbeddedCluster(brokers=3, data_dir=tmp_path, overrides=overrides) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
        group_configs(c.bootstrap_servers, group, **({} if fast else {"lock_ms": None}))
        produce(c.bootstrap_servers, topic, records, size=100, partitions=3)
        victim = c.leader_of(topic, 0)
        accepted: set[tuple[int, int]] = set()
        violations: list[tuple[int, int]] = []
        failed_acks = [0]

        def on_ack(offsets, exc):
            if exc is not None:
                failed_acks[0] += 1
                return
            for tp, offs in offsets.items():
                accepted.update((tp.partition, o) for o in offs)
        consumers = [share_consumer(c.bootstrap_servers, group, topic) for _ in range(2)]
        for sc in consumers:
            sc.set_acknowledgement_commit_callback(on_ack)
        seen: set[tuple[int, int]] = set()
        killed = False
        try:
            end = time.monotonic() + DEADLINE_S
            while not seen >= everything and time.monotonic() < end:
                for sc in consumers:
                    for m in poll_records(sc, 0.2):
                        key = (m.partition(), m.offset())
                        if key in accepted:
                            violations.append(key)
                        seen.add(key)
                if not killed and len(seen) >= records // 6:
                    c.kill(victim)
                    killed = True
            for sc in consumers:
                sc.commit_sync(30)
        finally:
            for sc in consumers:
                sc.close()
        assert killed and seen >= everything, f"{len(seen)} of {records} records consumed"
        assert not violations, f"delivered after an answered acceptance: {violations[:20]}"
        assert accepted, "no acknowledgement answered"

