"""Topic profile: records and bytes per hour, message sizes, key cardinality, compression ratio per codec,
producers seen, transactional and control batches.

    python -m spark_jobs.topic_profile --log-dirs DIR [--out DIR]

Every figure is computed in Spark from the ``kafka-log`` columns. "Bytes" are on-disk batch bytes
(``batch_size_bytes``, each batch counted once, attributed to the hour of its max timestamp); "payload" is key plus
value bytes. The compression ratio of a codec is the batches' uncompressed size (61-byte header plus the decoded
records section) over their size on disk.
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit spark_jobs/<job>.py): make the package importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

import sys

from spark_jobs.common import JobContext, fmt_bytes, job_parser, md_table, plt
from spark_jobs.replica_section import replica_section

SIZE_BUCKETS = [0, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]


def _size_label(i: int) -> str:
    if i >= len(SIZE_BUCKETS) - 1:
        return f">={fmt_bytes(SIZE_BUCKETS[-1])}"
    return f"{fmt_bytes(SIZE_BUCKETS[i])}-{fmt_bytes(SIZE_BUCKETS[i + 1])}"


RECORD_COLUMNS = "topic,partition,timestamp,key,value_size,headers,is_control"
BATCH_COLUMNS = ("topic,partition,base_offset,batch_size_bytes,uncompressed_bytes,compression,max_timestamp,"
                 "is_transactional,is_control,producer_id,producer_epoch,record_count")


def compute(ctx: JobContext):
    """Record figures from scans of the record columns it uses (value sizes, never values), batch figures from one
    row per batch (headers; decompressed only for the uncompressed size). Nothing per record is cached: each record
    table is a scan of its own, so memory stays bounded and no copy of the log lands in Spark's local directories."""
    from pyspark.sql import functions as F

    data = ctx.records(columns=RECORD_COLUMNS).where("NOT is_control")
    batches = (ctx.records(rowPerBatch="true", columns=BATCH_COLUMNS)
               .where("record_count > 0")  # the batches records were read from: not those compaction emptied
               .select("topic", "partition", "base_offset", F.col("batch_size_bytes").alias("size"),
                       F.col("uncompressed_bytes").alias("uncompressed"), "compression", "max_timestamp",
                       "is_transactional", "is_control", "producer_id", "producer_epoch",
                       F.col("record_count").alias("rows"))
               .cache())

    hourly_records = (data.where("timestamp IS NOT NULL")
                      .groupBy("topic", F.date_trunc("hour", "timestamp").alias("hour"))
                      .agg(F.count("*").alias("records"),
                           F.sum(F.coalesce(F.length("key"), F.lit(0)) + F.coalesce("value_size", F.lit(0)))
                           .alias("payload_bytes")))
    hourly_bytes = (batches.where("max_timestamp >= 0")
                    .groupBy("topic", F.date_trunc("hour", F.timestamp_millis("max_timestamp")).alias("hour"))
                    .agg(F.sum("size").alias("bytes"), F.count("*").alias("batches")))
    hourly = hourly_records.join(hourly_bytes, ["topic", "hour"], "full").fillna(0).orderBy("topic", "hour")

    vlen = F.coalesce("value_size", F.lit(0))
    bucket = F.lit(len(SIZE_BUCKETS) - 1)
    for i in reversed(range(len(SIZE_BUCKETS) - 1)):
        bucket = F.when(vlen < SIZE_BUCKETS[i + 1], i).otherwise(bucket)
    size_hist = (data.withColumn("bucket", bucket).groupBy("topic", "bucket").agg(F.count("*").alias("records"))
                 .orderBy("topic", "bucket"))
    sizes = (data.groupBy("topic").agg(
        F.count("*").alias("records"),
        F.sum(F.when(F.col("value_size").isNull(), 1).otherwise(0)).alias("null_values"),
        F.min(vlen).alias("min_value_bytes"),
        F.percentile_approx(vlen, 0.5, 10000).alias("p50_value_bytes"),
        F.percentile_approx(vlen, 0.99, 10000).alias("p99_value_bytes"),
        F.max(vlen).alias("max_value_bytes"),
        F.avg(vlen).alias("mean_value_bytes"),
        F.countDistinct("key").alias("distinct_keys"),
        F.approx_count_distinct("key").alias("approx_distinct_keys"),
        F.sum(F.when(F.col("key").isNull(), 1).otherwise(0)).alias("null_keys"),
        F.sum(F.size("headers")).alias("headers"),
        F.countDistinct("partition").alias("partitions"),
    ).orderBy("topic"))
    codecs = (batches.groupBy("topic", "compression").agg(
        F.count("*").alias("batches"), F.sum("rows").alias("records"), F.sum("size").alias("bytes_on_disk"),
        F.sum("uncompressed").alias("bytes_uncompressed"))
        .withColumn("ratio", F.col("bytes_uncompressed") / F.col("bytes_on_disk")).orderBy("topic", "compression"))
    producers = (batches.where("producer_id >= 0").groupBy("topic", "producer_id", "producer_epoch").agg(
        F.count("*").alias("batches"), F.sum(F.when(F.col("is_control"), 0).otherwise(F.col("rows"))).alias("records"),
        F.sum(F.col("is_transactional").cast("int")).alias("transactional_batches"),
        F.sum(F.col("is_control").cast("int")).alias("control_batches"),
        F.countDistinct("partition").alias("partitions"),
        F.min("base_offset").alias("first_base_offset"), F.max("base_offset").alias("last_base_offset"),
    ).orderBy("topic", "producer_id", "producer_epoch"))
    batch_kinds = (batches.groupBy("topic").agg(
        F.count("*").alias("batches"),
        F.sum(F.col("is_transactional").cast("int")).alias("transactional_batches"),
        F.sum(F.col("is_control").cast("int")).alias("control_batches"),
        F.sum(F.when(F.col("producer_id") >= 0, 1).otherwise(0)).alias("batches_with_producer_id"),
        F.countDistinct(F.when(F.col("producer_id") >= 0, F.col("producer_id"))).alias("producer_ids"),
    ).orderBy("topic"))
    return {"hourly": hourly, "size_hist": size_hist, "sizes": sizes, "codecs": codecs, "producers": producers,
            "batch_kinds": batch_kinds}


def run(ctx: JobContext) -> dict:
    res = {k: v.cache() for k, v in compute(ctx).items()}
    rows = {k: v.collect() for k, v in res.items()}
    for name, df in res.items():
        ctx.write_parquet(df, f"profile_{name}")
    p = plt()
    topics = sorted({r.topic for r in rows["sizes"]})

    fig, axes = p.subplots(2, 1, figsize=(9, 6), sharex=True)
    for t in topics:
        hs = [h for h in rows["hourly"] if h.topic == t and h.hour is not None]
        axes[0].plot([h.hour for h in hs], [h.records for h in hs], marker=".", label=t)
        axes[1].plot([h.hour for h in hs], [h.bytes for h in hs], marker=".", label=t)
    axes[0].set_ylabel("records / hour")
    axes[1].set_ylabel("bytes on disk / hour")
    axes[0].set_title("Traffic by hour (record timestamps)")
    if topics:
        axes[0].legend(fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(ctx.chart_path("profile_hourly"), dpi=100)
    p.close(fig)

    fig, ax = p.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(topics))
    for j, t in enumerate(topics):
        vals = [0] * len(SIZE_BUCKETS)
        for h in rows["size_hist"]:
            if h.topic == t:
                vals[h.bucket] = h.records
        ax.bar([i + j * width for i in range(len(SIZE_BUCKETS))], vals, width=width, label=t)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(SIZE_BUCKETS))])
    ax.set_xticklabels([_size_label(i) for i in range(len(SIZE_BUCKETS))], rotation=30, ha="right", fontsize="small")
    ax.set_ylabel("records")
    ax.set_title("Value size distribution")
    if topics:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(ctx.chart_path("profile_value_sizes"), dpi=100)
    p.close(fig)

    fig, ax = p.subplots(figsize=(8, max(3, 0.35 * len(rows["codecs"]) + 1.5)))
    labels = [f"{c.topic} ({c.compression})" for c in rows["codecs"]]
    ax.barh(labels, [c.ratio or 0 for c in rows["codecs"]])
    ax.invert_yaxis()
    ax.set_xlabel("uncompressed / on disk")
    ax.set_title("Compression ratio per codec")
    fig.tight_layout()
    fig.savefig(ctx.chart_path("profile_compression"), dpi=100)
    p.close(fig)

    sections = [
        "## Topics", "",
        md_table(["topic", "partitions", "records", "distinct keys (approx)", "null keys", "null values",
                  "value bytes min / p50 / p99 / max / mean", "headers"],
                 [(s.topic, s.partitions, s.records, f"{s.distinct_keys} ({s.approx_distinct_keys})", s.null_keys,
                   s.null_values, f"{s.min_value_bytes} / {s.p50_value_bytes} / {s.p99_value_bytes} / "
                   f"{s.max_value_bytes} / {s.mean_value_bytes:.1f}", s.headers) for s in rows["sizes"]]),
        "", "## Records and bytes per hour", "", "![hourly](profile_hourly.png)", "",
        md_table(["topic", "hour (UTC)", "records", "payload bytes", "bytes on disk", "batches"],
                 [(h.topic, h.hour, h.records, fmt_bytes(h.payload_bytes), fmt_bytes(h.bytes), h.batches)
                  for h in rows["hourly"]], limit=100),
        "", "## Message sizes", "", "![value sizes](profile_value_sizes.png)", "",
        "## Compression", "", "![compression](profile_compression.png)", "",
        md_table(["topic", "codec", "batches", "records", "on disk", "uncompressed", "ratio"],
                 [(c.topic, c.compression, c.batches, c.records, fmt_bytes(c.bytes_on_disk),
                   fmt_bytes(c.bytes_uncompressed), c.ratio) for c in rows["codecs"]]),
        "", "## Batches and producers", "",
        md_table(["topic", "batches", "transactional", "control", "with producer id", "producer ids"],
                 [(b.topic, b.batches, b.transactional_batches, b.control_batches, b.batches_with_producer_id,
                   b.producer_ids) for b in rows["batch_kinds"]]),
        "",
        md_table(["topic", "producer id", "epoch", "batches", "records", "transactional", "control", "partitions",
                  "first batch offset", "last batch offset"],
                 [(r.topic, r.producer_id, r.producer_epoch, r.batches, r.records, r.transactional_batches,
                   r.control_batches, r.partitions, r.first_base_offset, r.last_base_offset)
                  for r in rows["producers"]], limit=100) if rows["producers"] else "No idempotent or transactional "
                                                                                   "producers.",
    ]
    sections += replica_section(ctx.log_dirs, ctx.bounds())
    ctx.write_report("Topic profile", sections)
    res["rows"] = rows
    return res


def main(argv: list[str] | None = None, spark=None) -> dict:
    args = job_parser("topic_profile", "Traffic, sizes, keys, codecs and producers per topic").parse_args(argv)
    ctx = JobContext.create("topic_profile", args, spark)
    res = run(ctx)
    print(f"report: {ctx.out}/report.md")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
