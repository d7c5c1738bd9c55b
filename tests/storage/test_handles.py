"""What partitions hold open (issue 31, item 5): one descriptor per hosted partition plus a fixed number.

Index mappings keep no descriptor and are unmapped when idle; inactive segments' files are opened on first use,
at most ``MAX_OPEN_INACTIVE_SEGMENTS`` at once, and given back when idle; a clean start-up opens nothing but the
active segments; a slice handed out keeps its descriptor open after its segment let go of it. Under an
``RLIMIT_NOFILE`` too low for every partition, the logs past its room go offline (one line each) and keep their
checkpoint entries.
"""

from __future__ import annotations

import errno
import os

import pytest

from storage import handles
from storage.config import LogConfig, LogManagerConfig
from storage.errors import KafkaStorageError
from storage.fileio import FileIO
from storage.log_manager import LogManager
from tests.storage.helpers import NoSyncFileIO, all_batches, batch, open_log

PARTITIONS = 40
SEGMENT_BYTES = {"log.segment.bytes": "2000"}  # ~7 batches of 250 bytes per segment


def open_fds() -> set[str]:
    """Paths of this process's open descriptors that are log files (sockets and pipes left out)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # closed while listing
    return out


def log_fds(root: str) -> list[str]:
    return [p for p in open_fds() if p.startswith(root)]


def mapped_indexes(root: str) -> list[str]:
    with open("/proc/self/maps") as f:
        return [line.split()[-1] for line in f if root in line]


@pytest.fixture
def small_cache(monkeypatch):
    """A cache of 8 inactive segment files, so the bound shows with a few partitions."""
    monkeypatch.setattr(handles.INACTIVE_SEGMENT_FILES, "capacity", 8)
    return handles.INACTIVE_SEGMENT_FILES


def fill(root: str) -> dict[tuple[str, int], list[bytes]]:
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), SEGMENT_BYTES, file_io=NoSyncFileIO())
    lm.startup(0)
    written = {}
    for p in range(PARTITIONS):
        lg = lm.get_or_create_log("t", p, now_ms=0)
        for i in range(30):
            lg.append_as_leader(batch(1, value_size=200, tag=i), 0, now_ms=0)
        lg.update_high_watermark(lg.log_end_offset)
        assert len(lg.local_log.segments.values()) >= 4
        written[("t", p)] = all_batches(lg)
    lm.shutdown(0)
    return written


def test_a_clean_start_opens_only_the_active_segments(tmp_path, small_cache):
    root = str(tmp_path / "logs")
    written = fill(root)
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), SEGMENT_BYTES, file_io=NoSyncFileIO())
    lm.startup(0)
    try:
        files = log_fds(root)
        # one .log per partition (the active segment) and the dir's .lock: no index, no inactive segment
        assert sorted(p.rsplit(".", 1)[-1] for p in files) == ["lock"] + ["log"] * PARTITIONS
        active = {s.offset_index_path for lg in lm.all_logs() for s in lg.local_log.segments.values()[-1:]} | \
            {s.time_index_path for lg in lm.all_logs() for s in lg.local_log.segments.values()[-1:]}
        assert set(mapped_indexes(root)) <= active  # at most the active segments' indexes are mapped
        for lg in lm.all_logs():
            inactive = lg.local_log.segments.values()[:-1]
            assert not any(s.log.is_open or s._offset_index is not None for s in inactive)

        # reading every partition from the start opens inactive segments: never more than the cache holds
        for tp, batches in written.items():
            lg = lm.get_log(*tp)
            lg.update_high_watermark(lg.log_end_offset)
            assert all_batches(lg) == batches
            assert len(log_fds(root)) <= 1 + PARTITIONS + small_cache.capacity
        assert len(small_cache) <= small_cache.capacity

        # idle: the inactive files go, and every index mapping
        small_cache.release_idle(idle_ms=0)
        handles.INDEX_MAPPINGS.release_idle(idle_ms=0)
        assert len(log_fds(root)) == 1 + PARTITIONS
        assert not mapped_indexes(root)
        # and everything reads back the same, mapping and opening again
        for tp, batches in written.items():
            assert all_batches(lm.get_log(*tp)) == batches
            assert lm.get_log(*tp).fetch_offset_by_timestamp(1000) is not None
    finally:
        lm.shutdown(0)
    assert not log_fds(root)


def test_a_slice_keeps_its_descriptor_after_the_segment_lets_go(tmp_path, small_cache):
    lg = open_log(str(tmp_path), LogConfig.from_props({"segment.bytes": 2000}))
    for i in range(30):
        lg.append_as_leader(batch(1, value_size=200, tag=i), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    first = lg.local_log.segments.values()[0]
    served = lg.read(0, 1 << 20).records  # a fetch answer not yet sent, from an inactive segment
    expected = served.read()
    assert first.log.releasable and first.log.is_open
    small_cache.release_idle(idle_ms=0)
    assert not first.log.is_open  # the segment let go ...
    assert os.readlink(f"/proc/self/fd/{served.fd}") == first.log.path  # ... the slice did not
    assert served.read() == expected
    fd = served.fd
    del served
    assert not os.path.exists(f"/proc/self/fd/{fd}") or os.readlink(f"/proc/self/fd/{fd}") != first.log.path
    lg.close()


class _NoIndexDescriptors(NoSyncFileIO):
    """Out of descriptors for index files (EMFILE), as when ``ulimit -n`` is reached."""

    def __init__(self) -> None:
        self.failing = False

    def open(self, path, flags, mode=0o644):
        if self.failing and path.endswith((".index", ".timeindex")):
            raise OSError(errno.EMFILE, "Too many open files")
        return super().open(path, flags, mode)


def test_an_index_that_cannot_be_mapped_costs_an_entry_not_the_append(tmp_path, caplog):
    io = _NoIndexDescriptors()
    lg = open_log(str(tmp_path), file_io=io)
    lg.append_as_leader(batch(1, value_size=5000, tag=0), 0, now_ms=0)
    handles.INDEX_MAPPINGS.release_idle(idle_ms=0)
    io.failing = True
    for i in range(1, 6):  # each batch is past index.interval.bytes: each wants an index entry
        lg.append_as_leader(batch(1, value_size=5000, tag=i), 0, now_ms=0)
    assert lg.log_end_offset == 6
    assert [r for r in caplog.records if "Could not add an index entry" in r.getMessage()]
    io.failing = False
    lg.update_high_watermark(lg.log_end_offset)
    assert len(all_batches(lg)) == 6
    lg.close()


def test_the_descriptor_budget_is_logged_against_the_limit(tmp_path, caplog):
    caplog.set_level("INFO", logger="storage")
    lm = LogManager(LogManagerConfig(log_dirs=(str(tmp_path),)), file_io=FileIO())
    lm.startup(0)
    budget = lm.log_descriptor_budget()
    assert budget.needed == handles.MAX_OPEN_INACTIVE_SEGMENTS + handles.RESERVED_DESCRIPTORS
    assert [r for r in caplog.records if r.getMessage().startswith("File descriptors: 0 partitions")]
    lm.shutdown(0)


def test_logs_past_the_descriptor_budget_go_offline_and_keep_their_checkpoints(tmp_path, monkeypatch, caplog):
    root = str(tmp_path / "logs")
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), file_io=NoSyncFileIO())
    lm.startup(0)
    for p in range(6):
        lg = lm.get_or_create_log("t", p, now_ms=0)
        for i in range(3):
            lg.append_as_leader(batch(1, tag=i), 0, now_ms=0)
        lg.update_high_watermark(lg.log_end_offset)
    assert lm.get_log("t", 5).maybe_increment_log_start_offset(2)  # DeleteRecords
    lm.shutdown(0)

    # RLIMIT_NOFILE leaves room for three partition logs beside what is open, the inactive segments and the spare
    in_use = 10
    soft = in_use + handles.MAX_OPEN_INACTIVE_SEGMENTS + handles.SPARE_DESCRIPTORS + 3
    monkeypatch.setattr(handles, "open_descriptors", lambda: in_use)
    monkeypatch.setattr(handles.resource, "getrlimit", lambda which: (soft, soft))
    caplog.set_level("INFO", logger="storage")
    lm2 = LogManager(LogManagerConfig(log_dirs=(root,)), file_io=NoSyncFileIO())
    lm2.startup(0)
    try:
        assert sorted(lm2.current_logs()) == [("t", 0), ("t", 1), ("t", 2)]  # loaded in name order
        assert sorted(lm2.offline_partitions) == [("t", 3), ("t", 4), ("t", 5)]
        offline = [r for r in caplog.records if "the partition is offline" in r.getMessage()]
        assert len(offline) == 3 and not any(r.exc_info for r in offline)  # one line each, no traceback
        assert all("Not enough file descriptors" in r.getMessage() for r in offline)
        with pytest.raises(KafkaStorageError):
            lm2.get_or_create_log("t", 3, now_ms=0)
        # a partition created now finds no room either: offline, nothing created
        with pytest.raises(KafkaStorageError):
            lm2.get_or_create_log("u", 0, now_ms=0)
        assert ("u", 0) in lm2.offline_partitions and not os.path.exists(os.path.join(root, "u-0"))
        # a deleted log gives its descriptor back once its files are closed
        assert lm2.delete_log("t", 0)
        lm2.scheduler.run_all()
        assert lm2.get_or_create_log("u", 1, now_ms=0).log_end_offset == 0
    finally:
        lm2.shutdown(0)
    monkeypatch.undo()

    lm3 = LogManager(LogManagerConfig(log_dirs=(root,)), file_io=NoSyncFileIO())
    lm3.startup(0)
    try:
        # the offline ones kept their checkpointed log start offsets and high watermarks
        assert {tp: (lg.log_start_offset, lg.log_end_offset, lg.high_watermark)
                for tp, lg in lm3.current_logs().items() if tp[0] == "t"} == {
            ("t", 1): (0, 3, 3), ("t", 2): (0, 3, 3), ("t", 3): (0, 3, 3), ("t", 4): (0, 3, 3), ("t", 5): (2, 3, 3)}
        assert not lm3.offline_partitions
    finally:
        lm3.shutdown(0)
