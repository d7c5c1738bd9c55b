"""The checker must flag exactly the anomalies a history has: none in clean histories (hand-made and generated from
a model log), and the right kind, partition and example when one fault is put in."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.jepsen.checker import (
    ANOMALY_KINDS,
    BASIC_ANOMALY_KINDS,
    AckMismatch,
    Duplicated,
    Inconsistent,
    Lost,
    NonMonotonic,
    Phantom,
    ReadAt,
    check,
)
from tests.jepsen.history import ACK, FAIL, READ, SEND, Event, History


def only_anomaly(report, kind: str, partition: int):
    """Assert ``report`` holds exactly one anomaly, of ``kind`` in ``partition``, and return it."""
    counts = report.counts()
    assert {k: counts[k] for k in ANOMALY_KINDS} == {k: int(k == kind) for k in ANOMALY_KINDS}, report.summary()
    assert not report.ok
    found = getattr(report.partitions[partition], kind)
    assert len(found) == 1, report.summary()
    return found[0]


def clean_history() -> History:
    """Two producers on two partitions, one failed send that reached the log, one that did not, and two
    overlapping consumer sessions."""
    h = History()
    h.send("p1", 0, b"a")
    h.send("p2", -1, b"d")  # partitioner chooses: lands on partition 1
    h.ack("p1", 0, b"a", 0)
    h.read("s1", 0, 0, b"a")
    h.send("p1", 0, b"b")
    h.ack("p1", 0, b"b", 1)
    h.send("p1", 1, b"c")
    h.ack("p1", 1, b"c", 0)
    h.fail("p2", b"d", "REQUEST_TIMED_OUT")  # ... but it was written at partition 1 offset 1
    h.read("s1", 1, 0, b"c")
    h.read("s2", 1, 1, b"d")
    h.read("s1", 0, 1, b"b")
    h.send("p2", 1, b"e")
    h.read("s1", 1, 1, b"d")
    h.read("s2", 0, 1, b"b")
    h.read("s1", 1, 2, b"e")  # read before the producer hears its ack: legal
    h.ack("p2", 1, b"e", 2)
    h.send("p2", 0, b"f")
    h.fail("p2", b"f", "NOT_LEADER_OR_FOLLOWER")  # never written
    h.read("s2", 1, 2, b"e")
    return h


def test_clean_history_is_ok_with_info_counts():
    report = check(clean_history())
    assert report.ok, report.summary()
    assert report.counts() == {
        **dict.fromkeys(ANOMALY_KINDS, 0),
        "acked": 4, "failed": 2, "failed_but_read": 1, "reads": 8, "distinct_values_read": 5,
    }
    info = ("acked", "failed", "failed_but_read", "reads", "distinct_values_read")
    # f failed on partition 0 (its send named it), d on partition 1 (where it was read)
    assert [report.partitions[0].counts()[k] for k in info] == [2, 1, 0, 3, 2]
    assert [report.partitions[1].counts()[k] for k in info] == [2, 1, 1, 5, 3]
    assert set(report.partitions) == {0, 1}
    assert report.summary().splitlines()[-1].startswith("total: ok")


def test_lost_acked_but_never_read():
    h = clean_history()
    h.send("p1", 1, b"g")
    h.ack("p1", 1, b"g", 3)
    assert only_anomaly(check(h), "lost", 1) == Lost(b"g", 1, 3, "p1")


def test_lost_when_read_only_on_another_partition():
    h = clean_history()
    h.send("p1", 0, b"g")
    h.ack("p1", 0, b"g", 2)
    h.read("s3", 1, 3, b"g")
    assert only_anomaly(check(h), "lost", 0) == Lost(b"g", 0, 2, "p1")


def test_duplicated_same_value_at_two_offsets():
    h = clean_history()
    h.send("p1", 0, b"x")
    h.fail("p1", b"x", "NETWORK_EXCEPTION")  # retried without idempotence: written twice
    h.read("s3", 0, 3, b"x")
    h.read("s3", 0, 7, b"x")
    found = only_anomaly(check(h), "duplicated", 0)
    assert found == Duplicated(b"x", (ReadAt(0, 3, "s3"), ReadAt(0, 7, "s3")))


def test_duplicated_across_partitions_reported_under_first_read():
    h = clean_history()
    h.send("p1", -1, b"x")
    h.read("s3", 1, 5, b"x")
    h.read("s4", 0, 4, b"x")
    h.read("s5", 1, 5, b"x")  # the same place again is no further duplicate
    found = only_anomaly(check(h), "duplicated", 1)
    assert found == Duplicated(b"x", (ReadAt(1, 5, "s3"), ReadAt(0, 4, "s4")))


def test_inconsistent_offset_read_with_two_values():
    h = clean_history()
    h.send("p1", 0, b"u")
    h.send("p2", 0, b"w")
    h.read("s3", 0, 5, b"u")
    h.read("s4", 0, 5, b"w")
    h.read("s5", 0, 5, b"u")
    found = only_anomaly(check(h), "inconsistent", 0)
    assert found == Inconsistent(0, 5, ((b"u", "s3"), (b"w", "s4")))


def test_non_monotonic_session_reads_backwards():
    h = clean_history()
    h.send("p1", 1, b"x")
    h.read("s3", 1, 4, b"x")
    h.read("s3", 0, 0, b"a")  # another partition does not count
    h.read("s3", 1, 2, b"e")
    found = only_anomaly(check(h), "non_monotonic", 1)
    assert found == NonMonotonic("s3", 1, 4, 2, b"e")


def test_non_monotonic_repeated_offset():
    h = clean_history()
    h.read("s1", 0, 1, b"b")  # s1 already read offset 1: a re-read needs a new session
    assert only_anomaly(check(h), "non_monotonic", 0) == NonMonotonic("s1", 0, 1, 1, b"b")


def test_ack_mismatch_read_at_other_offset_than_acked():
    h = clean_history()
    h.send("p1", 0, b"g")
    h.ack("p1", 0, b"g", 3)  # a retry after failover answered with a new offset
    h.read("s1", 0, 2, b"g")
    found = only_anomaly(check(h), "ack_mismatch", 0)
    assert found == AckMismatch(b"g", 0, 3, (2,), "p1")


def test_phantom_value_never_sent():
    h = clean_history()
    h.read("s3", 1, 3, b"ghost")
    assert only_anomaly(check(h), "phantom", 1) == Phantom(b"ghost", 1, 3, "s3")


def test_summary_lists_examples_per_partition_and_totals():
    h = clean_history()
    for i in range(7):
        h.send("p1", 1, b"lost-%d" % i)
        h.ack("p1", 1, b"lost-%d" % i, 3 + i)
    h.read("s3", 0, 3, b"ghost")
    report = check(h)
    lines = report.summary().splitlines()
    assert lines[0].startswith("partition 0: ANOMALIES") and "phantom=1" in lines[0]
    assert "phantom:" in lines[1] and "b'ghost'" in lines[1] and "session=s3" in lines[1]
    assert lines[2].startswith("partition 1: ANOMALIES") and "lost=7" in lines[2]
    assert "b'lost-4'" in lines[3] and "b'lost-5'" not in lines[3] and "(+2 more)" in lines[3]
    assert lines[-1].startswith("total: ANOMALIES") and "lost=7" in lines[-1] and "phantom=1" in lines[-1]
    assert report.counts()["lost"] == 7 and report.counts()["acked"] == 11


def test_dump_load_round_trip(tmp_path):
    h = clean_history()
    h.send("p\u00e9", 2, b"\x00\xff\n{")
    h.fail("p\u00e9", b"\x00\xff\n{", 'error with "quotes"\nand a newline')
    path = tmp_path / "history.jsonl"
    h.dump(path)
    loaded = History.load(path)
    assert loaded.events == h.events
    assert len(path.read_text().splitlines()) == len(h.events)


def test_concurrent_recording_keeps_every_event_in_order():
    h = History()

    def produce(name: str):
        for i in range(500):
            h.send(name, 0, f"{name}-{i}".encode())

    threads = [threading.Thread(target=produce, args=(f"p{t}",)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = h.events
    assert len(events) == 2000
    assert all(a.time <= b.time for a, b in zip(events, events[1:]))
    for t in range(4):
        mine = [e.value for e in events if e.process == f"p{t}"]
        assert mine == [f"p{t}-{i}".encode() for i in range(500)]


def test_large_history_checks_in_linear_time():
    events = []
    for i in range(50_000):
        value, partition, offset = b"%d" % i, i % 4, i // 4
        events += [Event(SEND, "p", partition, value, None, 0.0), Event(ACK, "p", partition, value, offset, 0.0),
                   Event(READ, "s1", partition, value, offset, 0.0), Event(READ, "s2", partition, value, offset, 0.0)]
    start = time.monotonic()
    report = check(events)
    elapsed = time.monotonic() - start
    assert report.ok and report.counts()["reads"] == 100_000
    assert elapsed < 5, f"checking 200,000 events took {elapsed:.1f}s"


# ---- generated histories --------------------------------------------------------------------------------------

@dataclass
class ModelRun:
    """A clean history and the model it was generated from, so faults can be put in where they fit."""

    events: list[Event]
    logs: dict[int, list[bytes]]  # partition -> values in offset order
    acked: dict[bytes, tuple[int, int]]  # value -> acknowledged (partition, offset)
    unacked_in_log: list[bytes]  # failed or unanswered sends that reached the log
    outcomes: dict[str, int] = field(default_factory=dict)


@st.composite
def model_runs(draw) -> ModelRun:
    """Producers append to a model log per partition; every outcome is told truthfully; consumer sessions read
    contiguous increasing ranges that together cover every log; all sequences are interleaved at random."""
    n_partitions = draw(st.integers(1, 3))
    producers = [f"p{i}" for i in range(draw(st.integers(1, 3)))]
    logs: dict[int, list[bytes]] = {p: [] for p in range(n_partitions)}
    acked: dict[bytes, tuple[int, int]] = {}
    unacked_in_log: list[bytes] = []
    outcomes = dict.fromkeys(("ack", "fail_in_log", "fail_not_in_log", "pending_in_log", "pending_not_in_log"), 0)
    sequences: dict[str, list[tuple]] = {p: [] for p in producers}
    sends = draw(st.lists(st.tuples(st.sampled_from(producers), st.integers(0, n_partitions - 1),
                                    st.sampled_from(sorted(outcomes)), st.booleans()), max_size=25))
    for i, (producer, partition, outcome, explicit_partition) in enumerate(sends):
        value = b"v%d" % i
        outcomes[outcome] += 1
        seq = sequences[producer]
        seq.append((SEND, producer, partition if explicit_partition else -1, value, None, None))
        if outcome in ("ack", "fail_in_log", "pending_in_log"):
            offset = len(logs[partition])
            logs[partition].append(value)
            if outcome == "ack":
                acked[value] = (partition, offset)
                seq.append((ACK, producer, partition, value, offset, None))
            else:
                unacked_in_log.append(value)
        if outcome.startswith("fail"):
            seq.append((FAIL, producer, -1, value, None, "REQUEST_TIMED_OUT"))

    session_ids = iter(range(10_000))
    for partition, log in logs.items():
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(log) - 1)), max_size=3))) if len(log) > 1 else []
        ranges = list(zip([0, *cuts], [*cuts, len(log)]))
        for _ in range(draw(st.integers(0, 2))):  # overlapping extra sessions
            start = draw(st.integers(0, len(log)))
            ranges.append((start, draw(st.integers(start, len(log)))))
        for start, end in ranges:
            session = f"s{next(session_ids)}"
            sequences[session] = [(READ, session, partition, log[o], o, None) for o in range(start, end)]

    order = draw(st.permutations([name for name, seq in sequences.items() for _ in seq]))
    cursors = dict.fromkeys(sequences, 0)
    events = []
    for name in order:
        kind, process, partition, value, offset, error = sequences[name][cursors[name]]
        cursors[name] += 1
        events.append(Event(kind, process, partition, value, offset, float(len(events)), error))
    return ModelRun(events, logs, acked, unacked_in_log, outcomes)


@settings(max_examples=100, deadline=None)
@given(model_runs())
def test_generated_clean_histories_are_ok(run: ModelRun):
    report = check(run.events)
    assert report.ok, report.summary()
    counts = report.counts()
    assert counts["acked"] == run.outcomes["ack"]
    assert counts["failed"] == run.outcomes["fail_in_log"] + run.outcomes["fail_not_in_log"]
    assert counts["failed_but_read"] == run.outcomes["fail_in_log"]
    assert counts["reads"] == sum(e.kind == READ for e in run.events)
    assert counts["distinct_values_read"] == sum(len(log) for log in run.logs.values())


def _read(session: str, partition: int, offset: int, value: bytes) -> Event:
    return Event(READ, session, partition, value, offset, 1e9)


def _send(value: bytes, partition: int = -1) -> Event:
    return Event(SEND, "injector", partition, value, None, 0.0)


def inject(kind: str, run: ModelRun, draw) -> tuple[list[Event], int]:
    """Put exactly one anomaly of ``kind`` into ``run``; return the faulty events and the partition to report it."""
    events = list(run.events)
    partition = draw(st.sampled_from(sorted(run.logs)))
    end = len(run.logs[partition])  # first offset nobody has read
    reads = [e for e in events if e.kind == READ]
    use_existing = draw(st.booleans())

    if kind == "lost":
        if use_existing and run.acked:
            value = draw(st.sampled_from(sorted(run.acked)))
            return [e for e in events if not (e.kind == READ and e.value == value)], run.acked[value][0]
        return events + [_send(b"x", partition), Event(ACK, "injector", partition, b"x", end, 0.0)], partition

    if kind == "duplicated":
        other = draw(st.sampled_from(sorted(run.logs)))
        second = (other, len(run.logs[other]) + (other == partition))
        if use_existing and run.unacked_in_log:
            value = draw(st.sampled_from(run.unacked_in_log))
            first = next(e.partition for e in events if e.kind == READ and e.value == value)
            return events + [_read("injected", other, len(run.logs[other]), value)], first
        return events + [_send(b"x"), _read("injected", partition, end, b"x"), _read("injected", *second, b"x")], \
            partition

    if kind == "inconsistent":
        if use_existing and reads:
            victim = draw(st.sampled_from(reads))
            return events + [_send(b"x"), _read("injected", victim.partition, victim.offset, b"x")], victim.partition
        return events + [_send(b"x"), _send(b"y"), _read("i1", partition, end, b"x"),
                         _read("i2", partition, end, b"y")], partition

    if kind == "non_monotonic":
        if use_existing and reads:
            session = draw(st.sampled_from(sorted({e.process for e in reads})))
            victim = draw(st.sampled_from([e for e in reads if e.process == session]))
            return events + [_read(session, victim.partition, victim.offset, victim.value)], victim.partition
        return events + [_send(b"x"), _send(b"y"), _read("injected", partition, end + 1, b"x"),
                         _read("injected", partition, end, b"y")], partition

    if kind == "ack_mismatch":
        if use_existing and run.acked:
            value = draw(st.sampled_from(sorted(run.acked)))
            acked_partition = run.acked[value][0]
            wrong = len(run.logs[acked_partition]) + draw(st.integers(0, 3))
            return [e if not (e.kind == ACK and e.value == value) else
                    Event(ACK, e.process, e.partition, e.value, wrong, e.time) for e in events], acked_partition
        return events + [_send(b"x", partition), Event(ACK, "injector", partition, b"x", end + 1, 0.0),
                         _read("injected", partition, end, b"x")], partition

    assert kind == "phantom"
    if use_existing and run.unacked_in_log:
        value = draw(st.sampled_from(run.unacked_in_log))
        first = next(e.partition for e in events if e.kind == READ and e.value == value)
        return [e for e in events if e.value != value or e.kind == READ], first
    return events + [_read("injected", partition, end, b"never sent")], partition


@pytest.mark.parametrize("kind", BASIC_ANOMALY_KINDS)  # each kind its own examples, not what hypothesis favours
@settings(max_examples=50, deadline=None)
@given(run=model_runs(), data=st.data())
def test_one_injected_anomaly_is_found_as_its_kind(kind: str, run: ModelRun, data):
    events, partition = inject(kind, run, data.draw)
    report = check(events)
    only_anomaly(report, kind, partition)
