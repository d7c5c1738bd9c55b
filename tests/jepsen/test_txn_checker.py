"""Transactions (KIP-98) in histories: the checker must flag exactly the transactional anomaly a history has, none
in clean ones (hand-made, and generated from a model of transactional logs read with read_committed), and the
injected kind when one fault is put into a generated history."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.jepsen.checker import (
    ANOMALY_KINDS,
    TXN_ANOMALY_KINDS,
    AbortedRead,
    DuplicateOutput,
    LostCommitted,
    OffsetNotAtEnd,
    OutputBeyondCommitted,
    TornTransaction,
    UncommittedRead,
    check,
)
from tests.jepsen.history import (
    ACK,
    COMMITTED_OFFSET,
    READ,
    READ_COMMITTED,
    READ_SPAN,
    READ_UNCOMMITTED,
    SEND,
    TXN_ABORT_OK,
    TXN_BEGIN,
    TXN_COMMIT_OK,
    Event,
    History,
    JournaledHistory,
)

RC, RU = READ_COMMITTED, READ_UNCOMMITTED


def only_kind(report, kind: str, partition: int | None = None) -> list:
    """Assert ``report``'s anomalies are all of ``kind`` (at least one) and return them (of ``partition``)."""
    counts = report.counts()
    assert {k for k in ANOMALY_KINDS if counts[k]} == {kind}, report.summary()
    if partition is None:
        return [a for p in report.partitions.values() for a in getattr(p, kind)]
    return getattr(report.partitions[partition], kind)


def committed(h: History, producer: str, txn: str, writes: list[tuple[int, bytes, int]], end=None) -> None:
    """A transaction whose sends (partition, value, acked offset) are all acknowledged, then ``end``."""
    h.txn_begin(producer, txn)
    for partition, value, offset in writes:
        h.send(producer, partition, value, txn=txn)
        h.ack(producer, partition, value, offset, txn=txn)
    (end or h.txn_commit_ok)(producer, txn)


def clean_txn_history() -> History:
    """Logs (c: control marker)       partition 0: a0 b0 c(A) c(B) c0 c(C) n0 e0
                                      partition 1: a1 c(A) c1 c(C) d1 c(D)
    A committed, B aborted, C end unknown (committed: read), D end unknown then aborted, E still open, n0 not
    transactional. rc1 drains both partitions to their last stable offsets, rc2 reads a part, ru1 reads all."""
    h = History()
    h.txn_begin("t1", "A")
    h.send("t1", 0, b"a0", txn="A")
    h.txn_begin("t2", "B")
    h.send("t2", 0, b"b0", txn="B")
    h.ack("t1", 0, b"a0", 0, txn="A")
    h.send("t1", 1, b"a1", txn="A")
    h.ack("t2", 0, b"b0", 1, txn="B")
    h.ack("t1", 1, b"a1", 0, txn="A")
    h.txn_commit_ok("t1", "A")
    h.txn_abort_ok("t2", "B")
    committed(h, "t1", "C", [(0, b"c0", 4), (1, b"c1", 2)], end=lambda p, t: h.txn_end_unknown(p, t, "TIMED_OUT"))
    committed(h, "t2", "D", [(1, b"d1", 4)], end=lambda p, t: h.txn_end_unknown(p, t, "COORDINATOR_NOT_AVAILABLE"))
    h.txn_abort_ok("t2", "D")  # retried abort settles it
    h.send("plain", 0, b"n0")
    h.ack("plain", 0, b"n0", 6)
    h.txn_begin("t1", "E")
    h.send("t1", 0, b"e0", txn="E")
    h.ack("t1", 0, b"e0", 7, txn="E")
    for partition, offset, value in [(0, 0, b"a0"), (0, 4, b"c0"), (0, 6, b"n0"), (1, 0, b"a1"), (1, 2, b"c1")]:
        h.read("rc1", partition, offset, value, RC)
    h.read_span("rc1", 0, 0, 7, RC)
    h.read_span("rc1", 1, 0, 6, RC)
    h.read("rc2", 1, 2, b"c1", RC)
    for partition, offset, value in [(0, 0, b"a0"), (0, 1, b"b0"), (0, 4, b"c0"), (0, 6, b"n0"), (0, 7, b"e0"),
                                     (1, 0, b"a1"), (1, 2, b"c1"), (1, 4, b"d1")]:
        h.read("ru1", partition, offset, value, RU)
    return h


def test_clean_transactional_history_is_ok():
    report = check(clean_txn_history())
    assert report.ok, report.summary()
    assert report.transactions == {"committed": 1, "aborted": 2, "unknown": 1, "open": 1}
    assert report.counts()["acked"] == 8
    assert "transactions: committed=1 aborted=2 unknown=1 open=1" in report.summary()


def test_aborted_read_of_an_aborted_transaction():
    h = clean_txn_history()
    h.read("rc3", 0, 1, b"b0", RC)
    assert only_kind(check(h), "aborted_read", 0) == [AbortedRead(b"b0", 0, 1, "rc3", "B")]


def test_aborted_read_of_an_unknown_end_settled_by_a_later_abort():
    h = clean_txn_history()
    h.read("rc3", 1, 4, b"d1", RC)
    assert only_kind(check(h), "aborted_read", 1) == [AbortedRead(b"d1", 1, 4, "rc3", "D")]


def test_uncommitted_read_beyond_the_last_stable_offset():
    h = clean_txn_history()
    h.read("rc3", 0, 7, b"e0", RC)
    assert only_kind(check(h), "uncommitted_read", 0) == [UncommittedRead(b"e0", 0, 7, "rc3", "E")]


def test_read_uncommitted_may_read_aborted_and_open_values():
    h = clean_txn_history()
    h.read("ru2", 0, 1, b"b0")  # no isolation level: read_uncommitted, as before transactions
    h.read("ru2", 0, 7, b"e0", RU)
    assert check(h).ok


def test_lost_committed_skipped_by_a_session_that_read_past_it():
    h = clean_txn_history()
    committed(h, "t3", "F", [(1, b"f1", 6)])
    h.send("plain", 1, b"n1")
    h.ack("plain", 1, b"n1", 8)
    for offset, value in [(0, b"a1"), (2, b"c1"), (8, b"n1")]:
        h.read("rc3", 1, offset, value, RC)
    assert only_kind(check(h), "lost_committed", 1) == [LostCommitted(b"f1", 1, 6, "F", "rc3")]


def test_lost_committed_within_a_drain_span_without_reads_past_it():
    h = clean_txn_history()
    committed(h, "t3", "F", [(1, b"f1", 6)])
    h.read_span("rc3", 1, 6, 8, RC)  # e.g. the drain reached the end offset 8 having returned nothing
    assert only_kind(check(h), "lost_committed", 1) == [LostCommitted(b"f1", 1, 6, "F", "rc3")]


def test_committed_values_nobody_was_obliged_to_read_are_not_lost():
    h = clean_txn_history()
    committed(h, "t3", "F", [(1, b"f1", 6)])
    h.read("rc3", 1, 0, b"a1", RC)
    h.read("rc3", 1, 2, b"c1", RC)
    h.read_span("rc3", 1, 0, 6, RC)  # ends before f1
    h.read_span("ru3", 1, 0, 8, RU)  # read_uncommitted spans oblige nothing
    assert check(h).ok


def test_torn_transaction_session_saw_one_partition_of_a_committed_transaction():
    h = clean_txn_history()
    h.read("rc3", 0, 0, b"a0", RC)
    h.read("rc3", 1, 2, b"c1", RC)
    h.read_span("rc3", 1, 0, 6, RC)  # went over a1 at offset 0 without returning it; rc1 did return it
    assert only_kind(check(h), "torn_transaction", 1) == [TornTransaction("A", "rc3", 1, 0, b"a1", "skipped")]


def test_torn_transaction_of_unknown_outcome_read_in_part():
    h = clean_txn_history()
    committed(h, "t3", "G", [(0, b"g0", 8), (1, b"g1", 6)], end=lambda p, t: h.txn_end_unknown(p, t, "TIMED_OUT"))
    h.read("rc3", 0, 8, b"g0", RC)  # so G committed ...
    for offset, value in [(0, b"a1"), (2, b"c1")]:
        h.read("rc3", 1, offset, value, RC)
    h.read_span("rc3", 1, 0, 8, RC)  # ... but g1 was passed over
    assert only_kind(check(h), "torn_transaction", 1) == [TornTransaction("G", "rc3", 1, 6, b"g1", "skipped")]


def test_unknown_outcome_read_by_nobody_is_an_abort():
    h = clean_txn_history()
    committed(h, "t3", "G", [(0, b"g0", 8), (1, b"g1", 6)], end=lambda p, t: h.txn_end_unknown(p, t, "TIMED_OUT"))
    h.read_span("rc3", 0, 8, 10, RC)  # (E, still open on partition 0, may yet be aborted by its timeout)
    h.read_span("rc3", 1, 6, 8, RC)
    assert check(h).ok


def test_torn_transaction_values_out_of_send_order():
    h = clean_txn_history()
    h.txn_begin("t3", "H")
    h.send("t3", 1, b"h0", txn="H")
    h.send("t3", 1, b"h1", txn="H")
    h.ack("t3", 1, b"h1", 6, txn="H")  # acks agree with the log: only the order is wrong
    h.ack("t3", 1, b"h0", 7, txn="H")
    h.txn_commit_ok("t3", "H")
    h.read("rc3", 1, 6, b"h1", RC)
    h.read("rc3", 1, 7, b"h0", RC)
    assert only_kind(check(h), "torn_transaction", 1) == [TornTransaction("H", "rc3", 1, 6, b"h1", "out_of_order")]


def test_contradictory_transaction_outcome_is_a_malformed_history():
    h = clean_txn_history()
    h.txn_commit_ok("t2", "B")
    with pytest.raises(ValueError, match="both committed and aborted"):
        check(h)


def ctp_history() -> History:
    """Consume-transform-produce: input partition 0 holds i0 i1 i2; X turns i0 and i1 into x0 x1 and commits,
    Y's y2 from i2 is aborted, Z's z2 from i2 commits; the group's offset ends at the input end 3."""
    h = History()
    h.txn_begin("ctp", "X")
    h.send("ctp", 0, b"x0", txn="X", source=(0, 0, b"i0"))
    h.send("ctp", 1, b"x1", txn="X", source=(0, 1, b"i1"))
    h.ack("ctp", 0, b"x0", 0, txn="X")
    h.ack("ctp", 1, b"x1", 0, txn="X")
    h.txn_commit_ok("ctp", "X")
    h.txn_begin("ctp", "Y")
    h.send("ctp", 0, b"y2", txn="Y", source=(0, 2, b"i2"))
    h.ack("ctp", 0, b"y2", 2, txn="Y")
    h.txn_abort_ok("ctp", "Y")
    h.txn_begin("ctp", "Z")
    h.send("ctp", 0, b"z2", txn="Z", source=(0, 2, b"i2"))
    h.ack("ctp", 0, b"z2", 4, txn="Z")
    h.txn_commit_ok("ctp", "Z")
    h.committed_offset("g", 0, 3, 3)
    for partition, offset, value in [(0, 0, b"x0"), (0, 4, b"z2"), (1, 0, b"x1")]:
        h.read("drain", partition, offset, value, RC)
    h.read_span("drain", 0, 0, 6, RC)
    h.read_span("drain", 1, 0, 2, RC)
    return h


def test_clean_consume_transform_produce():
    report = check(ctp_history())
    assert report.ok, report.summary()


def test_duplicate_output_one_input_in_two_committed_outputs():
    h = ctp_history()
    committed(h, "ctp", "W", [])
    h.txn_begin("ctp", "W2")
    h.send("ctp", 1, b"w1", txn="W2", source=(0, 1, b"i1"))
    h.ack("ctp", 1, b"w1", 2, txn="W2")
    h.txn_commit_ok("ctp", "W2")
    h.read("drain", 1, 2, b"w1", RC)
    found = only_kind(check(h), "duplicate_output", 1)
    assert found == [DuplicateOutput(0, 1, b"i1", ((1, 0, b"x1"), (1, 2, b"w1")))]


def test_duplicate_output_committed_offset_behind_the_output():
    h = History([e for e in ctp_history().events if e.kind != COMMITTED_OFFSET])
    h.committed_offset("g", 0, 2, 3)  # z2 from i2 is in the output, but i2 will be consumed again
    report = check(h)
    assert only_kind(report, "duplicate_output", 0) == [OutputBeyondCommitted("g", 0, 2, 2, 0, 4, b"z2")]
    assert report.partitions[-1].duplicate_output == [OffsetNotAtEnd("g", 0, 2, 3)]


def test_duplicate_output_committed_offset_not_at_input_end():
    h = History([e for e in ctp_history().events if e.kind != COMMITTED_OFFSET])
    h.committed_offset("g", 0, 3, 4)
    assert only_kind(check(h), "duplicate_output", -1) == [OffsetNotAtEnd("g", 0, 3, 4)]


def test_old_events_dump_exactly_as_before_and_new_ones_round_trip(tmp_path):
    old = Event(SEND, "p", 0, b"v", None, 1.0)
    assert old.to_json() == {"kind": "send", "process": "p", "partition": 0, "value": "76", "offset": None,
                             "time": 1.0, "error": None}
    line = '{"kind":"read","process":"s","partition":1,"value":"76","offset":3,"time":2.0,"error":null}\n'
    (tmp_path / "old.jsonl").write_text(line)
    assert History.load(tmp_path / "old.jsonl").events == [Event(READ, "s", 1, b"v", 3, 2.0)]

    h = ctp_history()
    h.txn_begin("ctp", "V")
    h.send("ctp", 0, b"\x00\n", txn="V", source=(1, 7, b"\xff{"))
    h.fail("ctp", b"\x00\n", "NETWORK_EXCEPTION", txn="V")
    h.txn_end_unknown("ctp", "V", 'timed "out"')
    h.read("ru", 0, 9, b"\x00\n", RU)
    h.dump(tmp_path / "txn.jsonl")
    assert History.load(tmp_path / "txn.jsonl").events == h.events
    kinds = {json.loads(line)["kind"] for line in (tmp_path / "txn.jsonl").read_text().splitlines()}
    assert kinds == {"txn_begin", "send", "ack", "txn_commit_ok", "txn_abort_ok", "txn_end_unknown", "read",
                     "read_span", "committed_offset", "fail"}


def test_a_journal_holds_each_event_as_recorded_and_loads_without_a_torn_last_line(tmp_path):
    """JournaledHistory: what a process killed -9 leaves is readable; only a torn last line is forgiven."""
    path = tmp_path / "app.journal"
    h = JournaledHistory(path)
    txn = h.txn_begin("app")
    h.send("app", 0, b"out", txn=txn, source=(0, 5, b"in"))
    assert History.load(path).events == h.events  # on disk before any close: flushed per event
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"kind":"ack","process":"app","parti')  # the write a kill -9 cut short
    assert History.load(path, torn_tail=True).events == h.events
    with pytest.raises(ValueError):
        History.load(path)
    h.close()
    path.write_text(path.read_text().replace('"kind":"send"', '"kind":"sent"', 1))
    with pytest.raises(ValueError):  # a damaged line before the last is never forgiven
        History.load(path, torn_tail=True)


def test_txn_begin_makes_up_unique_names_and_isolation_is_checked():
    h = History()
    assert h.txn_begin("t") != h.txn_begin("t")
    with pytest.raises(ValueError):
        h.read("s", 0, 0, b"v", "read_commited")


# ---- generated transactional histories ---------------------------------------------------------------------------

# how a planned transaction ends: what the producer is told, and what really happened
ENDINGS = {"commit": "committed", "abort": "aborted", "unknown_committed": "committed",
           "unknown_aborted": "aborted", "unknown_then_abort": "aborted"}
MARKER = None  # a control record's place in a model log


@dataclass
class TxnRun:
    """A clean history and the model it came from, so that faults can be put in where they fit."""

    events: list[Event]
    logs: dict[int, list[tuple[bytes | None, str | None]]]  # partition -> (value or MARKER, txn or None) by offset
    told: dict[str, str]  # transaction -> what its producer was told: ENDINGS keys or "open"
    acked: dict[bytes, tuple[int, int, str]]  # transactional value -> acked (partition, offset, txn)
    sources: dict[bytes, tuple[int, int, bytes]] = field(default_factory=dict)  # output value -> its input

    def log_end(self, partition: int) -> int:
        return len(self.logs[partition])


@st.composite
def txn_runs(draw) -> TxnRun:
    """Transactional producers run their transactions one after another, interleaved with each other and with a
    plain producer; a transaction's end puts a marker in each partition it wrote. One producer may be a
    consume-transform-produce loop deriving each output from the next unconsumed input record and rewinding to
    the committed offset after an abort (then its group's offset ends at the input end). Readers honour
    KIP-98: read_committed ones return only committed and plain records below the last stable offset (the drain
    reads every partition up to it), read_uncommitted ones every data record."""
    n_partitions = draw(st.integers(1, 3))
    producers = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    transform = draw(st.booleans())  # t0 is a consume-transform-produce loop
    input_ends = {ip: draw(st.integers(0, 4)) for ip in range(2)} if transform else {}
    partition = st.integers(0, n_partitions - 1)

    plans: dict[str, list[tuple]] = {}  # producer -> actions
    told: dict[str, str] = {}
    for producer in producers:
        txns = draw(st.lists(st.tuples(st.lists(partition, min_size=1, max_size=4), st.sampled_from(sorted(ENDINGS))),
                             max_size=4))
        leave_open = not (transform and producer == "t0") and draw(st.booleans())
        if leave_open:
            txns.append((draw(st.lists(partition, min_size=1, max_size=3)), "open"))
        actions = []
        if transform and producer == "t0":
            txns = plan_transform(draw, txns, input_ends, partition)
        else:
            txns = [([(p, None) for p in writes], ending) for writes, ending in txns]
        for n, (writes, ending) in enumerate(txns):
            txn = f"{producer}#{n}"
            told[txn] = ending
            actions.append(("begin", producer, txn))
            actions += [("send", producer, txn, w) for w in writes]
            if ending != "open":
                actions.append(("end", producer, txn))
        plans[producer] = actions
    plans["plain"] = [("plain", "plain", None, p) for p in draw(st.lists(partition, max_size=6))]

    h = History()
    logs: dict[int, list] = {p: [] for p in range(n_partitions)}
    acked: dict[bytes, tuple[int, int, str]] = {}
    sources: dict[bytes, tuple[int, int, bytes]] = {}
    written: dict[str, set[int]] = {}
    order = draw(st.permutations([name for name, actions in plans.items() for _ in actions]))
    cursors = dict.fromkeys(plans, 0)
    for name in order:
        action, producer, txn, *what = plans[name][cursors[name]]
        cursors[name] += 1
        if action == "begin":
            h.txn_begin(producer, txn)
        elif action == "plain":
            value = b"plain-%d" % cursors[name]
            h.send(producer, what[0], value)
            h.ack(producer, what[0], value, len(logs[what[0]]))
            logs[what[0]].append((value, None))
        elif action == "send":
            (p, source), = what
            value = f"{txn}-{cursors[name]}".encode()
            h.send(producer, p, value, txn=txn, source=source)
            if source is not None:
                sources[value] = source
            # in an aborted transaction a send may fail, its record written or not
            fate = draw(st.sampled_from(["ack", "fail_in_log", "fail_lost"])) if ENDINGS.get(told[txn]) == "aborted" \
                else "ack"
            if fate != "fail_lost":
                if fate == "ack":
                    h.ack(producer, p, value, len(logs[p]), txn=txn)
                    acked[value] = (p, len(logs[p]), txn)
                logs[p].append((value, txn))
                written.setdefault(txn, set()).add(p)
            if fate != "ack":
                h.fail(producer, value, "REQUEST_TIMED_OUT", txn=txn)
        else:
            ending = told[txn]
            for p in sorted(written.get(txn, ())):
                logs[p].append((MARKER, txn))
            if ending == "commit":
                h.txn_commit_ok(producer, txn)
            elif ending == "abort":
                h.txn_abort_ok(producer, txn)
            else:
                h.txn_end_unknown(producer, txn, "REQUEST_TIMED_OUT")
                if ending == "unknown_then_abort":
                    h.txn_abort_ok(producer, txn)
    for ip, end in input_ends.items():
        h.committed_offset("g", ip, end, end)

    run = TxnRun(h.events, logs, told, acked, sources)
    record_readers(draw, run)
    return run


def plan_transform(draw, txns: list[tuple], input_ends: dict[int, int], partition) -> list[tuple]:
    """Give each send of the loop's transactions the input record it consumes next; rewind after an abort; add
    committed transactions at the end for whatever input is left, so that the group's offset reaches the end."""
    committed_at = dict.fromkeys(input_ends, 0)
    planned = []
    for writes, ending in txns:
        position = dict(committed_at)
        derived = []
        for p in writes:
            ip = draw(st.sampled_from(sorted(input_ends)))
            if position[ip] < input_ends[ip]:
                derived.append((p, (ip, position[ip], b"in-%d-%d" % (ip, position[ip]))))
                position[ip] += 1
        if derived:
            planned.append((derived, ending))
            if ENDINGS[ending] == "committed":
                committed_at = position
    for ip, end in input_ends.items():
        rest = [(draw(partition), (ip, o, b"in-%d-%d" % (ip, o))) for o in range(committed_at[ip], end)]
        if rest:
            planned.append((rest, "commit"))
    return planned


def record_readers(draw, run: TxnRun) -> None:
    """A read_committed drain of every partition to its last stable offset, read_committed sessions over random
    ranges of some partitions (half of them saying how far they went), a read_uncommitted drain."""
    really = {txn: ENDINGS.get(told, "open") for txn, told in run.told.items()}
    stable = {}
    for p, log in run.logs.items():
        stable[p] = next((o for o, (_, txn) in enumerate(log) if txn is not None and really[txn] == "open"), len(log))

    def visible(p: int, start: int, end: int):
        for o in range(start, end):
            value, txn = run.logs[p][o]
            if value is not MARKER and (txn is None or really[txn] == "committed"):
                yield o, value

    h = History()

    def read_committed(session: str, p: int, start: int, end: int, span: bool) -> None:
        for o, value in visible(p, start, end):
            h.read(session, p, o, value, RC)
        if span and end > start:
            h.read_span(session, p, start, end, RC)

    for p in run.logs:
        read_committed("drain", p, 0, stable[p], True)
    for n in range(draw(st.integers(0, 3))):
        for p in draw(st.sets(st.sampled_from(sorted(run.logs)), min_size=1)):
            start = draw(st.integers(0, stable[p]))
            read_committed(f"rc{n}", p, start, draw(st.integers(start, stable[p])), draw(st.booleans()))
    for p, log in run.logs.items():
        for o, (value, _) in enumerate(log):
            if value is not MARKER:
                h.read("ru-drain", p, o, value, RU)
    run.events += h.events


@settings(max_examples=150, deadline=None)
@given(txn_runs())
def test_generated_transactional_histories_are_ok(run: TxnRun):
    report = check(run.events)
    assert report.ok, report.summary()
    told = list(run.told.values())
    assert report.transactions == {
        "committed": told.count("commit"), "aborted": told.count("abort") + told.count("unknown_then_abort"),
        "unknown": told.count("unknown_committed") + told.count("unknown_aborted"), "open": told.count("open")}


def _told(run: TxnRun, *endings: str) -> list[tuple[bytes, tuple[int, int, str]]]:
    return sorted((v, place) for v, place in run.acked.items() if run.told[place[2]] in endings)


def _is_read_committed(e: Event) -> bool:
    return e.kind in (READ, READ_SPAN) and e.read_committed


def _new_txn(run: TxnRun, txn: str, partition: int, value: bytes, offset: int, end: str | None,
             source: tuple[int, int, bytes] | None = None) -> list[Event]:
    events = [Event(TXN_BEGIN, "injector", -1, b"", None, 0.0, txn=txn),
              Event(SEND, "injector", partition, value, None, 0.0, txn=txn, source=source),
              Event(ACK, "injector", partition, value, offset, 0.0, txn=txn)]
    if end is not None:
        events.append(Event(end, "injector", -1, b"", None, 0.0, txn=txn))
    return events


def _rc_read(session: str, partition: int, offset: int, value: bytes) -> Event:
    return Event(READ, session, partition, value, offset, 1e9, isolation=RC)


def _rc_span(session: str, partition: int, start: int, end: int) -> Event:
    return Event(READ_SPAN, session, partition, b"", start, 1e9, isolation=RC, end=end)


def inject(kind: str, run: TxnRun, draw) -> list[Event]:
    """Put one fault of ``kind`` into ``run``: in its own records when it has fitting ones, else in new ones
    written past every log end (where no session of the run has been)."""
    events = list(run.events)
    partition = draw(st.sampled_from(sorted(run.logs)))
    end = run.log_end(partition)
    use_existing = draw(st.booleans())

    if kind in ("aborted_read", "uncommitted_read"):
        endings, end_kind = (("abort", "unknown_then_abort"), TXN_ABORT_OK) if kind == "aborted_read" \
            else (("open",), None)
        candidates = _told(run, *endings)
        if use_existing and candidates:
            value, (p, offset, _) = draw(st.sampled_from(candidates))
            return events + [_rc_read("injected", p, offset, value)]
        return events + _new_txn(run, "injected#0", partition, b"x", end, end_kind) + \
            [_rc_read("injected", partition, end, b"x")]

    read = {e.value for e in events if e.kind == READ and e.read_committed}  # below the last stable offset
    if kind == "lost_committed":
        candidates = [(v, place) for v, place in _told(run, "commit") if v in read]
        if use_existing and candidates:  # no read_committed read returns it, though the drain went over it
            value, _ = draw(st.sampled_from(candidates))
            return [e for e in events if not (e.kind == READ and e.read_committed and e.value == value)]
        return events + _new_txn(run, "injected#0", partition, b"x", end, TXN_COMMIT_OK) + \
            [_rc_span("injected", partition, end, end + 2)]

    if kind == "torn_transaction":
        candidates = [(v, place) for v, place in _told(run, "commit", "unknown_committed") if v in read]
        if use_existing and candidates:  # another session goes over it without returning it
            value, (p, offset, _) = draw(st.sampled_from(candidates))
            return events + [_rc_span("injected", p, offset, offset + 1)]
        return events + _new_txn(run, "injected#0", partition, b"x", end, TXN_COMMIT_OK) + \
            [_rc_read("i1", partition, end, b"x"), _rc_span("i2", partition, end, end + 1)]

    assert kind == "duplicate_output"
    # outputs a read_committed reader returned (one past an open transaction is not read: no second output then)
    outputs = sorted(v for v in run.sources if v in read and run.acked.get(v, (0, 0, ""))[2] and
                     run.told[run.acked[v][2]] in ("commit", "unknown_committed"))
    if use_existing and outputs:  # the same input transformed again in a second committed transaction
        source = run.sources[draw(st.sampled_from(outputs))]
        return events + _new_txn(run, "injected#0", partition, b"x", end, TXN_COMMIT_OK, source) + \
            [_rc_read("injected", partition, end, b"x")]
    if use_existing and any(e.kind == COMMITTED_OFFSET for e in events):  # the group's offset short of the end
        victim = draw(st.sampled_from([e for e in events if e.kind == COMMITTED_OFFSET]))
        return [e if e is not victim else Event(COMMITTED_OFFSET, e.process, e.partition, b"", e.offset, e.time,
                                                end=e.end + 1) for e in events]
    return events + [Event(COMMITTED_OFFSET, "injected", 7, b"", 0, 1e9, end=1)]


@pytest.mark.parametrize("kind", TXN_ANOMALY_KINDS)  # each kind its own examples, not what hypothesis favours
@settings(max_examples=60, deadline=None)
@given(run=txn_runs(), data=st.data())
def test_one_injected_transactional_anomaly_is_found_as_its_kind(kind: str, run: TxnRun, data):
    only_kind(check(inject(kind, run, data.draw)), kind)


def test_a_large_transactional_history_checks_clean():
    """200,000 events (the checker's cost is n log n; how long it takes is not asserted here)."""
    events = []
    for t in range(25_000):
        txn, partition, offset = f"t#{t}", t % 4, 3 * (t // 4)  # two records and a marker per transaction
        events.append(Event(TXN_BEGIN, "t", -1, b"", None, 0.0, txn=txn))
        for i in range(2):
            value = b"%d-%d" % (t, i)
            events += [Event(SEND, "t", partition, value, None, 0.0, txn=txn),
                       Event(ACK, "t", partition, value, offset + i, 0.0, txn=txn),
                       _rc_read("s1", partition, offset + i, value), _rc_read("s2", partition, offset + i, value)]
        events.append(Event(TXN_COMMIT_OK if t % 3 else TXN_ABORT_OK, "t", -1, b"", None, 0.0, txn=txn))
    events = [e for e in events if not (e.kind == READ and int(e.value.split(b"-")[0]) % 3 == 0)]
    events += [_rc_span("s1", p, 0, 3 * 6250) for p in range(4)]
    report = check(events)
    assert report.ok, report.summary()
    assert report.transactions["committed"] == 16_666 and report.counts()["reads"] == 66_664
