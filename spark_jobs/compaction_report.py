"""Compaction report: what Kafka's log cleaner would remove right now, per topic-partition, and which keys churn.

    python -m spark_jobs.compaction_report --log-dirs DIR [--out DIR] [--now-ms MS] [--config k=v ...]

Per partition (figures from the ``kafka-log`` data source's reader, in Spark and per-partition tasks; segment sizes
from the file system):
records, bytes, distinct keys, tombstones, null-key records; the clean / dirty (cleanable) / uncleanable sections
(from ``cleaner-offset-checkpoint``); the dirty ratio and whether the cleaner would pick the log now; and the records
and bytes one cleaning pass would remove. Top keys by number of versions.

The model is Kafka's ``LogCleanerManager`` + ``Cleaner`` (as storage/cleaner.py implements it):

* first dirty offset = the cleaner checkpoint, if within [log start, log end], else the log start offset;
* uncleanable offset = min(last stable offset, active segment base, first dirty segment whose largest timestamp is
  within ``min.compaction.lag.ms`` of now), rounded down to its segment's base;
* cleanable bytes / (clean + cleanable bytes) > ``min.cleanable.dirty.ratio``, or the dirty section holds a
  segment whose first batch is older than ``max.compaction.lag.ms`` -> the log is cleaned now;
* one pass keeps, in segments below the uncleanable offset, a record iff it has a key and it is the latest offset
  for that key in the dirty section (keys not in the dirty section stay), and a tombstone only until the delete
  horizon of its batch (set to now + ``delete.retention.ms`` by the pass that first sees it) has passed.
  Transactions as Kafka's ``CleanedTransactionMetadata``: batches of aborted transactions are dropped whole (and
  their keys never enter the offset map); a marker whose transaction has no data batch left (and an emptied control
  batch) first gets a delete horizon (re-encoded for its new size), and a pass after that horizon removes it;
  other control batches are kept. The aborted ranges and last stable offsets are planned as the kafka-log source's
  read_committed plans them (``spark_jobs.transactions``), for the partitions holding transactional batches.
  A batch losing all records is dropped unless it is the last batch of an active
  producer or the last batch of the round (kept empty, 61 bytes). A batch losing some records, or gaining a
  delete horizon, is re-encoded with the same codec: its new size is computed by encoding it with
  :func:`protocol.record_codec.build_batch`, exactly as the cleaner writes it.

Memory stays bounded whatever the log's size: nothing per record is cached. A header-only scan gives one row per
batch; then one task per partition (``spark_jobs.partition_pass``) works as the cleaner does, reading the partition's
records twice: once for one row per key (the key figures, and the offset map of each key's latest dirty offset),
once over the cleaned range for one row per batch with what a pass keeps of it (a batch losing records is re-read
from its segment and re-encoded for its new size). Records never leave their task; its memory is the partition's
distinct keys plus a buffer.

Batches without records (left by earlier cleanings) are read as rows with a null offset (``emptyBatches``): a pass
drops them unless they are kept for the reasons above. Known limits: the cleaner's offset map
is assumed big enough (flagged if the dirty section has more distinct keys than the default dedupe buffer holds);
a producer whose last entry is a marker is not kept as an active producer's last batch. On a log holding
transactions the removal figures are checked against a transcription of Kafka's cleaner and against storage's
transaction-aware cleaner run on a copy (tests/spark_jobs/test_read_committed.py). The key figures (distinct
keys, tombstones, clean/dirty records) leave aborted records out; ``records`` counts them, and ``aborted_records``
says how many there are.
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit spark_jobs/<job>.py): make the package importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

import dataclasses
import sys
from dataclasses import asdict, dataclass

from spark_jobs.common import JobContext, fmt_bytes, fmt_ms, job_parser, md_table, plt
from spark_jobs.configs import load_topic_configs, read_checkpoints
from spark_jobs.partition_pass import BATCH_ROW, KEY_ROW, SUMMARY_ROW
from spark_jobs.replica_section import replica_section

EMPTY_BATCH_BYTES = 61
DEFAULT_DEDUPE_BUFFER = 128 * 1024 * 1024
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


@dataclass
class PartitionPlan:
    topic: str
    partition: int
    compact: bool
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    first_dirty_offset: int
    uncleanable_offset: int
    first_uncleanable_offset: int      # segment-aligned
    clean_bytes: int
    cleanable_bytes: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    need_compaction_now: bool
    would_clean_now: bool
    delete_retention_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    cleanup_policy: str

    @property
    def cleaned(self) -> bool:
        """One cleaning pass would clean ``[log start, first_uncleanable_offset)`` (whether or not it runs now)."""
        return self.compact and self.first_dirty_offset < self.first_uncleanable_offset


def _values(segs: list, frm: int, to: int) -> list:
    """Kafka's ``LogSegments.values(from, to)``: the floor segment of ``from`` and later ones starting below ``to``."""
    if frm == to:
        return []
    floor = [i for i, s in enumerate(segs) if s.base_offset <= frm]
    lo = floor[-1] if floor else 0
    return [s for s in segs[lo:] if s.base_offset < to]


def _non_active_from(segs: list, frm: int) -> list:
    if not segs or frm > segs[-1].base_offset:
        return []
    return _values(segs, frm, segs[-1].base_offset)


def plan_partition(topic: str, partition: int, segs: list, seg_stats: dict, cfg, checkpoint: int | None,
                   log_start_cp: int | None, lso: int | None, leo: int | None, now_ms: int) -> PartitionPlan:
    """Kafka's ``LogCleanerManager.cleanableOffsets`` + ``LogToClean`` for one partition.

    ``segs``: the partition's :class:`SegmentFile` list; ``seg_stats``: base offset -> (largest timestamp,
    first batch's max timestamp) from the data; ``leo``/``lso``: log end and last stable offsets from the data.
    """
    bases = [s.base_offset for s in segs]
    first_base = bases[0] if bases else 0
    log_start = max(first_base, log_start_cp if log_start_cp is not None else first_base)
    active_base = bases[-1] if bases else 0
    leo = leo if leo is not None else active_base
    lso = lso if lso is not None else leo
    if checkpoint is None or checkpoint < log_start or checkpoint > leo:
        first_dirty = log_start
    else:
        first_dirty = checkpoint

    def largest_ts(s) -> int:
        st = seg_stats.get(s.base_offset)
        ts = st[0] if st else None
        return ts if ts is not None and ts >= 0 else s.mtime_ms

    candidates = [lso, active_base]
    lag = max(cfg.min_compaction_lag_ms, 0)
    dirty_non_active = _non_active_from(segs, first_dirty)
    if lag > 0:
        for s in dirty_non_active:
            if largest_ts(s) > now_ms - lag:
                candidates.append(s.base_offset)
                break
    uncleanable = max(first_dirty, min(candidates))
    non_active = _non_active_from(segs, uncleanable)
    first_uncleanable = non_active[0].base_offset if non_active else active_base
    clean_bytes = sum(s.size for s in _values(segs, -1, first_dirty))
    lo = min(first_dirty, first_uncleanable)
    cleanable_bytes = sum(s.size for s in _values(segs, lo, first_uncleanable)) if lo < first_uncleanable else 0
    total = clean_bytes + cleanable_bytes
    ratio = cleanable_bytes / total if total else 0.0
    need_now = False
    if cfg.max_compaction_lag_ms > 0 and cfg.max_compaction_lag_ms < 2**63 - 1:
        firsts = [seg_stats[s.base_offset][1] for s in dirty_non_active
                  if s.base_offset in seg_stats and seg_stats[s.base_offset][1] is not None
                  and seg_stats[s.base_offset][1] > 0]
        if firsts and now_ms - min(firsts) > cfg.max_compaction_lag_ms:
            need_now = True
    compact = cfg.compact
    would = compact and total > 0 and ((need_now and cleanable_bytes > 0) or ratio > cfg.min_cleanable_dirty_ratio)
    return PartitionPlan(topic, partition, compact, log_start, leo, lso, first_dirty, uncleanable, first_uncleanable,
                         clean_bytes, cleanable_bytes, ratio, cfg.min_cleanable_dirty_ratio, need_now, would,
                         cfg.delete_retention_ms, cfg.min_compaction_lag_ms, cfg.max_compaction_lag_ms,
                         ",".join(cfg.cleanup_policy))


# -- the Spark part ----------------------------------------------------------------------------------------------
#
# Three scans, nothing per record kept between them (memory bounded by Spark's spilling aggregates and joins):
#   1. batches: one row per batch from its header alone (nothing decompressed): segment figures, last stable
#      offset, active producers -> the plan of every partition;
#   2. keys (key, offset, value size): one row per (topic, partition, key): versions, tombstones, payload bytes,
#      per-section counts and the latest offset in the dirty section (the cleaner's offset map);
#   3. retain (the same columns): every record of the cleaned range against the offset map -> per batch how many
#      records stay and which; batches losing records are then re-read by position and re-encoded
#      (spark_jobs/cleaned_batch.py).
# No value crosses into the JVM. A log holding transactions is read once more for its markers' keys (commit/abort).

ABORT_TYPE_HEX = "0000"         # a control record key is int16 version, int16 type (0 abort, 1 commit)


BATCH_COLUMNS = ("topic,partition,base_offset,last_offset,segment,position,max_timestamp,batch_size_bytes,record_count,"
                 "is_control,is_transactional,producer_id,delete_horizon_ms")


def _batch_table(ctx: JobContext):
    """Pass 1: one row per batch, empty batches included, from batch headers only (nothing decompressed)."""
    from pyspark.sql import functions as F

    return ctx.records(rowPerBatch="true", columns=BATCH_COLUMNS).select(
        "topic", "partition", "base_offset", "segment", "position", "last_offset", "max_timestamp",
        F.col("batch_size_bytes").cast("long").alias("size"), "is_control", "is_transactional", "producer_id",
        "delete_horizon_ms", F.col("record_count").alias("records"))


def _segment_figures(batches) -> tuple[dict, dict, set]:
    """(segment stats per partition, log end offsets, the partitions holding a transactional batch) for the
    plans."""
    from pyspark.sql import functions as F

    rows = (batches.groupBy("topic", "partition", "segment")
            .agg(F.max("max_timestamp").alias("largest_ts"),
                 F.min_by("max_timestamp", "position").alias("first_batch_ts"),
                 F.max("last_offset").alias("last_offset"),
                 F.max(F.col("is_transactional").cast("int")).alias("txn"))
            .collect())
    seg_stats: dict[tuple[str, int], dict[int, tuple]] = {}
    ends: dict[tuple[str, int], int] = {}
    txn_tps: set[tuple[str, int]] = set()
    for r in rows:
        tp = (r.topic, r.partition)
        seg_stats.setdefault(tp, {})[r.segment] = (r.largest_ts, r.first_batch_ts)
        ends[tp] = max(ends.get(tp, 0), r.last_offset + 1)
        if r.txn:
            txn_tps.add(tp)
    return seg_stats, ends, txn_tps


def _transactions(segs_by_tp: dict, txn_tps: set) -> dict:
    """Aborted ranges and last stable offset of every partition holding transactions, as the kafka-log source plans
    them for read_committed (:func:`spark_jobs.transactions.partition_transactions`: .txnindex files, else a walk
    of the batch headers, on the driver)."""
    from spark_jobs.transactions import partition_transactions

    return {tp: partition_transactions(segs_by_tp[tp]) for tp in sorted(txn_tps) if tp in segs_by_tp}


def _with_aborted(batches, spark, txns: dict):
    """The batch table with ``aborted``: a transactional data batch inside an aborted range of its producer (the
    cleaner drops it whole, keys unread)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    ranges = [(tp[0], tp[1], pid, first, last) for tp, t in txns.items() for pid, first, last in t.aborted]
    if not ranges:
        return batches.withColumn("aborted", F.lit(False))
    rdf = spark.createDataFrame(ranges, StructType([
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("producer_id", LongType()), StructField("txn_first", LongType()),
        StructField("txn_last", LongType())]))
    hit = (batches.where("is_transactional AND NOT is_control")
           .join(F.broadcast(rdf), ["topic", "partition", "producer_id"])
           .where((F.col("base_offset") <= F.col("txn_last")) & (F.col("last_offset") >= F.col("txn_first")))
           .select("topic", "partition", "base_offset").distinct().withColumn("aborted", F.lit(True)))
    return (batches.join(hit, ["topic", "partition", "base_offset"], "left")
            .withColumn("aborted", F.coalesce("aborted", F.lit(False))))


def _markers(batches):
    """Every marker (control batch of a producer) with ``txn_data``: the data batches of its transaction still in
    the log (its producer's transactional data batches since its previous marker; empty ones count, as the cleaner
    reads them). Kafka's ``CleanedTransactionMetadata`` lets the cleaner discard a marker once that is zero."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = (Window.partitionBy("topic", "partition", "producer_id").orderBy("base_offset")
         .rowsBetween(Window.unboundedPreceding, -1))
    txn = (batches.where("is_transactional AND producer_id >= 0")
           .withColumn("txn_seq", F.coalesce(F.sum(F.col("is_control").cast("int")).over(w), F.lit(0))))
    data = (txn.where("NOT is_control").groupBy("topic", "partition", "producer_id", "txn_seq")
            .agg(F.count("*").alias("txn_data")))
    return (txn.where("is_control").select("topic", "partition", "producer_id", "txn_seq", "base_offset")
            .join(data, ["topic", "partition", "producer_id", "txn_seq"], "left")
            .select("topic", "partition", "base_offset", F.coalesce("txn_data", F.lit(0)).alias("txn_data")))


def _marker_sizes(ctx: JobContext, rows, horizon: dict) -> list[tuple]:
    """(topic, partition, base offset, size) of each marker batch rewritten with a delete horizon, re-encoded as
    the cleaner writes it (the record's timestamp delta is then taken from the horizon)."""
    from spark_jobs.cleaned_batch import cleaned_batch_size, read_batch

    paths = {(s.topic, s.partition, s.base_offset): s.path for s in ctx.segments()}
    fds: dict[str, int] = {}
    out = []
    try:
        for r in rows:
            raw, where = read_batch(fds, paths[(r.topic, r.partition, r.segment)], r.position, r.size,
                                    r.base_offset)
            out.append((r.topic, r.partition, r.base_offset,
                        cleaned_batch_size(raw, None, horizon[(r.topic, r.partition)], where)))
    finally:
        import os

        for fd in fds.values():
            os.close(fd)
    return out


def _partition_passes(ctx: JobContext, plans: list[PartitionPlan], txns: dict):
    """Passes 2 and 3, one task per partition (``spark_jobs.partition_pass``): a row per key and, for partitions a
    pass would clean, a row per batch of the cleaned range; persisted, as both kinds are read from it."""
    import pickle

    from pyspark import StorageLevel

    from spark_jobs.partition_pass import OUTPUT_DDL, PartitionJob, partition_passes
    from spark_jobs.planning import plan_slices

    from spark_jobs.transactions import ranges_within

    slices: dict[tuple[str, int], list] = {}
    for sl in plan_slices(ctx.log_dirs, ctx.bounds()):
        t = txns.get((sl.topic, sl.partition))
        if t is not None and t.aborted:     # the passes skip aborted batches, as the cleaner's offset map does
            sl = dataclasses.replace(sl, aborted=ranges_within(t.aborted, sl.base_offset, None))
        slices.setdefault((sl.topic, sl.partition), []).append(sl)
    jobs = [PartitionJob(p.topic, p.partition, tuple(slices.get((p.topic, p.partition), ())),
                         p.cleaned, p.first_dirty_offset, p.first_uncleanable_offset, p.delete_retention_ms)
            for p in plans]
    jobs.sort(key=lambda j: -sum(sl.end_pos - sl.start_pos for sl in j.slices))   # the biggest start first
    spark = ctx.spark
    rows = spark.sparkContext.parallelize([(pickle.dumps(j),) for j in jobs], max(1, len(jobs)))
    return (spark.createDataFrame(rows, "job binary")
            .mapInArrow(partition_passes(ctx.now_ms, bool(ctx.args.ignore_corrupt_batches), ctx.stats_dir),
                        OUTPUT_DDL)
            .persist(StorageLevel.MEMORY_AND_DISK))


def _active_producers(batches, now_ms: int, expiration_ms: int):
    """The last data batch of every producer not yet expired at ``now`` (its batch is kept even if emptied)."""
    from pyspark.sql import functions as F

    last_data = (batches.where("producer_id >= 0 AND NOT is_control")
                 .groupBy("topic", "partition", "producer_id")
                 .agg(F.max("last_offset").alias("producer_last_offset")))
    last_any = (batches.where("producer_id >= 0").groupBy("topic", "partition", "producer_id")
                .agg(F.max_by("max_timestamp", "last_offset").alias("producer_last_any_ts")))
    return (last_data.join(last_any, ["topic", "partition", "producer_id"])
            .where(F.lit(now_ms) - F.col("producer_last_any_ts") < F.lit(expiration_ms))
            .select("topic", "partition", "producer_id", "producer_last_offset"))


def compute(ctx: JobContext, top_keys: int = 20, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS):
    """All the report's tables as Spark DataFrames / Python objects (the tests compare these)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.types import (BooleanType, DoubleType, IntegerType, LongType, StringType, StructField,
                                   StructType)

    spark = ctx.spark
    configs = load_topic_configs(ctx.log_dirs, ctx.args.config)
    cps = read_checkpoints(ctx.log_dirs)
    segs = ctx.segments()
    batches = _batch_table(ctx).persist(StorageLevel.MEMORY_AND_DISK)
    seg_stats, ends, txn_tps = _segment_figures(batches)

    by_tp: dict[tuple[str, int], list] = {}
    for s in segs:
        by_tp.setdefault((s.topic, s.partition), []).append(s)
    txns = _transactions(by_tp, txn_tps)
    lsos = {tp: t.last_stable_offset for tp, t in txns.items() if t.last_stable_offset is not None}
    plans: list[PartitionPlan] = []
    for (topic, partition), ss in sorted(by_tp.items()):
        cfg = configs.for_topic(topic)
        leo = ends.get((topic, partition))
        if leo is None:
            leo = ss[-1].base_offset
        plans.append(plan_partition(topic, partition, ss, seg_stats.get((topic, partition), {}), cfg,
                                    cps.cleaner.get((topic, partition)), cps.log_start.get((topic, partition)),
                                    lsos.get((topic, partition)), leo, ctx.now_ms))

    cleaned_df = spark.createDataFrame(     # the partitions a pass would clean, and where it stops
        [(p.topic, p.partition, p.first_uncleanable_offset) for p in plans if p.cleaned],
        StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                    StructField("first_uncleanable_offset", LongType())]))

    passes = _partition_passes(ctx, plans, txns)
    keys = passes.where(f"kind = {KEY_ROW}").select("topic", "partition", "key", "versions", "tombstones",
                                                    "last_offset")
    per_tp = passes.where(f"kind = {SUMMARY_ROW}").select(
        "topic", "partition", "records", "payload_bytes", "distinct_keys", "tombstones", "null_key_records",
        "clean_records", "dirty_records", "uncleanable_records")
    bytes_tp = batches.groupBy("topic", "partition").agg(F.sum("size").alias("batch_bytes"))

    # -- one cleaning pass: every batch of the cleaned range, with what stays of it
    retained = passes.where(f"kind = {BATCH_ROW}").select(
        "topic", "partition", "base_offset", "data_records", "data_kept", "kept_tombstones", "removed_tombstones",
        "removed_null_key", "rewrite", "new_horizon", "new_size")
    active = _active_producers(batches, ctx.now_ms, producer_id_expiration_ms)
    in_range = (batches.join(F.broadcast(cleaned_df), ["topic", "partition"])
                .where(F.col("last_offset") < F.col("first_uncleanable_offset")))
    if txns:
        in_range = _with_aborted(in_range, spark, txns).join(_markers(batches), ["topic", "partition", "base_offset"],
                                                             "left")
    else:
        in_range = in_range.withColumn("aborted", F.lit(False)).withColumn("txn_data", F.lit(None).cast("long"))
    # Kafka's CleanedTransactionMetadata: aborted batches are dropped whole; a marker (or an emptied control batch)
    # whose transaction has no data left may go: it first gets a delete horizon (now + delete.retention.ms),
    # a pass after that horizon removes it; other control batches stay as they are
    horizon_ms = {(p.topic, p.partition): ctx.now_ms + p.delete_retention_ms for p in plans}
    horizon_df = spark.createDataFrame([(t, p, h) for (t, p), h in horizon_ms.items()],
                                       "topic string, partition int, marker_horizon bigint")
    ctrl = F.col("is_control")
    discardable = ctrl & ((F.col("records") == 0) | (F.col("producer_id") >= 0) & (F.col("txn_data") == 0))
    in_range = (in_range.join(F.broadcast(horizon_df), ["topic", "partition"])
                .withColumn("marker_removed", F.coalesce(
                    discardable & F.col("delete_horizon_ms").isNotNull()
                    & (F.col("delete_horizon_ms") <= F.lit(ctx.now_ms)) | ctrl & (F.col("records") == 0), F.lit(False)))
                .withColumn("marker_rewrite", F.coalesce(discardable & F.col("delete_horizon_ms").isNull()
                                                         & (F.col("records") > 0), F.lit(False))))
    marker_rows = in_range.where("marker_rewrite").select("topic", "partition", "segment", "position", "size",
                                                          "base_offset").collect()
    sizes = spark.createDataFrame(_marker_sizes(ctx, marker_rows, horizon_ms) or [],
                                  "topic string, partition int, base_offset bigint, marker_size bigint")
    per_batch = (in_range.join(retained, ["topic", "partition", "base_offset"], "left")
                 .join(F.broadcast(sizes), ["topic", "partition", "base_offset"], "left")
                 .join(active, ["topic", "partition", "producer_id"], "left")
                 .withColumn("n", F.when(ctrl | F.col("aborted"), F.col("records"))
                             .otherwise(F.coalesce("data_records", F.lit(0))))
                 .withColumn("kept", F.when(F.col("aborted") | F.col("marker_removed"), F.lit(0))
                             .when(ctrl, F.col("records"))
                             .otherwise(F.coalesce("data_kept", F.lit(0))))
                 .withColumn("rewrite", F.coalesce("rewrite", F.lit(False)) | F.col("marker_rewrite"))
                 .withColumn("new_size", F.when(F.col("marker_rewrite"), F.col("marker_size"))
                             .otherwise(F.col("new_size")))
                 .withColumn("new_horizon", F.when(F.col("marker_rewrite"), F.col("marker_horizon"))
                             .otherwise(F.coalesce("new_horizon", "delete_horizon_ms")))
                 .fillna(0, ["kept_tombstones", "removed_tombstones", "removed_null_key"]))
    per_batch = per_batch.withColumn(
        "retain_empty", (F.col("producer_last_offset").isNotNull()
                         & (F.col("producer_last_offset") == F.col("last_offset")))
        | (F.col("last_offset") + 1 == F.col("first_uncleanable_offset")))
    per_batch = (per_batch.select(
        "topic", "partition", "segment", "position", "base_offset", "last_offset", "size", "is_control",
        "delete_horizon_ms", "n", "kept", "kept_tombstones", "removed_tombstones", "removed_null_key", "retain_empty",
        "rewrite", "new_horizon", "new_size", "aborted")
                 .withColumn("after", F.when(F.col("kept") == 0,
                                   F.when(F.col("retain_empty"), F.lit(EMPTY_BATCH_BYTES)).otherwise(0))
                             .when(F.col("rewrite"), F.col("new_size"))
                             .otherwise(F.col("size"))))
    pass_tp = per_batch.groupBy("topic", "partition").agg(
        F.sum(F.col("n") - F.col("kept")).alias("pass_records_removed"),
        F.sum(F.col("size") - F.col("after")).alias("pass_bytes_removed"),
        F.sum("removed_tombstones").alias("pass_tombstones_removed"),
        F.sum("removed_null_key").alias("pass_null_key_removed"),
        F.sum(F.when(F.col("kept") == 0, 1).otherwise(0)).alias("batches_emptied"),
        F.sum(F.when(F.col("rewrite"), 1).otherwise(0)).alias("batches_rewritten"),
    )

    per_tp_all = per_tp.join(bytes_tp, ["topic", "partition"], "left").join(pass_tp, ["topic", "partition"], "left")
    if txns:
        aborted_tp = (_with_aborted(batches.join(F.broadcast(spark.createDataFrame(
            sorted(txns), "topic string, partition int")), ["topic", "partition"]), spark, txns)
            .where("aborted").groupBy("topic", "partition").agg(F.sum("records").alias("aborted_records")))
        per_tp_all = per_tp_all.join(aborted_tp, ["topic", "partition"], "left")
    else:
        per_tp_all = per_tp_all.withColumn("aborted_records", F.lit(0).cast("long"))
    per_tp_all = (per_tp_all
                  .fillna(0, ["pass_records_removed", "pass_bytes_removed", "pass_tombstones_removed",
                              "pass_null_key_removed", "batches_emptied", "batches_rewritten", "aborted_records"])
                  .withColumn("records", F.col("records") + F.col("aborted_records")))   # the key pass skips them
    plans_df = spark.createDataFrame([asdict(p) for p in plans], StructType([
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("compact", BooleanType()), StructField("log_start_offset", LongType()),
        StructField("log_end_offset", LongType()), StructField("last_stable_offset", LongType()),
        StructField("first_dirty_offset", LongType()), StructField("uncleanable_offset", LongType()),
        StructField("first_uncleanable_offset", LongType()), StructField("clean_bytes", LongType()),
        StructField("cleanable_bytes", LongType()), StructField("dirty_ratio", DoubleType()),
        StructField("min_cleanable_dirty_ratio", DoubleType()), StructField("need_compaction_now", BooleanType()),
        StructField("would_clean_now", BooleanType()), StructField("delete_retention_ms", LongType()),
        StructField("min_compaction_lag_ms", LongType()), StructField("max_compaction_lag_ms", LongType()),
        StructField("cleanup_policy", StringType()),
    ]))
    partitions_df = (plans_df.join(per_tp_all, ["topic", "partition"], "left")
                     .withColumn("records_removed_now",
                                 F.when(F.col("would_clean_now"), F.col("pass_records_removed")).otherwise(F.lit(0)))
                     .withColumn("bytes_removed_now",
                                 F.when(F.col("would_clean_now"), F.col("pass_bytes_removed")).otherwise(F.lit(0)))
                     .fillna(0, ["records", "payload_bytes", "distinct_keys", "tombstones", "null_key_records",
                                 "clean_records", "dirty_records", "uncleanable_records", "batch_bytes"])
                     .orderBy("topic", "partition"))

    topic_keys = (keys.where("key IS NOT NULL").groupBy("topic", "key")
                  .agg(F.sum("versions").alias("versions"), F.count("*").alias("partitions"),
                       F.sum("tombstones").alias("tombstones"), F.max("last_offset").alias("last_offset"))
                  .persist(StorageLevel.MEMORY_AND_DISK))     # read twice: the top keys and the histogram
    top = topic_keys.orderBy(F.desc("versions"), "topic", "key").limit(top_keys)
    versions_hist = (topic_keys.groupBy("topic", F.least(F.col("versions"), F.lit(50)).alias("versions"))
                     .agg(F.count("*").alias("keys")).orderBy("topic", "versions"))
    max_keys = int(DEFAULT_DEDUPE_BUFFER / 24 * 0.9)
    return {"partitions": partitions_df, "top_keys": top, "versions_hist": versions_hist, "plans": plans,
            "per_batch": per_batch, "configs": configs, "checkpoint_errors": cps.errors,
            "max_map_keys": max_keys, "persisted": [batches, passes, topic_keys]}


def run(ctx: JobContext) -> dict:
    res = compute(ctx)
    parts = res["partitions"].cache()
    prow = parts.collect()
    top_df, hist_df = res["top_keys"].cache(), res["versions_hist"].cache()
    top = top_df.collect()
    hist = hist_df.collect()
    ctx.write_parquet(parts, "compaction_partitions")
    ctx.write_parquet(top_df, "compaction_top_keys")
    ctx.write_parquet(hist_df, "compaction_key_versions")
    for df in res["persisted"]:
        df.unpersist()

    p = plt()
    compacted = [r for r in prow if r.compact]
    shown = compacted or prow
    fig, ax = p.subplots(figsize=(max(6, 0.6 * len(shown) + 3), 4))
    labels = [f"{r.topic}-{r.partition}" for r in shown]
    before = [r.batch_bytes or 0 for r in shown]
    removed = [r.pass_bytes_removed or 0 for r in shown]
    ax.bar(labels, [b - x for b, x in zip(before, removed)], label="kept by one cleaning pass")
    ax.bar(labels, removed, bottom=[b - x for b, x in zip(before, removed)], label="removed by one pass")
    ax.set_ylabel("bytes in batches")
    ax.set_title("Compaction: bytes a cleaning pass would remove")
    ax.legend()
    p.setp(ax.get_xticklabels(), rotation=45, ha="right")
    fig.tight_layout()
    fig.savefig(ctx.chart_path("compaction_bytes"), dpi=100)
    p.close(fig)
    fig, ax = p.subplots(figsize=(7, 4))
    for topic in sorted({h.topic for h in hist}):
        hs = [h for h in hist if h.topic == topic]
        ax.plot([h.versions for h in hs], [h.keys for h in hs], marker="o", label=topic)
    ax.set_xlabel("versions per key (50 = 50 or more)")
    ax.set_ylabel("keys")
    ax.set_yscale("log")
    ax.set_title("Key churn")
    if hist:
        ax.legend()
    fig.tight_layout()
    fig.savefig(ctx.chart_path("compaction_key_versions"), dpi=100)
    p.close(fig)

    sections = ["## Partitions", "",
                md_table(["partition", "policy", "records", "bytes", "distinct keys", "tombstones", "null keys",
                          "clean / dirty / uncleanable records", "dirty ratio (min)", "cleaned now?",
                          "records removed", "bytes removed", "tombstones removed", "aborted records"],
                         [(f"{r.topic}-{r.partition}", r.cleanup_policy, r.records, fmt_bytes(r.batch_bytes),
                           r.distinct_keys, r.tombstones, r.null_key_records,
                           f"{r.clean_records} / {r.dirty_records} / {r.uncleanable_records}" if r.compact else "-",
                           f"{r.dirty_ratio:.3f} ({r.min_cleanable_dirty_ratio})" if r.compact else "-",
                           "yes" if r.would_clean_now else ("no" if r.compact else "not compacted"),
                           r.records_removed_now, fmt_bytes(r.bytes_removed_now), r.pass_tombstones_removed,
                           r.aborted_records) for r in prow]),
               "",
               "Removal figures are for one cleaning pass now, only where the cleaner would pick the log "
               "(dirty ratio above `min.cleanable.dirty.ratio` or `max.compaction.lag.ms` exceeded). "
               "A pass ignoring the ratio would remove:", "",
               md_table(["partition", "first dirty offset", "first uncleanable offset", "records", "bytes",
                         "batches emptied", "batches rewritten", "delete.retention.ms", "min.compaction.lag.ms"],
                        [(f"{r.topic}-{r.partition}", r.first_dirty_offset, r.first_uncleanable_offset,
                          r.pass_records_removed, fmt_bytes(r.pass_bytes_removed), r.batches_emptied,
                          r.batches_rewritten, fmt_ms(r.delete_retention_ms), fmt_ms(r.min_compaction_lag_ms))
                         for r in prow if r.compact]),
               "", "![bytes removed](compaction_bytes.png)", "",
               "## Keys with the most versions", "",
               md_table(["topic", "key", "versions", "tombstones", "partitions", "last offset"],
                        [(t.topic, t.key, t.versions, t.tombstones, t.partitions, t.last_offset) for t in top]),
               "", "![key churn](compaction_key_versions.png)", "",
               "## Topic configs used", "",
               md_table(["topic", "cleanup.policy", "min.cleanable.dirty.ratio", "delete.retention.ms",
                         "min.compaction.lag.ms", "source of cleanup.policy"],
                        [(t, ",".join(c.cleanup_policy), c.min_cleanable_dirty_ratio, c.delete_retention_ms,
                          c.min_compaction_lag_ms, res["configs"].source(t, "cleanup.policy"))
                         for t, c in sorted({r.topic: res["configs"].for_topic(r.topic) for r in prow}.items())])]
    if res["checkpoint_errors"]:
        sections += ["", "Unreadable checkpoint files (ignored, as Kafka resets to the log start):", ""]
        sections += [f"- {e}" for e in res["checkpoint_errors"]]
    sections += replica_section(ctx.log_dirs, ctx.bounds())
    ctx.write_report("Compaction report", sections)
    res["rows"] = prow
    return res


def main(argv: list[str] | None = None, spark=None) -> dict:
    args = job_parser("compaction_report", "What Kafka's log cleaner would remove now").parse_args(argv)
    ctx = JobContext.create("compaction_report", args, spark)
    res = run(ctx)
    print(f"report: {ctx.out}/report.md")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
