"""Transactional offsets (KIP-447) with confluent-kafka: a consume-transform-produce loop commits its input
offsets inside the transaction (``send_offsets_to_transaction``); a read_committed reader of the output sees
every input record exactly once and the group's committed offsets are the input's end; an aborted
transaction leaves the committed offsets where they were."""

from __future__ import annotations

import time

from broker.testing.embedded import EmbeddedBroker

N = 30


def _create(bootstrap: str, *topics: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        f.result(15)


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                                              timeout=15)}
    finally:
        c.close()


def _read_committed(bootstrap: str, topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
            elif m is None and len(out) >= n:
                break
    finally:
        c.close()
    return out


def test_consume_transform_produce_is_exactly_once_and_an_abort_keeps_the_committed_offsets():
    from confluent_kafka import Consumer, Producer

    with EmbeddedBroker() as b:
        bootstrap = b.bootstrap
        _create(bootstrap, "ctp-in", "ctp-out")
        p = Producer({"bootstrap.servers": bootstrap})
        for i in range(N):
            p.produce("ctp-in", b"v%d" % i, partition=i % 2)
        p.flush(15)

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.subscribe(["ctp-in"])
        tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-txn",
                       "transaction.timeout.ms": 20000})
        tp.init_transactions(30)
        seen = 0
        deadline = time.monotonic() + 60
        while seen < N and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(10, 1.0) if not m.error()]
            if not msgs:
                continue
            tp.begin_transaction()
            for m in msgs:
                tp.produce("ctp-out", m.value().upper(), partition=m.partition())
            tp.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                           consumer.consumer_group_metadata(), 30)
            tp.commit_transaction(30)
            seen += len(msgs)
        assert seen == N

        out = _read_committed(bootstrap, "ctp-out", N)
        assert sorted(out) == sorted(b"V%d" % i for i in range(N))
        assert _committed(bootstrap, "ctp", "ctp-in") == {0: N // 2, 1: N // 2}

        # more input, processed in a transaction that aborts: the committed offsets stay
        for i in range(N, N + 4):
            p.produce("ctp-in", b"v%d" % i, partition=i % 2)
        p.flush(15)
        msgs = []
        deadline = time.monotonic() + 30
        while len(msgs) < 4 and time.monotonic() < deadline:
            msgs += [m for m in consumer.consume(10, 1.0) if not m.error()]
        tp.begin_transaction()
        for m in msgs:
            tp.produce("ctp-out", m.value().upper(), partition=m.partition())
        tp.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                       consumer.consumer_group_metadata(), 30)
        tp.abort_transaction(30)
        consumer.close()
        assert _committed(bootstrap, "ctp", "ctp-in") == {0: N // 2, 1: N // 2}
        assert sorted(_read_committed(bootstrap, "ctp-out", N)) == sorted(b"V%d" % i for i in range(N))
