"""Retention report: per partition and per segment what ``retention.ms`` / ``retention.bytes`` delete now, and at a
what-if setting; bytes by age, partition skew, records whose timestamps go backwards.

    python -m spark_jobs.retention_report --log-dirs DIR [--out DIR] [--now-ms MS]
        [--what-if retention.ms=86400000] [--config k=v ...]

Per-segment figures (record count, first/last offset, min/max timestamp) are computed in Spark from the
``kafka-log`` columns; sizes and modification times come from the file system (what retention itself uses).

The deletion model is Kafka's ``UnifiedLog.deleteOldSegments`` (storage/log.py ``delete_old_segments``): first
segments wholly below the log start offset (``log-start-offset-checkpoint``), then, with ``cleanup.policy``
containing ``delete``, ``retention.bytes`` (oldest segments while the log stays at or above the limit) and
``retention.ms`` (oldest segments while ``now - largest timestamp > retention.ms``; a segment without timestamps
uses its file's mtime). Each rule deletes a prefix of the segment list and stops at the first segment it keeps;
an empty last segment is never deleted; the high watermark is taken to be the log end offset (a single-node
broker's), so the active segment can go too (the broker then rolls a new empty one).
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit spark_jobs/<job>.py): make the package importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

import sys
from dataclasses import dataclass

from spark_jobs.common import JobContext, fmt_bytes, fmt_ms, fmt_ms_date, job_parser, md_table, plt
from spark_jobs.configs import load_topic_configs, read_checkpoints
from spark_jobs.replica_section import replica_section

AGE_BUCKETS_MS = [3_600_000, 6 * 3_600_000, 86_400_000, 3 * 86_400_000, 7 * 86_400_000, 14 * 86_400_000,
                  30 * 86_400_000, 90 * 86_400_000]
AGE_LABELS = ["<1h", "1-6h", "6h-1d", "1-3d", "3-7d", "7-14d", "14-30d", "30-90d", ">=90d"]


@dataclass
class SegmentView:
    topic: str
    partition: int
    base_offset: int
    next_base_offset: int | None
    size: int
    largest_timestamp: int            # max timestamp, or the file's mtime if no record has one
    records: int


def predict_deletions(segs: list[SegmentView], cfg, now_ms: int, log_start_offset: int | None = None,
                      high_watermark: int | None = None, log_end_offset: int | None = None) -> dict[int, str]:
    """base offset -> reason, for every segment ``delete_old_segments(now_ms)`` removes."""
    segs = list(segs)
    deleted: dict[int, str] = {}
    if not segs:
        return deleted
    leo = log_end_offset if log_end_offset is not None else segs[-1].base_offset
    hw = high_watermark if high_watermark is not None else leo
    start = max(segs[0].base_offset, log_start_offset if log_start_offset is not None else segs[0].base_offset)

    def run(pred, reason: str) -> None:
        nonlocal segs
        take = []
        for i, s in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else leo
            if hw >= upper and pred(s, nxt) and not (nxt is None and s.size == 0):
                take.append(s)
            else:
                break
        for s in take:
            deleted[s.base_offset] = reason
        if take:
            segs = segs[len(take):]

    run(lambda s, n: n is not None and n.base_offset <= start, "log start offset")
    if cfg.delete:
        if cfg.retention_bytes >= 0:
            size = sum(s.size for s in segs)
            if size >= cfg.retention_bytes:
                diff = [size - cfg.retention_bytes]

                def by_size(s, n) -> bool:
                    if diff[0] - s.size >= 0:
                        diff[0] -= s.size
                        return True
                    return False

                run(by_size, "retention.bytes")
        if cfg.retention_ms >= 0:
            run(lambda s, n: now_ms - s.largest_timestamp > cfg.retention_ms, "retention.ms")
    return deleted


def _age_bucket(age_ms: int) -> int:
    for i, b in enumerate(AGE_BUCKETS_MS):
        if age_ms < b:
            return i
    return len(AGE_BUCKETS_MS)


def _parse_what_if(items) -> dict[str, str]:
    out = {}
    for it in items or ():
        if "=" not in it:
            raise SystemExit(f"--what-if expects key=value, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def compute(ctx: JobContext):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    configs = load_topic_configs(ctx.log_dirs, ctx.args.config)
    cps = read_checkpoints(ctx.log_dirs)
    what_if = _parse_what_if(getattr(ctx.args, "what_if", None))
    segs = ctx.segments()
    recs = (ctx.records(columns="topic,partition,segment,offset,last_offset,timestamp,max_timestamp,is_control")
            .withColumn("ts_ms", F.unix_millis("timestamp")))          # no key, value or headers decoded
    seg_df = ctx.segments_df(segs)

    def age_bucket(age_ms):
        expr = F.lit(len(AGE_BUCKETS_MS))
        for i, b in reversed(list(enumerate(AGE_BUCKETS_MS))):
            expr = F.when(age_ms < b, i).otherwise(expr)
        return expr

    # one scan, nothing per record kept: per segment and age bucket of the record (both tables derive from it);
    # the records going backwards are the second and last scan
    seg_ages = recs.groupBy(
        "topic", "partition", "segment", "is_control",
        F.when(F.col("ts_ms").isNotNull(), age_bucket(F.lit(ctx.now_ms) - F.col("ts_ms"))).alias("record_bucket"),
    ).agg(F.count("*").alias("records"), F.min("offset").alias("first_offset"),
          F.max("last_offset").alias("last_offset"), F.min("ts_ms").alias("min_timestamp"),
          F.max("max_timestamp").alias("max_timestamp")).persist()
    per_seg = (seg_ages.groupBy("topic", "partition", "segment").agg(
        F.sum("records").alias("records"),
        F.sum(F.when(F.col("is_control"), 0).otherwise(F.col("records"))).alias("data_records"),
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.min("min_timestamp").alias("min_timestamp"),
        F.max("max_timestamp").alias("max_timestamp"),
    ))
    seg_table = (seg_df.join(per_seg, ["topic", "partition", "segment"], "left")
                 .fillna(0, ["records", "data_records"])
                 .withColumn("largest_timestamp",
                             F.when(F.col("max_timestamp") >= 0, F.col("max_timestamp")).otherwise(F.col("mtime_ms")))
                 .withColumn("age_ms", F.lit(ctx.now_ms) - F.col("largest_timestamp"))
                 .orderBy("topic", "partition", "segment"))
    seg_rows = seg_table.collect()

    by_tp: dict[tuple[str, int], list] = {}
    for r in seg_rows:
        by_tp.setdefault((r.topic, r.partition), []).append(r)
    del_rows = []
    part_rows = []
    for (topic, partition), rows in sorted(by_tp.items()):
        views = [SegmentView(r.topic, r.partition, r.segment, r.next_segment, r.size, r.largest_timestamp,
                             r.records) for r in rows]
        leo = max([r.last_offset + 1 for r in rows if r.last_offset is not None], default=rows[-1].segment)
        cfg = configs.for_topic(topic)
        now_del = predict_deletions(views, cfg, ctx.now_ms, cps.log_start.get((topic, partition)), None, leo)
        wi_del = predict_deletions(views, configs.for_topic(topic, what_if), ctx.now_ms,
                                   cps.log_start.get((topic, partition)), None, leo) if what_if else {}
        for r in rows:
            del_rows.append((topic, partition, r.segment, now_del.get(r.segment), wi_del.get(r.segment)))

        def summ(d):
            gone = [r for r in rows if r.segment in d]
            remaining = [r for r in rows if r.segment not in d]
            new_start = remaining[0].segment if remaining else leo
            return (len(gone), sum(r.size for r in gone), sum(r.records for r in gone), new_start)

        n_now = summ(now_del)
        n_wi = summ(wi_del) if what_if else (None, None, None, None)
        part_rows.append((topic, partition, len(rows), sum(r.size for r in rows), sum(r.records for r in rows),
                          rows[0].segment, leo, cfg.retention_ms, cfg.retention_bytes, ",".join(cfg.cleanup_policy),
                          *n_now, *n_wi))

    spark = ctx.spark
    deletions = spark.createDataFrame(
        del_rows, "topic string, partition int, segment bigint, deleted_now_by string, deleted_what_if_by string")
    segments_out = seg_table.join(deletions, ["topic", "partition", "segment"], "left").orderBy(
        "topic", "partition", "segment")
    partitions_out = spark.createDataFrame(part_rows, (
        "topic string, partition int, segments int, size bigint, records bigint, first_segment bigint, "
        "log_end_offset bigint, retention_ms bigint, retention_bytes bigint, cleanup_policy string, "
        "segments_deleted_now int, bytes_deleted_now bigint, records_deleted_now bigint, log_start_after_now bigint, "
        "segments_deleted_what_if int, bytes_deleted_what_if bigint, records_deleted_what_if bigint, "
        "log_start_after_what_if bigint")).orderBy("topic", "partition")

    # bytes by age (segments, what retention acts on) and records by age
    bytes_by_age = (seg_table.withColumn("bucket", age_bucket(F.col("age_ms"))).groupBy("topic", "bucket")
                    .agg(F.sum("size").alias("bytes"), F.count("*").alias("segments")).orderBy("topic", "bucket"))
    records_by_age = (seg_ages.where("NOT is_control AND record_bucket IS NOT NULL")
                      .groupBy("topic", F.col("record_bucket").alias("bucket"))
                      .agg(F.sum("records").alias("records")).orderBy("topic", "bucket"))

    # partition skew per topic
    skew = (seg_table.groupBy("topic", "partition").agg(F.sum("size").alias("bytes"), F.sum("records").alias("records"))
            .groupBy("topic").agg(F.count("*").alias("partitions"), F.min("bytes").alias("min_bytes"),
                                  F.max("bytes").alias("max_bytes"), F.avg("bytes").alias("mean_bytes"),
                                  F.min("records").alias("min_records"), F.max("records").alias("max_records"))
            .withColumn("skew", F.when(F.col("mean_bytes") > 0, F.col("max_bytes") / F.col("mean_bytes")))
            .orderBy("topic"))
    part_bytes = seg_table.groupBy("topic", "partition").agg(F.sum("size").alias("bytes")).orderBy("topic", "partition")

    # timestamps going backwards, in offset order
    w = Window.partitionBy("topic", "partition").orderBy("offset")
    back = (recs.where("NOT is_control").select("topic", "partition", "offset", "ts_ms")
            .withColumn("prev_ts", F.lag("ts_ms").over(w))
            .where(F.col("ts_ms") < F.col("prev_ts"))
            .groupBy("topic", "partition").agg(F.count("*").alias("backwards_records"),
                                              F.max(F.col("prev_ts") - F.col("ts_ms")).alias("max_backwards_ms"),
                                              F.min("offset").alias("first_backwards_offset"))
            .orderBy("topic", "partition"))
    return {"segments": segments_out, "partitions": partitions_out, "bytes_by_age": bytes_by_age,
            "records_by_age": records_by_age, "skew": skew, "partition_bytes": part_bytes, "backwards": back,
            "what_if": what_if, "configs": configs, "persisted": [seg_ages]}


def run(ctx: JobContext) -> dict:
    res = compute(ctx)
    for name in ("segments", "partitions", "bytes_by_age", "records_by_age", "skew", "backwards", "partition_bytes"):
        res[name] = res[name].cache()
    segs = res["segments"].collect()
    parts = res["partitions"].collect()
    age = res["bytes_by_age"].collect()
    skew = res["skew"].collect()
    pbytes = res["partition_bytes"].collect()
    back = res["backwards"].collect()
    wi = res["what_if"]
    for name in ("segments", "partitions", "bytes_by_age", "records_by_age", "skew", "backwards"):
        ctx.write_parquet(res[name], f"retention_{name}")
    for df in res["persisted"]:
        df.unpersist()

    p = plt()
    topics = sorted({a.topic for a in age})
    fig, ax = p.subplots(figsize=(8, 4))
    bottoms = [0.0] * len(AGE_LABELS)
    for t in topics:
        vals = [0.0] * len(AGE_LABELS)
        for a in age:
            if a.topic == t:
                vals[a.bucket] = a.bytes
        ax.bar(AGE_LABELS, vals, bottom=bottoms, label=t)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    ax.set_ylabel("bytes (segment files)")
    ax.set_xlabel("age of the segment's newest record")
    ax.set_title("Bytes by age")
    if topics:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(ctx.chart_path("retention_bytes_by_age"), dpi=100)
    p.close(fig)
    fig, ax = p.subplots(figsize=(max(6, 0.5 * len(pbytes) + 3), 4))
    ax.bar([f"{r.topic}-{r.partition}" for r in pbytes], [r.bytes for r in pbytes])
    ax.set_ylabel("bytes")
    ax.set_title("Partition sizes (skew)")
    p.setp(ax.get_xticklabels(), rotation=45, ha="right")
    fig.tight_layout()
    fig.savefig(ctx.chart_path("retention_partition_bytes"), dpi=100)
    p.close(fig)

    wi_text = ", ".join(f"{k}={v}" for k, v in wi.items()) if wi else None
    sections = ["## Partitions", "",
                md_table(["partition", "policy", "segments", "size", "records", "retention.ms", "retention.bytes",
                          "deleted now (segments / bytes / records)", "log start after"]
                         + ([f"what-if {wi_text}", "log start after (what-if)"] if wi else []),
                         [(f"{r.topic}-{r.partition}", r.cleanup_policy, r.segments, fmt_bytes(r.size), r.records,
                           fmt_ms(r.retention_ms) if r.retention_ms >= 0 else "unlimited",
                           fmt_bytes(r.retention_bytes) if r.retention_bytes >= 0 else "unlimited",
                           f"{r.segments_deleted_now} / {fmt_bytes(r.bytes_deleted_now)} / {r.records_deleted_now}",
                           r.log_start_after_now)
                          + ((f"{r.segments_deleted_what_if} / {fmt_bytes(r.bytes_deleted_what_if)} / "
                              f"{r.records_deleted_what_if}", r.log_start_after_what_if) if wi else ())
                          for r in parts]),
                "", "## Segments", "",
                md_table(["partition", "segment", "size", "records", "first offset", "last offset",
                          "min timestamp", "max timestamp", "age", "deleted now by"]
                         + (["deleted (what-if) by"] if wi else []),
                         [(f"{s.topic}-{s.partition}", s.segment, fmt_bytes(s.size), s.records, s.first_offset,
                           s.last_offset, fmt_ms_date(s.min_timestamp), fmt_ms_date(s.max_timestamp), fmt_ms(s.age_ms),
                           s.deleted_now_by or "") + ((s.deleted_what_if_by or "",) if wi else ())
                          for s in segs], limit=500),
                "", "## Bytes by age", "", "![bytes by age](retention_bytes_by_age.png)", "",
                md_table(["topic", "age", "bytes", "segments"],
                         [(a.topic, AGE_LABELS[a.bucket], fmt_bytes(a.bytes), a.segments) for a in age]),
                "", "## Partition skew", "", "![partition sizes](retention_partition_bytes.png)", "",
                md_table(["topic", "partitions", "min", "max", "mean", "max/mean", "records min..max"],
                         [(s.topic, s.partitions, fmt_bytes(s.min_bytes), fmt_bytes(s.max_bytes),
                           fmt_bytes(s.mean_bytes), s.skew, f"{s.min_records}..{s.max_records}") for s in skew]),
                "", "## Timestamps going backwards", "",
                md_table(["partition", "records older than their predecessor", "largest step back",
                          "first such offset"],
                         [(f"{b.topic}-{b.partition}", b.backwards_records, fmt_ms(b.max_backwards_ms),
                           b.first_backwards_offset) for b in back]) if back else "None.",
                ]
    sections += replica_section(ctx.log_dirs, ctx.bounds())
    ctx.write_report("Retention report", sections)
    res.update({"segment_rows": segs, "partition_rows": parts, "backwards_rows": back, "skew_rows": skew,
                "age_rows": age})
    return res


def main(argv: list[str] | None = None, spark=None) -> dict:
    parser = job_parser("retention_report", "What retention.ms / retention.bytes delete now, and what-ifs")
    parser.add_argument("--what-if", action="append", default=[], metavar="KEY=VALUE",
                        help="recompute deletions with this topic setting for every topic (repeatable)")
    args = parser.parse_args(argv)
    ctx = JobContext.create("retention_report", args, spark)
    res = run(ctx)
    print(f"report: {ctx.out}/report.md")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
