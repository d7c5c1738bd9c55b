"""What a partition holds open while it is not being used, bounded.

A partition's active segment keeps its ``.log`` descriptor open: it is appended to and read at the tail all the
time.  Everything else is opened on first use and given back when idle or when there are too many:

* the ``.log`` descriptors of inactive segments (:data:`INACTIVE_SEGMENT_FILES`: at most
  :data:`MAX_OPEN_INACTIVE_SEGMENTS`, least recently used closed first), so a node holds at most one descriptor per
  hosted partition plus that fixed number;
* index mappings (:data:`INDEX_MAPPINGS`: no count limit, as they hold no descriptor; unmapped when idle, so
  memory and the ``vm.max_map_count`` entries follow what is read, as with Kafka's lazy indexes, KAFKA-7283).

A holder registers with :meth:`HandleCache.touch` on each use and implements :meth:`Releasable.try_release`, which
gives the resource back unless it is in use right now (it returns False then and stays registered).  The log
manager's ``release-idle-handles`` task calls :meth:`HandleCache.release_idle`.

When ``RLIMIT_NOFILE`` cannot hold every partition, :func:`descriptor_budget` says how many partition logs may
open (:attr:`DescriptorBudget.log_slots`): room is left for the inactive segments and :data:`SPARE_DESCRIPTORS`,
so the partitions past it go offline rather than the node running out in the middle of an append, a checkpoint,
the metadata log or an accept.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections import OrderedDict
from typing import NamedTuple, Protocol

__all__ = ["HandleCache", "Releasable", "INACTIVE_SEGMENT_FILES", "INDEX_MAPPINGS", "MAX_OPEN_INACTIVE_SEGMENTS",
           "IDLE_RELEASE_MS", "SPARE_DESCRIPTORS", "DescriptorBudget", "descriptor_budget", "open_descriptors"]

#: inactive segments' ``.log`` files held open at once (the fixed part of the descriptor budget)
MAX_OPEN_INACTIVE_SEGMENTS = 256
#: descriptors kept for everything but the logs: client and peer connections, checkpoints, the metadata log
RESERVED_DESCRIPTORS = 1024
#: descriptors never given to partition logs, however tight the limit: client connections, checkpoint and snapshot
#: writes, segment rolls, index mappings being made, the metadata log (a node in use needs far fewer than
#: :data:`RESERVED_DESCRIPTORS`; the budget asks for that much, the guard refuses logs only below this)
SPARE_DESCRIPTORS = 128
#: a handle unused this long is given back (Kafka's ``file.delete.delay.ms`` default: a slice handed to a response
#: is used long before)
IDLE_RELEASE_MS = 60_000


class Releasable(Protocol):
    def try_release(self) -> bool:
        """Give the resource back now, unless it is in use (then False); the holder reopens it on its next use."""


class HandleCache:
    """An LRU of open handles with an optional capacity; thread-safe (logs are used from several threads)."""

    def __init__(self, name: str, capacity: int | None) -> None:
        self.name = name
        self.capacity = capacity
        self._held: OrderedDict[int, tuple[Releasable, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def touch(self, holder: Releasable) -> None:
        """``holder`` used its handle now (and opened it, if it was not registered)."""
        key = id(holder)
        now = time.monotonic()
        with self._lock:
            held = self._held
            if key in held:
                held[key] = (holder, now)
                held.move_to_end(key)
                return
            held[key] = (holder, now)
            if self.capacity is None or len(held) <= self.capacity:
                return
            victims = [held.popitem(last=False)[1][0] for _ in range(len(held) - self.capacity)]
        self._release(victims, now)

    def forget(self, holder: Releasable) -> None:
        """``holder`` closed its handle itself."""
        with self._lock:
            self._held.pop(id(holder), None)

    def release_idle(self, idle_ms: int = IDLE_RELEASE_MS) -> int:
        """Give back every handle unused for ``idle_ms``; returns how many went."""
        now = time.monotonic()
        cutoff = now - idle_ms / 1000.0
        with self._lock:
            victims = []
            held = self._held
            while held:
                key, (holder, used) = next(iter(held.items()))
                if used > cutoff:
                    break
                del held[key]
                victims.append(holder)
        return self._release(victims, now)

    def _release(self, victims: list[Releasable], now: float) -> int:
        """Release outside the lock (a holder's release takes its own lock); one in use right now stays, as used."""
        released = 0
        for v in victims:
            if v.try_release():
                released += 1
            else:
                with self._lock:
                    self._held[id(v)] = (v, now)
        return released


INACTIVE_SEGMENT_FILES = HandleCache("inactive segment files", MAX_OPEN_INACTIVE_SEGMENTS)
INDEX_MAPPINGS = HandleCache("index mappings", None)


class DescriptorBudget(NamedTuple):
    partitions: int
    inactive_segments: int
    reserved: int
    needed: int
    soft_limit: int
    hard_limit: int
    raised_from: int | None  # the soft limit before it was raised, if it was
    in_use: int  # descriptors open when the budget was made but the logs' (the metadata log, the listener, ...)
    log_slots: int | None  # partition logs that may open without eating into the rest (None: no limit)


def open_descriptors() -> int:
    """How many descriptors this process has open (0 where the system does not list them)."""
    for d in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(0, len(os.listdir(d)) - 1)  # the listing's own descriptor is in it
        except OSError:
            continue
    return 0


def descriptor_budget(partitions: int, held: int = 0) -> DescriptorBudget:
    """What ``partitions`` logs may hold open at most, against ``RLIMIT_NOFILE``; the soft limit is raised towards
    the hard one when the budget does not fit. ``log_slots``: how many partition logs fit beside what else is open
    now (``held`` of the open descriptors are logs'), the inactive segments and :data:`SPARE_DESCRIPTORS`."""
    needed = partitions + MAX_OPEN_INACTIVE_SEGMENTS + RESERVED_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised_from = None
    if needed > soft and (hard == resource.RLIM_INFINITY or hard > soft):
        target = needed if hard == resource.RLIM_INFINITY else min(hard, max(needed, soft))
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            raised_from, soft = soft, target
        except (ValueError, OSError):
            pass  # not allowed here: the warning names the limit as it is
    in_use = max(0, open_descriptors() - held)
    slots = None if soft == resource.RLIM_INFINITY else max(0, soft - in_use - MAX_OPEN_INACTIVE_SEGMENTS
                                                                 - SPARE_DESCRIPTORS)
    return DescriptorBudget(partitions, MAX_OPEN_INACTIVE_SEGMENTS, RESERVED_DESCRIPTORS, needed, soft,
                            hard if hard != resource.RLIM_INFINITY else -1, raised_from, in_use, slots)
