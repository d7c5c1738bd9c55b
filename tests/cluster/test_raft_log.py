"""MemoryLog with entries that span offsets (one record batch per entry)."""

from cluster.raft.log import Entry, MemoryLog, Snapshot, Validation


def _log() -> MemoryLog:
    log = MemoryLog()
    log.append([Entry(0, 1, "a", count=3), Entry(3, 1, "b", count=2), Entry(5, 2, "c", count=4)])
    return log


def test_offsets_inside_a_batch_find_the_batch():
    log = _log()
    assert log.end_offset == 9
    assert [log.entry(o).data for o in (0, 2, 3, 4, 5, 8)] == ["a", "a", "b", "b", "c", "c"]
    assert log.entry(9) is None
    assert [e.data for e in log.read(4, 10)] == ["b", "c"]
    assert [e.data for e in log.read_until(0, 7)] == ["a", "b"]  # "c" ends at 9: not whole below 7


def test_truncation_never_splits_a_batch_and_crash_drops_unflushed_batches():
    log = _log()
    log.truncate_to(4)
    assert log.end_offset == 3
    log = _log()
    log.flushed_offset = 6
    log.crash()
    assert log.end_offset == 5


def test_epoch_boundaries_and_snapshots_with_batches():
    log = _log()
    assert log.end_offset_for_epoch(1) == (1, 5)
    assert log.validate_offset_and_epoch(9, 1).kind is Validation.DIVERGING
    log.create_snapshot(Snapshot(5, 1, "state"))
    assert log.start_offset == 5 and [e.data for e in log.entries] == ["c"]
    assert log.validate_offset_and_epoch(3, 1).kind is Validation.SNAPSHOT
