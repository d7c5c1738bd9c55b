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

``JournaledHistory`` writes each event to a file as it is recorded, for a client in a process of its own that
may be killed -9 (the exactly-once app of tests/integration/eos_app.py); the test merges the journals.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

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
TXN_END_KINDS = frozenset({TXN_COMMIT_OK, TXN_ABORT_OK, TXN_END_UNKNOWN})
KINDS = frozenset({SEND, ACK, FAIL, READ, TXN_BEGIN, *TXN_END_KINDS, READ_SPAN, COMMITTED_OFFSET})

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"  # what a read without an isolation level (``None``) means
ISOLATIONS = frozenset({READ_COMMITTED, READ_UNCOMMITTED})

UNKNOWN_PARTITION = -1


@dataclass(frozen=True, slots=True)
class Event:
    """One observation by one client.

    ``process`` is the producer's name for send/ack/fail/txn_*, the consumer *session* id for read and
    read_span (a session is one continuous read position: a new one whenever a consumer is created, re-assigned
    or seeks) and the consumer group for committed_offset.
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
    end: int | None = None  # read_span: first offset past the range; committed_offset: the input partition's end
    source: tuple[int, int, bytes] | None = None  # send: the input (partition, offset, value) it was derived from

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
        for name in ("txn", "isolation", "end"):  # only when set: old events dump as before
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.source is not None:
            partition, offset, value = self.source
            out["source"] = [partition, offset, value.hex()]
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
    """A ``History`` that also appends each event to ``path`` as it is recorded, one line written and flushed
    per event: a client process that is killed -9 leaves everything it recorded before (all but possibly a
    torn last line; ``History.load(path, torn_tail=True)``). Event times are ``time.monotonic()``, one clock for
    every process of a Linux host, so journals of several processes merge by time."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__()
        self._journal = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life

    def _record(self, kind: str, process: str, partition: int, value: bytes, offset: int | None,
                error: str | None = None, **extra) -> None:
        with self._lock:
            event = Event(kind, process, partition, bytes(value), offset, time.monotonic(), error, **extra)
            self._events.append(event)
            self._journal.write(json.dumps(event.to_json(), separators=(",", ":")) + "\n")
            self._journal.flush()

    def close(self) -> None:
        self._journal.close()


def _check_isolation(isolation: str | None) -> None:
    if isolation is not None and isolation not in ISOLATIONS:
        raise ValueError(f"unknown isolation level {isolation!r}")
