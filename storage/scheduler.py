"""Delayed work: deleting ``.deleted`` segment files after ``file.delete.delay.ms``.

Deletion is delayed so that a fetch holding a :class:`~storage.file_records.FileSlice` of a deleted segment
can still ``sendfile`` from it (Kafka's reason too).  That delay protects in-flight I/O, so it runs on a
real monotonic clock (injectable for tests), unlike the log's policies which take ``now_ms`` from the caller.

Nothing runs by itself: :meth:`Scheduler.run_due` is called by the log manager's maintenance (from a
background thread or an executor), and :meth:`Scheduler.run_all` at shutdown.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

__all__ = ["Scheduler"]


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class Scheduler:
    def __init__(self, clock: Callable[[], int] = _monotonic_ms) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, str, Callable[[], object]]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> None:
        due = self.clock() + max(0, delay_ms)
        with self._lock:
            heapq.heappush(self._heap, (due, next(self._seq), name, fn))

    def pending(self) -> int:
        with self._lock:
            return len(self._heap)

    def run_due(self, now_ms: int | None = None) -> int:
        """Run every task whose time has come; returns how many ran."""
        now = self.clock() if now_ms is None else now_ms
        ran = 0
        while True:
            with self._lock:
                if not self._heap or self._heap[0][0] > now:
                    return ran
                _, _, name, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:
                log.exception("Scheduled task %s failed", name)
            ran += 1

    def run_all(self) -> int:
        """Run everything pending now, regardless of its due time (shutdown, tests)."""
        ran = 0
        while True:
            with self._lock:
                if not self._heap:
                    return ran
                _, _, name, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:
                log.exception("Scheduled task %s failed", name)
            ran += 1
