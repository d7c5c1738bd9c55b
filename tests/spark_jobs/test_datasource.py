"""The kafka-log data source through Spark: content, pruning (by options and by pushed WHERE filters, asserted on
the segments the executors opened), splitting, corruption and bad input."""

from __future__ import annotations

import os
import struct
import uuid

import pytest

from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch
from spark_jobs.planning import list_partition_dirs, list_segments
from spark_jobs.scan import SPARK_TYPES, collect_stats

from .builders import HOUR, T0, dir_digest, plain_read_through_storage, write_storage_partition

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("ds"))
    produced = []
    for p in range(2):
        batches = []
        for i in range(30):
            recs = [Record(f"user-{(i + j) % 13}".encode() if (i + j) % 10 else None,
                           None if (i * 3 + j) % 17 == 0 else os.urandom(20 + (i * 7 + j) % 90),
                           [("h1", b"a"), ("h2", None)] if j == 1 else [],
                           timestamp=T0 + i * HOUR + j) for j in range(1 + (i + p) % 4)]
            batches.append((recs, {"compression": (i + p) % 5}))
        produced.append(write_storage_partition(d, "clicks.web-eu", p, batches, {"segment.bytes": 1500}))
    produced.append(write_storage_partition(d, "audit", 0, [([Record(b"a", b"b", timestamp=T0)], {})], {}))
    expected = sorted((r["topic"], r["partition"], r["offset"], r["timestamp_ms"], r["key"], r["value"],
                       r["headers"]) for pr in produced for r in pr.rows)
    codecs = {(r["topic"], r["partition"], r["offset"]): r["compression"] for pr in produced for r in pr.rows}
    return d, expected, codecs


def _rows(df):
    out = []
    for r in df.collect():
        ts = None if r.timestamp is None else int(r.timestamp.timestamp() * 1000 + 0.5)
        out.append((r.topic, r.partition, r.offset, ts, None if r.key is None else bytes(r.key),
                    None if r.value is None else bytes(r.value),
                    [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers]))
    return sorted(out)


def _stats_dir(tmp_path):
    return str(tmp_path / f"stats-{uuid.uuid4().hex}")


def test_reads_everything_byte_exact(spark, logdir):
    d, expected, codecs = logdir
    before = dir_digest(d)
    df = spark.read.format("kafka-log").load(d)
    assert df.schema.simpleString() == (  # Kafka's Spark source's columns, and is_control
        "struct<topic:string,partition:int,offset:bigint,timestamp:timestamp,timestamp_type:int,key:binary,"
        "value:binary,headers:array<struct<key:string,value:binary>>,is_control:boolean>")
    assert _rows(df) == expected
    every = spark.read.format("kafka-log").option("columns", "*").load(d)
    assert every.columns == list(SPARK_TYPES) and every.schema.simpleString().startswith(
        df.schema.simpleString()[:-len(",is_control:boolean>")] + ",base_offset:bigint")
    assert _rows(every) == expected
    assert {(r.topic, r.partition, r.offset): r.compression for r in every.collect()} == codecs
    assert dir_digest(d) == before


def test_one_input_partition_per_segment_and_splits(spark, logdir):
    d, expected, _ = logdir
    nsegs = sum(len(list_segments(p)) for p in list_partition_dirs(d))
    df = spark.read.format("kafka-log").load(d)
    assert df.rdd.getNumPartitions() == nsegs
    split = spark.read.format("kafka-log").option("maxSliceBytes", "400").load(d)
    assert split.rdd.getNumPartitions() > nsegs
    assert split.count() == len(expected)


def test_counts_equal_plain_python_read_through_storage(spark, logdir):
    d, _, _ = logdir
    ref = plain_read_through_storage(os.path.join(d, "clicks.web-eu-1"))
    df = spark.read.format("kafka-log").option("topics", "clicks.web-eu").option("partitions", "1").load(d)
    got = [(r.offset, None if r.key is None else bytes(r.key)) for r in df.orderBy("offset").collect()]
    assert got == [(o, k) for o, _, k, *_ in ref]


def test_option_pruning_opens_only_needed_segments(spark, logdir, tmp_path):
    d, expected, _ = logdir
    segs = list_segments([p for p in list_partition_dirs(d) if p.partition == 1 and p.topic != "audit"][0])
    assert len(segs) >= 5
    lo, hi = segs[3].base_offset, segs[3].next_base_offset
    sd = _stats_dir(tmp_path)
    df = (spark.read.format("kafka-log").option("statsPath", sd).option("topics", "clicks.web-eu")
          .option("partitions", "1").option("startingOffset", str(lo)).option("endingOffset", str(hi)).load(d))
    got = _rows(df)
    assert got == [r for r in expected if r[0] == "clicks.web-eu" and r[1] == 1 and lo <= r[2] < hi]
    assert collect_stats(sd).segments_opened == 1


def test_where_filters_are_pushed_and_prune(spark, logdir, tmp_path):
    d, expected, _ = logdir
    segs = list_segments([p for p in list_partition_dirs(d) if p.partition == 0 and p.topic != "audit"][0])
    lo = segs[-2].base_offset + 1
    sd = _stats_dir(tmp_path)
    df = spark.read.format("kafka-log").option("statsPath", sd).load(d)
    q = df.where(f"topic = 'clicks.web-eu' AND partition = 0 AND offset >= {lo}")
    assert _rows(q) == [r for r in expected if r[0] == "clicks.web-eu" and r[1] == 0 and r[2] >= lo]
    assert collect_stats(sd).segments_opened == 2


def test_timestamp_filters_pushdown_and_residuals(spark, logdir, tmp_path):
    d, expected, _ = logdir
    cut = T0 + 30 * HOUR
    sd = _stats_dir(tmp_path)
    df = spark.read.format("kafka-log").option("statsPath", sd).load(d)
    q = df.where(f"timestamp >= timestamp_millis({cut}) AND timestamp < timestamp_millis({cut + 5 * HOUR})")
    assert _rows(q) == [r for r in expected if r[3] is not None and cut <= r[3] < cut + 5 * HOUR]
    total_segments = sum(len(list_segments(p)) for p in list_partition_dirs(d))
    assert collect_stats(sd).segments_opened < total_segments / 2
    # filters the reader cannot apply exactly are handed back to Spark: the answer stays right
    q2 = df.where("offset IN (3, 5, 70) AND key IS NOT NULL AND (partition = 1 OR offset = 4)")
    assert _rows(q2) == [r for r in expected if r[2] in (3, 5, 70) and r[4] is not None and (r[1] == 1 or r[2] == 4)]
    q3 = df.where("topic LIKE 'click%' AND NOT (partition = 0)")
    assert _rows(q3) == [r for r in expected if r[0].startswith("click") and r[1] != 0]


def test_works_without_the_pushdown_conf(spark, logdir, tmp_path):
    d, expected, _ = logdir
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        sd = _stats_dir(tmp_path)
        df = spark.read.format("kafka-log").option("statsPath", sd).option("startingOffset", "20").load(d)
        assert _rows(df.where("partition = 0")) == [r for r in expected if r[1] == 0 and r[2] >= 20]
        opened = collect_stats(sd).segments_opened
        assert 0 < opened < sum(len(list_segments(p)) for p in list_partition_dirs(d))
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_corrupt_batch_through_spark(spark, tmp_path):
    d = str(tmp_path / "c")
    write_storage_partition(d, "t", 0, [([Record(b"k", b"v" * 50, timestamp=T0 + i)], {}) for i in range(6)])
    log = os.path.join(d, "t-0", "00000000000000000000.log")
    data = bytearray(open(log, "rb").read())
    pos = 2 * (12 + struct.unpack_from(">i", data, 8)[0])
    data[pos + 65] ^= 0x55
    open(log, "wb").write(data)
    with pytest.raises(Exception) as e:
        spark.read.format("kafka-log").load(d).count()
    assert "00000000000000000000.log" in str(e.value) and f"position {pos}" in str(e.value)
    sd = _stats_dir(tmp_path)
    df = spark.read.format("kafka-log").option("ignoreCorruptBatches", "true").option("statsPath", sd).load(d)
    assert df.count() == 5
    assert collect_stats(sd).corrupt_batches == 1


def test_control_batches_and_transactions_are_visible(spark, tmp_path):
    d = str(tmp_path / "tx")
    batches = [([Record(b"k", b"v", timestamp=T0)], {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0,
                                                      "is_transactional": True})]
    write_storage_partition(d, "tx", 0, batches)
    from .builders import storage_log

    lg = storage_log(os.path.join(d, "tx-0"), {})
    try:
        from storage.producer_state import ORIGIN_COORDINATOR

        lg.append_as_leader(bytearray(build_end_txn_marker_batch(commit=True, producer_id=7, producer_epoch=0,
                                                                 coordinator_epoch=0, timestamp=T0 + 1)),
                            0, now_ms=T0 + 1, origin=ORIGIN_COORDINATOR)
    finally:
        lg.close()
    rows = spark.read.format("kafka-log").option("columns", "*").load(d).orderBy("offset").collect()
    assert [(r.offset, r.is_transactional, r.is_control, r.producer_id) for r in rows] == [
        (0, True, False, 7), (1, True, True, 7)]


def test_not_a_log_dir_is_a_clear_error(spark, tmp_path):
    (tmp_path / "random").mkdir()
    (tmp_path / "random" / "notes.txt").write_text("hello")
    with pytest.raises(Exception, match="not a Kafka log directory"):
        spark.read.format("kafka-log").load(str(tmp_path / "random")).count()


def test_empty_log_dir_reads_nothing(spark, tmp_path):
    (tmp_path / "meta.properties").write_text("version=1\n")
    assert spark.read.format("kafka-log").load(str(tmp_path)).count() == 0


def test_independent_dir_and_torn_tail_through_spark(spark, tmp_path):
    """kafka-python-built batches with hand-laid index files, read through Spark; then a half-written batch at the
    end of the live segment is ignored (the snapshot ends at the last whole batch)."""
    from .builders import kafka_python_batch, write_independent_partition

    d = str(tmp_path / "indep")
    batches = [kafka_python_batch([(T0 + i * 1000 + j, b"k%d" % j, b"v" * (i + j), [("i", b"%d" % i)])
                                   for j in range(4)], codec=i % 5) for i in range(60)]
    offsets = write_independent_partition(d, "indep.topic-1", 0, batches, segment_bytes=3000,
                                          index_interval_bytes=400)
    expected = [o + j for o, _ in offsets for j in range(4)]
    df = spark.read.format("kafka-log").option("maxSliceBytes", "1000").load(d)
    assert [r.offset for r in df.orderBy("offset").collect()] == expected
    seg = sorted(f for f in os.listdir(os.path.join(d, "indep.topic-1-0")) if f.endswith(".log"))[-1]
    with open(os.path.join(d, "indep.topic-1-0", seg), "ab") as f:
        f.write(bytes(kafka_python_batch([(T0, b"k", b"torn" * 40, [])]))[:50])
    sd = _stats_dir(tmp_path)
    assert spark.read.format("kafka-log").option("statsPath", sd).load(d).count() == len(expected)
    assert collect_stats(sd).torn_tails == 1


def test_empty_batch_rows_only_when_asked(spark, tmp_path):
    d = str(tmp_path / "e")
    from .builders import storage_log

    lg = storage_log(os.path.join(d, "e-0"), {})
    lg.append_as_leader(bytearray(build_batch([Record(b"k", b"v", timestamp=T0)])), 0, now_ms=T0)
    lg.append_as_follower(bytearray(build_batch([], base_offset=1, last_offset_delta=0, max_timestamp=T0)),
                          now_ms=T0)
    lg.close()
    assert spark.read.format("kafka-log").load(d).count() == 1
    rows = (spark.read.format("kafka-log").option("emptyBatches", "true").option("columns", "*").load(d)
            .orderBy("base_offset").collect())
    assert [(r.offset, r.base_offset, r.record_count, r.batch_size_bytes) for r in rows] == [(0, 0, 1, 70),
                                                                                              (None, 1, 0, 61)]
    q = spark.read.format("kafka-log").option("emptyBatches", "true").load(d).where("offset >= 0")
    assert q.count() == 1                  # with empty-batch rows, offset filters stay with Spark
