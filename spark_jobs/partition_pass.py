"""The compaction report's record passes, one task per partition, as storage's cleaner works: the per-key figures
(and from them the offset map, each key's latest offset in the dirty range), then what one cleaning pass keeps of
every batch of the cleaned range. Runs on executors; no pyspark import.

Done in Spark, the same figures took a group-by of every record by key and a join of every cleaned record back to
its key's latest offset: each record shuffled twice. Here the records stay in the task, in Arrow; only one row
per key and one per batch leave it. Memory is bounded as the cleaner's is, by the partition's distinct keys (the
offset map) plus one buffer of records.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from .cleaned_batch import cleaned_batch_size, read_batch
from .planning import ScanBounds, SegmentSlice
from .scan import ScanStats, read_slice, write_stats

__all__ = ["BATCH_ROW", "KEY_ROW", "SUMMARY_ROW", "PartitionJob", "OUTPUT_DDL", "OUTPUT_SCHEMA", "partition_rows",
           "partition_passes"]

KEY_FIELDS = [pa.field("key", pa.binary()), pa.field("versions", pa.int64()), pa.field("tombstones", pa.int64()),
              pa.field("last_offset", pa.int64()), pa.field("latest_dirty", pa.int64())]
"""The task's key table (``latest_dirty`` is the offset map's value; the rest leaves the task as key rows)."""
KEY_ROW_FIELDS = ("key", "versions", "tombstones", "last_offset")
SUMMARY_FIELDS = [pa.field("records", pa.int64()), pa.field("payload_bytes", pa.int64()),
                  pa.field("distinct_keys", pa.int64()), pa.field("tombstones", pa.int64()),
                  pa.field("null_key_records", pa.int64()), pa.field("clean_records", pa.int64()),
                  pa.field("dirty_records", pa.int64()), pa.field("uncleanable_records", pa.int64())]
BATCH_FIELDS = [pa.field("base_offset", pa.int64()), pa.field("data_records", pa.int64()),
                pa.field("data_kept", pa.int64()), pa.field("kept_tombstones", pa.int64()),
                pa.field("removed_tombstones", pa.int64()), pa.field("removed_null_key", pa.int64()),
                pa.field("rewrite", pa.bool_()), pa.field("new_horizon", pa.int64()), pa.field("new_size", pa.int64())]
KEY_ROW, SUMMARY_ROW, BATCH_ROW = 0, 1, 2
_FIELDS = {f.name: f for f in KEY_FIELDS + SUMMARY_FIELDS + BATCH_FIELDS}
OUTPUT_SCHEMA = pa.schema(
    [pa.field("topic", pa.string()), pa.field("partition", pa.int32()), pa.field("kind", pa.int32())]
    + [_FIELDS[n] for n in dict.fromkeys(list(KEY_ROW_FIELDS) + [f.name for f in SUMMARY_FIELDS + BATCH_FIELDS])])
"""One schema for the three kinds of row (Spark's ``mapInArrow`` has one output): a key row per key (``kind``
:data:`KEY_ROW`), one summary row per partition, a row per batch of the cleaned range; fields a kind does not have
are null."""
_DDL_TYPES = {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint", pa.bool_(): "boolean",
              pa.binary(): "binary"}
OUTPUT_DDL = ", ".join(f"{f.name} {_DDL_TYPES[f.type]}" for f in OUTPUT_SCHEMA)

# how each key figure combines across chunks: a record is a key row of one version
_KEY_MERGE = [("versions", "sum"), ("tombstones", "sum"), ("last_offset", "max"), ("latest_dirty", "max")]
MERGE_ROWS = 1 << 20        # records held before they are folded into the key table
BUFFER_ROWS = 1 << 20       # records of the cleaned range joined with the offset map at once
_KEY_COLUMNS = ("offset", "key", "value_size", "is_control")                 # what the key table reads
_CLEANED_COLUMNS = _KEY_COLUMNS + ("base_offset", "delete_horizon_ms", "position", "batch_size_bytes")


@dataclass(frozen=True)
class PartitionJob:
    """One partition's slices (as the data source plans them) and the cleaner's plan for it."""

    topic: str
    partition: int
    slices: tuple[SegmentSlice, ...]
    cleaned: bool                   # one cleaning pass would clean [log start, first_uncleanable_offset)
    first_dirty_offset: int
    first_uncleanable_offset: int
    delete_retention_ms: int


def _records(job: PartitionJob, columns: tuple[str, ...], bounds: ScanBounds | None, ignore_corrupt: bool,
             stats: ScanStats) -> Iterator[tuple[int, pa.Table]]:
    """(slice index, the data records of one chunk): control records are not the cleaner's to keep or drop, and the
    batches of aborted transactions (the slice's ``aborted`` ranges) are dropped whole by the cleaner, their keys
    never entering its offset map."""
    for i, sl in enumerate(job.slices):
        for rb in read_slice(sl, bounds, ignore_corrupt=ignore_corrupt, stats=stats, columns=columns,
                             read_committed=bool(sl.aborted)):
            t = pa.Table.from_batches([rb])
            if pc.any(t["is_control"]).as_py():
                t = t.filter(pc.invert(t["is_control"]))
            if t.num_rows:
                yield i, t


def _as_key_rows(t: pa.Table, first_dirty: int, first_uncleanable: int, totals: dict[str, int]) -> pa.Table:
    """Each record as a key row of one version (so folding is one aggregation whatever was folded before); the
    partition's totals, which need no grouping, are added to ``totals``."""
    off, key, size = t["offset"], t["key"], t["value_size"]
    clean = pc.less(off, first_dirty)
    unclean = pc.greater_equal(off, first_uncleanable)
    dirty = pc.invert(pc.or_(clean, unclean))
    tomb = pc.cast(pc.is_null(size), pa.int64())
    n = t.num_rows
    for name, value in (("records", n), ("payload_bytes", pc.sum(pc.binary_length(key)).as_py() or 0),
                        ("payload_bytes", pc.sum(size).as_py() or 0), ("tombstones", pc.sum(tomb).as_py() or 0),
                        ("null_key_records", key.null_count), ("clean_records", pc.sum(clean).as_py() or 0),
                        ("uncleanable_records", pc.sum(unclean).as_py() or 0)):
        totals[name] = totals.get(name, 0) + value
    return pa.table({"key": key, "versions": pa.repeat(pa.scalar(1, pa.int64()), n), "tombstones": tomb,
                     "last_offset": off, "latest_dirty": pc.if_else(dirty, off, pa.scalar(None, pa.int64()))})


def _fold(tables: list[pa.Table]) -> pa.Table:
    merged = pa.concat_tables(tables).group_by("key", use_threads=False).aggregate(_KEY_MERGE)
    return merged.select(["key"] + [f"{name}_{how}" for name, how in _KEY_MERGE]).rename_columns(
        [f.name for f in KEY_FIELDS])


def key_table(job: PartitionJob, ignore_corrupt: bool, stats: ScanStats) -> tuple[pa.Table, pa.Table]:
    """One row per key of the partition (null keys: one row) with :data:`KEY_FIELDS`, and the partition's totals
    (one row of :data:`SUMMARY_FIELDS`)."""
    held: list[pa.Table] = []
    totals: dict[str, int] = {}
    rows, limit = 0, MERGE_ROWS
    for _, t in _records(job, _KEY_COLUMNS, None, ignore_corrupt, stats):
        held.append(_as_key_rows(t, job.first_dirty_offset, job.first_uncleanable_offset, totals))
        rows += t.num_rows
        if rows >= limit:       # folded again once as many records as keys have come (not on every chunk)
            held = [_fold(held)]
            rows = held[0].num_rows
            limit = max(MERGE_ROWS, 2 * rows)
    keys = _fold(held) if held else pa.schema(KEY_FIELDS).empty_table()
    records = totals.get("records", 0)
    totals.update(distinct_keys=keys.num_rows - (1 if totals.get("null_key_records") else 0),
                  dirty_records=records - totals.get("clean_records", 0) - totals.get("uncleanable_records", 0))
    return keys, pa.table({f.name: pa.array([totals.get(f.name, 0)], f.type) for f in SUMMARY_FIELDS})


def _retained(buf: pa.Table, offset_map: pa.Table, job: PartitionJob, paths: list[str], now_ms: int,
              fds: dict[str, int]) -> pa.Table:
    """Per batch of ``buf`` (whole batches only): what the cleaner keeps (``Cleaner.shouldRetainRecord``), and for a
    batch that loses some records (or gains a delete horizon) the size it is rewritten at."""
    j = buf.join(offset_map, "key", join_type="left outer", use_threads=False)
    tomb = j["tomb"]
    superseded = pc.fill_null(pc.less(j["offset"], j["map_offset"]), False)
    horizon_passed = pc.fill_null(pc.greater_equal(pa.scalar(now_ms, pa.int64()), j["delete_horizon_ms"]), False)
    retain = pc.and_(pc.and_(pc.is_valid(j["key"]), pc.invert(superseded)),
                     pc.invert(pc.and_(tomb, horizon_passed)))
    lost = pc.invert(retain)
    j = j.append_column("retain", pc.cast(retain, pa.int64())).append_column(
        "kept_tomb", pc.cast(pc.and_(retain, tomb), pa.int64())).append_column(
        "removed_tomb", pc.cast(pc.and_(lost, tomb), pa.int64())).append_column(
        "removed_null", pc.cast(pc.and_(lost, pc.is_null(j["key"])), pa.int64()))
    per_batch = j.group_by(["base_offset", "position", "batch_size_bytes", "slice"], use_threads=False).aggregate([
        ("offset", "count"), ("retain", "sum"), ("kept_tomb", "sum"), ("removed_tomb", "sum"),
        ("removed_null", "sum"), ("delete_horizon_ms", "max")])
    n, kept = per_batch["offset_count"], per_batch["retain_sum"]
    kept_tombs, horizon = per_batch["kept_tomb_sum"], per_batch["delete_horizon_ms_max"]
    needs_horizon = pc.and_(pc.greater(kept_tombs, 0), pc.is_null(horizon))
    rewrite = pc.and_(pc.greater(kept, 0), pc.or_(pc.less(kept, n), needs_horizon))
    new_horizon = pc.if_else(needs_horizon, pa.scalar(now_ms + job.delete_retention_ms, pa.int64()), horizon)
    sizes: list[int | None] = [None] * per_batch.num_rows
    todo = pc.indices_nonzero(rewrite).to_pylist()
    if todo:
        kept_offsets: dict[int, list[int]] = {}
        rewritten = per_batch["base_offset"].filter(rewrite)
        kept_rows = j.filter(pc.and_(retain, pc.is_in(j["base_offset"], value_set=rewritten))).select(
            ["base_offset", "offset"]).to_pydict()
        for base, off in zip(kept_rows["base_offset"], kept_rows["offset"]):
            kept_offsets.setdefault(base, []).append(off)
        cols = per_batch.select(["base_offset", "position", "batch_size_bytes", "slice"]).to_pydict()
        horizons = new_horizon.to_pylist()
        for i in todo:
            path = paths[cols["slice"][i]]
            raw, where = read_batch(fds, path, cols["position"][i], cols["batch_size_bytes"][i],
                                    cols["base_offset"][i])
            sizes[i] = cleaned_batch_size(raw, kept_offsets[cols["base_offset"][i]], horizons[i], where)
    return pa.table({"base_offset": per_batch["base_offset"], "data_records": n, "data_kept": pc.cast(kept, pa.int64()),
                     "kept_tombstones": pc.cast(kept_tombs, pa.int64()),
                     "removed_tombstones": pc.cast(per_batch["removed_tomb_sum"], pa.int64()),
                     "removed_null_key": pc.cast(per_batch["removed_null_sum"], pa.int64()),
                     "rewrite": rewrite, "new_horizon": new_horizon, "new_size": pa.array(sizes, pa.int64())})


def retained_per_batch(job: PartitionJob, offset_map: pa.Table, ignore_corrupt: bool, stats: ScanStats,
                       now_ms: int) -> Iterator[pa.Table]:
    """The cleaned range's batches holding data records, a table of :data:`BATCH_FIELDS` per buffer of records.
    ``offset_map``: (key, map_offset) for every non-null key with a record in the dirty range."""
    bounds = ScanBounds(offset_hi=job.first_uncleanable_offset)
    paths = [sl.path for sl in job.slices]
    fds: dict[str, int] = {}
    held: list[pa.Table] = []
    rows = 0
    try:
        for i, t in _records(job, _CLEANED_COLUMNS, bounds, ignore_corrupt, stats):
            held.append(pa.table({
                "key": t["key"], "offset": t["offset"], "tomb": pc.is_null(t["value_size"]),
                "base_offset": t["base_offset"], "position": t["position"], "batch_size_bytes": t["batch_size_bytes"],
                "delete_horizon_ms": t["delete_horizon_ms"], "slice": pa.repeat(pa.scalar(i, pa.int32()), t.num_rows)}))
            rows += t.num_rows
            if rows >= BUFFER_ROWS:
                buf = pa.concat_tables(held)
                last = buf["base_offset"][-1]       # its batch may go on in the next chunk: held back
                tail = pc.equal(buf["base_offset"], last)
                done = buf.filter(pc.invert(tail))
                held = [buf.filter(tail)]
                rows = held[0].num_rows
                if done.num_rows:
                    yield _retained(done, offset_map, job, paths, now_ms, fds)
        if held and rows:
            yield _retained(pa.concat_tables(held), offset_map, job, paths, now_ms, fds)
    finally:
        for fd in fds.values():
            os.close(fd)


def _rows(job: PartitionJob, table: pa.Table, kind: int) -> Iterator[pa.RecordBatch]:
    n = table.num_rows
    cols = {"topic": pa.repeat(job.topic, n), "partition": pa.repeat(pa.scalar(job.partition, pa.int32()), n),
            "kind": pa.repeat(pa.scalar(kind, pa.int32()), n)}
    for f in OUTPUT_SCHEMA:
        if f.name not in cols:
            cols[f.name] = table[f.name] if f.name in table.column_names else pa.nulls(n, f.type)
    yield from pa.table(cols, schema=OUTPUT_SCHEMA).to_batches(max_chunksize=1 << 16)


def partition_rows(job: PartitionJob, now_ms: int, *, ignore_corrupt: bool = False, stats: ScanStats | None = None
                   ) -> Iterator[pa.RecordBatch]:
    """A row per key of the partition and one with its totals, then (when a pass would clean it) a row per batch of
    the cleaned range."""
    stats = stats if stats is not None else ScanStats()
    keys, totals = key_table(job, ignore_corrupt, stats)
    yield from _rows(job, keys.select(list(KEY_ROW_FIELDS)), KEY_ROW)
    yield from _rows(job, totals, SUMMARY_ROW)
    if not job.cleaned:
        return
    dirty = keys.filter(pc.and_(pc.is_valid(keys["key"]), pc.is_valid(keys["latest_dirty"])))
    offset_map = pa.table({"key": dirty["key"], "map_offset": dirty["latest_dirty"]})
    del keys, dirty
    for table in retained_per_batch(job, offset_map, ignore_corrupt, stats, now_ms):
        yield from _rows(job, table, BATCH_ROW)


def partition_passes(now_ms: int, ignore_corrupt: bool, stats_dir: str | None):
    """A ``mapInArrow`` function over rows holding a pickled :class:`PartitionJob` (column ``job``), giving
    :data:`OUTPUT_SCHEMA` rows; each task's scan counters go to ``stats_dir`` as the data source's do."""

    def run(batches: Iterator) -> Iterator:
        stats = ScanStats()
        try:
            for rb in batches:
                for blob in rb.column("job").to_pylist():
                    yield from partition_rows(pickle.loads(blob), now_ms, ignore_corrupt=ignore_corrupt,
                                              stats=stats)
        finally:
            if stats_dir:
                from pyspark import TaskContext

                task = TaskContext.get()
                write_stats(stats_dir, stats, None if task is None else task.stageId())

    return run
