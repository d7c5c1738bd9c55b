"""Transactional test clients, one of each kind per real client library, shared by the transaction tests.

A transaction is ``(outcome, [(partition, value), ...])`` with outcome ``"commit"`` or ``"abort"``; the producers
run a list of them in order (``PRODUCERS``, plus ``run_kafkajs`` for KafkaJS in node), and the readers
(``READERS``) read a topic from the beginning with an isolation level until they have ``n`` records or their
time is up, then keep polling ``quiet`` seconds more so that a record too many is seen too. ``expected`` is what
a reader must get: per partition, in order, the values of the transactions with the given outcomes.

Every wait is bounded; every client is closed also when the test fails.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

Txn = tuple[str, list[tuple[int, bytes]]]


def spread(outcome: str, values: list[bytes], partitions: int) -> Txn:
    """A transaction whose i-th value goes to partition ``i % partitions``."""
    return outcome, [(i % partitions, v) for i, v in enumerate(values)]


def expected(txns: list[Txn], partitions: int, outcomes: tuple[str, ...] = ("commit",)) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for outcome, records in txns:
        if outcome in outcomes:
            for p, v in records:
                out[p].append(v)
    return out


def _servers(bootstrap: str) -> list[str]:
    return bootstrap.split(",")


# ---- producers ----------------------------------------------------------------------------------------------

def produce_confluent(bootstrap: str, topic: str, txn_id: str, txns: list[Txn], config: dict | None = None) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 30000,
                  **(config or {})})
    p.init_transactions(60)
    for outcome, records in txns:
        p.begin_transaction()
        for partition, v in records:
            while True:
                try:
                    p.produce(topic, v, partition=partition)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    p.poll(0.1)
        p.flush(30)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(60)


def produce_kafka_python(bootstrap: str, topic: str, txn_id: str, txns: list[Txn]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=_servers(bootstrap), transactional_id=txn_id, transaction_timeout_ms=30000,
                      request_timeout_ms=30000)
    try:
        p.init_transactions()
        for outcome, records in txns:
            p.begin_transaction()
            for partition, v in records:
                p.send(topic, v, partition=partition)
            p.flush(30)
            (p.commit_transaction if outcome == "commit" else p.abort_transaction)()
    finally:
        p.close(10)


def produce_aiokafka(bootstrap: str, topic: str, txn_id: str, txns: list[Txn]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=_servers(bootstrap), transactional_id=txn_id,
                             transaction_timeout_ms=30000, request_timeout_ms=30000)
        await p.start()
        try:
            for outcome, records in txns:
                await p.begin_transaction()
                sent = [await p.send(topic, v, partition=partition) for partition, v in records]
                await asyncio.wait_for(asyncio.gather(*sent), 30)
                if outcome == "commit":
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
        finally:
            await p.stop()
    asyncio.run(run())


PRODUCERS = {"confluent-kafka": produce_confluent, "kafka-python": produce_kafka_python,
             "aiokafka": produce_aiokafka}


def run_kafkajs(kafkajs_dir: Path, bootstrap: str, topic: str, txn_id: str, txns: list[Txn], partitions: int,
                expect: int, timeout: float = 120.0, read_timeout_ms: int = 20000) -> dict[int, list[bytes]]:
    """KafkaJS (js/transactions.js) runs the transactions, then reads the topic read_committed (its default) in a
    consumer group until it has ``expect`` records; returns what it read."""
    job = {"brokers": _servers(bootstrap), "topic": topic, "transactionalId": txn_id, "expect": expect,
           "partitions": partitions, "readTimeoutMs": read_timeout_ms,
           "transactions": [{"outcome": o, "records": [[p, v.decode()] for p, v in rs]} for o, rs in txns]}
    out = subprocess.run(["node", str(Path(kafkajs_dir) / "transactions.js")], input=json.dumps(job).encode(),
                         capture_output=True, timeout=timeout, cwd=kafkajs_dir)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-4000:]
    return {int(p): [v.encode() for v in vs] for p, vs in json.loads(out.stdout)["read"].items()}


# ---- readers ------------------------------------------------------------------------------------------------

def read_confluent(bootstrap: str, topic: str, partitions: int, isolation: str, n: int, timeout: float = 20.0,
                   quiet: float = 1.0, config: dict | None = None) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{topic}-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, "fetch.wait.max.ms": 100, **(config or {})})
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def poll(until: float, stop_at_n: bool) -> None:
        while time.monotonic() < until and not (stop_at_n and sum(map(len, out.values())) >= n):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out[m.partition()].append(m.value())
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        poll(time.monotonic() + timeout, True)
        poll(time.monotonic() + quiet, False)  # and nothing more arrives
        return out
    finally:
        c.close()


def read_kafka_python(bootstrap: str, topic: str, partitions: int, isolation: str, n: int, timeout: float = 20.0,
                      quiet: float = 1.0) -> dict[int, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=_servers(bootstrap), group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=100, request_timeout_ms=30000, isolation_level=isolation)
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def poll(until: float, stop_at_n: bool) -> None:
        while time.monotonic() < until and not (stop_at_n and sum(map(len, out.values())) >= n):
            for tp, msgs in c.poll(timeout_ms=200).items():
                out[tp.partition] += [m.value for m in msgs]
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        poll(time.monotonic() + timeout, True)
        poll(time.monotonic() + quiet, False)
        return out
    finally:
        c.close()


def read_aiokafka(bootstrap: str, topic: str, partitions: int, isolation: str, n: int, timeout: float = 20.0,
                  quiet: float = 1.0) -> dict[int, list[bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=_servers(bootstrap), enable_auto_commit=False,
                             isolation_level=isolation, fetch_max_wait_ms=100, request_timeout_ms=30000)
        await c.start()
        out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

        async def poll(until: float, stop_at_n: bool) -> None:
            while time.monotonic() < until and not (stop_at_n and sum(map(len, out.values())) >= n):
                for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                    out[tp.partition] += [m.value for m in msgs]
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            await c.seek_to_beginning()
            await poll(time.monotonic() + timeout, True)
            await poll(time.monotonic() + quiet, False)
            return out
        finally:
            await c.stop()
    return asyncio.run(run())


READERS = {"confluent-kafka": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka}
