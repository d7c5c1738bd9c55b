"""Only the columns a query names: a pruned scan (user schema, ``columns`` option) gives exactly the rows of the
full scan projected on those columns, whatever the bounds, with the compiled and the pure-Python decoder; a scan
asking for no record column counts rows from batch headers; a malformed user schema is a clear error."""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import fast_records, record_columns
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch
from protocol.records import LOG_APPEND_TIME
from spark_jobs.planning import ScanBounds, plan_slices
from spark_jobs.scan import (ARROW_SCHEMA, RECORD_COLUMNS, ColumnSelectionError, ScanStats, arrow_schema, read_slice,
                             select_columns)

from .builders import HOUR, T0, kafka_python_batch, write_independent_partition, write_storage_partition
from .test_scan import mixed_batches

NAMES = ARROW_SCHEMA.names
HEADER_ONLY = ("topic", "partition", "base_offset", "record_count", "max_timestamp", "compression", "position")


def _compacted_batches() -> list[bytes]:
    """Batches as the log cleaner leaves them: offset gaps inside a batch, empty batches, a delete horizon, a
    transaction and its marker, LogAppendTime."""
    out = []
    for i in range(40):
        recs = [Record(b"k%d" % (j % 3), None if (i + j) % 7 == 0 else b"v" * (i + j), timestamp=T0 + i * HOUR + j,
                       offset_delta=2 * j + i % 2) for j in range(i % 4)]
        horizon = T0 + 5 * HOUR if i % 5 == 0 else None
        out.append(build_batch(recs, compression=i % 5, last_offset_delta=2 * len(recs) + 1,
                               max_timestamp=None if recs else T0 + i * HOUR, delete_horizon_ms=horizon))
    out.append(build_batch([Record(b"t", b"x", timestamp=T0)], producer_id=9, producer_epoch=0, base_sequence=0,
                           is_transactional=True))
    out.append(build_end_txn_marker_batch(commit=True, producer_id=9, producer_epoch=0, coordinator_epoch=1,
                                          timestamp=T0 + 1))
    out.append(build_batch([Record(b"lat", b"y", timestamp=T0)], timestamp_type=LOG_APPEND_TIME,
                           max_timestamp=T0 + 7 * HOUR))
    return out


@pytest.fixture(scope="module")
def columns_dir(tmp_path_factory):
    """Client-written (storage's Log), kafka-python-built and cleaner-shaped partitions in one log dir."""
    d = str(tmp_path_factory.mktemp("columns"))
    write_storage_partition(d, "orders", 0, mixed_batches(40), {"segment.bytes": 1500})
    write_storage_partition(d, "orders", 1, mixed_batches(20, 2), {"segment.bytes": 1500})
    write_independent_partition(d, "kp", 0, [kafka_python_batch(
        [(T0 + i * 1000 + j, b"k%d" % j, b"v" * (i + j), [("i", b"%d" % i)] if j else []) for j in range(3)],
        codec=i % 5) for i in range(30)], segment_bytes=2000, index_interval_bytes=300)
    write_independent_partition(d, "compacted", 0, _compacted_batches(), segment_bytes=1200,
                                index_interval_bytes=200)
    return d


def scan(log_dir, bounds=None, columns=None, stats=None, **kw) -> pa.Table:
    stats = stats if stats is not None else ScanStats()
    batches = [b for sl in plan_slices(log_dir, bounds, max_slice_bytes=kw.pop("max_slice_bytes", 1 << 30))
               for b in read_slice(sl, bounds, stats=stats, columns=columns, **kw)]
    return pa.Table.from_batches(batches, arrow_schema(columns))


bounds_st = st.builds(
    lambda off_lo, off_len, ts_lo, ts_len: ScanBounds(
        offset_lo=off_lo, offset_hi=None if off_lo is None or off_len is None else off_lo + off_len,
        ts_lo_us=None if ts_lo is None else (T0 + ts_lo) * 1000,
        ts_hi_us=None if ts_lo is None or ts_len is None else (T0 + ts_lo + ts_len) * 1000),
    st.none() | st.integers(-2, 120), st.none() | st.integers(0, 80),
    st.none() | st.integers(-1000, 40 * HOUR), st.none() | st.integers(0, 20 * HOUR))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(columns=st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True), bounds=bounds_st,
       empty_batches=st.booleans(), split=st.sampled_from([1 << 30, 600]))
def test_pruned_scan_equals_projected_full_scan(columns_dir, columns, bounds, empty_batches, split):
    full = scan(columns_dir, bounds, empty_batches=empty_batches, max_slice_bytes=split)
    pruned = scan(columns_dir, bounds, columns, empty_batches=empty_batches, max_slice_bytes=split)
    assert pruned.schema.names == columns
    assert pruned.to_pylist() == full.select(columns).to_pylist()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(columns=st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True), bounds=bounds_st)
def test_pure_python_decoder_gives_the_same_pruned_scan(columns_dir, columns, bounds):
    compiled = scan(columns_dir, bounds, columns, empty_batches=True)
    saved = fast_records._CBatch, record_columns._CBuilder
    fast_records._CBatch = record_columns._CBuilder = None        # as ODRADEK_PURE_RECORDS=1 leaves them
    try:
        pure = scan(columns_dir, bounds, columns, empty_batches=True)
    finally:
        fast_records._CBatch, record_columns._CBuilder = saved
    assert pure.to_pylist() == compiled.to_pylist()


def test_header_only_columns_decompress_nothing(columns_dir):
    full_stats, stats = ScanStats(), ScanStats()
    full = scan(columns_dir, stats=full_stats)
    t = scan(columns_dir, columns=HEADER_ONLY, stats=stats)
    assert t.to_pylist() == full.select(list(HEADER_ONLY)).to_pylist()
    assert stats.records_decoded == 0 and full_stats.records_decoded == t.num_rows
    assert stats.batches_from_header == full_stats.batches_decoded - _empty_batches(columns_dir)
    # a batch straddling an offset bound is decoded for its offsets, the others still come from headers
    b = ScanBounds(offset_lo=5, offset_hi=30)
    stats = ScanStats()
    t = scan(columns_dir, b, columns=("topic", "record_count"), stats=stats)
    assert t.to_pylist() == scan(columns_dir, b).select(["topic", "record_count"]).to_pylist()
    assert 0 < stats.batches_decoded and 0 < stats.batches_from_header


BATCH_COLUMNS = [c for c in NAMES if c not in RECORD_COLUMNS]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bounds=bounds_st, split=st.sampled_from([1 << 30, 600]))
def test_row_per_batch_gives_each_batch_once(columns_dir, bounds, split):
    stats = ScanStats()
    per_batch = scan(columns_dir, bounds, BATCH_COLUMNS, row_per_batch=True, max_slice_bytes=split, stats=stats)
    assert stats.records_decoded == 0
    rows = per_batch.to_pylist()
    keys = [(r["topic"], r["partition"], r["base_offset"]) for r in rows]
    assert len(keys) == len(set(keys))
    # every batch with a record (or, empty, an offset range) within the bounds is there, as the full scan has it
    full = scan(columns_dir, bounds, empty_batches=True, max_slice_bytes=split).select(BATCH_COLUMNS).to_pylist()
    unique_full = list({(r["topic"], r["partition"], r["base_offset"]): r for r in full}.values())
    assert all(r in rows for r in unique_full)
    if bounds == ScanBounds():
        assert rows == unique_full
    # more only where the header cannot rule a batch out: it overlaps the bounds
    for r in rows:
        if r not in unique_full:
            assert bounds.offset_lo is None or r["last_offset"] >= bounds.offset_lo
            assert bounds.offset_hi is None or r["base_offset"] < bounds.offset_hi


def test_row_per_batch_refuses_record_columns(columns_dir):
    with pytest.raises(ColumnSelectionError, match="record-level"):
        scan(columns_dir, columns=("topic", "offset"), row_per_batch=True)


def _empty_batches(d) -> int:
    t = scan(d, columns=("record_count",), empty_batches=True)
    return t.column("record_count").to_pylist().count(0)


def test_value_size_is_the_value_length_or_null(columns_dir):
    full = scan(columns_dir, empty_batches=True)
    sizes = scan(columns_dir, columns=("value_size",), empty_batches=True).column("value_size").to_pylist()
    assert sizes == [None if v is None else len(v) for v in full.column("value").to_pylist()]
    assert None in sizes and 0 < max(s for s in sizes if s is not None)


def test_key_only_scan_builds_no_value_column(columns_dir):
    t = scan(columns_dir, columns=("key", "offset"))
    assert t.schema.names == ["key", "offset"] and t.num_rows == scan(columns_dir).num_rows


@pytest.mark.parametrize("fields, message", [
    ([("nosuch", "int", True)], "kafka-log has no column 'nosuch'; its columns are: topic, partition"),
    ([("offset", "string", True)], "kafka-log column 'offset' is bigint, not string"),
    ([("key", "string", True)], "kafka-log column 'key' is binary, not string"),
    ([("timestamp", "timestamp_ntz", True)], "kafka-log column 'timestamp' is timestamp, not timestamp_ntz"),
    ([("offset", "bigint", False)], "kafka-log column 'offset' is nullable; drop NOT NULL"),
    ([("offset", "bigint", True), ("offset", "bigint", True)], "kafka-log column 'offset' is asked for twice"),
    ([], "selects no columns"),
])
def test_select_columns_refuses_a_malformed_schema(fields, message):
    with pytest.raises(ColumnSelectionError, match=message):
        select_columns(fields)


# -- through Spark ------------------------------------------------------------------------------------------------

def _collect(df) -> list[tuple]:
    return sorted((tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in df.collect()), key=repr)


SCHEMAS = [
    "topic string, partition int, offset long, timestamp timestamp, key binary",
    "key binary, offset bigint",
    "value binary, headers array<struct<key:string,value:binary>>, offset long, is_control boolean",
    "record_count int, topic string, uncompressed_bytes int",
    "key binary, value_size int, partition int",
]


@pytest.mark.spark
@pytest.mark.parametrize("ddl", SCHEMAS)
def test_user_schema_equals_projected_full_read(spark, columns_dir, ddl):
    names = [f.split()[0] for f in ddl.split(", ")]
    full = spark.read.format("kafka-log").option("columns", "*").load(columns_dir)
    df = spark.read.format("kafka-log").schema(ddl).load(columns_dir)
    assert df.columns == names
    assert _collect(df) == _collect(full.select(*names))
    opt = spark.read.format("kafka-log").option("columns", ",".join(names)).load(columns_dir)
    assert opt.schema == df.schema and _collect(opt) == _collect(df)
    if "offset" in names:                       # a pushed filter on a pruned read
        assert _collect(df.where("offset >= 4 AND offset < 40")) == \
            _collect(full.where("offset >= 4 AND offset < 40").select(*names))


@pytest.mark.spark
def test_row_per_batch_through_spark(spark, columns_dir):
    df = spark.read.format("kafka-log").option("rowPerBatch", "true").load(
        columns_dir, schema="topic string, partition int, base_offset long, record_count int")
    rows = sorted(tuple(r) for r in df.collect())
    expected = scan(columns_dir, columns=("topic", "partition", "base_offset", "record_count"), empty_batches=True)
    assert rows == sorted({tuple(r.values()) for r in expected.to_pylist()})


@pytest.mark.spark
def test_header_only_count_through_spark(spark, columns_dir, tmp_path):
    sd = str(tmp_path / f"stats-{uuid.uuid4().hex}")
    n = spark.read.format("kafka-log").schema("topic string").option("statsPath", sd).load(columns_dir).count()
    assert n == spark.read.format("kafka-log").load(columns_dir).count()
    from spark_jobs.scan import collect_stats

    st_ = collect_stats(sd)
    assert st_.records_decoded == 0 and st_.batches_from_header > 0


@pytest.mark.spark
@pytest.mark.parametrize("ddl, options, message", [
    ("topic string, nosuch int", {}, "kafka-log has no column 'nosuch'"),
    ("offset string", {}, "kafka-log column 'offset' is bigint, not string"),
    ("key binary, partition bigint", {}, "kafka-log column 'partition' is int, not bigint"),
    ("offset long not null", {}, "drop NOT NULL"),
    (None, {"columns": "offset,nope"}, "kafka-log has no column 'nope'"),
    ("topic string, key binary", {"rowPerBatch": "true"}, "rowPerBatch gives one row per batch"),
    (None, {"rowPerBatch": "true"}, "drop offset, timestamp, key, value, headers"),
    ("offset long", {"columns": "key"}, "differ from the columns option"),
])
def test_malformed_user_schema_is_a_clear_error(spark, columns_dir, ddl, options, message):
    r = spark.read.format("kafka-log")
    if ddl:
        r = r.schema(ddl)
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(Exception, match=message):
        r.load(columns_dir).count()
    # the session and its Python workers are fine: the next read counts right
    expected = scan(columns_dir).num_rows
    assert spark.read.format("kafka-log").schema("offset long").load(columns_dir).count() == expected
    assert os.path.isdir(columns_dir)
