"""Compaction against a model (LogCleanerTest in spirit): after cleaning, each key's latest value is still at
its original offset, superseded records are gone, survivors keep their offsets, tombstones vanish only after
``delete.retention.ms``; dirty ratio, compaction lag and the cleaner checkpoint; a crash at every step of
the segment swap leaves a consistent log."""

from __future__ import annotations

import os
import random
import shutil
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.record_codec import Record, build_batch, decode_batch
from protocol.records import validate_batch

from storage.cleaner import LogCleaner
from storage.config import LogConfig, LogManagerConfig
from storage.segment import LogSegment
from tests.storage.helpers import NoSyncFileIO, open_log

COMPACT = dict(cleanup_policy=("compact",), segment_bytes=1200, index_interval_bytes=100, file_delete_delay_ms=0,
               min_cleanable_dirty_ratio=0.5, delete_retention_ms=1000)


def _cleaner(lg) -> LogCleaner:
    return LogCleaner(LogManagerConfig(log_dirs=(os.path.dirname(lg.dir),), log_cleaner_dedupe_buffer_size=1 << 20),
                      lambda: {(lg.topic, lg.partition): lg}, [os.path.dirname(lg.dir)], file_io=NoSyncFileIO())


def _records(lg) -> dict[int, tuple]:
    out = {}
    for b in lg.iter_batches(lg.log_start_offset):
        validate_batch(b)
        h, recs = decode_batch(b, 0)
        for r in recs:
            out[r.offset] = (r.key, r.value)
    return out


def _append(lg, items, ts, now_ms=0):
    """items: list of (key, value) in one batch"""
    recs = [Record(k, v, timestamp=ts) for k, v in items]
    return lg.append_as_leader(bytearray(build_batch(recs)), 0, now_ms=now_ms)


@settings(deadline=None)
@given(ops=st.lists(st.lists(st.tuples(st.integers(0, 12), st.one_of(st.none(), st.binary(min_size=1, max_size=60))),
                             min_size=1, max_size=5), min_size=5, max_size=60))
def test_compaction_matches_model(ops):
    root = tempfile.mkdtemp(prefix="odradek-clean-")
    try:
        lg = open_log(root, LogConfig(**COMPACT))
        written: dict[int, tuple] = {}
        for i, items in enumerate(ops):
            kv = [(b"key-%d" % k, v) for k, v in items]
            info = _append(lg, kv, ts=1000 + i)
            for j, (k, v) in enumerate(kv):
                written[info.first_offset + j] = (k, v)
        lg.update_high_watermark(lg.log_end_offset)
        cleaner = _cleaner(lg)
        now = 5000
        end = cleaner.force_clean(lg, now)
        active_base = lg.active_segment.base_offset
        assert end == active_base  # cleaned up to the active segment
        after = _records(lg)
        latest = {}  # latest offset per key within the cleaned section (the map ends there)
        for off in sorted(written):
            if off < end:
                latest[written[off][0]] = off
        for off, (k, v) in written.items():
            if off >= active_base:
                assert after[off] == (k, v)  # the active segment is never cleaned
            elif latest[k] == off:
                assert after[off] == (k, v)  # latest per key stays at its offset (tombstones too, for now)
            else:
                assert off not in after  # superseded
        assert set(after) <= set(written)  # no offset changed
        assert lg.verify() == []
        # the cleaner checkpoint holds the first dirty offset
        cp = open(os.path.join(root, "cleaner-offset-checkpoint")).read()
        assert cp == (f"0\n1\nt 0 {end}\n" if end > 0 else "")
        # tombstones: kept before the delete horizon, gone after it
        cleaner.force_clean(lg, now + 500)
        assert _records(lg) == after
        for key, value in ((b"x", b"y"), (b"x", b"z")):
            info = _append(lg, [(key, value)], ts=10_000)
            written[info.first_offset] = (key, value)
            lg.roll(now_ms=0)
        lg.update_high_watermark(lg.log_end_offset)
        end2 = cleaner.force_clean(lg, now + 1001)
        assert end2 == lg.active_segment.base_offset
        final = _records(lg)
        latest2 = {}
        for off in sorted(written):
            if off < end2:
                latest2[written[off][0]] = off
        for off, (k, v) in written.items():
            if off >= end2:
                assert final[off] == (k, v)
            elif latest2[k] != off:
                assert off not in final  # superseded
            elif v is not None:
                assert final[off] == (k, v)
            elif off < end:
                assert off not in final  # a tombstone seen by the first cleaning: its horizon has passed
            else:
                assert final[off] == (k, v)  # a tombstone cleaned for the first time: horizon just set
        lg.close()
        # and the cleaned log reloads, clean and unclean
        for clean in (True, False):
            lg2 = open_log(root, LogConfig(**COMPACT), had_clean_shutdown=clean, recovery_point=0)
            assert _records(lg2) == final
            assert lg2.verify() == []
            lg2.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_dirty_ratio_and_compaction_lag(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(**{**COMPACT, "min_compaction_lag_ms": 10_000}))
    for i in range(40):
        _append(lg, [(b"k%d" % (i % 4), b"v" * 50)], ts=1000 + i * 100)
    lg.update_high_watermark(lg.log_end_offset)
    cleaner = _cleaner(lg)
    # everything is younger than the minimum compaction lag at now=5000: nothing cleanable
    assert cleaner.grab_filthiest_compacted_log(5000) is None
    ltc = cleaner.grab_filthiest_compacted_log(100_000)
    assert ltc is not None and ltc.cleanable_ratio == 1.0
    cleaner.clean_log(ltc, 100_000)
    # now the dirty ratio is 0: below min.cleanable.dirty.ratio
    assert cleaner.grab_filthiest_compacted_log(100_000) is None
    first_dirty, uncleanable, _ = cleaner.cleanable_offsets(lg, cleaner.all_cleaner_checkpoints().get(("t", 0)),
                                                            100_000)
    assert first_dirty == uncleanable == lg.active_segment.base_offset


def test_max_compaction_lag_forces_cleaning(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(**{**COMPACT, "min_cleanable_dirty_ratio": 0.99,
                                              "max_compaction_lag_ms": 1000}))
    for i in range(30):
        _append(lg, [(b"k%d" % i, b"v" * 50)], ts=1000)  # unique keys: little to gain
    lg.update_high_watermark(lg.log_end_offset)
    cleaner = _cleaner(lg)
    # the segment with the cleaner checkpoint at 10 leaves a low dirty ratio
    cleaner.update_checkpoints(str(tmp_path), update=(("t", 0), lg.log_segments()[-2].base_offset))
    assert cleaner.grab_filthiest_compacted_log(1500) is None
    ltc = cleaner.grab_filthiest_compacted_log(10_000)  # older than max.compaction.lag.ms: must clean
    assert ltc is not None and ltc.need_compaction_now


def test_idempotent_producer_last_batch_is_kept(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(**COMPACT))
    pid = 5
    seq = 0
    for i in range(20):
        recs = [Record(b"same", b"v%d" % i, timestamp=1000)]
        lg.append_as_leader(bytearray(build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=seq)), 0,
                            now_ms=0)
        seq += 1
    lg.roll(now_ms=0)
    lg.append_as_leader(bytearray(build_batch([Record(b"same", b"new", timestamp=1000)])), 0, now_ms=0)
    lg.roll(now_ms=0)
    lg.append_as_leader(bytearray(build_batch([Record(b"other", b"x", timestamp=1000)])), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    _cleaner(lg).force_clean(lg, 5000)
    batches = [decode_batch(b, 0) for b in lg.iter_batches(0)]
    # the producer's last batch survives as an empty batch carrying its sequence
    last = [(h, r) for h, r in batches if h.producer_id == pid]
    assert len(last) == 1 and last[0][1] == [] and last[0][0].last_sequence == 19
    lg.close()
    lg2 = open_log(str(tmp_path), LogConfig(**COMPACT), had_clean_shutdown=False)
    assert lg2.producer_state.last_entry(pid).last_seq == 19
    dup = lg2.append_as_leader(bytearray(build_batch([Record(b"same", b"v19", timestamp=1)], producer_id=pid,
                                                     producer_epoch=0, base_sequence=19)), 0, now_ms=0)
    assert dup.duplicate


class Crash(BaseException):
    """A crash: no exception handler runs its cleanup."""


@pytest.mark.parametrize("crash_at", range(0, 7))
def test_crash_during_swap_leaves_consistent_log(tmp_path, monkeypatch, crash_at):
    root = str(tmp_path)
    cfg = LogConfig(**{**COMPACT, "segment_bytes": 400})
    lg = open_log(root, cfg)
    rnd = random.Random(crash_at)
    for i in range(30):
        _append(lg, [(b"k%d" % rnd.randrange(5), b"value-%d" % i)], ts=1000 + i)
    lg.update_high_watermark(lg.log_end_offset)
    before = _records(lg)
    latest = {}
    for off, (k, v) in sorted(before.items()):
        latest[k] = (off, v)
    active_base = lg.active_segment.base_offset
    calls = {"n": 0}
    real = LogSegment.change_file_suffixes

    def crashing(self, old, new):
        calls["n"] += 1
        if calls["n"] == crash_at:
            raise Crash()
        return real(self, old, new)

    monkeypatch.setattr(LogSegment, "change_file_suffixes", crashing)
    if crash_at == 0:
        # crash while writing the .cleaned segment
        import storage.cleaner as cl
        monkeypatch.setattr(cl.Cleaner, "_clean_into",
                            lambda *a, **k: (_ for _ in ()).throw(Crash()))
    cleaner = _cleaner(lg)
    crashed = False
    try:
        cleaner.force_clean(lg, 5000)
    except Crash:
        crashed = True
    monkeypatch.setattr(LogSegment, "change_file_suffixes", real)
    lg.close_handlers()
    names = os.listdir(lg.dir)
    if crashed:
        assert any(n.endswith((".cleaned", ".swap")) for n in names) or crash_at > 2
    # restart after the crash: swaps are finished or rolled back
    lg2 = open_log(root, cfg, had_clean_shutdown=False)
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(lg2.dir))
    after = _records(lg2)
    assert lg2.verify() == []
    for k, (off, v) in latest.items():
        assert after[off] == (k, v)  # every key's latest value at its offset
    for off, kv in after.items():
        assert before[off] == kv  # nothing invented, offsets unchanged
    assert max(after) == max(before) and lg2.log_end_offset == lg.log_end_offset
    for off in before:
        if off >= active_base:
            assert off in after
    lg2.close()
