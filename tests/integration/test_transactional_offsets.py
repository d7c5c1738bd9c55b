"""Transactional offsets (KIP-447) with confluent-kafka: a consume-transform-produce loop commits its input
offsets inside the transaction (``send_offsets_to_transaction``); a read_committed reader of the output sees
every input record exactly once and the group's committed offsets are the input's end; an aborted
transaction leaves the committed offsets where they were."""

from __future__ import annotations

import time

import pytest

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


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_is_exactly_once_and_an_abort_keeps_the_committed_offsets(protocol):
    """Both group protocols: TxnOffsetCommit v3+ carries the member and its generation (classic) or epoch
    (KIP-848), which the coordinator checks."""
    from confluent_kafka import Consumer, Producer

    with EmbeddedBroker() as b:
        bootstrap = b.bootstrap
        _create(bootstrap, "ctp-in", "ctp-out")
        p = Producer({"bootstrap.servers": bootstrap})
        for i in range(N):
            p.produce("ctp-in", b"v%d" % i, partition=i % 2)
        p.flush(15)

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "group.protocol": protocol})
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


def _send_offsets_kafka_python(bootstrap: str, topic: str, group: str, rounds) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{group}", request_timeout_ms=15000)
    try:
        p.init_transactions()
        for outcome, offset in rounds:
            p.begin_transaction()
            p.send(topic, b"x", partition=0)
            p.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)}, group)
            (p.commit_transaction if outcome == "commit" else p.abort_transaction)()
    finally:
        p.close(10)


def _send_offsets_aiokafka(bootstrap: str, topic: str, group: str, rounds) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aio-{group}")
        await p.start()
        try:
            for outcome, offset in rounds:
                await p.begin_transaction()
                await p.send_and_wait(topic, b"x", partition=0)
                await p.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(offset, "")}, group)
                await (p.commit_transaction() if outcome == "commit" else p.abort_transaction())
        finally:
            await p.stop()

    asyncio.run(run())


def test_kafka_python_and_aiokafka_send_offsets_to_transaction():
    """Their TxnOffsetCommit (no group membership: generation -1): a committed transaction's offsets become the
    group's committed offsets, an aborted one's never do."""
    with EmbeddedBroker() as b:
        _create(b.bootstrap, "sot")
        rounds = [("commit", 7), ("abort", 100), ("commit", 9), ("abort", 200)]
        for name, send in (("kp", _send_offsets_kafka_python), ("aio", _send_offsets_aiokafka)):
            send(b.bootstrap, "sot", f"g-{name}", rounds)
            assert _committed(b.bootstrap, f"g-{name}", "sot")[0] == 9, name
