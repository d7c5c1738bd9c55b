"""The broker process's one clock: wall time for timestamps and deadlines, monotonic time for durations.

Everything in broker/ reads time through the ``Clock`` it was given; storage/ and cluster/ receive
``now_ms`` as an argument. Tests swap in a ``ManualClock`` to drive timers without sleeping.
"""

from __future__ import annotations

import time


class Clock:
    """Kafka's ``Time``: ``milliseconds()`` (wall clock) and ``nanoseconds()`` (monotonic)."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = Clock()


class ManualClock(Clock):
    """A clock that moves only when told to (Kafka's MockTime)."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._mono = 0.0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._mono

    def advance(self, ms: int) -> None:
        self._now_ms += ms
        self._mono += ms / 1000.0
