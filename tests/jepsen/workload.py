"""A Kafka workload that records a Jepsen-style history while faults happen around it.

Two idempotent acks=all producers (confluent-kafka and kafka-python) write unique values round-robin over the
partitions; two readers (confluent-kafka and kafka-python, ``assign`` from offset 0, no group) read everything
as it becomes readable. Every send, acknowledgement, error and read goes into one ``History``; ``drain`` reads
each partition from offset 0 to its high watermark in a fresh session at the end, so the checker sees every
record the cluster kept. A reader that has to be rebuilt starts a new session (its position is its own).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time

from tests.jepsen.history import History

log = logging.getLogger("jepsen.workload")

RATE_PER_PRODUCER = 100  # records/s: enough that every fault lands on writes in flight, little enough for 2 cores


class _Worker:
    def __init__(self, name: str, history: History, servers, topic: str, partitions: int,
                 rate: float = RATE_PER_PRODUCER) -> None:
        self.name, self.history, self.servers = name, history, servers
        self.topic, self.partitions = topic, partitions
        self.rate = rate  # records/s (a producer's sends are paced by it)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> "_Worker":
        self.thread.start()
        return self

    def stop(self, timeout: float = 90.0) -> None:
        self.stop_event.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.name} did not stop within {timeout}s"
        if self.error is not None:
            raise self.error

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
            log.exception("%s failed", self.name)
            self.error = exc

    def run(self) -> None:
        raise NotImplementedError


class ConfluentProducer(_Worker):
    def run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.servers(), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000, "client.id": self.name})

        def report(err, msg):
            if err is not None:
                self.history.fail(self.name, msg.value(), str(err))
            else:
                self.history.ack(self.name, msg.partition(), msg.value(), msg.offset())

        for i in itertools.count():
            if self.stop_event.is_set():
                break
            value, partition = b"%s-%08d" % (self.name.encode(), i), i % self.partitions
            self.history.send(self.name, partition, value)
            p.produce(self.topic, value=value, partition=partition, on_delivery=report)
            p.poll(1 / self.rate)
        remaining = p.flush(90)
        assert remaining == 0, f"{self.name}: {remaining} records neither acknowledged nor failed after 90 s"


class KafkaPythonProducer(_Worker):
    def run(self) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=self.servers().split(","), acks="all", enable_idempotence=True,
                          linger_ms=5, delivery_timeout_ms=60000, request_timeout_ms=10000,
                          client_id=self.name, retries=2**31 - 1)
        try:
            for i in itertools.count():
                if self.stop_event.is_set():
                    break
                value, partition = b"%s-%08d" % (self.name.encode(), i), i % self.partitions
                self.history.send(self.name, partition, value)
                future = p.send(self.topic, value=value, partition=partition)
                future.add_callback(lambda md, v=value: self.history.ack(self.name, md.partition, v, md.offset))
                future.add_errback(lambda exc, v=value: self.history.fail(self.name, v, repr(exc)))
                time.sleep(1 / self.rate)
            p.flush(90)
        finally:
            p.close(timeout=10)


class AiokafkaProducer(_Worker):
    def run(self) -> None:
        import asyncio

        asyncio.run(self._arun())

    async def _arun(self) -> None:
        import asyncio

        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=self.servers(), acks="all", enable_idempotence=True, linger_ms=5,
                             request_timeout_ms=10000, client_id=self.name)
        await p.start()
        pending: set = set()

        def report(fut, value):
            pending.discard(fut)
            exc = fut.exception()
            if exc is not None:
                self.history.fail(self.name, value, repr(exc))
            else:
                md = fut.result()
                self.history.ack(self.name, md.partition, value, md.offset)

        try:
            for i in itertools.count():
                if self.stop_event.is_set():
                    break
                value, partition = b"%s-%08d" % (self.name.encode(), i), i % self.partitions
                self.history.send(self.name, partition, value)
                fut = await p.send(self.topic, value=value, partition=partition)
                pending.add(fut)
                fut.add_done_callback(lambda f, v=value: report(f, v))
                await asyncio.sleep(1 / self.rate)
            await p.flush()
            if pending:
                await asyncio.wait(list(pending), timeout=90)
        finally:
            await p.stop()


class KafkaJsProducer(_Worker):
    """KafkaJS's idempotent producer in a node process (tests/groups/js/producer.js), one send at a time."""

    def run(self) -> None:
        import os
        import signal
        import subprocess

        from tests.groups.js_member import JS, ensure_kafkajs

        ensure_kafkajs()
        proc = subprocess.Popen(["node", os.path.join(JS, "producer.js"), self.servers(), self.topic, self.name,
                                 str(self.partitions), str(round(1000 / self.rate))],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        sent = 0

        def stop_later():
            self.stop_event.wait()
            proc.send_signal(signal.SIGTERM)

        threading.Thread(target=stop_later, daemon=True).start()
        try:
            for line in proc.stdout:
                kind, _, rest = line.strip().partition(" ")
                if kind == "K":
                    partition, offset, value = rest.split(" ", 2)
                    self.history.send(self.name, int(partition), value.encode())
                    self.history.ack(self.name, int(partition), value.encode(), int(offset))
                    sent += 1
                elif kind == "F":
                    self.history.send(self.name, -1, rest.encode())
                    self.history.fail(self.name, rest.encode(), "KafkaJS gave up")
                elif kind == "ERR":
                    raise AssertionError(f"{self.name}: {rest}")
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


class ConfluentReader(_Worker):
    """Reads every partition from offset 0 with ``assign`` (no group: the position is the reader's own)."""

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.servers(), "group.id": f"{self.name}-unused",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": self.name})
        c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        session = f"{self.name}-1"
        try:
            while not self.stop_event.is_set():
                for m in c.consume(500, 0.2):
                    if m.error() is None:
                        self.history.read(session, m.partition(), m.offset(), m.value())
        finally:
            c.close()


class KafkaPythonReader(_Worker):
    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=self.servers().split(","), enable_auto_commit=False,
                          auto_offset_reset="earliest", client_id=self.name, request_timeout_ms=10000)
        parts = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        c.assign(parts)
        c.seek_to_beginning(*parts)
        session = f"{self.name}-1"
        try:
            while not self.stop_event.is_set():
                for tp, records in c.poll(timeout_ms=200).items():
                    for r in records:
                        self.history.read(session, tp.partition, r.offset, r.value)
        finally:
            c.close()


class Workload:
    """The producers and readers above, started and stopped together."""

    def __init__(self, servers, topic: str, partitions: int, history: History | None = None) -> None:
        self.history = history or History()
        self.topic, self.partitions, self.servers = topic, partitions, servers
        args = (self.history, servers, topic, partitions)
        self.producers = [ConfluentProducer("ck", *args), KafkaPythonProducer("kp", *args)]
        self.readers = [ConfluentReader("ck-reader", *args), KafkaPythonReader("kp-reader", *args)]

    def start(self) -> "Workload":
        for w in self.producers + self.readers:
            w.start()
        return self

    def __enter__(self) -> "Workload":
        return self.start()

    def __exit__(self, *exc) -> None:
        """Whatever happened, no client thread outlives the test (a failed test must not leave readers
        retrying dead brokers while the next one runs)."""
        for w in self.producers + self.readers:
            w.stop_event.set()
        for w in self.producers + self.readers:
            w.thread.join(10)

    def stop_producers(self) -> None:
        for w in self.producers:
            w.stop()

    def stop_readers(self) -> None:
        for w in self.readers:
            w.stop()

    def drain(self, timeout: float = 60.0) -> None:
        """Read every partition from 0 to its high watermark in one fresh session."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.servers(), "group.id": "drain-unused", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        try:
            ends = {p: c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=20)[1]
                    for p in range(self.partitions)}
            c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions) if ends[p] > 0])
            position = {p: 0 for p in range(self.partitions)}
            deadline = time.monotonic() + timeout
            while any(position[p] < ends[p] for p in ends):
                assert time.monotonic() < deadline, f"drain did not reach the high watermarks {ends}: {position}"
                for m in c.consume(1000, 0.5):
                    if m.error() is None:
                        self.history.read("drain", m.partition(), m.offset(), m.value())
                        position[m.partition()] = m.offset() + 1
        finally:
            c.close()
