"""MemoryLog with entries that span offsets (one record batch per entry)."""

import pytest

from cluster.raft.log import Entry, MemoryLog, Snapshot, Validation, ValidOffsetAndEpoch


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
    assert log.start_offset == 0 and len(log.entries) == 3  # kept until retention cleans it
    assert log.validate_offset_and_epoch(3, 1).kind is Validation.VALID
    assert not log.clean(lambda s: True)  # the latest snapshot and the log after the oldest one always stay
    assert log.delete_before_snapshot(log.latest_snapshot)
    assert log.start_offset == 5 and [e.data for e in log.entries] == ["c"]
    assert log.validate_offset_and_epoch(3, 1).kind is Validation.SNAPSHOT


def test_cleaning_keeps_the_latest_snapshot_and_moves_the_start_to_a_snapshot():
    """KafkaMetadataLogTest.testAdvanceLogStartOffsetAfterCleaning / testSnapshotDeletionWithInvalidSnapshotState:
    the start moves only to a kept snapshot, oldest first, while the predicate allows; a follower whose last
    epoch is older than the oldest snapshot's gets the latest snapshot (validateOffsetAndEpoch)."""
    log = MemoryLog()
    log.append([Entry(i, 1 + i // 4, f"e{i}") for i in range(12)])
    for end in (4, 8, 10):
        log.create_snapshot(Snapshot(end, log.entry(end - 1).epoch, f"s{end}"))
    with pytest.raises(ValueError):
        log.create_snapshot(Snapshot(6, 2, "older than the latest"))
    assert log.validate_offset_and_epoch(0, 0).kind is Validation.VALID
    seen = []
    assert log.clean(lambda s: seen.append(s.end_offset) or s.end_offset < 8)
    assert seen == [4, 8] and log.start_offset == 8 and [s.end_offset for s in log.snapshots] == [8, 10]
    assert log.validate_offset_and_epoch(6, 2) == ValidOffsetAndEpoch(Validation.SNAPSHOT, 10, 3)
    assert log.validate_offset_and_epoch(9, 3).kind is Validation.VALID
    assert log.validate_offset_and_epoch(8, 1).kind is Validation.SNAPSHOT  # epoch older than the oldest snapshot
    assert not log.delete_before_snapshot(Snapshot(12, 3, "not kept"))
    assert log.clean(lambda s: True) and log.start_offset == 10 and len(log.snapshots) == 1
    assert not log.clean(lambda s: True)
