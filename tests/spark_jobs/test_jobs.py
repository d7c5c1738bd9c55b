"""The three jobs on a generated log directory with known answers.

Correct by comparison: the compaction report's prediction equals what storage/'s own log cleaner removes when run
on a copy of the directory with the same clock; the retention report's deletions equal what storage/'s retention
deletes on a copy with the same clock; counts and offsets equal a plain-Python read through storage/. Topic configs
come from the directory's own metadata log (``__cluster_metadata-0``, Kafka's ConfigRecords).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from protocol.generated.metadata import ConfigRecord, RemoveTopicRecord, TopicRecord
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch
from storage.checkpoints import OffsetCheckpointFile

from .builders import DAY, HOUR, T0, dir_digest, plain_read_through_storage, storage_log, write_storage_partition

pytestmark = pytest.mark.spark

NOW = T0 + 5 * DAY + 3 * HOUR
METADATA = {
    "accounts": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.3", "delete.retention.ms": "3600000",
                 "segment.bytes": "2000"},
    "events.v1": {"retention.ms": str(2 * DAY), "retention.bytes": "9000", "segment.bytes": "1500"},
    "gone": {"cleanup.policy": "compact"},
}


def _frame(rec) -> bytes:
    from cluster.metadata_serde import encode_record   # the broker's own framing (MetadataRecordSerde)

    return encode_record(rec)


def _write_metadata_log(d: str) -> None:
    recs = []
    for i, (topic, cfg) in enumerate(METADATA.items()):
        tid = bytes(15) + bytes([i + 10])
        recs.append(TopicRecord(name=topic, topic_id=tid))
        for k, v in cfg.items():
            recs.append(ConfigRecord(resource_type=2, resource_name=topic, name=k, value=v))
    recs.append(ConfigRecord(resource_type=2, resource_name="accounts", name="max.message.bytes", value="100000"))
    recs.append(ConfigRecord(resource_type=2, resource_name="accounts", name="max.message.bytes", value=None))
    recs.append(RemoveTopicRecord(topic_id=bytes(15) + bytes([12])))
    lg = storage_log(os.path.join(d, "__cluster_metadata-0"), {"retention.ms": "-1"})
    try:
        for chunk in range(0, len(recs), 4):
            batch = [Record(None, _frame(r), timestamp=T0) for r in recs[chunk:chunk + 4]]
            lg.append_as_leader(bytearray(build_batch(batch)), 0, now_ms=T0)
    finally:
        lg.close()


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("known"))
    _write_metadata_log(d)
    produced = {}
    # accounts-0: churning keys, tombstones, null keys, every codec
    b = []
    for i in range(70):
        recs = [Record(None if (i * 5 + j) % 23 == 0 else f"acct-{(i * 3 + j) % 17}".encode(),
                       None if (i + j) % 9 == 0 else f"balance={i * 10 + j}".encode() * (1 + j),
                       [("src", b"web")] if j == 0 else [], timestamp=T0 + i * 60_000 + j) for j in range(1 + i % 4)]
        b.append((recs, {"compression": i % 5}))
    produced[("accounts", 0)] = write_storage_partition(d, "accounts", 0, b, {"segment.bytes": 2000})
    # accounts-1: cleaned once up to a checkpoint (the checkpoint file says so), more churn after it
    b = [([Record(f"k{(i + j) % 5}".encode(), b"x" * (i % 30), timestamp=T0 + i * 1000) for j in range(3)],
          {"compression": 3 if i % 2 else 0}) for i in range(40)]
    produced[("accounts", 1)] = write_storage_partition(d, "accounts", 1, b, {"segment.bytes": 2000})
    # accounts-2: an idempotent producer, active at NOW: its last batch is kept even if emptied
    b = [([Record(f"p{i % 3}".encode(), f"v{i}".encode(), timestamp=NOW - HOUR + i)],
          {"producer_id": 42, "producer_epoch": 1, "base_sequence": i}) for i in range(30)]
    produced[("accounts", 2)] = write_storage_partition(d, "accounts", 2, b, {"segment.bytes": 800})
    # events.v1: delete policy over 5 days, two skewed partitions, some timestamps going backwards
    for p, n in ((0, 40), (1, 90)):
        b = []
        for i in range(n):
            ts = T0 + i * (5 * DAY // n) - (2 * HOUR if i % 11 == 5 else 0)
            b.append(([Record(None, os.urandom(30 + (i % 50)), timestamp=ts + j) for j in range(3)],
                      {"compression": (i + p) % 5}))
        produced[("events.v1", p)] = write_storage_partition(d, "events.v1", p, b, {"segment.bytes": 1500})
    # payments: a transaction, committed
    b = [([Record(b"o1", b"paid", timestamp=T0 + 5)], {"producer_id": 9, "producer_epoch": 3, "base_sequence": 0,
                                                       "is_transactional": True})]
    produced[("payments", 0)] = write_storage_partition(d, "payments", 0, b)
    lg = storage_log(os.path.join(d, "payments-0"), {})
    try:
        from storage.producer_state import ORIGIN_COORDINATOR

        lg.append_as_leader(bytearray(build_end_txn_marker_batch(commit=True, producer_id=9, producer_epoch=3,
                                                                 coordinator_epoch=0, timestamp=T0 + 6)),
                            0, now_ms=T0 + 6, origin=ORIGIN_COORDINATOR)
    finally:
        lg.close()
    OffsetCheckpointFile(os.path.join(d, "cleaner-offset-checkpoint")).write({("accounts", 1): 60})
    return d, produced


def _args(d, out, *extra):
    return ["--log-dirs", d, "--out", str(out), "--now-ms", str(NOW), *extra]


# -- compaction ----------------------------------------------------------------------------------------------

def _storage_cleaner_on_copy(d, tmp_path):
    """Run storage/'s LogCleaner on a copy with the same clock; per partition (records, bytes) before and after."""
    from storage.cleaner import LogCleaner
    from storage.config import LogConfig, LogManagerConfig
    from storage.log import Log

    copy = str(tmp_path / "cleaned")
    shutil.copytree(d, copy)
    logs = {}
    for p in (0, 1, 2):
        props = {k: v for k, v in METADATA["accounts"].items()}
        logs[("accounts", p)] = Log.open(os.path.join(copy, f"accounts-{p}"), LogConfig.from_props(props),
                                         now_ms=NOW)
    for lg in logs.values():
        lg.update_high_watermark(lg.log_end_offset)      # a single-node broker's high watermark
    size = {tp: lg.size for tp, lg in logs.items()}
    recs = {tp: sum(1 for b in lg.iter_batches(0) for _ in _decode(b)) for tp, lg in logs.items()}
    cleaner = LogCleaner(LogManagerConfig(log_dirs=(copy,)), lambda: logs, [copy])
    for _ in range(10):                                  # each log is cleaned at most once, filthiest first
        if not cleaner.clean_once(NOW):
            break
    out = {}
    for tp, lg in logs.items():
        out[tp] = (recs[tp] - sum(1 for b in lg.iter_batches(0) for _ in _decode(b)), size[tp] - lg.size)
        lg.close()
    return out


def _decode(b):
    from protocol.record_codec import decode_batch

    h, records = decode_batch(b)
    return [] if h.is_control else records


@pytest.fixture(scope="module")
def local_compaction(spark, known, tmp_path_factory):
    """The compaction report on ``known`` in local mode (the shared session): its result, its output directory and
    the directory's digest before it ran. The local-cluster test compares its tables with these."""
    from spark_jobs import compaction_report

    d, _ = known
    out = tmp_path_factory.mktemp("compaction-local") / "out"
    before = dir_digest(d)
    return compaction_report.main(_args(d, out), spark=spark), out, before


def test_compaction_report_equals_storage_cleaner(known, local_compaction, tmp_path):
    d, produced = known
    res, out, before = local_compaction
    assert dir_digest(d) == before
    rows = {(r.topic, r.partition): r for r in res["rows"]}
    actual = _storage_cleaner_on_copy(d, tmp_path)
    for tp, (removed_records, removed_bytes) in actual.items():
        r = rows[tp]
        assert r.compact and r.cleanup_policy == "compact"
        assert (r.records_removed_now, r.bytes_removed_now) == (removed_records, removed_bytes), tp
    assert rows[("accounts", 0)].records_removed_now > 0 and rows[("accounts", 0)].would_clean_now
    assert rows[("accounts", 1)].first_dirty_offset == 60
    # figures from the data equal the reference computed from what was written
    for tp in (("accounts", 0), ("accounts", 1), ("accounts", 2)):
        w = produced[tp].rows
        r = rows[tp]
        assert r.records == len(w)
        assert r.distinct_keys == len({x["key"] for x in w if x["key"] is not None})
        assert r.tombstones == sum(x["value"] is None for x in w)
        assert r.null_key_records == sum(x["key"] is None for x in w)
        assert r.clean_records + r.dirty_records + r.uncleanable_records == len(w)
    assert rows[("accounts", 1)].clean_records == 60
    assert not rows[("events.v1", 0)].compact and rows[("events.v1", 0)].records_removed_now == 0
    assert ("gone", 0) not in rows
    # keys with the most versions
    versions = Counter((x["key"]) for x in produced[("accounts", 0)].rows + produced[("accounts", 1)].rows
                       + produced[("accounts", 2)].rows if x["key"] is not None)
    top = res["top_keys"].collect()
    assert top[0].versions == max(versions.values())
    assert {bytes(t.key): t.versions for t in top} == {k: v for k, v in versions.items()
                                                      if k in {bytes(t.key) for t in top}}
    assert (out / "report.md").exists() and (out / "compaction_bytes.png").stat().st_size > 1000
    assert pq.read_table(str(out / "compaction_partitions.parquet")).num_rows == len(rows)


def test_compaction_report_decodes_each_record_at_most_three_times(known, local_compaction):
    """Bounded passes, nothing cached per record: one row per batch, one per key, the kept offsets per batch."""
    d, _ = known
    _, out, _ = local_compaction
    decoded = int(re.search(r"records decoded: (\d+)", (out / "report.md").read_text()).group(1))
    on_disk = sum(len(plain_read_through_storage(os.path.join(d, name))) for name in os.listdir(d)
                  if name.rsplit("-", 1)[0] in ("accounts", "events.v1", "payments"))
    assert on_disk <= decoded <= 3 * on_disk


def test_compaction_model_second_pass_removes_expired_tombstones(spark, known, tmp_path):
    """After a real cleaning pass sets delete horizons, the report on the cleaned directory predicts the second
    pass (tombstones past their horizon go) and storage's cleaner agrees."""
    from spark_jobs import compaction_report
    from storage.cleaner import LogCleaner
    from storage.config import LogConfig, LogManagerConfig
    from storage.log import Log

    d, _ = known
    work = str(tmp_path / "work")
    os.makedirs(work)
    shutil.copytree(os.path.join(d, "accounts-0"), os.path.join(work, "accounts-0"))
    shutil.copytree(os.path.join(d, "__cluster_metadata-0"), os.path.join(work, "__cluster_metadata-0"))
    cfg = LogConfig.from_props(dict(METADATA["accounts"], **{"min.cleanable.dirty.ratio": "0.01"}))

    def clean(now):
        lg = Log.open(os.path.join(work, "accounts-0"), cfg, now_ms=now)
        lg.update_high_watermark(lg.log_end_offset)
        before = (sum(len(_decode(b)) for b in lg.iter_batches(0)), lg.size)
        LogCleaner(LogManagerConfig(log_dirs=(work,)), lambda: {("accounts", 0): lg}, [work]).force_clean(lg, now)
        after = (sum(len(_decode(b)) for b in lg.iter_batches(0)), lg.size)
        lg.close()
        return before[0] - after[0], before[1] - after[1]

    clean(NOW)
    # append more so the first pass's output is dirty again, then predict and clean two hours later
    later = NOW + 2 * HOUR
    extra = [([Record(f"acct-{i}".encode(), b"new", timestamp=later)], {}) for i in range(17)]
    write_storage_partition(work, "accounts", 0, extra, {"segment.bytes": "2000"}, now_ms=later)
    lg = Log.open(os.path.join(work, "accounts-0"), cfg, now_ms=later)
    lg.roll(later)                                       # the new records leave the active segment
    lg.close()
    res = compaction_report.main(["--log-dirs", work, "--out", str(tmp_path / "o2"), "--now-ms", str(later),
                                  "--config", "min.cleanable.dirty.ratio=0.01"], spark=spark)
    r = [x for x in res["rows"] if x.topic == "accounts"][0]
    assert r.min_cleanable_dirty_ratio == 0.3          # the metadata log wins over --config
    removed = clean(later)
    assert (r.pass_records_removed, r.pass_bytes_removed) == removed
    assert r.pass_tombstones_removed > 0


def test_compaction_counts_empty_batches_left_by_earlier_cleanings(spark, tmp_path):
    """A record-less batch (as a cleaning pass leaves behind) is dropped by the next pass unless it is the round's
    last batch or an active producer's: the report sees it (``emptyBatches`` rows) and agrees with storage."""
    from spark_jobs import compaction_report
    from storage.cleaner import LogCleaner
    from storage.config import LogConfig, LogManagerConfig
    from storage.log import Log

    d = str(tmp_path / "emp")
    props = {"cleanup.policy": "compact", "segment.bytes": "100000"}
    lg = storage_log(os.path.join(d, "emp-0"), props)
    for k, v in ((b"k1", b"v1"), (b"k2", b"v2")):
        lg.append_as_leader(bytearray(build_batch([Record(k, v, timestamp=T0)])), 0, now_ms=T0)
    lg.append_as_follower(bytearray(build_batch([], base_offset=lg.log_end_offset, last_offset_delta=0,
                                                max_timestamp=T0)), now_ms=T0)
    for k, v in ((b"k1", b"v3"), (b"k2", b"v4")):
        lg.append_as_leader(bytearray(build_batch([Record(k, v, timestamp=T0)])), 0, now_ms=T0)
    lg.roll(T0)
    lg.append_as_leader(bytearray(build_batch([Record(b"k3", b"x", timestamp=T0)])), 0, now_ms=T0)
    lg.close()
    res = compaction_report.main(["--log-dirs", d, "--out", str(tmp_path / "o"), "--now-ms", str(T0 + HOUR),
                                  "--config", "cleanup.policy=compact"], spark=spark)
    r = res["rows"][0]
    assert r.records == 5 and r.batches_emptied == 3            # k1@0, k2@1 and the empty batch at 2
    copy = str(tmp_path / "copy")
    shutil.copytree(d, copy)
    lg = Log.open(os.path.join(copy, "emp-0"), LogConfig.from_props(props), now_ms=T0 + HOUR)
    lg.update_high_watermark(lg.log_end_offset)
    size = lg.size
    LogCleaner(LogManagerConfig(log_dirs=(copy,)), lambda: {("emp", 0): lg}, [copy]).force_clean(lg, T0 + HOUR)
    removed = size - lg.size
    lg.close()
    assert (r.records_removed_now, r.bytes_removed_now) == (2, removed) and removed == 2 * 72 + 61


def test_compaction_report_stops_on_a_corrupt_batch_or_skips_and_counts_it(spark, tmp_path):
    """A corrupt batch stops the report with its file and position named; with ``--ignore-corrupt-batches`` every
    pass (the header pass and the per-partition record passes) skips it and the Scan section counts and names it."""
    from spark_jobs import compaction_report

    d = str(tmp_path / "c")
    write_storage_partition(d, "t", 0, [([Record(b"k%d" % (i % 3), b"v" * 50, timestamp=T0 + i)], {})
                                        for i in range(8)], {"segment.bytes": "100000"})
    log = os.path.join(d, "t-0", "00000000000000000000.log")
    data = bytearray(open(log, "rb").read())
    pos = 2 * (12 + struct.unpack_from(">i", data, 8)[0])       # the third batch: all eight have one size
    data[pos + 65] ^= 0x55                                      # a byte of its records: the CRC no longer matches
    open(log, "wb").write(data)
    compact = ["--config", "cleanup.policy=compact"]
    with pytest.raises(Exception) as e:
        compaction_report.main(_args(d, tmp_path / "stopped", *compact), spark=spark)
    assert "00000000000000000000.log" in str(e.value) and f"position {pos}" in str(e.value)
    res = compaction_report.main(_args(d, tmp_path / "skipped", *compact, "--ignore-corrupt-batches"), spark=spark)
    (row,) = res["rows"]
    assert row.records == 7 and row.distinct_keys == 3
    report = (tmp_path / "skipped" / "report.md").read_text()
    assert re.search(r"corrupt batches skipped: [1-9]", report) and f"00000000000000000000.log@{pos}" in report


# -- retention -----------------------------------------------------------------------------------------------

def _storage_retention_on_copy(d, tmp_path, name, overrides=None):
    from storage.config import LogConfig
    from storage.log import Log

    copy = str(tmp_path / name)
    shutil.copytree(d, copy)
    out = {}
    for p in (0, 1):
        props = dict(METADATA["events.v1"], **(overrides or {}))
        lg = Log.open(os.path.join(copy, f"events.v1-{p}"), LogConfig.from_props(props), now_ms=NOW)
        lg.update_high_watermark(lg.log_end_offset)
        bases = [s.base_offset for s in lg.log_segments()]
        size = lg.size
        lg.delete_old_segments(NOW)
        remaining = {s.base_offset for s in lg.log_segments()}
        out[("events.v1", p)] = ({b for b in bases if b not in remaining}, size - lg.size + 0, lg.log_start_offset)
        lg.close()
    return out


def test_retention_report_equals_storage_retention(spark, known, tmp_path):
    from spark_jobs import retention_report

    d, produced = known
    before = dir_digest(d)
    res = retention_report.main(_args(d, tmp_path / "out", "--what-if", "retention.ms=86400000"), spark=spark)
    assert dir_digest(d) == before
    segs = defaultdict(dict)
    for s in res["segment_rows"]:
        segs[(s.topic, s.partition)][s.segment] = s
    parts = {(p.topic, p.partition): p for p in res["partition_rows"]}
    now = _storage_retention_on_copy(d, tmp_path, "now")
    what_if = _storage_retention_on_copy(d, tmp_path, "wi", {"retention.ms": "86400000"})
    for tp in now:
        deleted, _, start = now[tp]
        assert {b for b, s in segs[tp].items() if s.deleted_now_by} == deleted, tp
        assert parts[tp].segments_deleted_now == len(deleted)
        assert parts[tp].bytes_deleted_now == sum(segs[tp][b].size for b in deleted)
        assert parts[tp].log_start_after_now == start
        wi_deleted, _, wi_start = what_if[tp]
        assert {b for b, s in segs[tp].items() if s.deleted_what_if_by} == wi_deleted, tp
        assert parts[tp].log_start_after_what_if == wi_start
    assert parts[("events.v1", 1)].segments_deleted_now > 0
    assert {s.deleted_now_by for s in segs[("events.v1", 1)].values()} >= {"retention.bytes"} or \
        {s.deleted_now_by for s in segs[("events.v1", 1)].values()} >= {"retention.ms"}
    assert parts[("events.v1", 1)].segments_deleted_what_if > parts[("events.v1", 1)].segments_deleted_now
    assert parts[("accounts", 0)].segments_deleted_now == 0           # compact only: retention leaves it
    # per-segment figures equal a plain-Python read through storage
    for tp in (("events.v1", 0), ("accounts", 1)):
        ref = plain_read_through_storage(os.path.join(d, f"{tp[0]}-{tp[1]}"))
        bases = sorted(segs[tp])
        for i, b in enumerate(bases):
            hi = bases[i + 1] if i + 1 < len(bases) else 1 << 62
            in_seg = [r for r in ref if b <= r[0] < hi]
            s = segs[tp][b]
            assert (s.records, s.first_offset) == (len(in_seg), in_seg[0][0])
            assert s.max_timestamp == max(r[1] for r in in_seg)
            assert s.min_timestamp == min(r[1] for r in in_seg)
    # timestamps going backwards, partition skew
    back = {(b.topic, b.partition): b.backwards_records for b in res["backwards_rows"]}
    for tp in (("events.v1", 0), ("events.v1", 1)):
        ts = [r["timestamp_ms"] for r in produced[tp].rows]
        assert back.get(tp, 0) == sum(1 for a, b in zip(ts, ts[1:]) if b < a)
    skew = {s.topic: s for s in res["skew_rows"]}
    sizes = [sum(os.path.getsize(os.path.join(d, f"events.v1-{p}", f))
                 for f in os.listdir(os.path.join(d, f"events.v1-{p}")) if f.endswith(".log")) for p in (0, 1)]
    assert (skew["events.v1"].min_bytes, skew["events.v1"].max_bytes) == (min(sizes), max(sizes))
    out = tmp_path / "out"
    assert (out / "retention_bytes_by_age.png").exists() and "what-if" in (out / "report.md").read_text()


# -- topic profile -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_profile(spark, known, tmp_path_factory):
    """The topic profile of ``known`` in local mode (the shared session) and its output directory; the
    local-cluster test compares its tables with these."""
    from spark_jobs import topic_profile

    d, _ = known
    out = tmp_path_factory.mktemp("profile-local") / "out"
    return topic_profile.main(_args(d, out), spark=spark), out


def test_topic_profile_figures(known, local_profile):
    d, produced = known
    res, out = local_profile
    rows = res["rows"]
    by_topic = defaultdict(list)
    for (t, _), pr in produced.items():
        by_topic[t].extend(pr.rows)
    sizes = {s.topic: s for s in rows["sizes"]}
    for t, w in by_topic.items():
        assert sizes[t].records == len(w)
        assert sizes[t].distinct_keys == len({x["key"] for x in w if x["key"] is not None})
        assert sizes[t].null_keys == sum(x["key"] is None for x in w)
        vl = [len(x["value"] or b"") for x in w]
        assert (sizes[t].min_value_bytes, sizes[t].max_value_bytes) == (min(vl), max(vl))
    hourly = defaultdict(int)
    for x in by_topic["events.v1"]:
        hourly[x["timestamp_ms"] // HOUR] += 1
    got = {int(h.hour.timestamp() * 1000) // HOUR: h.records for h in rows["hourly"] if h.topic == "events.v1"}
    assert got == dict(hourly)
    codecs = {(c.topic, c.compression): c for c in rows["codecs"]}
    assert {c for t, c in codecs if t == "accounts"} == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert codecs[("accounts", "gzip")].ratio > 1.0 and codecs[("accounts", "none")].ratio == pytest.approx(1.0)
    prods = {(p.topic, p.producer_id, p.producer_epoch): p for p in rows["producers"]}
    assert prods[("accounts", 42, 1)].records == 30
    assert (prods[("payments", 9, 3)].transactional_batches, prods[("payments", 9, 3)].control_batches) == (2, 1)
    kinds = {k.topic: k for k in rows["batch_kinds"]}
    assert (kinds["payments"].transactional_batches, kinds["payments"].control_batches) == (2, 1)
    for png in ("profile_hourly.png", "profile_value_sizes.png", "profile_compression.png"):
        assert (out / png).stat().st_size > 1000
    assert "## Compression" in (out / "report.md").read_text()


def test_configs_from_metadata_log(known):
    from spark_jobs.configs import load_topic_configs

    d, _ = known
    c = load_topic_configs(d, ["events.v1:retention.ms=1", "accounts:retention.ms=5"])
    assert c.for_topic("accounts").compact and c.for_topic("accounts").min_cleanable_dirty_ratio == 0.3
    assert c.for_topic("accounts").max_message_bytes == 1024 * 1024 + 12          # deleted by a null ConfigRecord
    assert c.for_topic("accounts").retention_ms == 5                               # not in the metadata log
    assert c.for_topic("events.v1").retention_ms == 2 * DAY                         # the metadata log wins
    assert c.source("events.v1", "retention.ms") == "metadata log (topic)"
    assert "gone" not in c.metadata.topic                                            # RemoveTopicRecord
    assert c.for_topic("other").cleanup_policy == ("delete",)


def test_job_refuses_to_write_into_the_log_dir(spark, known):
    from spark_jobs import topic_profile

    d, _ = known
    with pytest.raises(SystemExit, match="inside the log directory"):
        topic_profile.main(["--log-dirs", d, "--out", os.path.join(d, "report")], spark=spark)


def test_job_on_something_that_is_not_a_log_dir(spark, tmp_path):
    from spark_jobs import retention_report
    from spark_jobs.planning import NotALogDirError

    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(NotALogDirError):
        retention_report.main(["--log-dirs", str(tmp_path / "photos"), "--out", str(tmp_path / "o")], spark=spark)


def test_stats_dir_receives_the_scan_counters(spark, known, tmp_path):
    # --stats-dir: where executors on other hosts can leave their counters (a shared filesystem); the job reads them
    # from there into its Scan section and removes its own subdirectory afterwards
    from spark_jobs import retention_report

    d, _ = known
    shared = tmp_path / "shared"
    shared.mkdir()
    retention_report.main(["--log-dirs", d, "--out", str(tmp_path / "o"), "--stats-dir", str(shared),
                           "--now-ms", str(T0)], spark=spark)
    report = (tmp_path / "o" / "report.md").read_text()
    scan = report.split("## Scan", 1)[1]
    assert f"Counters the executors left in `{shared}`" in scan
    assert int(re.search(r"Segments opened: (\d+)", scan).group(1)) > 0
    assert int(re.search(r"batches decoded: (\d+)", scan).group(1)) > 0
    assert list(shared.iterdir()) == []


PROFILE_TABLES = ("sizes", "hourly", "size_hist", "codecs", "producers", "batch_kinds")


def _on_local_cluster(job: str, args: list[str], tmp_path) -> Path:
    """``python -m spark_jobs.<job> ... --master local-cluster[2,1,1024]`` in its own process: a standalone master and
    two workers, each executor its own JVM with its own Python workers. Checks both executors ran tasks; returns
    the SPARK_HOME whose work/ holds their logs."""
    # local-cluster workers keep executor logs in $SPARK_HOME/work: a SPARK_HOME of links to pyspark's own keeps
    # them in tmp_path, not in the venv
    import pyspark

    spark_home = tmp_path / "spark-home"
    spark_home.mkdir()
    for name in ("bin", "jars", "python", "sbin"):
        if os.path.exists(os.path.join(os.path.dirname(pyspark.__file__), name)):
            (spark_home / name).symlink_to(os.path.join(os.path.dirname(pyspark.__file__), name))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home))
    p = subprocess.run([sys.executable, "-m", f"spark_jobs.{job}", *args, "--master", "local-cluster[2,1,1024]"],
                       env=env, capture_output=True, text=True, timeout=300,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert p.returncode == 0, p.stderr[-3000:]
    # both executors ran tasks, each in its own JVM (the workers relaunch a few at shutdown: those ran nothing)
    executor_logs = sorted(spark_home.glob("work/app-*/*/stderr"))
    assert len([log for log in executor_logs if "Finished task" in log.read_text()]) == 2
    return spark_home


@pytest.mark.soak
def test_topic_profile_on_a_local_cluster(known, local_profile, tmp_path):
    """The topic profile on ``local-cluster[2,1,1024]``: its tables (per topic: one topic keeps it short, three
    partitions of it) equal local mode's. Long profile (``ODRADEK_SOAK=1``, ``make soak``), as the compaction
    report's same check: starting the standalone executors' JVMs took ~53 s of CI's 20 minutes; CI runs every job
    in local mode, whose tasks run in the same pickled Python workers."""
    d, _ = known
    _, local_out = local_profile
    out = tmp_path / "cluster"
    _on_local_cluster("topic_profile", [*_args(d, out), "--topics", "accounts"], tmp_path)
    for table in PROFILE_TABLES:
        cluster_rows = pq.read_table(str(out / f"profile_{table}.parquet")).to_pylist()
        local_rows = [r for r in pq.read_table(str(local_out / f"profile_{table}.parquet")).to_pylist()
                      if r["topic"] == "accounts"]
        assert local_rows and sorted(cluster_rows, key=repr) == sorted(local_rows, key=repr), table


@pytest.mark.soak
def test_compaction_report_on_a_local_cluster(known, local_compaction, tmp_path):
    """The compaction report on ``local-cluster[2,1,1024]`` (its per-partition tasks pickled to other executors'
    Python workers, its counters from their files): every table equals local mode's."""
    d, _ = known
    _, local_out, _ = local_compaction
    out = tmp_path / "cluster"
    _on_local_cluster("compaction_report", _args(d, out), tmp_path)
    for table in ("compaction_partitions", "compaction_top_keys", "compaction_key_versions"):
        cluster_rows = pq.read_table(str(out / f"{table}.parquet")).to_pylist()
        local_rows = pq.read_table(str(local_out / f"{table}.parquet")).to_pylist()
        assert local_rows and sorted(cluster_rows, key=repr) == sorted(local_rows, key=repr), table
    scan = re.compile(r"Segments opened: .*")
    assert scan.search((out / "report.md").read_text()).group() == scan.search(
        (local_out / "report.md").read_text()).group()
