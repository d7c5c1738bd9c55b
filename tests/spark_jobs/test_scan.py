"""spark_jobs.planning and spark_jobs.scan without a JVM: layout, pruning, snapshot, torn tails, corruption,
bad input. The same code runs inside Spark's Python workers (test_datasource.py checks that path)."""

from __future__ import annotations

import os
import shutil
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.record_codec import Record, build_batch
from spark_jobs.planning import (
    NotALogDirError,
    PlanStats,
    ScanBounds,
    list_partition_dirs,
    list_segments,
    plan_slices,
)
from spark_jobs.scan import ARROW_SCHEMA, CorruptSegmentError, ScanStats, SegmentChangedError, read_slice

from .builders import (
    HOUR,
    T0,
    dir_digest,
    kafka_python_batch,
    plain_read_through_storage,
    write_independent_partition,
    write_storage_partition,
)

CODECS = [0, 1, 2, 3, 4]


def scan_all(log_dir, bounds=None, stats=None, **kw) -> pa.Table:
    stats = stats if stats is not None else ScanStats()
    batches = []
    for sl in plan_slices(log_dir, bounds, **{k: v for k, v in kw.items() if k in ("max_slice_bytes",
                                                                                   "use_indexes")}):
        batches.extend(read_slice(sl, bounds, stats=stats,
                                  **{k: v for k, v in kw.items() if k in ("ignore_corrupt",)}))
    if not batches:
        return ARROW_SCHEMA.empty_table()
    return pa.Table.from_batches(batches, ARROW_SCHEMA)


def rows(table: pa.Table) -> list[tuple]:
    d = table.to_pydict()
    out = []
    for i in range(table.num_rows):
        ts = d["timestamp"][i]
        out.append((d["topic"][i], d["partition"][i], d["offset"][i],
                    None if ts is None else int(ts.timestamp() * 1000 + 0.5), d["key"][i], d["value"][i],
                    [(h["key"], h["value"]) for h in d["headers"][i]], d["compression"][i]))
    return out


def mixed_batches(n: int, seed: int = 0, with_headers: bool = True) -> list[tuple[list[Record], dict]]:
    out = []
    for i in range(n):
        codec = CODECS[(i + seed) % 5]
        recs = [Record(None if (i + j) % 9 == 0 else f"key-{(i * 7 + j) % 23}".encode(),
                       None if (i + j) % 11 == 0 else bytes([(i + j) % 256]) * (1 + (i * j) % 300),
                       [("trace", f"{i}.{j}".encode()), ("null-header", None)] if with_headers and j % 2 else [],
                       timestamp=T0 + i * 60_000 + j)
                for j in range(1 + i % 5)]
        out.append((recs, {"compression": codec}))
    return out


@pytest.fixture(scope="module")
def storage_dir(tmp_path_factory):
    """Two topics written through storage/ (every codec, headers, null keys/values), several segments each, plus a
    metadata log, a -delete and a -future directory that a scan must skip."""
    d = str(tmp_path_factory.mktemp("logdir"))
    produced = []
    produced.append(write_storage_partition(d, "orders.v2-eu", 0, mixed_batches(60), {"segment.bytes": 1500}))
    produced.append(write_storage_partition(d, "orders.v2-eu", 1, mixed_batches(25, 3), {"segment.bytes": 1500}))
    produced.append(write_storage_partition(d, "metrics", 0, mixed_batches(10, 1, False), {}))
    write_storage_partition(d, "__consumer_offsets", 0, mixed_batches(3), {})
    os.makedirs(os.path.join(d, "old-0.0123456789abcdef0123456789abcdef-delete"))
    shutil.copy(os.path.join(d, "metrics-0", "00000000000000000000.log"),
                os.path.join(d, "old-0.0123456789abcdef0123456789abcdef-delete"))
    os.makedirs(os.path.join(d, "metrics-0.0123456789abcdef0123456789abcdef-future"))
    expected = sorted((r["topic"], r["partition"], r["offset"], r["timestamp_ms"], r["key"], r["value"],
                       r["headers"], r["compression"]) for p in produced for r in p.rows)
    return d, expected


def test_reads_storage_written_dir_byte_exact(storage_dir):
    d, expected = storage_dir
    before = dir_digest(d)
    stats = ScanStats()
    got = sorted(rows(scan_all(d, stats=stats)))
    assert got == expected
    assert {t for t, *_ in got} == {"orders.v2-eu", "metrics"}       # internal and -delete/-future skipped
    assert {c for *_, c in got} == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert stats.corrupt_batches == 0 and stats.torn_tails == 0
    assert dir_digest(d) == before                                       # nothing written


def test_counts_and_offsets_equal_plain_read_through_storage(storage_dir):
    d, _ = storage_dir
    for topic, part in (("orders.v2-eu", 0), ("orders.v2-eu", 1), ("metrics", 0)):
        ref = plain_read_through_storage(os.path.join(d, f"{topic}-{part}"))
        t = scan_all(d, ScanBounds(topics=frozenset({topic}), partitions=frozenset({part})))
        assert t.column("offset").to_pylist() == [r[0] for r in ref]
        assert t.column("key").to_pylist() == [r[2] for r in ref]


def test_internal_topics_only_when_asked(storage_dir):
    d, _ = storage_dir
    t = scan_all(d, ScanBounds(include_internal=True))
    assert "__consumer_offsets" in set(t.column("topic").to_pylist())
    t = scan_all(d, ScanBounds(topics=frozenset({"__consumer_offsets"})))
    assert set(t.column("topic").to_pylist()) == {"__consumer_offsets"}


def test_topic_names_with_dots_and_dashes(storage_dir):
    d, _ = storage_dir
    names = {(p.topic, p.partition) for p in list_partition_dirs(d)}
    assert names == {("orders.v2-eu", 0), ("orders.v2-eu", 1), ("metrics", 0)}


def test_independent_dir_kafka_python_builder_and_hand_made_indexes(tmp_path):
    """Batches from kafka-python's DefaultRecordBatchBuilder, index files laid out byte by byte as Kafka's
    OffsetIndex/TimeIndex; read back exactly, split at index entries, pruned by the time index."""
    d = str(tmp_path)
    batches, expect = [], []
    for i in range(120):
        recs = [(T0 + i * HOUR + j, f"k{i % 17}".encode(), os.urandom(50 + (i * j) % 200),
                 [("h", f"{i}".encode())] if j == 0 else []) for j in range(3)]
        batches.append(kafka_python_batch(recs, codec=i % 5))
        expect.append(recs)
    offsets = write_independent_partition(d, "kp.topic-x", 3, batches, segment_bytes=12_000,
                                          index_interval_bytes=1024)
    exp_rows = [(off + j, ts, k, v, hs) for (off, _), recs in zip(offsets, expect)
                for j, (ts, k, v, hs) in enumerate(recs)]
    segs = list_segments(list_partition_dirs(d)[0])
    assert len(segs) > 3
    t = scan_all(d)
    got = [(o, int(ts.timestamp() * 1000 + 0.5), k, v, [(h["key"], h["value"]) for h in hs]) for o, ts, k, v, hs in
           zip(*(t.column(c).to_pylist() for c in ("offset", "timestamp", "key", "value", "headers")))]
    assert got == exp_rows
    # split at index entries: same rows, more slices
    stats = PlanStats()
    slices = plan_slices(d, max_slice_bytes=3000, stats=stats)
    assert len(slices) > len(segs) and stats.split_fallbacks == 0
    assert scan_all(d, max_slice_bytes=3000).column("offset").to_pylist() == [r[0] for r in exp_rows]
    # time pruning uses each rolled segment's last time-index entry
    cut = T0 + 100 * HOUR
    st_ = ScanStats()
    tb = scan_all(d, ScanBounds(ts_lo_us=cut * 1000), st_)
    assert tb.column("offset").to_pylist() == [r[0] for r in exp_rows if r[1] >= cut]
    assert st_.segments_opened < len(segs) / 2


def test_offset_pruning_opens_only_needed_segments(storage_dir):
    d, expected = storage_dir
    segs = list_segments([p for p in list_partition_dirs(d) if p.topic == "orders.v2-eu" and p.partition == 0][0])
    assert len(segs) >= 4
    lo, hi = segs[2].base_offset + 1, segs[2].next_base_offset + 2
    bounds = ScanBounds(topics=frozenset({"orders.v2-eu"}), partitions=frozenset({0}), offset_lo=lo, offset_hi=hi)
    stats, pstats = ScanStats(), PlanStats()
    slices = plan_slices(d, bounds, stats=pstats)
    assert [s.base_offset for s in slices] == [segs[2].base_offset, segs[3].base_offset]
    assert pstats.segments_pruned_by_offset == len(segs) - 2
    t = scan_all(d, bounds, stats)
    assert stats.segments_opened == 2
    assert t.column("offset").to_pylist() == [r[2] for r in expected
                                              if r[0] == "orders.v2-eu" and r[1] == 0 and lo <= r[2] < hi]
    assert stats.batches_skipped_by_header > 0        # whole batches outside the range: not decompressed


def test_timestamp_upper_bound_is_applied_per_record(storage_dir):
    d, expected = storage_dir
    hi = T0 + 30 * 60_000 + 2
    t = scan_all(d, ScanBounds(ts_lo_us=(T0 + 10 * 60_000) * 1000, ts_hi_us=hi * 1000))
    assert sorted(rows(t)) == [r for r in expected if T0 + 10 * 60_000 <= r[3] < hi]


def _write_simple(d, topic="t", n=20, props=None):
    return write_storage_partition(d, topic, 0, [([Record(b"k", b"v" * 100, timestamp=T0 + i)], {})
                                                 for i in range(n)], props or {})


def test_torn_tail_of_active_segment_is_ignored(tmp_path):
    d = str(tmp_path)
    _write_simple(d)
    log = os.path.join(d, "t-0", "00000000000000000000.log")
    extra = build_batch([Record(b"k", b"tail" * 50, timestamp=T0)], base_offset=20)
    with open(log, "ab") as f:
        f.write(extra[:len(extra) // 2])              # a producer's write in flight
    stats = ScanStats()
    assert scan_all(d, stats=stats).num_rows == 20
    assert stats.torn_tails == 1


def test_snapshot_ignores_data_appended_after_planning(tmp_path):
    d = str(tmp_path)
    _write_simple(d)
    slices = plan_slices(d)
    log = os.path.join(d, "t-0", "00000000000000000000.log")
    with open(log, "ab") as f:
        f.write(build_batch([Record(b"k", b"later", timestamp=T0)], base_offset=20))
    got = [b for sl in slices for b in read_slice(sl)]
    assert sum(b.num_rows for b in got) == 20


def test_segment_shrunk_after_planning_is_an_error(tmp_path):
    d = str(tmp_path)
    _write_simple(d)
    slices = plan_slices(d)
    os.truncate(os.path.join(d, "t-0", "00000000000000000000.log"), 100)
    with pytest.raises(SegmentChangedError, match="shrank"):
        list(read_slice(slices[0]))


def test_bad_crc_names_file_and_position_unless_ignored(tmp_path):
    d = str(tmp_path)
    _write_simple(d, n=5)
    log = os.path.join(d, "t-0", "00000000000000000000.log")
    data = bytearray(open(log, "rb").read())
    second = 12 + struct.unpack_from(">i", data, 8)[0]
    data[second + 70] ^= 0xFF                              # a byte inside the second batch's records
    open(log, "wb").write(data)
    with pytest.raises(CorruptSegmentError) as e:
        scan_all(d)
    assert log in str(e.value) and f"position {second}" in str(e.value)
    stats = ScanStats()
    t = scan_all(d, stats=stats, ignore_corrupt=True)
    assert t.column("offset").to_pylist() == [0, 2, 3, 4]
    assert stats.corrupt_batches == 1 and f"{log}@{second}" in stats.corrupt[0]


def test_garbage_segment(tmp_path):
    d = str(tmp_path)
    os.makedirs(os.path.join(d, "t-0"))
    with open(os.path.join(d, "t-0", "00000000000000000000.log"), "wb") as f:
        f.write(b"this is not a kafka log segment at all, just some text" * 3)
    with pytest.raises(CorruptSegmentError, match="00000000000000000000.log at byte position 0"):
        scan_all(d)
    stats = ScanStats()
    assert scan_all(d, stats=stats, ignore_corrupt=True).num_rows == 0 and stats.corrupt_batches == 1


def test_truncated_batch_in_a_rolled_segment_is_corruption(tmp_path):
    d = str(tmp_path)
    _write_simple(d, n=40, props={"segment.bytes": 1000})
    segs = list_segments(list_partition_dirs(d)[0])
    assert len(segs) > 2
    os.truncate(segs[0].path, segs[0].size - 5)
    with pytest.raises(CorruptSegmentError, match="truncated"):
        scan_all(d)


def test_zero_filled_preallocated_tail(tmp_path):
    d = str(tmp_path)
    _write_simple(d)
    with open(os.path.join(d, "t-0", "00000000000000000000.log"), "ab") as f:
        f.write(bytes(4096))
    assert scan_all(d).num_rows == 20


def test_missing_and_bogus_indexes_rebuilt_in_memory(tmp_path):
    d = str(tmp_path)
    _write_simple(d, n=200, props={"segment.bytes": 8000, "index.interval.bytes": 500})
    expect = scan_all(d).column("offset").to_pylist()
    segs = list_segments(list_partition_dirs(d)[0])
    os.remove(segs[0].index_path)
    os.remove(segs[0].time_index_path)
    with open(segs[1].index_path, "r+b") as f:          # entries pointing into the middle of batches
        n = os.path.getsize(segs[1].index_path) // 8
        for i in range(n):
            f.seek(i * 8 + 4)
            f.write(struct.pack(">i", 7 + i * 13))
    before = dir_digest(d)
    stats = PlanStats()
    got = scan_all(d, max_slice_bytes=2000, stats=None)
    slices = plan_slices(d, ScanBounds(ts_lo_us=(T0 + 150) * 1000), max_slice_bytes=2000, stats=stats)
    assert got.column("offset").to_pylist() == expect
    assert stats.index_rebuilds >= 1
    assert slices
    assert dir_digest(d) == before                          # rebuilt in memory only


def test_empty_partition_and_empty_log_dir(tmp_path):
    d = str(tmp_path)
    open(os.path.join(d, "meta.properties"), "w").write("version=1\n")
    assert scan_all(d).num_rows == 0
    os.makedirs(os.path.join(d, "empty-0"))
    open(os.path.join(d, "empty-0", "00000000000000000000.log"), "wb").close()
    assert [p.topic for p in list_partition_dirs(d)] == ["empty"]
    assert scan_all(d).num_rows == 0


def test_not_a_log_dir(tmp_path):
    with pytest.raises(NotALogDirError, match="does not exist"):
        plan_slices(str(tmp_path / "nope"))
    (tmp_path / "somefile.txt").write_text("x")
    (tmp_path / "subdir").mkdir()
    with pytest.raises(NotALogDirError, match="not a Kafka log directory"):
        plan_slices(str(tmp_path))
    with pytest.raises(NotALogDirError, match="not a directory"):
        plan_slices(str(tmp_path / "somefile.txt"))


def test_unexpected_log_file_name(tmp_path):
    os.makedirs(tmp_path / "t-0")
    (tmp_path / "t-0" / "123.log").write_bytes(b"")
    with pytest.raises(NotALogDirError, match="20-digit"):
        plan_slices(str(tmp_path))


def test_partition_dir_given_directly(storage_dir):
    d, expected = storage_dir
    t = scan_all(os.path.join(d, "metrics-0"))
    assert sorted(rows(t)) == [r for r in expected if r[0] == "metrics"]


# -- property: pruning never changes the answer ------------------------------------------------------------------

@pytest.fixture(scope="module")
def prop_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("prop"))
    batches = []
    for i in range(150):
        ts = T0 + i * 1000 + (5000 if i % 17 == 0 else 0)     # some timestamps out of order
        batches.append(([Record(b"k%d" % j, b"v" * (i % 40), timestamp=ts + j) for j in range(1 + i % 4)],
                        {"compression": i % 5}))
    write_storage_partition(d, "p", 0, batches, {"segment.bytes": 2500, "index.interval.bytes": 300})
    full = scan_all(d)
    return d, list(zip(full.column("offset").to_pylist(),
                       [int(x.timestamp() * 1_000_000) for x in full.column("timestamp").to_pylist()]))


@settings(deadline=None)
@given(off_lo=st.one_of(st.none(), st.integers(-5, 420)), off_len=st.one_of(st.none(), st.integers(0, 200)),
       ts_lo=st.one_of(st.none(), st.integers(-2000, 160_000)), ts_len=st.one_of(st.none(), st.integers(0, 90_000)),
       split=st.sampled_from([1 << 30, 700, 3000]))
def test_pruned_scan_equals_filtered_full_scan(prop_dir, off_lo, off_len, ts_lo, ts_len, split):
    d, full = prop_dir
    off_hi = None if off_lo is None or off_len is None else off_lo + off_len
    ts_lo_us = None if ts_lo is None else (T0 + ts_lo) * 1000
    ts_hi_us = None if ts_lo_us is None or ts_len is None else ts_lo_us + ts_len * 1000 + 1
    bounds = ScanBounds(offset_lo=off_lo, offset_hi=off_hi, ts_lo_us=ts_lo_us, ts_hi_us=ts_hi_us)
    t = scan_all(d, bounds, max_slice_bytes=split)
    want = [o for o, ts in full if (off_lo is None or o >= off_lo) and (off_hi is None or o < off_hi)
            and (ts_lo_us is None or ts >= ts_lo_us) and (ts_hi_us is None or ts < ts_hi_us)]
    assert t.column("offset").to_pylist() == want
