"""Judge a recorded ``History`` of a Kafka workload: what the log must contain given what clients were told.

One pass over the events fills dicts keyed by value, by (partition, offset) and by (session, partition); the
anomalies are then read off those dicts, so checking is linear in the history size (transactional visibility adds
one sort per partition of its sessions' bounds and acked offsets: n log n).

Anomalies (any one makes ``Report.ok`` false):

- lost: a value acknowledged on partition P that no read on P ever returned.
- duplicated: one value read at two or more different (partition, offset) places; reported under the
  partition of its first read.
- inconsistent: one (partition, offset) read with two or more different values, across all sessions.
- non_monotonic: within one session and partition, a read at an offset <= that of the session's previous read
  there.
- ack_mismatch: a value acknowledged at offset X on P but read on P at another offset (an idempotent retry
  after failover must be answered with the original offset).
- phantom: a value read that was never sent (no send, ack or fail mentions it).

A failed send is indeterminate, so failed values that are read are legal and only counted.

Transactions (KIP-98). A transaction's outcome is *committed* (txn_commit_ok), *aborted* (txn_abort_ok, also
after a txn_end_unknown), *unknown* (txn_end_unknown only) or *open* (no end recorded; both oks for one
transaction make the history malformed: ValueError). Only read_committed reads and spans judge visibility;
read_uncommitted reads may return anything that is in the log. A read_committed session *covers* offset o of
partition P when o lies in [lowest offset it read or spanned on P, highest offset it read on P or end of a span
there): a session is one continuous position, and read_committed cannot pass o before o's transaction ended, so
a session covering o must have returned o's record if that record is visible. A transaction is *visible* when
committed, or when unknown and some read_committed read returned one of its values (then it committed). The
values a visible transaction obliges covering sessions to return are its acknowledged ones, at their acked
(partition, offset); failed or unanswered sends inside it are indeterminate one by one. Transactional acks are
judged by these kinds, not by ``lost``.

- aborted_read: a read_committed read returned a value of an aborted transaction (one per value, first read).
- uncommitted_read: a read_committed read returned a value of an open transaction: beyond the last stable
  offset (one per value, first read).
- lost_committed: a value acknowledged at (P, o) in a committed transaction that some read_committed session
  covers, but that no read_committed read on P returned (one per value, with the first obliged session).
- torn_transaction: (reason "skipped") a read_committed session covers the acked (P, o) of a value of a visible
  transaction but did not return it on P, while the value is not lost_committed (another read returned it, or
  the transaction is unknown and visible): all-or-nothing visibility broken, one per (session, value); or
  (reason "out_of_order") values of one transaction read on one partition at offsets not increasing in the
  transaction's send order, one per value.
- duplicate_output (consume-transform-produce): an input record (partition, offset of the input topic) from
  which two or more output values were read by read_committed reads (outputs of aborted and open transactions
  are reported as their own kinds and not counted; values must be unique, so a reprocessed input makes a new
  value), under the first output's partition; an output read by read_committed derived from an input offset at
  or beyond the group's final committed offset on that input partition (it will be produced again), under the
  output's partition; a final committed offset different from its input partition's end (the group did not
  commit exactly what was processed), under partition -1.

Share groups (KIP-932): ``check_share`` judges a share group's deliveries of one topic against what producers were
acknowledged, given ``group.share.delivery.count.limit`` and ``group.share.record.lock.duration.ms``. A delivery
(share_acquire) happened at a broker time in [its ``since``, its recorded time]; an acknowledgement took effect,
if at all, between its share_ack and its answer; an ok answer means it took effect, an error answer or none (its
member's process was killed -9 before it was answered) that it may or may not have. A killed member's close is
recorded as it is killed (its share session ends as its connection drops); records that its fetch in flight
acquired and it never recorded show only when they come back. A consumer's kill is no fault of a partition.
Kafka persists a record's
state on acknowledgements, releases and lock expiry, not on acquisition, so a leader change may forget
acquisitions: a record held then is redelivered with its last persisted delivery count, and whoever held it may
still believe it does. A *fault* of a partition is a ``fault`` event of it or of all partitions (a moment), or a
``fault_start``..``fault_end`` span (any moment in it). A member leaves the group (its records released) by
closing, by a fault, or after its session timeout without heartbeats, which is assumed longer than the lock
duration (Kafka's defaults: 45 s and 30 s). Only what the history proves is reported:

- delivery_after_ack: a delivery acquired after an Accept or Reject of that offset was answered ok (its ``since``
  is at or after the answer): the record was acknowledged or archived for good.
- share_lost: a record acknowledged to a producer (outside transactions) that does not end acknowledged or
  archived given the final SPSO and state batches (reason "not_done", with its final state), or that ends so
  without any member ever having acquired it (reason "skipped": the SPSO moved past an undelivered record).
  Judged only when the history has share_final events (then every partition with acked records needs one).
- count_regression: a delivery whose delivery count is not above that of a delivery of the same offset that
  was acquired before it (the earlier one's recorded time is at or before the later one's ``since``; equal
  counts need no order), with no fault of the partition between the earlier one's ``since`` and the later
  one's recorded time. An equal count is no regression when the member of either closed (or was killed) before
  the other was recorded: a share session that ends (ShareAcknowledge closing it, its connection
  dropping) releases its member's acquired records with their delivery counts decreased (Kafka's
  ``releaseAcquiredRecords``: fetched, not delivered), so the next delivery counts the same again.
- over_limit: a delivery whose delivery count is above ``delivery_count_limit``.
- concurrent_hold: a delivery acquired while another delivery of the same offset was certainly still held: the
  later one was acquired after the earlier one was recorded and before the earlier one's lock could have
  ended: not before its ``since`` plus the lock duration, nor before its member acknowledged that offset (an
  acknowledgement unanswered by the earlier one's ``since`` counts from then), closed, or a fault of the
  partition. Per-acquisition lock timers only ever fire late, so the lock lasts at least that long.
- ack_unacquired: an acknowledgement answered ok for an offset its member did not hold: more ok answers for
  (member, offset) than deliveries of it to that member recorded before the acknowledgement was sent (an ok
  Renew keeps the record held, so it must find one but does not use it up), or an answer for an offset the
  member had not acknowledged. An error answer is indeterminate, as a failed send.

Information per partition: deliveries, redeliveries (deliveries of an offset delivered before), accepted and
rejected (distinct offsets whose Accept or Reject was answered ok), archived (offsets known archived: rejected,
released or expired at the delivery count limit, or archived in the final state), the final SPSO.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field, fields
from typing import NamedTuple

from tests.jepsen.history import (
    ACCEPT,
    ACK,
    ACKNOWLEDGED,
    ALL_PARTITIONS,
    ARCHIVED,
    AVAILABLE,
    FAULT,
    FAULT_END,
    FAULT_START,
    KINDS,
    REJECT,
    RENEW,
    SHARE_ACK,
    SHARE_ACK_RESULT,
    SHARE_ACQUIRE,
    SHARE_CLOSE,
    SHARE_FINAL,
    SHARE_STATE,
    COMMITTED_OFFSET,
    FAIL,
    READ,
    READ_SPAN,
    SEND,
    SHARE_KINDS,
    TXN_ABORT_OK,
    TXN_BEGIN,
    TXN_COMMIT_OK,
    TXN_END_UNKNOWN,
    UNKNOWN_PARTITION,
    Event,
    History,
)

BASIC_ANOMALY_KINDS = ("lost", "duplicated", "inconsistent", "non_monotonic", "ack_mismatch", "phantom")
TXN_ANOMALY_KINDS = ("aborted_read", "uncommitted_read", "lost_committed", "torn_transaction", "duplicate_output")
ANOMALY_KINDS = BASIC_ANOMALY_KINDS + TXN_ANOMALY_KINDS
COMMITTED, ABORTED, UNKNOWN, OPEN = "committed", "aborted", "unknown", "open"
TXN_OUTCOMES = (COMMITTED, ABORTED, UNKNOWN, OPEN)
INFO_KINDS = ("acked", "failed", "failed_but_read", "reads", "distinct_values_read")
EXAMPLES_PER_KIND = 5


class ReadAt(NamedTuple):
    """Where a value was read, and by which session first."""

    partition: int
    offset: int
    session: str


@dataclass(frozen=True)
class Lost:
    value: bytes
    partition: int
    offset: int  # the acknowledged offset
    producer: str


@dataclass(frozen=True)
class Duplicated:
    value: bytes
    reads: tuple[ReadAt, ...]  # every distinct place it was read, in order of first read


@dataclass(frozen=True)
class Inconsistent:
    partition: int
    offset: int
    values: tuple[tuple[bytes, str], ...]  # (value, first session that read it), in order of first read


@dataclass(frozen=True)
class NonMonotonic:
    session: str
    partition: int
    previous_offset: int
    offset: int
    value: bytes


@dataclass(frozen=True)
class AckMismatch:
    value: bytes
    partition: int
    acked_offset: int
    read_offsets: tuple[int, ...]  # offsets on the acked partition other than the acked one, ascending
    producer: str


@dataclass(frozen=True)
class Phantom:
    value: bytes
    partition: int  # first read
    offset: int
    session: str


@dataclass(frozen=True)
class AbortedRead:
    value: bytes
    partition: int
    offset: int
    session: str  # the first read_committed session that returned it
    txn: str


@dataclass(frozen=True)
class UncommittedRead:
    value: bytes
    partition: int
    offset: int
    session: str
    txn: str


@dataclass(frozen=True)
class LostCommitted:
    value: bytes
    partition: int
    offset: int  # the acknowledged offset
    txn: str
    session: str  # the first read_committed session that covers the offset


@dataclass(frozen=True)
class TornTransaction:
    txn: str
    session: str  # "skipped": the session that missed it; "out_of_order": the first reader of that place
    partition: int
    offset: int  # "skipped": the acked offset; "out_of_order": where the value was read
    value: bytes
    reason: str  # "skipped" | "out_of_order"


@dataclass(frozen=True)
class DuplicateOutput:
    input_partition: int
    input_offset: int
    input_value: bytes
    outputs: tuple[tuple[int, int, bytes], ...]  # (partition, offset, value) of each first read, in read order


@dataclass(frozen=True)
class OutputBeyondCommitted:
    group: str
    input_partition: int
    input_offset: int
    committed_offset: int
    partition: int  # the output's
    offset: int
    value: bytes


@dataclass(frozen=True)
class OffsetNotAtEnd:
    group: str
    input_partition: int
    committed_offset: int
    input_end: int


@dataclass
class PartitionReport:
    """Anomalies and information counts for one partition (-1 holds failed sends of unknown partition)."""

    partition: int
    lost: list[Lost] = field(default_factory=list)
    duplicated: list[Duplicated] = field(default_factory=list)
    inconsistent: list[Inconsistent] = field(default_factory=list)
    non_monotonic: list[NonMonotonic] = field(default_factory=list)
    ack_mismatch: list[AckMismatch] = field(default_factory=list)
    phantom: list[Phantom] = field(default_factory=list)
    aborted_read: list[AbortedRead] = field(default_factory=list)
    uncommitted_read: list[UncommittedRead] = field(default_factory=list)
    lost_committed: list[LostCommitted] = field(default_factory=list)
    torn_transaction: list[TornTransaction] = field(default_factory=list)
    duplicate_output: list[DuplicateOutput | OutputBeyondCommitted | OffsetNotAtEnd] = field(default_factory=list)
    acked: int = 0
    failed: int = 0  # distinct values whose send failed; attributed to their send's or first read's partition
    failed_but_read: int = 0  # legal: an error answer for data that did reach the log
    reads: int = 0
    distinct_values_read: int = 0

    @property
    def ok(self) -> bool:
        return not any(getattr(self, kind) for kind in ANOMALY_KINDS)

    def counts(self) -> dict[str, int]:
        out = {kind: len(getattr(self, kind)) for kind in ANOMALY_KINDS}
        out.update({kind: getattr(self, kind) for kind in INFO_KINDS})
        return out

    def summary(self) -> str:
        counts = self.counts()
        head = " ".join(f"{kind}={counts[kind]}" for kind in (*INFO_KINDS, *ANOMALY_KINDS))
        lines = [f"partition {self.partition}: {'ok' if self.ok else 'ANOMALIES'} {head}"]
        for kind in ANOMALY_KINDS:
            found = getattr(self, kind)
            if found:
                more = f" (+{len(found) - EXAMPLES_PER_KIND} more)" if len(found) > EXAMPLES_PER_KIND else ""
                examples = "; ".join(_describe(a) for a in found[:EXAMPLES_PER_KIND])
                lines.append(f"  {kind}: {examples}{more}")
        return "\n".join(lines)


@dataclass
class Report:
    partitions: dict[int, PartitionReport] = field(default_factory=dict)
    transactions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TXN_OUTCOMES, 0))

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions.values())

    def counts(self) -> dict[str, int]:
        """Totals over all partitions, per anomaly kind and per information count."""
        totals = dict.fromkeys((*ANOMALY_KINDS, *INFO_KINDS), 0)
        for report in self.partitions.values():
            for kind, n in report.counts().items():
                totals[kind] += n
        return totals

    def summary(self) -> str:
        """One line per partition with up to 5 examples per anomaly kind, then the totals."""
        lines = [self.partitions[p].summary() for p in sorted(self.partitions)]
        if any(self.transactions.values()):
            lines.append("transactions: " + " ".join(f"{k}={n}" for k, n in self.transactions.items()))
        totals = self.counts()
        lines.append(f"total: {'ok' if self.ok else 'ANOMALIES'} "
                     + " ".join(f"{kind}={totals[kind]}" for kind in (*INFO_KINDS, *ANOMALY_KINDS)))
        return "\n".join(lines)


def _short(value: bytes, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(anomaly) -> str:
    parts = []
    for f in fields(anomaly):
        v = getattr(anomaly, f.name)
        if isinstance(v, bytes):
            v = _short(v)
        elif isinstance(v, Delivery):
            v = f"({v.member} p{v.partition}@{v.offset} count={v.delivery_count} in [{v.since:.3f}, {v.time:.3f}])"
        elif isinstance(v, AckAnswer):
            sent = "never" if v.sent is None else f"{v.sent:.3f}"
            v = (f"({v.ack_type} by {v.member} p{v.partition}@{v.offset} sent {sent} answered {v.answered:.3f} "
                 f"{v.error or 'ok'})")
        elif f.name == "reads":
            v = "[" + ", ".join(f"p{r.partition}@{r.offset} by {r.session}" for r in v) + "]"
        elif f.name == "outputs":
            v = "[" + ", ".join(f"p{p}@{o} {_short(val)}" for p, o, val in v) + "]"
        elif f.name == "values":
            v = "[" + ", ".join(f"{_short(val)} by {session}" for val, session in v) + "]"
        elif isinstance(v, tuple):
            v = list(v)
        if f.name != "partition":  # already in the line's heading
            parts.append(f"{f.name}={v}")
    return " ".join(parts)


def check(history: History | list[Event]) -> Report:
    """Find every anomaly in ``history`` (see the module docstring), per partition."""
    events = history.events if isinstance(history, History) else history

    sent: set[bytes] = set()
    send_partition: dict[bytes, int] = {}  # explicit partitions only
    failed: set[bytes] = set()
    acks: list[Event] = []
    places_of_value: dict[bytes, dict[tuple[int, int], str]] = {}  # value -> (partition, offset) -> 1st session
    values_at: dict[tuple[int, int], dict[bytes, str]] = {}  # (partition, offset) -> value -> 1st session
    last_offset: dict[tuple[str, int], int] = {}  # (session, partition) -> offset of its previous read
    reads_per_partition: dict[int, int] = {}
    values_per_partition: dict[int, set[bytes]] = {}
    non_monotonic: list[NonMonotonic] = []
    txns = _Transactions()

    for e in events:
        kind = e.kind
        if kind == READ:
            place = (e.partition, e.offset)
            places_of_value.setdefault(e.value, {}).setdefault(place, e.process)
            values_at.setdefault(place, {}).setdefault(e.value, e.process)
            reads_per_partition[e.partition] = reads_per_partition.get(e.partition, 0) + 1
            values_per_partition.setdefault(e.partition, set()).add(e.value)
            position = (e.process, e.partition)
            previous = last_offset.get(position)
            if previous is not None and e.offset <= previous:
                non_monotonic.append(NonMonotonic(e.process, e.partition, previous, e.offset, e.value))
            last_offset[position] = e.offset
            if e.read_committed:
                txns.committed_read(e)
        elif kind == SEND:
            sent.add(e.value)
            if e.partition != UNKNOWN_PARTITION:
                send_partition.setdefault(e.value, e.partition)
            txns.member(e, in_send_order=True)
        elif kind == ACK:
            sent.add(e.value)
            acks.append(e)
            txns.member(e)
        elif kind == FAIL:
            sent.add(e.value)
            failed.add(e.value)
            txns.member(e)
        elif kind == READ_SPAN:
            if e.read_committed and e.end > e.offset:
                txns.cover(e.process, e.partition, e.offset, e.end)
        elif kind in (TXN_BEGIN, TXN_COMMIT_OK, TXN_ABORT_OK, TXN_END_UNKNOWN):
            txns.ending(e)
        elif kind == COMMITTED_OFFSET:
            txns.committed_offsets[e.partition] = e
        elif kind in SHARE_KINDS:
            continue  # judged by check_share; plain readers of a share-group workload's topic are judged here
        else:
            raise ValueError(f"unknown event kind {kind!r} in {e}")

    report = Report()

    def at(partition: int) -> PartitionReport:
        if partition not in report.partitions:
            report.partitions[partition] = PartitionReport(partition)
        return report.partitions[partition]

    for partition, n in reads_per_partition.items():
        at(partition).reads = n
        at(partition).distinct_values_read = len(values_per_partition[partition])
    for e in non_monotonic:
        at(e.partition).non_monotonic.append(e)

    for e in acks:
        here = at(e.partition)
        here.acked += 1
        places = places_of_value.get(e.value, {})
        offsets_here = sorted(offset for partition, offset in places if partition == e.partition)
        if not offsets_here:
            if e.value not in txns.txn_of:  # a transaction's acks oblige read_committed sessions instead
                here.lost.append(Lost(e.value, e.partition, e.offset, e.process))
        elif offsets_here != [e.offset]:
            others = tuple(o for o in offsets_here if o != e.offset)
            here.ack_mismatch.append(AckMismatch(e.value, e.partition, e.offset, others, e.process))

    for value in failed:
        places = places_of_value.get(value)
        first_read_partition = next(iter(places))[0] if places else UNKNOWN_PARTITION
        here = at(send_partition.get(value, first_read_partition))
        here.failed += 1
        if places:
            here.failed_but_read += 1

    for value, places in places_of_value.items():
        (first_partition, first_offset), first_session = next(iter(places.items()))
        if len(places) > 1:
            reads = tuple(ReadAt(p, o, s) for (p, o), s in places.items())
            at(first_partition).duplicated.append(Duplicated(value, reads))
        if value not in sent:
            at(first_partition).phantom.append(Phantom(value, first_partition, first_offset, first_session))

    for (partition, offset), readers in values_at.items():
        if len(readers) > 1:
            at(partition).inconsistent.append(Inconsistent(partition, offset, tuple(readers.items())))

    txns.judge(report, at, acks, places_of_value)
    return report


class _Transactions:
    """What the history says of transactions and read_committed sessions, filled during the one pass."""

    def __init__(self) -> None:
        self.txn_of: dict[bytes, str] = {}  # value -> its transaction
        self.sends_of: dict[str, list[bytes]] = {}  # transaction -> its values in send order
        self.source_of: dict[bytes, tuple[int, int, bytes]] = {}  # output value -> input record
        self.known: dict[str, None] = {}  # every transaction named, in order of first mention
        self.ends: dict[str, set[str]] = {}  # transaction -> kinds of its end events
        self.first_committed_read: dict[bytes, tuple[int, int, str]] = {}  # value -> (partition, offset, session)
        self.committed_readers: dict[tuple[bytes, int], set[str]] = {}  # (value, partition) -> sessions
        self.coverage: dict[tuple[str, int], list[int]] = {}  # (session, partition) -> [low, high)
        self.committed_offsets: dict[int, Event] = {}  # input partition -> its last committed_offset event

    def member(self, e: Event, in_send_order: bool = False) -> None:
        if e.source is not None:
            self.source_of.setdefault(e.value, e.source)
        if e.txn is None:
            return
        self.known.setdefault(e.txn)
        if self.txn_of.setdefault(e.value, e.txn) == e.txn and in_send_order:
            self.sends_of.setdefault(e.txn, []).append(e.value)

    def ending(self, e: Event) -> None:
        self.known.setdefault(e.txn)
        if e.kind != TXN_BEGIN:
            self.ends.setdefault(e.txn, set()).add(e.kind)

    def committed_read(self, e: Event) -> None:
        self.first_committed_read.setdefault(e.value, (e.partition, e.offset, e.process))
        self.committed_readers.setdefault((e.value, e.partition), set()).add(e.process)
        self.cover(e.process, e.partition, e.offset, e.offset + 1)

    def cover(self, session: str, partition: int, start: int, end: int) -> None:
        span = self.coverage.get((session, partition))
        if span is None:
            self.coverage[(session, partition)] = [start, end]
        else:
            span[0], span[1] = min(span[0], start), max(span[1], end)

    def outcome(self, txn: str | None) -> str | None:
        if txn is None:
            return None
        ends = self.ends.get(txn, ())
        if TXN_COMMIT_OK in ends and TXN_ABORT_OK in ends:
            raise ValueError(f"transaction {txn!r} both committed and aborted")
        if TXN_COMMIT_OK in ends:
            return COMMITTED
        if TXN_ABORT_OK in ends:
            return ABORTED
        return UNKNOWN if ends else OPEN

    def judge(self, report: Report, at, acks: list[Event], places_of_value) -> None:
        outcomes = {txn: self.outcome(txn) for txn in self.known}
        for outcome in outcomes.values():
            report.transactions[outcome] += 1

        seen_committed: set[str] = set()  # transactions some read_committed read returned a value of
        for value, (partition, offset, session) in self.first_committed_read.items():
            txn = self.txn_of.get(value)
            outcome = outcomes.get(txn)
            if outcome == ABORTED:
                at(partition).aborted_read.append(AbortedRead(value, partition, offset, session, txn))
            elif outcome == OPEN:
                at(partition).uncommitted_read.append(UncommittedRead(value, partition, offset, session, txn))
            elif txn is not None:
                seen_committed.add(txn)

        self._judge_visibility(at, acks, outcomes, seen_committed)
        self._judge_order(at, places_of_value)
        self._judge_outputs(at, outcomes)

    def _judge_visibility(self, at, acks: list[Event], outcomes: dict[str, str], seen_committed: set[str]) -> None:
        """Each acked value of a visible transaction against the read_committed sessions covering its offset: a
        sweep per partition over the sorted coverage bounds and acked offsets (n log n)."""
        sweeps: dict[int, list[tuple]] = {}
        for (session, partition), (low, high) in self.coverage.items():
            sweeps.setdefault(partition, []).extend(((high, 0, session), (low, 1, session)))
        obliged: set[bytes] = set()
        for e in acks:
            txn = self.txn_of.get(e.value)
            if e.value in obliged or e.partition not in sweeps:
                continue
            if outcomes.get(txn) == COMMITTED or (outcomes.get(txn) == UNKNOWN and txn in seen_committed):
                obliged.add(e.value)
                sweeps[e.partition].append((e.offset, 2, e))
        for partition, sweep in sweeps.items():
            sweep.sort(key=lambda item: item[:2])
            active: dict[str, None] = {}
            for _, step, what in sweep:
                if step == 0:
                    del active[what]
                elif step == 1:
                    active[what] = None
                else:
                    readers = self.committed_readers.get((what.value, partition), ())
                    if len(active) > sum(session in active for session in readers):
                        self._missed(at, what, [s for s in active if s not in readers], outcomes)

    def _missed(self, at, ack: Event, sessions: list[str], outcomes: dict[str, str]) -> None:
        txn = self.txn_of[ack.value]
        here = at(ack.partition)
        if outcomes[txn] == COMMITTED and (ack.value, ack.partition) not in self.committed_readers:
            here.lost_committed.append(LostCommitted(ack.value, ack.partition, ack.offset, txn, sessions[0]))
        else:
            here.torn_transaction.extend(TornTransaction(txn, s, ack.partition, ack.offset, ack.value, "skipped")
                                         for s in sessions)

    def _judge_order(self, at, places_of_value) -> None:
        """A transaction's values on one partition sit in its send order (one producer, one sequence)."""
        for txn, values in self.sends_of.items():
            highest: dict[int, int] = {}
            for value in values:
                for (partition, offset), session in places_of_value.get(value, {}).items():
                    if offset < highest.get(partition, -1):
                        at(partition).torn_transaction.append(
                            TornTransaction(txn, session, partition, offset, value, "out_of_order"))
                    highest[partition] = max(offset, highest.get(partition, -1))

    def _judge_outputs(self, at, outcomes: dict[str, str]) -> None:
        outputs_of: dict[tuple[int, int], list[tuple[int, int, bytes]]] = {}
        input_value: dict[tuple[int, int], bytes] = {}
        for value, (partition, offset, _) in self.first_committed_read.items():
            source = self.source_of.get(value)
            if source is None or outcomes.get(self.txn_of.get(value)) in (ABORTED, OPEN):
                continue
            outputs_of.setdefault(source[:2], []).append((partition, offset, value))
            input_value.setdefault(source[:2], source[2])
            committed = self.committed_offsets.get(source[0])
            if committed is not None and source[1] >= committed.offset:
                at(partition).duplicate_output.append(OutputBeyondCommitted(
                    committed.process, source[0], source[1], committed.offset, partition, offset, value))
        for (input_partition, input_offset), outputs in outputs_of.items():
            if len(outputs) > 1:
                at(outputs[0][0]).duplicate_output.append(DuplicateOutput(
                    input_partition, input_offset, input_value[(input_partition, input_offset)], tuple(outputs)))
        for input_partition, e in self.committed_offsets.items():
            if e.offset != e.end:
                at(UNKNOWN_PARTITION).duplicate_output.append(OffsetNotAtEnd(e.process, input_partition, e.offset,
                                                                             e.end))


# ---- share groups (KIP-932) --------------------------------------------------------------------------------------

SHARE_ANOMALY_KINDS = ("delivery_after_ack", "share_lost", "count_regression", "over_limit", "concurrent_hold",
                       "ack_unacquired")
SHARE_INFO_KINDS = ("deliveries", "redeliveries", "accepted", "rejected", "archived")
DEFAULT_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit
DEFAULT_RECORD_LOCK_DURATION_MS = 30000  # group.share.record.lock.duration.ms
BELOW_SPSO = "below_spso"  # a final state: acknowledged or archived, Kafka keeps no state to say which


class Delivery(NamedTuple):
    """One share_acquire: ``member`` got ``partition``/``offset`` with ``delivery_count``, acquired by the broker
    at a time in [``since``, ``time``]."""

    member: str
    partition: int
    offset: int
    delivery_count: int
    since: float
    time: float


class AckAnswer(NamedTuple):
    """An acknowledgement (``ack_type`` None: none was sent) and its answer (``error`` None: ok)."""

    member: str
    partition: int
    offset: int
    ack_type: str | None
    sent: float | None
    answered: float
    error: str | None


@dataclass(frozen=True)
class DeliveryAfterAck:
    delivery: Delivery
    ack: AckAnswer  # the earliest ok-answered Accept or Reject of the offset


@dataclass(frozen=True)
class ShareLost:
    partition: int
    offset: int
    value: bytes
    producer: str
    reason: str  # "not_done" | "skipped"
    state: str  # its final state: AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED or BELOW_SPSO


@dataclass(frozen=True)
class CountRegression:
    delivery: Delivery
    earlier: Delivery  # acquired before it (or of the same count) with no fault of the partition in between


@dataclass(frozen=True)
class OverLimit:
    delivery: Delivery
    limit: int


@dataclass(frozen=True)
class ConcurrentHold:
    delivery: Delivery
    held: Delivery  # certainly still held when ``delivery`` was acquired
    held_until: float  # the earliest its lock could have ended


@dataclass(frozen=True)
class AckUnacquired:
    ack: AckAnswer


@dataclass
class SharePartitionReport:
    """A share group's anomalies and figures for one partition of the topic."""

    partition: int
    delivery_after_ack: list[DeliveryAfterAck] = field(default_factory=list)
    share_lost: list[ShareLost] = field(default_factory=list)
    count_regression: list[CountRegression] = field(default_factory=list)
    over_limit: list[OverLimit] = field(default_factory=list)
    concurrent_hold: list[ConcurrentHold] = field(default_factory=list)
    ack_unacquired: list[AckUnacquired] = field(default_factory=list)
    deliveries: int = 0
    redeliveries: int = 0
    accepted: int = 0
    rejected: int = 0
    archived: int = 0
    start_offset: int | None = None  # the final SPSO (None: not recorded)

    @property
    def ok(self) -> bool:
        return not any(getattr(self, kind) for kind in SHARE_ANOMALY_KINDS)

    def counts(self) -> dict[str, int]:
        out = {kind: len(getattr(self, kind)) for kind in SHARE_ANOMALY_KINDS}
        out.update({kind: getattr(self, kind) for kind in SHARE_INFO_KINDS})
        return out

    def summary(self) -> str:
        counts = self.counts()
        head = " ".join(f"{kind}={counts[kind]}" for kind in (*SHARE_INFO_KINDS, *SHARE_ANOMALY_KINDS))
        lines = [f"partition {self.partition}: {'ok' if self.ok else 'ANOMALIES'} spso={self.start_offset} {head}"]
        for kind in SHARE_ANOMALY_KINDS:
            found = getattr(self, kind)
            if found:
                more = f" (+{len(found) - EXAMPLES_PER_KIND} more)" if len(found) > EXAMPLES_PER_KIND else ""
                examples = "; ".join(_describe(a) for a in found[:EXAMPLES_PER_KIND])
                lines.append(f"  {kind}: {examples}{more}")
        return "\n".join(lines)


@dataclass
class ShareReport:
    partitions: dict[int, SharePartitionReport] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions.values())

    def counts(self) -> dict[str, int]:
        """Totals over all partitions, per anomaly kind and per figure."""
        totals = dict.fromkeys((*SHARE_ANOMALY_KINDS, *SHARE_INFO_KINDS), 0)
        for report in self.partitions.values():
            for kind, n in report.counts().items():
                totals[kind] += n
        return totals

    def start_offsets(self) -> dict[int, int | None]:
        return {p: r.start_offset for p, r in sorted(self.partitions.items())}

    def summary(self) -> str:
        """One line per partition with up to 5 examples per anomaly kind, then the totals."""
        lines = [self.partitions[p].summary() for p in sorted(self.partitions)]
        totals = self.counts()
        lines.append(f"total: {'ok' if self.ok else 'ANOMALIES'} "
                     + " ".join(f"{kind}={totals[kind]}" for kind in (*SHARE_INFO_KINDS, *SHARE_ANOMALY_KINDS)))
        return "\n".join(lines)


def check_share(history: History | list[Event], delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT,
                record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS) -> ShareReport:
    """Find every share-group anomaly in ``history`` (see the module docstring), per partition. Events must be
    in time order (a ``History`` records them so; merged journals are sorted by time). The work per offset is
    quadratic in that offset's deliveries, which the delivery count limit and the faults bound."""
    events = history.events if isinstance(history, History) else history
    lock_duration = record_lock_duration_ms / 1000.0
    produced: dict[tuple[int, int], Event] = {}  # (partition, offset) -> its non-transactional ack
    deliveries: dict[tuple[int, int], list[Delivery]] = {}  # (partition, offset) -> in recording order
    delivered_to: dict[tuple[str, int, int], int] = {}  # (member, partition, offset) -> deliveries so far
    settled: dict[tuple[str, int, int], int] = {}  # (member, partition, offset) -> ok-answered acknowledgements
    # (member, partition, offset) -> its unanswered share_acks, first sent first, with the deliveries to the
    # member of the offset recorded before each was sent and the list its answer's time goes into
    unanswered: dict[tuple[str, int, int], deque[tuple[Event, int, list[float]]]] = {}
    acks_of: dict[tuple[str, int, int], list[tuple[Event, list[float]]]] = {}  # -> (share_ack, [answer time])
    answers: list[AckAnswer] = []
    closes: dict[str, float] = {}
    faults: dict[int, list[tuple[float, float]]] = {}  # partition (or ALL_PARTITIONS) -> (start, end) spans
    started: dict[tuple[str, int], float] = {}  # (what, partition) -> start of a lasting fault not yet ended
    finals: dict[int, int] = {}
    states: dict[int, list[Event]] = {}
    report = ShareReport()

    def at(partition: int) -> SharePartitionReport:
        if partition not in report.partitions:
            report.partitions[partition] = SharePartitionReport(partition)
        return report.partitions[partition]

    for e in events:
        kind = e.kind
        if kind == SHARE_ACQUIRE:
            if e.since is None or e.since > e.time or not e.delivery_count or e.delivery_count < 1:
                raise ValueError(f"a share_acquire needs a delivery count >= 1 and since <= its time: {e}")
            d = Delivery(e.process, e.partition, e.offset, e.delivery_count, e.since, e.time)
            deliveries.setdefault((e.partition, e.offset), []).append(d)
            key = (e.process, e.partition, e.offset)
            delivered_to[key] = delivered_to.get(key, 0) + 1
            if e.delivery_count > delivery_count_limit:
                at(e.partition).over_limit.append(OverLimit(d, delivery_count_limit))
        elif kind == SHARE_ACK:
            key = (e.process, e.partition, e.offset)
            answered: list[float] = []
            unanswered.setdefault(key, deque()).append((e, delivered_to.get(key, 0), answered))
            acks_of.setdefault(key, []).append((e, answered))
        elif kind == SHARE_ACK_RESULT:
            for offset in e.offsets:
                key = (e.process, e.partition, offset)
                pending = unanswered.get(key)
                ack, delivered_before, answered = pending.popleft() if pending else (None, 0, [])
                answered.append(e.time)
                answer = AckAnswer(e.process, e.partition, offset, ack.ack_type if ack else None,
                                   ack.time if ack else None, e.time, e.error)
                answers.append(answer)
                if e.error is None:
                    if ack is None or settled.get(key, 0) >= delivered_before:
                        at(e.partition).ack_unacquired.append(AckUnacquired(answer))
                    elif ack.ack_type != RENEW:
                        settled[key] = settled.get(key, 0) + 1
        elif kind == SHARE_CLOSE:
            closes.setdefault(e.process, e.time)
        elif kind == FAULT:
            faults.setdefault(e.partition, []).append((e.time, e.time))
        elif kind == FAULT_START:
            started.setdefault((e.process, e.partition), e.time)
        elif kind == FAULT_END:
            start = started.pop((e.process, e.partition), float("-inf"))
            faults.setdefault(e.partition, []).append((start, e.time))
        elif kind == SHARE_FINAL:
            finals[e.partition] = e.offset
        elif kind == SHARE_STATE:
            states.setdefault(e.partition, []).append(e)
        elif kind == ACK:
            if e.txn is None:  # a transaction's records may be aborted: archived by the share partition
                produced.setdefault((e.partition, e.offset), e)
        elif kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r} in {e}")

    for (_, partition), start in started.items():
        faults.setdefault(partition, []).append((start, float("inf")))
    everywhere = _merged(faults.get(ALL_PARTITIONS, []))
    spans = {p: _merged([*found, *faults.get(ALL_PARTITIONS, [])]) for p, found in faults.items()
             if p != ALL_PARTITIONS}

    def fault_between(partition: int, start: float, end: float) -> float | None:
        """The first moment in [``start``, ``end``] at which ``partition`` has a fault, if any."""
        starts, ends = spans.get(partition, everywhere)
        i = bisect_left(ends, start)  # the first span not over before ``start``
        return max(starts[i], start) if i < len(starts) and starts[i] <= end else None

    terminal: dict[tuple[int, int], AckAnswer] = {}  # (partition, offset) -> earliest ok Accept/Reject answer
    accepted: dict[int, set[int]] = {}
    rejected: dict[int, set[int]] = {}
    for a in answers:
        if a.error is None and a.ack_type in (ACCEPT, REJECT):
            terminal.setdefault((a.partition, a.offset), a)
            (accepted if a.ack_type == ACCEPT else rejected).setdefault(a.partition, set()).add(a.offset)

    archived: dict[int, set[int]] = {p: set(offsets) for p, offsets in rejected.items()}
    for (partition, offset), found in deliveries.items():
        here = at(partition)
        here.deliveries += len(found)
        here.redeliveries += len(found) - 1
        last = max(found, key=lambda d: d.delivery_count)
        if last.delivery_count >= delivery_count_limit and offset not in accepted.get(partition, ()):
            archived.setdefault(partition, set()).add(offset)  # released or expired at the limit
        ends = [_hold_end(d, acks_of, closes, fault_between, lock_duration) for d in found]
        _judge_deliveries(here, found, ends, terminal.get((partition, offset)), closes, fault_between)

    for partition, batch_events in states.items():
        for b in batch_events:
            if b.state == ARCHIVED:
                archived.setdefault(partition, set()).update(range(b.offset, b.end))
    for partition, offsets in accepted.items():
        at(partition).accepted = len(offsets)
    for partition, offsets in rejected.items():
        at(partition).rejected = len(offsets)
    for partition, offsets in archived.items():
        at(partition).archived = len(offsets)
    for partition, spso in finals.items():
        at(partition).start_offset = spso

    if finals:
        _judge_lost(at, produced, deliveries, finals, states)
    return report


def _merged(spans: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Fault spans as disjoint ones in time order: their starts and their ends (both ascending)."""
    starts: list[float] = []
    ends: list[float] = []
    for start, end in sorted(spans):
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def _hold_end(d: Delivery, acks_of, closes: dict[str, float], fault_between, lock_duration: float) -> float:
    """The earliest time delivery ``d``'s lock may have ended: its lock duration from ``since``, an
    acknowledgement of the offset by its member that may have been applied after ``since``, the member's close,
    a fault of the partition."""
    end = d.since + lock_duration
    for ack, answered in acks_of.get((d.member, d.partition, d.offset), ()):
        if ack.time >= end:
            break
        if not answered or answered[0] >= d.since:
            end = min(end, max(ack.time, d.since))
    close = closes.get(d.member)
    if close is not None:
        end = min(end, max(close, d.since))
    fault = fault_between(d.partition, d.since, end)
    return end if fault is None else fault


def _judge_deliveries(here: SharePartitionReport, found: list[Delivery], ends: list[float],
                      terminal: AckAnswer | None, closes: dict[str, float], fault_between) -> None:
    """The deliveries of one offset (``ends``: the earliest each one's lock may have ended): after its
    acknowledgement, count regressions, concurrent holds."""
    inf = float("inf")
    for i, d in enumerate(found):
        if terminal is not None and d.since >= terminal.answered:
            here.delivery_after_ack.append(DeliveryAfterAck(d, terminal))
        for earlier in found[:i]:
            ordered = earlier.time <= d.since
            if d.delivery_count == earlier.delivery_count and (closes.get(earlier.member, inf) <= d.time
                                                               or closes.get(d.member, inf) <= earlier.time):
                continue  # the first released by its member's session end, its count decreased
            if (ordered and d.delivery_count <= earlier.delivery_count) or \
                    d.delivery_count == earlier.delivery_count:
                start, stop = min(earlier.since, d.since), max(earlier.time, d.time)
                if fault_between(d.partition, start, stop) is None:
                    here.count_regression.append(CountRegression(d, earlier))
                    break
        for earlier, end in zip(found[:i], ends[:i], strict=True):
            if earlier.time <= d.since and d.time < end:
                here.concurrent_hold.append(ConcurrentHold(d, earlier, end))
                break


def _judge_lost(at, produced: dict[tuple[int, int], Event], deliveries: dict[tuple[int, int], list[Delivery]],
                finals: dict[int, int], states: dict[int, list[Event]]) -> None:
    """Each record acknowledged to a producer against the final SPSO and state batches of its partition."""
    missing = sorted({p for p, _ in produced} - set(finals))
    if missing:
        raise ValueError(f"records were produced to partitions {missing} without a share_final for them")
    state_at: dict[tuple[int, int], str] = {}
    for partition, batch_events in states.items():
        for b in batch_events:
            for offset in range(max(b.offset, finals.get(partition, 0)), b.end):
                state_at[(partition, offset)] = b.state
    for (partition, offset), ack in sorted(produced.items()):
        # below the SPSO: acknowledged or archived, Kafka keeps no state to say which
        state = BELOW_SPSO if offset < finals[partition] else state_at.get((partition, offset), AVAILABLE)
        if state not in (ACKNOWLEDGED, ARCHIVED, BELOW_SPSO):
            at(partition).share_lost.append(ShareLost(partition, offset, ack.value, ack.process, "not_done", state))
        elif (partition, offset) not in deliveries:
            at(partition).share_lost.append(ShareLost(partition, offset, ack.value, ack.process, "skipped", state))
