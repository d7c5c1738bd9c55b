"""Judge a recorded ``History`` of a Kafka workload: what the log must contain given what clients were told.

One pass over the events fills dicts keyed by value, by (partition, offset) and by (session, partition); the
anomalies are then read off those dicts, so checking is linear in the history size.

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
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import NamedTuple

from tests.jepsen.history import ACK, FAIL, READ, SEND, UNKNOWN_PARTITION, Event, History

ANOMALY_KINDS = ("lost", "duplicated", "inconsistent", "non_monotonic", "ack_mismatch", "phantom")
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
        elif f.name == "reads":
            v = "[" + ", ".join(f"p{r.partition}@{r.offset} by {r.session}" for r in v) + "]"
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
        elif kind == SEND:
            sent.add(e.value)
            if e.partition != UNKNOWN_PARTITION:
                send_partition.setdefault(e.value, e.partition)
        elif kind == ACK:
            sent.add(e.value)
            acks.append(e)
        elif kind == FAIL:
            sent.add(e.value)
            failed.add(e.value)
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

    return report
