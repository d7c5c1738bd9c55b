"""``EmbeddedCluster`` and the ``odradek_cluster`` fixture as a user's suite would use them: real clients,
an RF-3 topic, the partition leader killed and restarted, a leader cut off and healed, a broker paused."""

from __future__ import annotations

import pytest

from broker.testing.embedded_cluster import EmbeddedCluster, wait_until

pytest_plugins = ["broker.testing.pytest_plugin"]  # the odradek_cluster fixture, as a user's suite gets it

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def create_topic(c: EmbeddedCluster, topic: str, replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replicas)], request_timeout=15)[topic].result(20)


def isr(c: EmbeddedCluster, topic: str, via: int | None = None) -> list[int]:
    """The ISR as any broker (or node ``via``) answers Metadata."""
    servers = c.bootstrap_servers if via is None else c.client_address(via)
    md = AdminClient({"bootstrap.servers": servers}).list_topics(topic, timeout=5)
    return sorted(md.topics[topic].partitions[0].isrs)


def produce(c: EmbeddedCluster, topic: str, values: range) -> None:
    """acks=all, every record acknowledged (librdkafka retries through a failover on its own; a short socket
    timeout, since a paused broker accepts connections and answers nothing)."""
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 30000, "socket.timeout.ms": 3000, "topic.metadata.refresh.interval.ms": 1000})
    errors: list = []
    for v in values:
        p.produce(topic, str(v).encode(), on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(40) == 0, "records still undelivered"
    assert errors == []


def consume_all(c: EmbeddedCluster, topic: str, count: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[int] = []
    try:
        def more() -> bool:
            for m in consumer.consume(500, timeout=1.0):
                assert m.error() is None, m.error()
                got.append(int(m.value()))
            return len(got) >= count

        wait_until(more, 30, 0, f"{count} records of {topic}")
    finally:
        consumer.close()
    return got


def test_a_killed_leader_fails_over_and_comes_back(odradek_cluster):
    c = odradek_cluster
    assert len(c.broker_ids) == 3 and c.controller() in c.broker_ids
    create_topic(c, "orders", 3)
    wait_until(lambda: isr(c, "orders") == [1, 2, 3], 20, 0.2, "a full ISR", retry=(Exception,))
    produce(c, "orders", range(0, 100))

    victim = c.leader_of("orders", 0)
    c.kill(victim)
    wait_until(lambda: c.leader_of("orders", 0) != victim, 20, 0.2, "a new leader")
    produce(c, "orders", range(100, 200))  # acks=all: the two live replicas have every record

    c.restart(victim)
    wait_until(lambda: isr(c, "orders") == [1, 2, 3], 30, 0.2, f"node {victim} back in the ISR", retry=(Exception,))
    assert consume_all(c, "orders", 200) == list(range(200))


@pytest.mark.parametrize("odradek_cluster", [{"controllers": 1, "brokers": 2}], indirect=True)
def test_an_isolated_or_paused_leader_loses_its_partition(odradek_cluster):
    c = odradek_cluster
    assert c.broker_ids == [2, 3] and c.controller() == 1  # the controller-only node 1, brokers 2 and 3
    create_topic(c, "events", 2)
    wait_until(lambda: isr(c, "events") == [2, 3], 20, 0.2, "a full ISR", retry=(Exception,))
    produce(c, "events", range(0, 50))

    cut = c.leader_of("events", 0)
    other = 5 - cut
    c.isolate(cut)  # the controller stops hearing its heartbeats and fences it; clients still reach it
    wait_until(lambda: c.leader_of("events", 0) == other, 20, 0.2, f"leadership moved to node {other}")
    produce(c, "events", range(50, 100))
    c.heal()  # asked, the healed node would answer from its stale image until it catches up: ask the leader
    wait_until(lambda: isr(c, "events", via=other) == [2, 3], 30, 0.2, f"node {cut} back in the ISR",
               retry=(Exception,))

    c.pause(other)  # SIGSTOP: the leader's session runs out, the other replica takes over
    wait_until(lambda: c.leader_of("events", 0) == cut, 20, 0.2, f"leadership back on node {cut}")
    produce(c, "events", range(100, 150))
    c.resume(other)
    assert consume_all(c, "events", 150) == list(range(150))
