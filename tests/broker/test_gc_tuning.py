"""broker/gc_tuning.py: a large change runs with the collector paused and what exists after it is frozen; pauses
nest; an embedded broker (not ``odradek serve``) leaves the host process's collector alone."""

from __future__ import annotations

import gc
import weakref

import pytest

import broker.gc_tuning as gc_tuning


@pytest.fixture
def serve_process(monkeypatch):
    """As ``odradek serve`` sets it, undone after the test (the collector's state too)."""
    was_enabled = gc.isenabled()
    monkeypatch.setattr(gc_tuning, "_enabled", True)
    monkeypatch.setattr(gc_tuning, "_paused", 0)
    monkeypatch.setattr(gc_tuning, "_collect_frozen", False)
    yield
    gc.unfreeze()
    if was_enabled:
        gc.enable()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_large_change_is_made_with_the_collector_paused_and_frozen_after(serve_process):
    gc.unfreeze()
    gc_tuning.pause()
    assert not gc.isenabled()
    kept = [_Cycle() for _ in range(100)]  # long-lived objects made meanwhile
    gc_tuning.pause()  # another node of the process, or a start-up and a change at once
    gc_tuning.settle()
    assert not gc.isenabled()  # one pause is left
    gc_tuning.settle()
    assert gc.isenabled() and gc.get_freeze_count() > len(kept)
    walked = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
    assert not any(id(k) in walked for k in kept)  # frozen: in no generation the collector walks
    gc_tuning.settle()  # a settle without a pause changes nothing
    assert gc.isenabled()


def test_after_many_partitions_went_away_their_frozen_cycles_are_collected(serve_process):
    gc.unfreeze()
    gc_tuning.pause()
    doomed = [_Cycle() for _ in range(50)]
    refs = [weakref.ref(d) for d in doomed]
    gc_tuning.settle()
    del doomed
    gc.collect()
    assert all(r() is not None for r in refs)  # cycles among frozen objects: not collected while frozen
    gc_tuning.pause()
    gc_tuning.collect_frozen_at_settle()
    gc_tuning.settle()
    assert all(r() is None for r in refs) and gc.isenabled()


def test_an_embedded_broker_leaves_the_collector_alone(monkeypatch):
    monkeypatch.setattr(gc_tuning, "_enabled", False)
    frozen = gc.get_freeze_count()
    enabled = gc.isenabled()
    gc_tuning.pause()
    assert gc.isenabled() == enabled
    gc_tuning.settle()
    assert gc.get_freeze_count() == frozen
