"""Crash recovery (LogLoaderTest in spirit): torn tails at every byte position, corrupt bytes, missing and
corrupt indexes, a flipped byte in an old segment found by verify, a corrupt partition going offline
while the others keep serving, and each damaged log told in one line."""

from __future__ import annotations

import logging
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import LOG_OVERHEAD, parse_header, validate_batch

from storage.config import LogConfig, LogManagerConfig
from storage.errors import KafkaStorageError
from storage.log_manager import LogManager
from storage.verify import main as verify_main
from tests.storage.helpers import NoSyncFileIO, all_batches, batch, open_log

CFG = LogConfig(segment_bytes=3000, index_interval_bytes=200)


def _fill(root: str, n: int, cfg: LogConfig = CFG, name: str = "t-0") -> tuple[list[bytes], list[int]]:
    """Append ``n`` batches, return the batches as stored and their end positions within their segment."""
    lg = open_log(root, cfg, name=name)
    for i in range(n):
        lg.append_as_leader(batch(1 + i % 3, value_size=40 + (i * 37) % 200, tag=i, ts=1000 + i), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    stored = all_batches(lg)
    lg.close_handlers()  # crash: no flush, no trim, no checkpoint, no clean-shutdown marker
    return stored, []


def _segment_files(d: str) -> list[str]:
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


@settings(deadline=None)
@given(cut=st.floats(0, 1), which=st.integers(0, 10))
def test_truncated_tail_at_any_byte_recovers_a_prefix(tmp_path_factory, cut, which):
    root = str(tmp_path_factory.mktemp("cut"))
    stored, _ = _fill(root, 25)
    d = os.path.join(root, "t-0")
    segs = _segment_files(d)
    target = os.path.join(d, segs[-1])  # the active segment is the one a crash tears
    size = os.path.getsize(target)
    new_size = int(size * cut)
    with open(target, "r+b") as f:
        f.truncate(new_size)
    lg = open_log(root, CFG)
    lg.update_high_watermark(lg.log_end_offset)
    got = all_batches(lg)
    assert got == stored[: len(got)]
    # exactly the whole batches before the cut survive
    seg_base = int(segs[-1].split(".")[0])
    lost = [b for b in stored if parse_header(b).base_offset >= seg_base]
    kept_in_seg, pos = 0, 0
    for b in lost:
        if pos + len(b) <= new_size:
            kept_in_seg += 1
            pos += len(b)
        else:
            break
    assert len(got) == len(stored) - len(lost) + kept_in_seg
    assert lg.log_end_offset == (parse_header(got[-1]).last_offset + 1 if got else 0)
    assert os.path.getsize(target) == pos
    assert lg.verify() == []
    # and the log keeps working
    lg.append_as_leader(batch(1), 0, now_ms=0)
    lg.close()


@settings(deadline=None)
@given(pos_frac=st.floats(0, 0.999), flip=st.integers(1, 255))
def test_corrupt_byte_truncates_at_that_batch_and_drops_later_segments(tmp_path_factory, pos_frac, flip):
    root = str(tmp_path_factory.mktemp("flip"))
    stored, _ = _fill(root, 40)
    d = os.path.join(root, "t-0")
    segs = _segment_files(d)
    assert len(segs) >= 3
    victim = os.path.join(d, segs[1])
    data = bytearray(open(victim, "rb").read())
    p = int(len(data) * pos_frac)
    data[p] ^= flip
    open(victim, "wb").write(data)
    base1 = int(segs[1].split(".")[0])
    before = [b for b in stored if parse_header(b).base_offset < base1]
    in_seg = [b for b in stored if parse_header(b).base_offset >= base1][: 10**6]
    # which batch of the segment holds the flipped byte, and where inside it
    start, damaged = 0, None
    for i, b in enumerate(in_seg):
        if start <= p < start + len(b):
            damaged, within = i, p - start
            break
        start += len(b)
    assert damaged is not None
    # recovery point 0: everything is rechecked
    lg = open_log(root, CFG)
    lg.update_high_watermark(lg.log_end_offset)
    got = all_batches(lg)
    for b in got:
        validate_batch(b)  # every surviving batch has a valid CRC
    intact = before + in_seg[:damaged]
    assert got[: len(intact)] == intact  # everything before the damaged batch survives
    if within < 8 or 12 <= within < 16:
        # base offset / leader epoch: not covered by the CRC (Kafka's format). Range checks catch most
        # offset damage; otherwise the batch survives, differing from what was written only in those bytes.
        if len(got) > len(intact):
            k = len(intact)
            orig, now = stored[k], got[k]
            assert orig[8:12] == now[8:12] and orig[16:] == now[16:]
            assert got[k + 1:] == stored[k + 1:len(got)]
    else:
        assert got == intact  # the damaged batch and everything after it are gone
        assert _segment_files(d)[-1] <= segs[1]  # and the later segments
    assert lg.verify() == []
    lg.close()


def test_recovery_starts_at_recovery_point(tmp_path):
    root = str(tmp_path)
    lg = open_log(root, CFG)
    for i in range(40):
        lg.append_as_leader(batch(2, tag=i), 0, now_ms=0)
    lg.flush(now_ms=0)
    rp = lg.recovery_point
    assert rp == lg.log_end_offset
    lg.append_as_leader(batch(2, tag=99), 0, now_ms=0)
    lg.close_handlers()
    lg2 = open_log(root, CFG, recovery_point=rp)
    assert lg2.load_stats.recovered_segments == 1  # only the segment holding the recovery point
    assert lg2.log_end_offset == 82


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path, caplog):
    root = str(tmp_path)
    lg = open_log(root, CFG)
    for i in range(60):
        lg.append_as_leader(batch(1, value_size=100, tag=i, ts=1000 + i), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    stored = all_batches(lg)
    by_ts = lg.fetch_offset_by_timestamp(1030)
    lg.flush(now_ms=0)
    lg.close()
    d = os.path.join(root, "t-0")
    segs = _segment_files(d)
    base0, base1, base2 = (s.split(".")[0] for s in segs[:3])
    os.unlink(os.path.join(d, base0 + ".index"))              # missing offset index
    os.unlink(os.path.join(d, base1 + ".timeindex"))          # missing time index
    with open(os.path.join(d, base2 + ".index"), "r+b") as f:  # garbage in an index
        f.write(os.urandom(16))
    with open(os.path.join(d, segs[3].split(".")[0] + ".index"), "ab") as f:
        f.write(b"\x00\x01\x02")                                # not a multiple of 8
    # clean shutdown: no recovery scan, the indexes are still checked (on their first use) and rebuilt
    caplog.set_level(logging.WARNING, logger="storage")
    lg2 = open_log(root, CFG, had_clean_shutdown=True, recovery_point=lg.log_end_offset)
    lg2.update_high_watermark(lg2.log_end_offset)
    assert all_batches(lg2) == stored
    for off in range(0, 60, 7):
        assert parse_header(lg2.read_bytes(off, 100)).base_offset == off
    assert lg2.fetch_offset_by_timestamp(1030) == by_ts
    # the missing offset index at start-up (Kafka's rule), the corrupt ones when first used: one line each
    assert lg2.load_stats.rebuilt_indexes == 1
    assert len([r for r in caplog.records if "rebuilding index" in r.getMessage()]) >= 2
    lg2.close()
    assert verify_main([d]) == 0


def test_index_entry_pointing_inside_a_batch_is_detected_lazily(tmp_path):
    root = str(tmp_path)
    lg = open_log(root, CFG)
    for i in range(60):
        lg.append_as_leader(batch(1, value_size=100, tag=i), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    stored = all_batches(lg)
    lg.close()
    d = os.path.join(root, "t-0")
    idx = os.path.join(d, _segment_files(d)[0].split(".")[0] + ".index")
    data = bytearray(open(idx, "rb").read())
    assert len(data) >= 16
    # keep the entries plausible for the cheap load-time checks but point one into the middle of a batch
    pos = int.from_bytes(data[12:16], "big") + 7
    data[12:16] = pos.to_bytes(4, "big")
    open(idx, "wb").write(data)
    assert verify_main([d]) == 1  # the scrub sees it
    lg2 = open_log(root, CFG, had_clean_shutdown=True, recovery_point=10**9)
    lg2.update_high_watermark(lg2.log_end_offset)
    for b in stored:  # every offset looked up through the index
        h = parse_header(b)
        assert lg2.read_bytes(h.base_offset, 1, min_one_message=True) == b
    assert verify_main([d]) == 0  # the index was rebuilt when the bad entry was first used
    lg2.close()


def test_flipped_byte_in_old_segment_is_reported_by_verify(tmp_path, capsys):
    root = str(tmp_path)
    lg = open_log(root, CFG)
    for i in range(40):
        lg.append_as_leader(batch(2, tag=i), 0, now_ms=0)
    lg.flush(now_ms=0)
    lg.close()
    d = os.path.join(root, "t-0")
    victim = os.path.join(d, _segment_files(d)[0])
    data = bytearray(open(victim, "rb").read())
    second = parse_header(data).batch_length + LOG_OVERHEAD
    third = second + parse_header(data, second).batch_length + LOG_OVERHEAD
    data[third - 3] ^= 0x40  # inside the second batch's records: covered by its CRC
    open(victim, "wb").write(data)
    # after a clean shutdown the loader does not scan old segments ...
    lg2 = open_log(root, CFG, had_clean_shutdown=True, recovery_point=lg.log_end_offset)
    assert lg2.log_end_offset == 80
    # ... the scrub finds it
    problems = lg2.verify()
    assert len(problems) == 1 and "crc" in problems[0].lower()
    lg2.close()
    assert verify_main([root]) == 1
    out = capsys.readouterr().out
    assert "CORRUPT" in out and os.path.basename(victim) in out


def test_corrupt_partition_goes_offline_others_keep_serving(tmp_path, monkeypatch):
    root = str(tmp_path / "logs")
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm.startup(0)
    good, bad = lm.get_or_create_log("good", 0, now_ms=0), lm.get_or_create_log("bad", 0, now_ms=0)
    for i in range(30):
        good.append_as_leader(batch(1, value_size=100, tag=i), 0, now_ms=0)
        bad.append_as_leader(batch(1, value_size=100, tag=i), 0, now_ms=0)
    for lg in (good, bad):
        lg.update_high_watermark(lg.log_end_offset)
    lm.shutdown(0)
    # garbage where a batch header should be, in an old segment: not scanned after a clean shutdown
    bd = os.path.join(root, "bad-0")
    victim = os.path.join(bd, _segment_files(bd)[0])
    with open(victim, "r+b") as f:
        f.seek(0)
        f.write(b"\xff" * 17)
    lm2 = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm2.startup(0)
    bad2, good2 = lm2.get_log("bad", 0), lm2.get_log("good", 0)
    with pytest.raises(KafkaStorageError) as e:
        bad2.read(0, 1000)
    assert e.value.code == 56  # KAFKA_STORAGE_ERROR
    assert bad2.offline
    with pytest.raises(KafkaStorageError):
        bad2.append_as_leader(batch(1), 0, now_ms=0)
    assert parse_header(good2.read_bytes(0, 1000)).base_offset == 0
    good2.append_as_leader(batch(1), 0, now_ms=0)
    lm2.shutdown(0)

    # a partition whose load fails outright is offline; the rest load
    import storage.log_manager as lm_mod
    real_open = lm_mod.Log.open

    def failing_open(path, *a, **kw):
        if os.path.basename(path) == "bad-0":
            raise KafkaStorageError("simulated disk error")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(lm_mod.Log, "open", staticmethod(failing_open))
    lm3 = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm3.startup(0)
    assert ("bad", 0) in lm3.offline_partitions and lm3.get_log("bad", 0) is None
    assert lm3.get_log("good", 0).log_end_offset == 31
    with pytest.raises(KafkaStorageError):
        lm3.get_or_create_log("bad", 0, now_ms=0)
    lm3.shutdown(0)


def test_unclean_restart_of_log_manager(tmp_path):
    root = str(tmp_path / "logs")
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm.startup(0)
    lg = lm.get_or_create_log("t", 0, now_ms=0)
    rnd = random.Random(3)
    for i in range(50):
        lg.append_as_leader(batch(1 + rnd.randrange(3), value_size=rnd.randrange(10, 200), tag=i), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    stored = all_batches(lg)
    lm.close_without_checkpoints()  # crash
    assert not os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))
    lm2 = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm2.startup(0)
    lg2 = lm2.get_log("t", 0)
    lg2.update_high_watermark(lg2.log_end_offset)
    assert all_batches(lg2) == stored  # page cache survived: nothing lost
    assert lg2.load_stats.recovered_segments == len(lg2.log_segments())
    lm2.shutdown(0)
    assert os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))
    lm3 = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm3.startup(0)
    assert lm3.get_log("t", 0).load_stats.recovered_segments == 0  # clean: no scan
    assert lm3.get_log("t", 0).high_watermark == lg2.log_end_offset  # from replication-offset-checkpoint
    lm3.shutdown(0)


def test_each_damaged_log_is_told_in_one_line(tmp_path, caplog):
    """After a crash, each damaged log is repaired and told in one WARNING line saying what was wrong; undamaged
    logs (recovered all the same: nothing proves their tails were synced) say nothing past the INFO progress line."""
    root = str(tmp_path / "logs")
    names = ["torn", "crc", "garbage", "noindex", "fine"]
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm.startup(0)
    stored = {}
    for name in names:
        lg = lm.get_or_create_log(name, 0, now_ms=0)
        for i in range(40):
            lg.append_as_leader(batch(1, value_size=100, tag=i), 0, now_ms=0)
        lg.flush(now_ms=0)
        lg.update_high_watermark(lg.log_end_offset)
        stored[name] = all_batches(lg)
        assert len(lg.log_segments()) >= 2
    lm.checkpoint_all()
    lm.close_without_checkpoints()  # crash, the recovery points at the log ends

    torn = batch(1, value_size=100, tag=99)
    tails = {"torn": torn[:len(torn) // 2], "crc": torn[:-1] + bytes([torn[-1] ^ 0xFF]),
             "garbage": b"\x00" * 8 + b"\xff" * 4 + os.urandom(40)}
    for name, tail in tails.items():
        d = os.path.join(root, f"{name}-0")
        with open(os.path.join(d, _segment_files(d)[-1]), "ab") as f:
            f.write(tail)
    d = os.path.join(root, "noindex-0")
    first = _segment_files(d)[0].removesuffix(".log")
    os.unlink(os.path.join(d, first + ".index"))
    os.unlink(os.path.join(d, first + ".timeindex"))

    caplog.set_level(logging.INFO, logger="storage")
    lm2 = LogManager(LogManagerConfig(log_dirs=(root,)), {"log.segment.bytes": "3000"}, file_io=NoSyncFileIO())
    lm2.startup(0)
    try:
        told = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert sorted(os.path.basename(m.split(": ")[0].split()[-1]) for m in told) == \
            ["crc-0", "garbage-0", "noindex-0", "torn-0"]
        said = {os.path.basename(m.split(": ")[0].split()[-1]): m for m in told}
        assert "an incomplete batch at its end: truncated to offset 40" in said["torn-0"]
        assert "invalid messages" in said["crc-0"] and "truncated to offset 40" in said["crc-0"]
        assert "invalid messages" in said["garbage-0"] and "truncated to offset 40" in said["garbage-0"]
        assert "no offset index for segment 0: recovered the segment and rebuilt its indexes" in said["noindex-0"]
        assert sum(1 for r in caplog.records if "Recovering unflushed segment" in r.getMessage()) == len(names)
        for name in names:
            lg = lm2.get_log(name, 0)
            lg.update_high_watermark(lg.log_end_offset)
            assert all_batches(lg) == stored[name]
    finally:
        lm2.shutdown(0)
