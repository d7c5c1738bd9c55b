"""Cross-check with independent code: every batch odradek writes to a segment file — appended by a leader,
by a follower, with each compression codec, with LogAppendTime, idempotent, rewritten by the cleaner (delete
horizon, emptied batches) — parses with kafka-python's own record-batch reader (``kafka.record``), CRC
included, and yields the records odradek meant to store."""

from __future__ import annotations

import os

import pytest

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch

from protocol.record_codec import Record, build_batch
from protocol.records import stamp_batch

from storage.config import LogConfig
from tests.storage.helpers import open_log
from tests.storage.test_cleaner import _cleaner


def _segment_batches(log_dir: str) -> list[DefaultRecordBatch]:
    """Read every ``.log`` file byte for byte with kafka-python, as kafka-dump-log would."""
    out = []
    for name in sorted(os.listdir(log_dir)):
        if not name.endswith(".log"):
            continue
        data = open(os.path.join(log_dir, name), "rb").read()
        mr = MemoryRecords(data)
        while True:
            b = mr.next_batch()
            if b is None:
                break
            assert isinstance(b, DefaultRecordBatch) and b.magic == 2
            assert b.validate_crc(), f"kafka-python rejects the CRC of the batch at {b.base_offset} in {name}"
            out.append(b)
        assert not mr.has_next()
    return out


def test_kafka_python_reads_every_batch(tmp_path):
    cfg = LogConfig(segment_bytes=3000, cleanup_policy=("compact",), file_delete_delay_ms=0,
                    delete_retention_ms=10)
    lg = open_log(str(tmp_path), cfg)
    expected: dict[int, tuple] = {}

    def add(recs, **kw):
        info = lg.append_as_leader(bytearray(build_batch(recs, **kw)), 7, now_ms=123)
        for i, r in enumerate(recs):
            expected[info.first_offset + i] = (r.key, r.value, r.headers)

    for codec in range(5):  # none, gzip, snappy, lz4, zstd
        add([Record(b"k%d" % i, b"value-%d-%d" % (codec, i) * 5, [("h", b"v"), ("n", None)], timestamp=1000 + i)
             for i in range(6)], compression=codec)
    add([Record(b"tomb", None, timestamp=2000)])
    add([Record(b"idem", b"x%d" % i, timestamp=2002) for i in range(3)], producer_id=42, producer_epoch=1,
        base_sequence=0)
    # a follower append keeps the leader's offsets
    b = bytearray(build_batch([Record(b"f", b"from leader", timestamp=3000)], partition_leader_epoch=9))
    stamp_batch(b, 0, lg.log_end_offset, 9)
    f_off = lg.log_end_offset
    lg.append_as_follower(b, now_ms=0)
    expected[f_off] = (b"f", b"from leader", [])
    lg.update_high_watermark(lg.log_end_offset)

    batches = _segment_batches(lg.dir)
    got = {}
    for kb in batches:
        assert kb.leader_epoch in (7, 9)
        for r in kb:
            got[r.offset] = (r.key, r.value, [(k, v) for k, v in r.headers])
    assert got == expected
    idem = [kb for kb in batches if kb.producer_id == 42]
    assert len(idem) == 1 and idem[0].base_sequence == 0 and idem[0].producer_epoch == 1

    # the cleaner's rewritten batches (delete horizon set, superseded records dropped, empty batches)
    for i in range(20):
        add([Record(b"k1", b"newer-%d" % i, timestamp=4000 + i)], producer_id=43, producer_epoch=0, base_sequence=i)
    add([Record(b"k1", b"final", timestamp=4999)])  # supersedes producer 43's last batch: it is kept empty
    lg.roll(now_ms=0)
    add([Record(b"last", b"x", timestamp=5000)])
    lg.update_high_watermark(lg.log_end_offset)
    cleaner = _cleaner(lg)
    cleaner.force_clean(lg, 10_000)
    batches = _segment_batches(lg.dir)
    assert any(kb.attributes & 0x40 for kb in batches)  # a delete horizon was written
    assert any(kb.records_count == 0 for kb in batches)  # a producer's last batch kept empty
    offsets = [r.offset for kb in batches for r in kb]
    assert offsets == sorted(offsets)
    for kb in batches:
        for r in kb:
            assert expected[r.offset][:2] == (r.key, r.value)  # survivors unchanged, at their offsets


@pytest.mark.parametrize("ts_type", ["LogAppendTime"])
def test_kafka_python_sees_log_append_time(tmp_path, ts_type):
    lg = open_log(str(tmp_path), LogConfig(message_timestamp_type=ts_type))
    lg.append_as_leader(bytearray(build_batch([Record(b"a", b"b", timestamp=1)] * 3)), 0, now_ms=99_000)
    (kb,) = _segment_batches(lg.dir)
    assert kb.timestamp_type == 1 and kb.max_timestamp == 99_000
    assert [r.timestamp for r in kb] == [99_000] * 3


def test_index_files_match_kafka_layout_and_the_log(tmp_path):
    """Read odradek's .index/.timeindex with the independent layout readers (written from OffsetIndex.java /
    TimeIndex.java comments) and check every entry against the .log as kafka-python parses it, the way
    Kafka builds them (LogSegment.append: an entry every index.interval.bytes, (last offset, batch start);
    the time index holds (max timestamp so far, its offset) and gets a final entry when the segment rolls)."""
    from tests.storage.test_index import kafka_offset_index_entries, kafka_time_index_entries

    lg = open_log(str(tmp_path), LogConfig(segment_bytes=20_000, index_interval_bytes=1000))
    for i in range(200):
        lg.append_as_leader(bytearray(build_batch([Record(b"k", b"v" * (50 + i % 300), timestamp=1000 + i * 3)])),
                            0, now_ms=0)
    lg.roll(now_ms=0)
    lg.close()
    d = lg.dir
    for name in sorted(os.listdir(d)):
        if not name.endswith(".log") or os.path.getsize(os.path.join(d, name)) == 0:
            continue
        base = int(name.split(".")[0])
        data = open(os.path.join(d, name), "rb").read()
        batches = {}
        pos = 0
        mr = MemoryRecords(data)
        while True:
            b = mr.next_batch()
            if b is None:
                break
            batches[pos] = b
            pos += b.size_in_bytes
        idx = kafka_offset_index_entries(os.path.join(d, f"{base:020d}.index"), base)
        assert os.path.getsize(os.path.join(d, f"{base:020d}.index")) == 8 * len(idx)  # trimmed
        assert len(idx) >= pos // 1000 - 2
        prev = -1
        for off, p in idx:
            assert p in batches and batches[p].last_offset == off and off > prev
            prev = off
        tidx = kafka_time_index_entries(os.path.join(d, f"{base:020d}.timeindex"), base)
        assert tidx, "a rolled segment has at least its final time index entry"
        max_ts = max(b.max_timestamp for b in batches.values())
        last_of_max = [b.last_offset for b in batches.values() if b.max_timestamp == max_ts][0]
        assert tidx[-1] == (max_ts, last_of_max)
        assert [t for t, _ in tidx] == sorted(t for t, _ in tidx)
