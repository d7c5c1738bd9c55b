"""A transactional (KIP-98) Kafka workload that records a Jepsen-style history while faults happen around it.

* ``TxnProducer``: confluent-kafka producers, each with its own ``transactional.id``, committing and (a seeded
  fraction) deliberately aborting transactions of a few records spread over 2-4 partitions of the topic.
* ``CtpWorker``: consume-transform-produce. A read_committed consumer (``assign``, no membership: its group
  commits only through ``send_offsets_to_transaction``) reads an input topic that ``Feeder`` fills with an
  idempotent producer; each batch read becomes one transaction of output records (each naming its input record)
  plus the consumer's offsets. After an abort, or an unknown outcome (the producer is then rebuilt:
  ``init_transactions`` waits for the old transaction to be finished), it rewinds to the group's committed
  offsets, as Kafka's exactly-once loop does. At the end it processes the input to its end and records the
  group's committed offsets, so the checker can find outputs duplicated or lost between input and output.
* ``TxnReader``: readers of every partition from offset 0 (``assign``): confluent-kafka read_committed and
  read_uncommitted, kafka-python read_committed (each client filters aborted records itself).

``TxnWorkload`` runs them all (a drop-in for ``Workload`` in the fault tests' ``finish``); its ``drain`` waits
for every partition's last stable offset to reach its high watermark (transactions cut off by a fault end by
``transaction.timeout.ms``), then reads everything in a fresh session of each isolation level, so the checker
holds the read_committed drain to every committed record. Every record value is unique in the history.

A ``send_offsets_to_transaction`` that outlives its timeout (a librdkafka bug when the group coordinator moves)
leaves its transaction unknown and its producer abandoned, counted in ``stats``.

Randomness (which partitions, how many records, commit or abort) comes from one seed per worker, derived from
the test's seed; client timing is not reproducible, the choices are.
"""

from __future__ import annotations

import logging
import random
import time

from tests.jepsen.history import READ_COMMITTED, READ_UNCOMMITTED, History
from tests.jepsen.workload import (
    TransactionalRecorder, Workload, _Worker, drain_read_committed, record_committed_offsets, record_messages,
)

log = logging.getLogger("jepsen.txn_workload")

TRANSACTION_TIMEOUT_MS = 10000  # a transaction cut off by a fault is aborted by its coordinator this soon
ABORT_RATIO = 0.25  # transactions aborted on purpose
MAX_RECORDS = 8  # per transaction
INIT_DEADLINE = 120.0  # s for a producer to get through init_transactions (faults included)
FEED_RATE = 40  # input records/s for the consume-transform-produce leg
SEND_OFFSETS_TIMEOUT = 15.0


class ClientCallStuck(Exception):
    """A client call outlived its own timeout by ``STUCK_GRACE`` s (the call is left running in its thread)."""


STUCK_GRACE = 10.0


def _bounded(call, timeout: float, what: str):
    """``call()`` in a daemon thread, given ``timeout`` + ``STUCK_GRACE`` s: librdkafka's
    ``send_offsets_to_transaction`` can ignore its timeout and block for good when the group coordinator moves
    (confluentinc/librdkafka#5456, #5511, open); the worker then abandons that producer instead of hanging."""
    import threading

    box: dict = {}

    def run():
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=run, name=what, daemon=True)
    t.start()
    t.join(timeout + STUCK_GRACE)
    if t.is_alive():
        raise ClientCallStuck(f"{what} still blocked {timeout + STUCK_GRACE:.0f} s after it was called")
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _error(exc: BaseException):
    from confluent_kafka import KafkaException

    return exc.args[0] if isinstance(exc, KafkaException) and exc.args else None


class _TxnWorker(_Worker):
    """A worker with one transactional producer at a time (rebuilt with the same ``transactional.id`` when a
    transaction's outcome is unknown or the producer hit a fatal error)."""

    def __init__(self, name: str, history: History, servers, topic: str, partitions: int, txn_id: str,
                 seed: int, abort_ratio: float = ABORT_RATIO) -> None:
        super().__init__(name, history, servers, topic, partitions)
        self.txn_id, self.rng, self.abort_ratio = txn_id, random.Random(seed), abort_ratio
        self.outcomes = {"committed": 0, "aborted": 0, "unknown": 0}
        self.rebuilds = 0
        self.abandoned = 0  # producers left blocked in a client call (ClientCallStuck)
        self.recorder: TransactionalRecorder | None = None

    def _main(self) -> None:
        try:
            super()._main()
        finally:
            self.recorder = None  # the producer destroyed now, not left retrying dead brokers after the test

    def _producer(self) -> TransactionalRecorder:
        """The current recorder, or a new producer through ``init_transactions`` (retried within
        ``INIT_DEADLINE``: a coordinator may be moving)."""
        if self.recorder is not None:
            return self.recorder
        from confluent_kafka import KafkaException, Producer

        deadline = time.monotonic() + INIT_DEADLINE
        last = None
        while time.monotonic() < deadline:
            p = Producer({"bootstrap.servers": self.servers(), "transactional.id": self.txn_id,
                          "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": 5,
                          "client.id": self.name})
            for _ in range(20):  # the same producer may retry a retriable failure (e.g. a timeout)
                try:
                    p.init_transactions(max(1.0, min(30.0, deadline - time.monotonic())))
                    self.recorder = TransactionalRecorder(p, self.history, self.name, self.topic)
                    return self.recorder
                except KafkaException as exc:
                    last = exc
                    error = _error(exc)
                    if error is None or error.fatal() or not error.retriable() or time.monotonic() >= deadline:
                        break
            self.rebuilds += 1
        raise AssertionError(f"{self.name}: init_transactions failed for {INIT_DEADLINE} s: {last!r}")

    def _drop_producer(self) -> None:
        self.recorder = None
        self.rebuilds += 1

    def _end(self, rec: TransactionalRecorder, abort: bool) -> str:
        """Commit (``finish``: retried, aborted when required) or abort (retried while retriable); an unknown
        outcome drops the producer."""
        from confluent_kafka import KafkaException

        if abort:
            outcome = "unknown"
            for _ in range(3):
                try:
                    rec.abort()
                    outcome = "aborted"
                    break
                except KafkaException as exc:
                    error = _error(exc)
                    if error is None or not error.retriable():
                        break
            rec.txn = None
        else:
            outcome = rec.finish()
        self.outcomes[outcome] += 1
        if outcome == "unknown":
            self._drop_producer()
        return outcome

    def _failed_inside(self, rec: TransactionalRecorder, exc: BaseException) -> str:
        """begin/produce/send_offsets raised: abort if the error allows it, else the outcome is unknown."""
        error = _error(exc)
        log.info("%s: %r inside a transaction", self.name, exc)
        if rec.txn is None:  # begin_transaction failed: nothing to end
            self._drop_producer()
            return "none"
        if error is not None and error.txn_requires_abort():
            return self._end(rec, abort=True)
        self.history.txn_end_unknown(self.name, rec.txn, repr(exc))
        rec.txn = None
        self.outcomes["unknown"] += 1
        self._drop_producer()
        return "unknown"


class TxnProducer(_TxnWorker):
    def run(self) -> None:
        from confluent_kafka import KafkaException

        n = 0
        while not self.stop_event.is_set():
            rec = self._producer()
            n += 1
            parts = self.rng.sample(range(self.partitions), self.rng.randint(2, min(4, self.partitions)))
            count = self.rng.randint(len(parts), MAX_RECORDS)
            abort = self.rng.random() < self.abort_ratio
            try:
                rec.begin()
                for i in range(count):
                    rec.produce(b"%s-%06d-%02d" % (self.name.encode(), n, i), parts[i % len(parts)])
                    rec.producer.poll(0)
                if abort:  # the records in the log first (Kafka's commit flushes, its abort purges the queue)
                    rec.producer.flush(10)
            except KafkaException as exc:
                self._failed_inside(rec, exc)
                continue
            self._end(rec, abort)
            time.sleep(self.rng.uniform(0.0, 0.1))


class Feeder(_Worker):
    """The consume-transform-produce leg's input: an idempotent acks=all producer, ``FEED_RATE`` records/s
    round-robin (not in the history: it describes the output topic; the input is judged by its end offsets)."""

    def run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.servers(), "enable.idempotence": True, "linger.ms": 5,
                      "client.id": self.name})
        i = 0
        while not self.stop_event.is_set():
            p.produce(self.topic, value=b"in-%08d" % i, partition=i % self.partitions)
            p.poll(1 / FEED_RATE)
            i += 1
        assert p.flush(90) == 0, f"{self.name}: input records neither acknowledged nor failed after 90 s"


class CtpWorker(_TxnWorker):
    """Consume-transform-produce from ``input_topic`` into the history's topic, exactly once."""

    def __init__(self, name: str, history: History, servers, topic: str, partitions: int, txn_id: str, seed: int,
                 input_topic: str, input_partitions: int, group: str, catch_up_timeout: float = 90.0) -> None:
        super().__init__(name, history, servers, topic, partitions, txn_id, seed)
        self.input_topic, self.input_partitions, self.group = input_topic, input_partitions, group
        self.catch_up_timeout = catch_up_timeout
        self.processed = 0  # input records whose outputs were committed
        self.trail: list[str] = []  # each transaction's input offsets and outcome, each rewind's offsets

    def _committed(self, consumer) -> dict[int, int]:
        """The group's committed input offsets (stable: librdkafka asks for them as read_committed)."""
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + 60
        while True:
            try:
                got = consumer.committed([TopicPartition(self.input_topic, p) for p in range(self.input_partitions)],
                                         timeout=10)
                return {tp.partition: max(tp.offset, 0) for tp in got}  # -1001: nothing committed yet
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _caught_up(self, consumer, positions: dict[int, int]) -> bool:
        from confluent_kafka import TopicPartition

        for p in range(self.input_partitions):
            end = consumer.get_watermark_offsets(TopicPartition(self.input_topic, p), timeout=10)[1]
            if positions[p] < end:
                return False
        return True

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.servers(), "group.id": self.group,
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest", "client.id": f"{self.name}-in"})
        try:
            positions: dict[int, int] | None = None
            stop_deadline = None
            n = 0
            while True:
                rec = self._producer()  # before reading the offsets: a rebuilt producer's init ends the old txn
                if positions is None:
                    positions = self._committed(consumer)
                    self.trail.append(f"{time.monotonic():.3f} rewind to the committed offsets {positions}")
                    consumer.assign([TopicPartition(self.input_topic, p, o) for p, o in positions.items()])
                if self.stop_event.is_set():
                    stop_deadline = stop_deadline or time.monotonic() + self.catch_up_timeout
                    try:
                        if self._caught_up(consumer, positions):
                            break
                    except KafkaException:
                        pass
                    assert time.monotonic() < stop_deadline, \
                        f"{self.name}: input not processed to its end within {self.catch_up_timeout} s: {positions}"
                msgs = [m for m in consumer.consume(50, 0.3) if m.error() is None]
                if not msgs:
                    continue
                n += 1
                outcome = self._transform(rec, msgs, consumer, n)
                self.trail.append(f"{time.monotonic():.3f} #{n} {rec.name} {outcome}: inputs "
                                  f"{sorted({(m.partition(), m.offset()) for m in msgs})[:1]}.."
                                  f"{sorted({(m.partition(), m.offset()) for m in msgs})[-1:]}")
                if outcome == "committed":
                    for m in msgs:
                        positions[m.partition()] = max(positions[m.partition()], m.offset() + 1)
                    self.processed += len(msgs)
                else:
                    positions = None  # rewind to what the group committed
            deadline = time.monotonic() + 60
            while True:  # a coordinator that moved answers NOT_COORDINATOR, which librdkafka hands back
                try:
                    record_committed_offsets(consumer, self.history, self.group, self.input_topic,
                                             self.input_partitions)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            consumer.close()

    def _transform(self, rec: TransactionalRecorder, msgs, consumer, n: int) -> str:
        from confluent_kafka import KafkaException, TopicPartition

        nxt: dict[int, int] = {}
        try:
            rec.begin()
            for m in msgs:
                value = b"%s-%d-%08d-%06d" % (self.name.encode(), m.partition(), m.offset(), n)
                rec.produce(value, (m.partition() + m.offset()) % self.partitions,
                            source=(m.partition(), m.offset(), m.value()))
                nxt[m.partition()] = max(nxt.get(m.partition(), 0), m.offset() + 1)
            rec.producer.poll(0)
            offsets = [TopicPartition(self.input_topic, p, o) for p, o in nxt.items()]
            metadata = consumer.consumer_group_metadata()
            _bounded(lambda: rec.send_offsets(offsets, metadata, SEND_OFFSETS_TIMEOUT), SEND_OFFSETS_TIMEOUT,
                     f"{self.name} send_offsets_to_transaction")
        except KafkaException as exc:
            return self._failed_inside(rec, exc)
        except ClientCallStuck as exc:
            log.warning("%s: %s; producer abandoned", self.name, exc)
            self.abandoned += 1
            return self._failed_inside(rec, exc)
        return self._end(rec, abort=self.rng.random() < self.abort_ratio)


class TxnReader(_Worker):
    """Reads every partition from offset 0 with ``assign`` at one isolation level."""

    def __init__(self, name: str, history: History, servers, topic: str, partitions: int, isolation: str) -> None:
        super().__init__(name, history, servers, topic, partitions)
        self.isolation = isolation

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.servers(), "group.id": f"{self.name}-unused",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": self.name,
                      "isolation.level": self.isolation})
        c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        session = f"{self.name}-1"
        try:
            while not self.stop_event.is_set():
                record_messages(self.history, session, c.consume(500, 0.2), self.isolation)
        finally:
            c.close()


class KafkaPythonTxnReader(TxnReader):
    """kafka-python's read_committed consumer (its own filtering of aborted transactions from the Fetch answer)."""

    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=self.servers().split(","), enable_auto_commit=False,
                          auto_offset_reset="earliest", client_id=self.name, request_timeout_ms=10000,
                          isolation_level=self.isolation)
        parts = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        c.assign(parts)
        c.seek_to_beginning(*parts)
        session = f"{self.name}-1"
        try:
            while not self.stop_event.is_set():
                for tp, records in c.poll(timeout_ms=200).items():
                    for r in records:
                        self.history.read(session, tp.partition, r.offset, r.value, self.isolation)
        finally:
            c.close()


class TxnWorkload(Workload):
    """``producers`` transactional producers, the consume-transform-produce leg (its feeder first) and the
    readers, started and stopped together."""

    def __init__(self, servers, topic: str, partitions: int, input_topic: str, input_partitions: int, seed: int,
                 producers: int = 2, history: History | None = None) -> None:
        self.history = history or History()
        self.topic, self.partitions, self.servers = topic, partitions, servers
        rng = random.Random(seed)
        args = (self.history, servers, topic, partitions)
        self.txn_ids = [f"jepsen-txn-{i}" for i in range(producers)] + ["jepsen-ctp"]
        self.txn_producers: list[_TxnWorker] = [TxnProducer(f"tx{i}", *args, self.txn_ids[i], rng.randrange(2**32))
                                                for i in range(producers)]
        self.ctp = CtpWorker("ctp", *args, self.txn_ids[-1], rng.randrange(2**32), input_topic, input_partitions,
                             "jepsen-ctp-group")
        self.txn_producers.append(self.ctp)
        self.feeder = Feeder("feeder", self.history, servers, input_topic, input_partitions)
        self.producers = [self.feeder, *self.txn_producers]  # stopped in this order: the input ends first
        self.readers = [TxnReader("rc-reader", *args, READ_COMMITTED),
                        TxnReader("ru-reader", *args, READ_UNCOMMITTED),
                        KafkaPythonTxnReader("kp-rc-reader", *args, READ_COMMITTED)]

    def stats(self) -> dict[str, int]:
        out = {k: sum(w.outcomes[k] for w in self.txn_producers) for k in ("committed", "aborted", "unknown")}
        out["producer_rebuilds"] = sum(w.rebuilds for w in self.txn_producers)
        out["producers_abandoned_stuck"] = sum(w.abandoned for w in self.txn_producers)
        out["ctp_inputs_processed"] = self.ctp.processed
        return out

    def drain(self, timeout: float = 90.0) -> None:
        """Once every partition is stable (no transaction open), read it all read_uncommitted, then
        read_committed with spans that oblige the checker."""
        from confluent_kafka import Consumer, TopicPartition

        def consumer(isolation: str):
            return Consumer({"bootstrap.servers": self.servers(), "group.id": "drain-unused",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": isolation})

        committed, uncommitted = consumer(READ_COMMITTED), consumer(READ_UNCOMMITTED)
        try:
            deadline = time.monotonic() + timeout
            while True:
                tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
                lso = [committed.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
                hw = [uncommitted.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
                if lso == hw:
                    break
                assert time.monotonic() < deadline, f"last stable offsets {lso} never reached the ends {hw}"
                time.sleep(0.5)
            drain_read_committed(uncommitted, self.topic, self.partitions, self.history, session="drain-ru",
                                 timeout=timeout, isolation=READ_UNCOMMITTED)
            drain_read_committed(committed, self.topic, self.partitions, self.history, session="drain-rc",
                                 timeout=timeout)
        finally:
            committed.close()
            uncommitted.close()
