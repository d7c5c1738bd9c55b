"""Python's cyclic collector in a broker process that holds thousands of partitions.

A full collection walks every object the collector tracks, and it runs whenever the long-lived objects have grown
by a quarter since the last one. A node with 10,000 partitions holds about a million of them (logs, segments,
indexes, partitions, the metadata image), so while partitions are created or loaded the collector kept walking the
whole heap: event-loop stalls of 0.5-1.6 s on every node while one CreateTopics of 10,000 partitions was applied
(py-spy: the stalls sat on allocation sites, the collector's signature).

What a large metadata change or a start-up creates lives as long as its partitions. So a large change is applied
with the collector paused, and what then exists is frozen (``gc.freeze``: moved to the permanent generation, never
walked again; a splice, no walk). Later collections walk only what came after. Reference counting frees everything
else as before; what freezing costs is that a reference cycle among frozen objects that later becomes garbage
stays until frozen objects are collected again, which is done (one full walk) after a change that removed many
partitions.

``odradek serve`` turns this on for its process; an embedded broker leaves its host process's collector alone.
"""

from __future__ import annotations

import gc
import logging

from broker.clock import SYSTEM_CLOCK

log = logging.getLogger("odradek.gc")

MANY_PARTITIONS = 1000  # removed by one large change: its frozen objects are collected at settle

_enabled = False
_paused = 0  # nested pauses (several nodes of one process, a start-up and a change at once)
_collect_frozen = False


def enable_for_this_process() -> None:
    global _enabled
    _enabled = True


def pause() -> None:
    """Before creating many long-lived objects: no collection until the matching ``settle``."""
    global _paused
    if not _enabled:
        return
    _paused += 1
    gc.disable()


def collect_frozen_at_settle() -> None:
    """Many partitions went away: their frozen objects are walked once at the next ``settle``."""
    global _collect_frozen
    _collect_frozen = True


def settle() -> None:
    """After a ``pause``: freeze what exists, and let the collector run again once no pause is left."""
    global _paused, _collect_frozen
    if not _enabled or _paused == 0:
        return
    _paused -= 1
    if _paused:
        return
    if _collect_frozen:
        _collect_frozen = False
        started = SYSTEM_CLOCK.monotonic()
        gc.unfreeze()
        found = gc.collect()
        log.info("collected %d objects of removed partitions in %.0f ms", found,
                 (SYSTEM_CLOCK.monotonic() - started) * 1000)
    gc.freeze()  # no count logged: gc.get_freeze_count() walks the permanent generation
    gc.enable()
