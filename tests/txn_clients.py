"""Transactional test clients, one of each kind per real client library, shared by the transaction tests.

A transaction is ``(outcome, [(partition, value), ...])`` with outcome ``"commit"`` or ``"abort"``; the producers
run a list of them in order (``PRODUCERS``, plus ``run_kafkajs`` for KafkaJS in node; ``batch_bytes`` caps a
batch, which must stay under the topic's ``segment.bytes``), and the readers
(``READERS``) read a topic from the beginning with an isolation level until they have ``n`` records or their
time is up, then keep polling ``quiet`` seconds more so that a record too many is seen too. ``expected`` is what
a reader must get: per partition, in order, the values of the transactions with the given outcomes.
``wire_*`` are a transactional producer's requests over a raw connection (KafkaWire), for what real clients never
send.

Every wait is bounded; every client is closed also when the test fails.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest, ProduceRequest,
)
from protocol.generated.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch
from tests.kafka_wire import KafkaWire

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

def produce_confluent(bootstrap: str, topic: str, txn_id: str, txns: list[Txn], batch_bytes: int = 1000000,
                      config: dict | None = None) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 30000,
                  "batch.size": batch_bytes, **(config or {})})
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


def produce_kafka_python(bootstrap: str, topic: str, txn_id: str, txns: list[Txn], batch_bytes: int = 16384) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=_servers(bootstrap), transactional_id=txn_id, transaction_timeout_ms=30000,
                      request_timeout_ms=30000, batch_size=batch_bytes)
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


def produce_aiokafka(bootstrap: str, topic: str, txn_id: str, txns: list[Txn], batch_bytes: int = 16384) -> None:
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=_servers(bootstrap), transactional_id=txn_id,
                             transaction_timeout_ms=30000, request_timeout_ms=30000, max_batch_size=batch_bytes)
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
                expect: int, timeout: float = 120.0, read_timeout_ms: int = 20000,
                send_chunk: int = 1000) -> dict[int, list[bytes]]:
    """KafkaJS (js/transactions.js) runs the transactions, then reads the topic read_committed (its default) in a
    consumer group until it has ``expect`` records; returns what it read. It sends ``send_chunk`` records a call
    (one batch a partition each)."""
    job = {"brokers": _servers(bootstrap), "topic": topic, "transactionalId": txn_id, "expect": expect,
           "partitions": partitions, "readTimeoutMs": read_timeout_ms, "sendChunk": send_chunk,
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


# ---- a raw transactional client (tests/kafka_wire.py), for what real clients never do ------------------------

def wire_coordinator(w: KafkaWire, txn_id: str) -> None:
    for _ in range(100):  # __transaction_state is created on first use
        r = w.call(10, 3, FindCoordinatorRequest(key=txn_id, key_type=1))
        if r.error_code == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"no coordinator for {txn_id}: {r}")


def wire_init(w: KafkaWire, txn_id: str, timeout_ms: int = 10000, version: int = 4) -> tuple[int, int, int]:
    for _ in range(100):
        r = w.call(22, version, InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms))
        if r.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS):
            return r.error_code, r.producer_id, r.producer_epoch
        time.sleep(0.1)
    raise AssertionError("InitProducerId kept answering a retriable error")


def txn_batch(pid: int, epoch: int, values: list[bytes], sequence: int = 0) -> bytes:
    """A transactional batch stamped now (a partition's producer state keeps its max timestamp)."""
    now = int(time.time() * 1000)
    return bytes(build_batch([Record(value=v, timestamp=now) for v in values], producer_id=pid, producer_epoch=epoch,
                             base_sequence=sequence, is_transactional=True))


def wire_produce(w: KafkaWire, topic: str, batches: dict[int, bytes], txn_id: str | None):
    r = w.call(0, 9, ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=i, records=b)
                                                     for i, b in batches.items()])]))
    return [p.error_code for t in r.responses for p in t.partition_responses]


def wire_add_partitions(w: KafkaWire, txn_id: str, pid: int, epoch: int, topic: str,
                        partitions: list[int]) -> list[int]:
    """AddPartitionsToTxn v3 (a producer's): the error code per partition."""
    r = w.call(24, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=partitions)]))
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]


def wire_end_txn(w: KafkaWire, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    r = w.call(26, 3, EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit))
    return r.error_code


def wire_latest(w: KafkaWire, topic: str, partition: int, read_committed: bool) -> int:
    """ListOffsets v5 for the latest offset: the last stable offset (read_committed) or the high watermark."""
    from protocol.generated.messages import ListOffsetsRequest
    from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

    r = w.call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=int(read_committed), topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset
