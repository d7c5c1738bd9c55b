"""Partition replication between processes, with librdkafka clients: an RF 3 topic with min.insync.replicas=2
keeps taking idempotent acks=all writes while a follower is killed (the ISR shrinks), restarted (it catches up
and rejoins) and then the leader is killed (a new leader from the ISR); nothing acknowledged is lost or read
twice, and once every replica is back the three logs hold the same batches, byte for byte.

A Fetch from a broker that is not a replica of the partition, or from a follower naming a leader epoch from the
future, gets Kafka's error and changes nothing.

``ODRADEK_SOAK=1`` runs each test on both topologies (3 combined nodes; 3 controllers + 3 brokers), where
``make test`` runs each on one, alternating.
"""

from __future__ import annotations

import os
from broker.testing.embedded_cluster import FAST_FAILOVER
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.generated.messages import FetchRequest, MetadataRequest
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic, ReplicaState
from storage.config import LogConfig
from storage.log import FetchIsolation, Log
from tests.harness import ClusterProcesses, wait_until
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FAST = FAST_FAILOVER
SOAK = bool(os.environ.get("ODRADEK_SOAK"))
TOPOLOGIES = {"3 combined": {"combined": 3}, "3 controllers + 3 brokers": {"combined": 0, "controllers": 3,
                                                                           "brokers": 3}}


def topologies(in_ci: str) -> list[str]:
    """Both topologies in the long profile (``ODRADEK_SOAK=1``); the short one runs each test on one, the tests
    alternating (as test_replication_faults.py's)."""
    return list(TOPOLOGIES) if SOAK else [in_ci]


TOPIC = "replicated"
BATCH = 500


def until(predicate, timeout: float = 60.0, what: str = "condition"):
    return wait_until(predicate, timeout, 0.2, what, retry=(Exception,))


def bootstrap(c: ClusterProcesses, without: int | None = None) -> str:
    return ",".join(f"127.0.0.1:{p}" for i, p in c.broker_ports.items() if i != without and c.nodes[i].alive())


def leader_and_isr(c: ClusterProcesses, without: int | None = None) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap(c, without)})
    p = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
    return p.leader, sorted(p.isrs)


def produce(servers: str, first: int, n: int, acked: list[bytes]) -> None:
    """``n`` idempotent acks=all records; every one must be acknowledged without error."""
    errors = []

    def report(err, msg):
        (errors if err is not None else acked).append(err if err is not None else msg.value())

    p = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 60000})
    for i in range(first, first + n):
        p.produce(TOPIC, value=b"v%06d" % i, on_delivery=report)
        p.poll(0)
    assert p.flush(90) == 0 and not errors, errors[:3]


def consume_all(servers: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    try:
        until(lambda: _poll_into(consumer, got) and len(got) >= expected, 60, f"{expected} records")
    finally:
        consumer.close()
    return got


def _poll_into(consumer, got: list) -> bool:
    for m in consumer.consume(1000, 0.5):
        if m.error() is None:
            got.append(m.value())
    return True


def batches(node_dir: Path) -> list[bytes]:
    lg = Log.open(str(node_dir / f"{TOPIC}-0"), LogConfig.from_props({}), now_ms=0)
    try:
        return [bytes(b) for b in lg.iter_batches(0, FetchIsolation.LOG_END)]
    finally:
        lg.close()


@pytest.fixture
def cluster(request, tmp_path):
    c = ClusterProcesses(tmp_path, overrides=FAST, **TOPOLOGIES[request.param])
    try:
        c.start()
        for i in c.broker_ports:  # every broker registered and unfenced: replicas go to all of them
            until(lambda i=i: c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, f"node {i} unfenced")
        yield c
    finally:
        c.close()


@pytest.mark.parametrize("cluster", topologies("3 controllers + 3 brokers"), indirect=True)
def test_acks_all_survives_follower_and_leader_kills_and_replicas_agree(cluster):
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def created():
        for f in admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})],
                                         request_timeout=10).values():
            f.result()
        return True

    until(created, what="the topic")
    until(lambda: leader_and_isr(c)[0] >= 0 and len(leader_and_isr(c)[1]) == 3, what="a leader and a full ISR")
    acked: list[bytes] = []
    produce(c.bootstrap, 0, BATCH, acked)

    leader, isr = leader_and_isr(c)
    follower = next(r for r in isr if r != leader)
    c.nodes[follower].kill()
    produce(bootstrap(c), BATCH, BATCH, acked)  # 2 of 3 in sync: acks=all still completes
    until(lambda: follower not in leader_and_isr(c, follower)[1], 30, "the killed follower out of the ISR")

    c.start(follower)
    until(lambda: follower in leader_and_isr(c)[1], 60, "the restarted follower back in the ISR")

    c.nodes[leader].kill()
    produce(bootstrap(c), 2 * BATCH, BATCH, acked)
    new_leader, _ = until(lambda: (lambda li: li if li[0] not in (-1, leader) else None)(leader_and_isr(c, leader)),
                          30, "a new leader")
    assert new_leader in isr

    got = consume_all(bootstrap(c), len(acked))
    assert len(acked) == 3 * BATCH
    assert set(acked) <= set(got), f"lost: {sorted(set(acked) - set(got))[:5]}"
    assert len(got) == len(set(got)), "a record was read twice"

    c.start(leader)  # the old leader rejoins as a follower (truncating what it had not replicated)
    until(lambda: leader_and_isr(c)[1] == sorted(isr), 60, "every replica back in the ISR")
    # DeleteRecords answers once every live replica has moved its log start: the low watermark is 100
    admin = AdminClient({"bootstrap.servers": c.bootstrap})  # kept: a collected client fails its futures
    deleted = admin.delete_records([TopicPartition(TOPIC, 0, 100)], request_timeout=30, operation_timeout=30)
    assert next(iter(deleted.values())).result(timeout=60).low_watermark == 100
    for n in c.nodes.values():  # nothing is being written: every replica holds what the leader holds
        n.kill()
    ends = {i: batches(c.nodes[i].data_dir) for i in isr}
    reference = ends[new_leader]
    assert len(reference) > 0
    for i, logged in ends.items():
        assert logged == reference, f"replica {i}'s batches differ from the leader's"


@pytest.mark.parametrize("cluster", topologies("3 combined"), indirect=True)
def test_fetch_from_a_non_replica_or_a_future_epoch_changes_nothing(cluster):
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def created():
        for f in admin.create_topics([NewTopic(TOPIC, 1, 2)], request_timeout=10).values():
            f.result()
        return True

    until(created, what="the topic")
    leader, isr = until(lambda: (lambda li: li if li[0] >= 0 and len(li[1]) == 2 else None)(leader_and_isr(c)),
                        what="a leader and its follower in the ISR")
    outsider = next(i for i in c.broker_ports if i not in isr)
    with KafkaWire(c.broker_ports[leader]) as w:
        def leader_knows():  # the leader's own image has the partition (it may apply it after the others)
            t = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])).topics[0]
            return t if t.partitions and t.partitions[0].leader_id == leader else None

        t = until(leader_knows, 30, "the leader's own metadata for the topic")
        topic_id, epoch = t.topic_id, t.partitions[0].leader_epoch
        # with the leader's epoch the outsider may be a replica the leader has not heard of yet (Kafka's reason)
        follower = next(i for i in isr if i != leader)
        for replica, epoch, code in ((outsider, epoch, ErrorCode.UNKNOWN_LEADER_EPOCH),
                                     (outsider, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                     (follower, epoch + 5, ErrorCode.UNKNOWN_LEADER_EPOCH)):  # from the future
            request = FetchRequest(replica_id=-1, replica_state=ReplicaState(replica_id=replica, replica_epoch=-1),
                                   max_wait_ms=0, min_bytes=0, topics=[FetchTopic(topic_id=topic_id, partitions=[
                                       FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                                      partition_max_bytes=1 << 20)])])
            response = w.call(1, 17, request)
            assert response.responses[0].partitions[0].error_code == code
    until(lambda: leader_and_isr(c) == (leader, isr), 10, "the partition unchanged")
