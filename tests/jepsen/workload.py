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

from tests.jepsen.history import READ_COMMITTED, History

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


# ---- transactions (KIP-98): recorders for confluent-kafka clients (run under faults by txn_workload.py) ------------


class TransactionalRecorder:
    """A confluent-kafka transactional ``Producer`` (``transactional.id`` set, ``init_transactions`` done) whose
    transactions, sends and outcomes go into ``history`` under ``name``.

    One transaction at a time, as Kafka allows; each delivery report is recorded under the transaction its record
    was produced in (reports are served by the calling thread's poll, flush or commit). A commit or abort call
    that raises is recorded as ``txn_end_unknown`` and re-raised: the caller decides (``finish`` does it the
    usual way)."""

    def __init__(self, producer, history: History, name: str, topic: str) -> None:
        self.producer, self.history, self.name, self.topic = producer, history, name, topic
        self.txn: str | None = None

    def begin(self) -> str:
        assert self.txn is None, f"{self.name}: transaction {self.txn} still open"
        self.producer.begin_transaction()
        self.txn = self.history.txn_begin(self.name)
        return self.txn

    def produce(self, value: bytes, partition: int, source: tuple[int, int, bytes] | None = None) -> None:
        """Send ``value`` inside the open transaction; ``source`` is the input record it was derived from."""
        txn = self.txn
        assert txn is not None, f"{self.name}: produce outside a transaction"

        def report(err, msg):
            if err is not None:
                self.history.fail(self.name, value, str(err), txn=txn)
            else:
                self.history.ack(self.name, msg.partition(), value, msg.offset(), txn=txn)

        self.history.send(self.name, partition, value, txn=txn, source=source)
        self.producer.produce(self.topic, value=value, partition=partition, on_delivery=report)

    def send_offsets(self, offsets, group_metadata, timeout: float = 30.0) -> None:
        """The consumer positions to commit with the transaction (consume-transform-produce)."""
        self.producer.send_offsets_to_transaction(offsets, group_metadata, timeout)

    def commit(self, timeout: float = 30.0) -> None:
        self._end(self.producer.commit_transaction, self.history.txn_commit_ok, timeout)

    def abort(self, timeout: float = 30.0) -> None:
        self._end(self.producer.abort_transaction, self.history.txn_abort_ok, timeout)

    def _end(self, call, record_ok, timeout: float) -> None:
        txn = self.txn
        assert txn is not None, f"{self.name}: no transaction to end"
        try:
            call(timeout)
        except Exception as exc:
            self.history.txn_end_unknown(self.name, txn, repr(exc))
            raise
        record_ok(self.name, txn)
        self.txn = None

    def finish(self, timeout: float = 30.0, commit_attempts: int = 3) -> str:
        """Commit, retrying a retriable failure, aborting when the error requires it; returns "committed",
        "aborted" or "unknown" (a fatal or persistent error: the transaction stays indeterminate in the history,
        and this recorder forgets it)."""
        from confluent_kafka import KafkaException

        for _ in range(commit_attempts):
            try:
                self.commit(timeout)
                return "committed"
            except KafkaException as exc:
                error = exc.args[0]
                if error.txn_requires_abort():
                    try:
                        self.abort(timeout)
                        return "aborted"
                    except KafkaException:
                        break
                if not error.retriable():
                    break
        self.txn = None
        return "unknown"


def record_messages(history: History, session: str, messages, isolation: str = READ_COMMITTED) -> int:
    """Record what ``Consumer.consume`` returned (errors skipped) as reads of ``session``; returns how many."""
    n = 0
    for m in messages:
        if m.error() is None:
            history.read(session, m.partition(), m.offset(), m.value(), isolation)
            n += 1
    return n


def drain_read_committed(consumer, topic: str, partitions: int, history: History, session: str = "drain",
                         timeout: float = 60.0, isolation: str = READ_COMMITTED) -> dict[int, int]:
    """Read every partition from 0 to its end offset as ``consumer`` sees it (``isolation.level=read_committed``:
    the last stable offset) and record a ``read_span`` of each: the checker then holds the session to every
    committed record below. Positions, not the last record read, say when a partition is done: aborted records
    and control records are never returned. Returns the end offsets. A read_uncommitted ``consumer`` (with
    ``isolation``) drains to the high watermark the same way (a log's last offset may be a control record)."""
    from confluent_kafka import TopicPartition

    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done: set[int] = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + timeout
    while len(done) < partitions:
        assert time.monotonic() < deadline, f"drain did not reach the end offsets {ends}"
        record_messages(history, session, consumer.consume(1000, 0.5), isolation)
        for tp in consumer.position([TopicPartition(topic, p) for p in range(partitions) if p not in done]):
            if tp.offset >= ends[tp.partition]:
                done.add(tp.partition)
    for p, end in ends.items():
        history.read_span(session, p, 0, end, isolation)
    return ends


def record_committed_offsets(consumer, history: History, group: str, input_topic: str, partitions: int) -> None:
    """At the end of a consume-transform-produce run: ``group``'s committed offset on each input partition and
    that partition's end, as ``consumer`` (of that group) sees them."""
    from confluent_kafka import TopicPartition

    tps = [TopicPartition(input_topic, p) for p in range(partitions)]
    found = [(tp.partition, max(tp.offset, 0),  # -1001: nothing committed
              consumer.get_watermark_offsets(TopicPartition(input_topic, tp.partition), timeout=20)[1])
             for tp in consumer.committed(tps, timeout=20)]
    for partition, offset, end in found:  # all or nothing: a caller may retry a failed lookup
        history.committed_offset(group, partition, offset, end)
