"""What producers and consumers of a workload saw, recorded as it happens, so a checker can judge it afterwards.

Producer and consumer threads share one ``History``; every call appends one ``Event`` under a lock, with its
``time.monotonic()`` taken under the same lock so event order and time order agree. ``dump``/``load`` keep a
history as JSON lines (values as hex) for a postmortem of a failed run.

Transactions (KIP-98): a transactional producer records ``txn_begin`` with a name unique to that one transaction
in the history (``txn_begin`` makes one up when not given), tags the sends, acks and fails inside it with
``txn=``, and ends it with ``txn_commit_ok``, ``txn_abort_ok`` or ``txn_end_unknown`` (the commit or abort call
failed or timed out: the outcome is indeterminate). A later ``txn_abort_ok`` of the same transaction settles an
unknown end as aborted. Reads carry the consumer's isolation level; ``read_span`` says a session's position went
over a whole offset range (so it was obliged to return every record it could see there, e.g. the final drain).
For consume-transform-produce, a send names the input record its value was derived from (``source``), and
``committed_offset`` records the group's committed offset on each input partition at the end with that input
partition's end offset. A history describes one topic: the input topic's partitions exist only in ``source``
and ``committed_offset``. Events without the new fields dump and load exactly as before.

Share groups (KIP-932): a share consumer *member* (one name per consumer instance: a new one whenever a consumer is
created) records each record a poll returned as ``share_acquire`` with its delivery count
(``Message.delivery_count()``) and ``since``, the earliest time the broker can have acquired it: the start of the
earliest poll whose ShareFetch may have returned it (librdkafka sends ShareFetch from inside poll; a response that
arrives after that poll returned may be handed out by a later one), or, when unsure, the consumer's creation (sound,
but it proves less). ``share_ack`` when it calls acknowledge (accept, release, reject, or renew; recorded before the
acknowledgement can be sent); ``share_ack_result`` for each per-partition answer: commit_sync's result per partition
with the offsets acknowledged there since the last answer, or the acknowledgement commit callback's offsets with its
error (None for ok; a client-side invalidation such as NOT_LEADER_OR_FOLLOWER is an error too); ``share_close`` when
it starts closing or is killed (its acquired records are released when its connection drops). ``fault`` marks a
moment when share-partition state held only in a leader's memory may be lost (a leader change of one partition that
the workload saw, or -1: of all); ``fault_start`` and ``fault_end`` (paired by what and partition) bound a fault
that lasts: such state may be lost at any time between them (a start without an end lasts to the end of the history,
an end without a start from its beginning). A fault that may remove members from the group (one that can cut them
off from the group coordinator) is a fault of all partitions: their records are released. What to record: any
broker's kill -9 is a fault of all partitions lasting until leadership has settled after its restart (leaders move
back to their preferred replicas later, and the share coordinator, whose loss can make leaders reload state, may
have been on it); a network partition or pause likewise from its start until it has healed and settled; a
client-side disconnect the workload learns of (librdkafka's error_cb) a moment of all partitions. At the end the
workload records the group's share-partition start offset (SPSO) per partition with ``share_final`` and the
persisted state batches above it (``share_state``: first and last offset, state, delivery count), e.g. from
ReadShareGroupState.

``JournaledHistory`` writes each event to a file (or a stream: stdout) as it is recorded, for a client in a
process of its own that may be killed -9 (the exactly-once app of tests/integration/eos_app.py, the share consumers
of tests/integration/share_member.py); the test merges the journals, or ``add``s the streamed events to its own
history as they come.
"""

from __future__ import annotations

import json
import os
import threading
import time
from bisect import insort
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TextIO

SEND = "send"
ACK = "ack"
FAIL = "fail"
READ = "read"
TXN_BEGIN = "txn_begin"
TXN_COMMIT_OK = "txn_commit_ok"
TXN_ABORT_OK = "txn_abort_ok"
TXN_END_UNKNOWN = "txn_end_unknown"
READ_SPAN = "read_span"
COMMITTED_OFFSET = "committed_offset"
SHARE_ACQUIRE = "share_acquire"
SHARE_ACK = "share_ack"
SHARE_ACK_RESULT = "share_ack_result"
SHARE_CLOSE = "share_close"
SHARE_FINAL = "share_final"
SHARE_STATE = "share_state"
FAULT = "fault"
FAULT_START = "fault_start"
FAULT_END = "fault_end"
FAULT_KINDS = frozenset({FAULT, FAULT_START, FAULT_END})
TXN_END_KINDS = frozenset({TXN_COMMIT_OK, TXN_ABORT_OK, TXN_END_UNKNOWN})
SHARE_KINDS = frozenset({SHARE_ACQUIRE, SHARE_ACK, SHARE_ACK_RESULT, SHARE_CLOSE, SHARE_FINAL, SHARE_STATE,
                         *FAULT_KINDS})
KINDS = frozenset({SEND, ACK, FAIL, READ, TXN_BEGIN, *TXN_END_KINDS, READ_SPAN, COMMITTED_OFFSET, *SHARE_KINDS})

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"  # what a read without an isolation level (``None``) means
ISOLATIONS = frozenset({READ_COMMITTED, READ_UNCOMMITTED})

UNKNOWN_PARTITION = -1
ALL_PARTITIONS = -1  # a fault's partition when it may touch every partition's leader

# KIP-932 acknowledgement types (AcknowledgeType: ACCEPT=1, RELEASE=2, REJECT=3; KIP-1222's RENEW=4 keeps the
# record acquired with a new lock) and record states (RecordState)
ACCEPT, RELEASE, REJECT, RENEW = "accept", "release", "reject", "renew"
ACK_TYPES = frozenset({ACCEPT, RELEASE, REJECT, RENEW})
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "available", "acquired", "acknowledged", "archived"
RECORD_STATES = frozenset({AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED})


@dataclass(frozen=True, slots=True)
class Event:
    """One observation by one client.

    ``process`` is the producer's name for send/ack/fail/txn_*, the consumer *session* id for read and
    read_span (a session is one continuous read position: a new one whenever a consumer is created, re-assigned
    or seeks), the consumer group for committed_offset, share_final and share_state, the share consumer member
    for share_acquire, share_ack, share_ack_result and share_close, and what happened for fault*.
    """

    kind: str  # one of KINDS
    process: str
    partition: int  # UNKNOWN_PARTITION (-1) when not known (send without explicit partition, fail, txn_*)
    value: bytes  # b"" for txn_*, read_span and committed_offset
    offset: int | None  # ack, read; read_span's start; committed_offset's committed offset
    time: float  # time.monotonic() when recorded
    error: str | None = None  # fail and txn_end_unknown only
    txn: str | None = None  # the transaction of a send/ack/fail inside one, and of txn_* events
    isolation: str | None = None  # read and read_span: READ_COMMITTED or READ_UNCOMMITTED (None: uncommitted)
    end: int | None = None  # read_span, share_state: first offset past the range; committed_offset: the input's end
    source: tuple[int, int, bytes] | None = None  # send: the input (partition, offset, value) it was derived from
    delivery_count: int | None = None  # share_acquire: the record's delivery count; share_state: the batch's
    since: float | None = None  # share_acquire: the earliest time the broker can have acquired the record
    ack_type: str | None = None  # share_ack: ACCEPT, RELEASE, REJECT or RENEW
    offsets: tuple[int, ...] | None = None  # share_ack_result: the offsets the answer is for
    state: str | None = None  # share_state: the batch's record state (RECORD_STATES)

    @property
    def read_committed(self) -> bool:
        return self.isolation == READ_COMMITTED

    def to_json(self) -> dict:
        out = {
            "kind": self.kind,
            "process": self.process,
            "partition": self.partition,
            "value": self.value.hex(),
            "offset": self.offset,
            "time": self.time,
            "error": self.error,
        }
        # only when set: old events dump as before
        for name in ("txn", "isolation", "end", "delivery_count", "since", "ack_type", "state"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.source is not None:
            partition, offset, value = self.source
            out["source"] = [partition, offset, value.hex()]
        if self.offsets is not None:
            out["offsets"] = list(self.offsets)
        return out

    @classmethod
    def from_json(cls, obj: dict) -> Event:
        if obj["kind"] not in KINDS:
            raise ValueError(f"unknown event kind {obj['kind']!r}")
        return cls(
            kind=obj["kind"],
            process=obj["process"],
            partition=obj["partition"],
            value=bytes.fromhex(obj["value"]),
            offset=obj["offset"],
            time=obj["time"],
            error=obj.get("error"),
            txn=obj.get("txn"),
            isolation=obj.get("isolation"),
            end=obj.get("end"),
            source=(obj["source"][0], obj["source"][1], bytes.fromhex(obj["source"][2])) if obj.get("source")
            else None,
            delivery_count=obj.get("delivery_count"),
            since=obj.get("since"),
            ack_type=obj.get("ack_type"),
            offsets=tuple(obj["offsets"]) if obj.get("offsets") is not None else None,
            state=obj.get("state"),
        )


class History:
    """Append-only, thread-safe record of a workload's events."""

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = list(events)
        self._txn_count = len(self._events)  # names made up by txn_begin stay unique after a load

    def _record(self, kind: str, process: str, partition: int, value: bytes, offset: int | None,
                error: str | None = None, **extra) -> None:
        with self._lock:
            self._events.append(Event(kind, process, partition, bytes(value), offset, time.monotonic(), error,
                                      **extra))

    def add(self, event: Event) -> None:
        """An event another process recorded (its time from the host's one monotonic clock), put in time order:
        it may arrive after events recorded here later than it happened."""
        with self._lock:
            insort(self._events, event, key=lambda e: e.time)

    def send(self, process: str, partition: int, value: bytes, txn: str | None = None,
             source: tuple[int, int, bytes] | None = None) -> None:
        """A produce is about to be attempted (partition -1 when the partitioner chooses); inside transaction
        ``txn`` if given; derived from input record ``source`` = (partition, offset, value) if given."""
        if source is not None:
            source = (source[0], source[1], bytes(source[2]))
        self._record(SEND, process, partition, value, None, txn=txn, source=source)

    def ack(self, process: str, partition: int, value: bytes, offset: int, txn: str | None = None) -> None:
        """The broker acknowledged ``value`` at ``offset``: it must be readable there from now on (inside a
        transaction: it is in the log there, visible to read_committed once the transaction commits)."""
        self._record(ACK, process, partition, value, offset, txn=txn)

    def fail(self, process: str, value: bytes, error: str, txn: str | None = None) -> None:
        """The send was answered with an error: indeterminate, the value may or may not be in the log."""
        self._record(FAIL, process, UNKNOWN_PARTITION, value, None, error, txn=txn)

    def read(self, session: str, partition: int, offset: int, value: bytes, isolation: str | None = None) -> None:
        """Consumer session ``session`` received ``value`` at ``partition``/``offset``; ``isolation`` is its
        consumer's isolation level (None: read_uncommitted, as before transactions)."""
        _check_isolation(isolation)
        self._record(READ, session, partition, value, offset, isolation=isolation)

    def read_span(self, session: str, partition: int, start: int, end: int, isolation: str | None = None) -> None:
        """Session ``session``'s position on ``partition`` went from ``start`` to ``end``: it returned every
        record it could see in [start, end) (recorded when, e.g., the final drain reaches the end offset)."""
        _check_isolation(isolation)
        self._record(READ_SPAN, session, partition, b"", start, isolation=isolation, end=end)

    def txn_begin(self, process: str, txn: str | None = None) -> str:
        """Producer ``process`` begins a transaction; returns its name (unique in this history), made up as
        ``process#n`` when not given."""
        with self._lock:
            self._txn_count += 1
            txn = txn if txn is not None else f"{process}#{self._txn_count}"
        self._record(TXN_BEGIN, process, UNKNOWN_PARTITION, b"", None, txn=txn)
        return txn

    def txn_commit_ok(self, process: str, txn: str) -> None:
        """commit_transaction returned: every record of ``txn`` is visible to read_committed consumers."""
        self._record(TXN_COMMIT_OK, process, UNKNOWN_PARTITION, b"", None, txn=txn)

    def txn_abort_ok(self, process: str, txn: str) -> None:
        """abort_transaction returned: no record of ``txn`` is ever visible to read_committed consumers."""
        self._record(TXN_ABORT_OK, process, UNKNOWN_PARTITION, b"", None, txn=txn)

    def txn_end_unknown(self, process: str, txn: str, error: str) -> None:
        """The commit (or abort) call failed or timed out: ``txn`` is committed or aborted, unknown which."""
        self._record(TXN_END_UNKNOWN, process, UNKNOWN_PARTITION, b"", None, error, txn=txn)

    def committed_offset(self, group: str, input_partition: int, offset: int, input_end: int) -> None:
        """At the end of a consume-transform-produce run: ``group``'s committed offset on the input topic's
        ``input_partition``, and that partition's end offset (the two must be equal once all is processed)."""
        self._record(COMMITTED_OFFSET, group, input_partition, b"", offset, end=input_end)

    def share_acquire(self, member: str, partition: int, offset: int, value: bytes, delivery_count: int,
                      since: float) -> None:
        """A poll of share consumer ``member`` returned the record at ``partition``/``offset`` with its
        ``delivery_count``; the broker acquired it for ``member`` no earlier than ``since`` (the poll's start when
        the client fetches only inside poll, else the consumer's creation)."""
        self._record(SHARE_ACQUIRE, member, partition, value, offset, delivery_count=delivery_count, since=since)

    def share_ack(self, member: str, partition: int, offset: int, ack_type: str) -> None:
        """``member`` acknowledges the record it acquired at ``partition``/``offset`` (recorded before the
        acknowledgement can be sent: call it just before ``acknowledge``)."""
        if ack_type not in ACK_TYPES:
            raise ValueError(f"unknown acknowledgement type {ack_type!r}")
        self._record(SHARE_ACK, member, partition, b"", offset, ack_type=ack_type)

    def share_ack_result(self, member: str, partition: int, offsets: Iterable[int], error: str | None) -> None:
        """The broker answered ``member``'s acknowledgements of ``offsets`` on ``partition``: ``error`` None for
        ok (they took effect), else its name (indeterminate, as a failed send)."""
        self._record(SHARE_ACK_RESULT, member, partition, b"", None, error, offsets=tuple(sorted(offsets)))

    def share_close(self, member: str) -> None:
        """``member`` starts closing, leaves the group or is killed: the records it holds may be released from
        now on."""
        self._record(SHARE_CLOSE, member, UNKNOWN_PARTITION, b"", None)

    def fault(self, what: str, partition: int = ALL_PARTITIONS) -> None:
        """Share-partition state held in a leader's memory may have been lost at this moment: ``partition``'s
        leader changed, or (``ALL_PARTITIONS``) a broker was killed or restarted."""
        self._record(FAULT, what, partition, b"", None)

    def fault_start(self, what: str, partition: int = ALL_PARTITIONS) -> None:
        """A fault that lasts starts (e.g. a broker partitioned away or paused): until its ``fault_end``,
        ``partition``'s (or every partition's) leader may change and members may be removed at any moment."""
        self._record(FAULT_START, what, partition, b"", None)

    def fault_end(self, what: str, partition: int = ALL_PARTITIONS) -> None:
        """The fault ``what`` that ``fault_start`` began on ``partition`` is over (healed, resumed)."""
        self._record(FAULT_END, what, partition, b"", None)

    def share_final(self, group: str, partition: int, start_offset: int) -> None:
        """At the end: share group ``group``'s share-partition start offset (SPSO) on ``partition``; every record
        below it is acknowledged or archived."""
        self._record(SHARE_FINAL, group, partition, b"", start_offset)

    def share_state(self, group: str, partition: int, first: int, last: int, state: str,
                    delivery_count: int) -> None:
        """At the end: a persisted state batch above the SPSO: records ``first``..``last`` (inclusive) are in
        ``state`` with ``delivery_count``; offsets above the SPSO in no batch are available."""
        if state not in RECORD_STATES:
            raise ValueError(f"unknown record state {state!r}")
        self._record(SHARE_STATE, group, partition, b"", first, end=last + 1, state=state,
                     delivery_count=delivery_count)

    @property
    def events(self) -> list[Event]:
        """A copy, safe to iterate while workload threads keep recording."""
        with self._lock:
            return list(self._events)

    def dump(self, path: str | os.PathLike) -> None:
        """One JSON object per line, values as hex, in recording order."""
        with open(path, "w", encoding="utf-8") as out:
            for event in self.events:
                out.write(json.dumps(event.to_json(), separators=(",", ":")))
                out.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike, torn_tail: bool = False) -> History:
        """A history from ``dump``'s lines; ``torn_tail`` allows a last line without its newline (a journal
        whose process was killed mid-write), which is then dropped."""
        events = []
        with open(path, encoding="utf-8") as src:
            lines = src.read().split("\n")
        last = len(lines)
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                events.append(Event.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                if torn_tail and lineno == last:
                    break
                raise ValueError(f"{path}:{lineno}: not a history event: {exc}") from exc
        return cls(events)


class JournaledHistory(History):
    """A ``History`` that also appends each event to ``path`` (or writes it to an open text stream, e.g.
    ``sys.stdout`` read by the test through a pipe) as it is recorded, one line written and flushed per event: a
    client process that is killed -9 leaves everything it recorded before (all but possibly a torn last line;
    ``History.load(path, torn_tail=True)``). Event times are ``time.monotonic()``, one clock for every process of
    a Linux host, so journals of several processes merge by time."""

    def __init__(self, path: str | os.PathLike | TextIO) -> None:
        super().__init__()
        self._owned = not hasattr(path, "write")
        # open for the process's life
        self._journal = open(path, "a", encoding="utf-8") if self._owned else path  # noqa: SIM115

    def _record(self, kind: str, process: str, partition: int, value: bytes, offset: int | None,
                error: str | None = None, **extra) -> None:
        with self._lock:
            event = Event(kind, process, partition, bytes(value), offset, time.monotonic(), error, **extra)
            self._events.append(event)
            self._journal.write(json.dumps(event.to_json(), separators=(",", ":")) + "\n")
            self._journal.flush()

    def close(self) -> None:
        if self._owned:
            self._journal.close()


def _check_isolation(isolation: str | None) -> None:
    if isolation is not None and isolation not in ISOLATIONS:
        raise ValueError(f"unknown isolation level {isolation!r}")
