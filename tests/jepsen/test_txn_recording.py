"""The transactional recorders in workload.py against fake confluent-kafka clients (every outcome on demand; the
real broker under faults: tests/integration/test_replication_faults.py and test_netns_partitions.py): what they
put into a History, and that the checker judges it."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.jepsen.checker import check
from tests.jepsen.history import ACK, FAIL, READ_COMMITTED, SEND, TXN_BEGIN, History
from tests.jepsen.workload import (
    TransactionalRecorder,
    drain_read_committed,
    record_committed_offsets,
    record_messages,
)


class FakeMessage:
    def __init__(self, partition: int, offset: int, value: bytes, error=None) -> None:
        self._partition, self._offset, self._value, self._error = partition, offset, value, error

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def error(self):
        return self._error


class FakeTransactionalProducer:
    """Appends to per-partition logs; delivery reports wait for the next commit (as flush inside commit)."""

    def __init__(self, commit_errors: dict[int, KafkaError] | None = None) -> None:
        self.logs: dict[int, list] = {}
        self.pending: list = []
        self.commit_errors = commit_errors or {}  # commit call number (from 0) -> the KafkaError it raises
        self.calls: list[str] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, topic, value, partition, on_delivery) -> None:
        log = self.logs.setdefault(partition, [])
        self.pending.append((on_delivery, FakeMessage(partition, len(log), value)))
        log.append(value)

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout) -> None:
        self.calls.append(f"offsets {[(tp.partition, tp.offset) for tp in offsets]}")

    def _deliver(self) -> None:
        for report, msg in self.pending:
            report(None, msg)
        self.pending.clear()

    def commit_transaction(self, timeout) -> None:
        error = self.commit_errors.get(self.calls.count("commit"))
        self.calls.append("commit")
        self._deliver()
        if error is not None:
            raise KafkaException(error)

    def abort_transaction(self, timeout) -> None:
        self.calls.append("abort")
        self._deliver()


def test_transactional_recorder_records_sends_acks_sources_and_outcomes():
    h = History()
    producer = FakeTransactionalProducer(commit_errors={
        1: KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True),  # 2nd transaction: retried, then ok
        3: KafkaError(KafkaError._STATE, "fenced partition", txn_requires_abort=True),  # 3rd: aborted
    })
    recorder = TransactionalRecorder(producer, h, "ctp", "out")
    outcomes = []
    for n in range(3):
        txn = recorder.begin()
        recorder.produce(b"v%d" % n, n % 2, source=(0, n, b"in%d" % n))
        recorder.send_offsets([TopicPartition("in", 0, n + 1)], object())
        outcomes.append((txn, recorder.finish()))
    assert [o for _, o in outcomes] == ["committed", "committed", "aborted"]
    assert len({txn for txn, _ in outcomes}) == 3
    per_txn = {txn: [e.kind for e in h.events if e.txn == txn] for txn, _ in outcomes}
    assert list(per_txn.values()) == [
        [TXN_BEGIN, SEND, ACK, "txn_commit_ok"],
        [TXN_BEGIN, SEND, ACK, "txn_end_unknown", "txn_commit_ok"],
        [TXN_BEGIN, SEND, ACK, "txn_end_unknown", "txn_abort_ok"]]
    third = outcomes[2][0]
    assert producer.calls == ["begin", "offsets [(0, 1)]", "commit", "begin", "offsets [(0, 2)]", "commit",
                              "commit", "begin", "offsets [(0, 3)]", "commit", "abort"]
    assert next(e for e in h.events if e.kind == SEND and e.txn == third).source == (0, 2, b"in2")
    report = check(h)
    assert report.ok and report.transactions == {"committed": 2, "aborted": 1, "unknown": 0, "open": 0}


def test_transactional_recorder_failed_delivery_and_fatal_commit_stay_indeterminate():
    h = History()
    producer = FakeTransactionalProducer(commit_errors={0: KafkaError(KafkaError._FATAL, "fenced", fatal=True)})
    recorder = TransactionalRecorder(producer, h, "p", "out")
    txn = recorder.begin()
    recorder.produce(b"a", 0)
    report, msg = producer.pending.pop()
    report(KafkaError(KafkaError._MSG_TIMED_OUT), msg)
    assert recorder.finish() == "unknown" and recorder.txn is None
    assert [(e.kind, e.txn) for e in h.events] == [(TXN_BEGIN, txn), (SEND, txn), (FAIL, txn),
                                                   ("txn_end_unknown", txn)]
    assert check(h).transactions["unknown"] == 1
    with pytest.raises(AssertionError):
        recorder.produce(b"b", 0)  # outside a transaction


class FakeReadCommittedConsumer:
    """Serves the committed records of fixed logs; positions pass aborted and control records as a broker's
    read_committed fetch does."""

    def __init__(self, logs: dict[int, list], committed: dict[int, int] | None = None) -> None:
        self.logs, self.committed_offsets = logs, committed or {}
        self.positions: dict[int, int] = {}

    def get_watermark_offsets(self, tp, timeout):
        return 0, len(self.logs[tp.partition])

    def assign(self, tps) -> None:
        self.positions = {tp.partition: tp.offset for tp in tps}

    def consume(self, n, timeout):
        out = []
        for p, log in self.logs.items():
            while self.positions[p] < len(log):
                record = log[self.positions[p]]
                if record is not None:
                    out.append(FakeMessage(p, self.positions[p], record))
                self.positions[p] += 1
        return out + [FakeMessage(0, -1, b"", error=KafkaError(KafkaError._PARTITION_EOF))]

    def position(self, tps):
        return [TopicPartition(tp.topic, tp.partition, self.positions[tp.partition]) for tp in tps]

    def committed(self, tps, timeout):
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets.get(tp.partition, -1001))
                for tp in tps]


def test_drain_read_committed_records_reads_and_spans_that_oblige_the_checker():
    h = History()
    committed = TransactionalRecorder(FakeTransactionalProducer(), h, "t", "out")
    committed.begin()
    committed.produce(b"c0", 0)
    committed.produce(b"c1", 1)
    committed.commit()
    # the fake consumer's logs: partition 0 ends with an aborted record and a marker (None), 1 with a marker
    consumer = FakeReadCommittedConsumer({0: [b"c0", None, None], 1: [b"c1", None], 2: []})
    assert drain_read_committed(consumer, "out", 3, h) == {0: 3, 1: 2, 2: 0}
    spans = [(e.partition, e.offset, e.end, e.isolation) for e in h.events if e.kind == "read_span"]
    assert spans == [(0, 0, 3, READ_COMMITTED), (1, 0, 2, READ_COMMITTED), (2, 0, 0, READ_COMMITTED)]
    assert check(h).ok

    lost_events = [e for e in h.events if not (e.kind == "read" and e.value == b"c1")]  # went over c1
    assert check(lost_events).counts()["lost_committed"] == 1


def test_record_messages_and_committed_offsets():
    h = History()
    assert record_messages(h, "s", [FakeMessage(0, 4, b"x"), FakeMessage(0, -1, b"", error=object())]) == 1
    assert h.events[0].isolation == READ_COMMITTED
    consumer = FakeReadCommittedConsumer({0: [b"i0", b"i1"], 1: [b"i2"]}, committed={0: 2})
    record_committed_offsets(consumer, h, "g", "in", 2)
    assert [(e.partition, e.offset, e.end) for e in h.events[1:]] == [(0, 2, 2), (1, 0, 1)]
    assert check(h).counts()["duplicate_output"] == 1  # partition 1: nothing committed of 1 input record
