"""What producers and consumers of a workload saw, recorded as it happens, so a checker can judge it afterwards.

Producer and consumer threads share one ``History``; every call appends one ``Event`` under a lock, with its
``time.monotonic()`` taken under the same lock so event order and time order agree. ``dump``/``load`` keep a
history as JSON lines (values as hex) for a postmortem of a failed run.
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
KINDS = frozenset({SEND, ACK, FAIL, READ})

UNKNOWN_PARTITION = -1


@dataclass(frozen=True, slots=True)
class Event:
    """One observation by one client.

    ``process`` is the producer's name for send/ack/fail and the consumer *session* id for read (a session is
    one continuous read position: a new one whenever a consumer is created, re-assigned or seeks).
    """

    kind: str  # "send" | "ack" | "fail" | "read"
    process: str
    partition: int  # UNKNOWN_PARTITION (-1) when not known (send without explicit partition, fail)
    value: bytes
    offset: int | None  # ack and read only
    time: float  # time.monotonic() when recorded
    error: str | None = None  # fail only

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "process": self.process,
            "partition": self.partition,
            "value": self.value.hex(),
            "offset": self.offset,
            "time": self.time,
            "error": self.error,
        }

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
        )


class History:
    """Append-only, thread-safe record of a workload's events."""

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = list(events)

    def _record(self, kind: str, process: str, partition: int, value: bytes, offset: int | None,
                error: str | None = None) -> None:
        with self._lock:
            self._events.append(Event(kind, process, partition, bytes(value), offset, time.monotonic(), error))

    def send(self, process: str, partition: int, value: bytes) -> None:
        """A produce is about to be attempted (partition -1 when the partitioner chooses)."""
        self._record(SEND, process, partition, value, None)

    def ack(self, process: str, partition: int, value: bytes, offset: int) -> None:
        """The broker acknowledged ``value`` at ``offset``: it must be readable there from now on."""
        self._record(ACK, process, partition, value, offset)

    def fail(self, process: str, value: bytes, error: str) -> None:
        """The send was answered with an error: indeterminate, the value may or may not be in the log."""
        self._record(FAIL, process, UNKNOWN_PARTITION, value, None, error)

    def read(self, session: str, partition: int, offset: int, value: bytes) -> None:
        """Consumer session ``session`` received ``value`` at ``partition``/``offset``."""
        self._record(READ, session, partition, value, offset)

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
    def load(cls, path: str | os.PathLike) -> History:
        events = []
        with open(path, encoding="utf-8") as src:
            for lineno, line in enumerate(src, 1):
                if not line.strip():
                    continue
                try:
                    events.append(Event.from_json(json.loads(line)))
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(f"{path}:{lineno}: not a history event: {exc}") from exc
        return cls(events)
