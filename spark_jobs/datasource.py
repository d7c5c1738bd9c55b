"""``kafka-log``: a PySpark data source over Kafka log directories (segments read where they lie).

    spark_jobs.register(spark)
    df = spark.read.format("kafka-log").load("/var/lib/odradek/data")

One Spark input partition per segment (segments above ``maxSliceBytes`` are split at offset-index entries).
The reader is a thin adapter over :mod:`spark_jobs.planning` (driver) and :mod:`spark_jobs.scan` (executors).

Options (all strings, case-insensitive names):

=========================  ==================================================================================
``topics``                 comma-separated topic names (exact)
``partitions``             comma-separated partition numbers
``startingOffset``         first offset to read (inclusive)
``endingOffset``           offset to stop before (exclusive, like the Kafka source's ``endingOffsets``)
``startingTimestamp``      epoch ms, inclusive
``endingTimestamp``        epoch ms, exclusive
``includeInternal``        read ``__consumer_offsets``/``__cluster_metadata``/``__transaction_state`` too
``ignoreCorruptBatches``   skip batches that fail CRC/structure checks, count them (``statsPath``) and go on
``maxSliceBytes``          split segments larger than this (default 128 MiB)
``useIndexes``             ``false``: never trust ``.index``/``.timeindex`` files (headers are walked instead)
``statsPath``              a directory where each task writes its scan counters (segments opened, batches...)
``emptyBatches``           also one row (null offset/key/value) per batch holding no records, as compaction
                           leaves them; off by default
``columns``                comma-separated column names: the DataFrame has only these (same as ``.schema``);
                           ``*`` for all of them
``rowPerBatch``            one row per batch (empty ones too) instead of per record: batch-level columns only,
                           from CRC-checked headers, nothing decompressed; bounds keep the batches whose
                           header says they may hold a matching record
``isolationLevel``         ``read_uncommitted`` (default: every record, markers as rows) or ``read_committed``:
                           what a read_committed consumer gets: no control batches, no batches of aborted
                           transactions, nothing at or above each partition's last stable offset (planned on
                           the driver from ``.txnindex`` files or batch headers; see spark_jobs/transactions.py)
=========================  ==================================================================================

Columns: by default those of Kafka's own Spark source, ``topic, partition, offset, timestamp, timestamp_type, key,
value, headers``, and ``is_control`` (transaction markers are rows too). Each record's batch fields (``base_offset,
last_offset, partition_leader_epoch, producer_id, producer_epoch, base_sequence, is_transactional, compression,
batch_size_bytes, uncompressed_bytes, record_count, max_timestamp, delete_horizon_ms, segment, position``) and
``value_size`` are there when named, or all with ``option("columns", "*")``.

Only the columns a query needs: Spark does not tell a Python data source which columns a query reads (and converts
every column of every row it is given), so say it with a schema naming the columns (any order, same names and types),
or the ``columns`` option::

    spark.read.format("kafka-log").schema("topic string, partition int, offset long, key binary").load(d)

The reader then decodes only those: no value array for a key-only query (``value_size``, the value's length or
null for a tombstone, answers "is there a value, how big" without moving values), and with none of ``offset``,
``timestamp``, ``key``, ``value``, ``headers``, ``value_size`` a batch wholly inside the bounds is counted from its
CRC-checked header without decompressing it. An unknown column, another type or NOT NULL is refused with a
message naming the column.

With Spark >= 4.1 and ``spark.sql.python.filterPushdown.enabled=true``, ``WHERE`` conjuncts on ``topic``,
``partition``, ``offset`` and ``timestamp`` are pushed into the same pruning. Filters the reader applies exactly per
row are kept; anything else is handed back to Spark. Correctness never depends on pushdown: the options and the
pushed filters go through one code path, and without pushdown Spark simply filters the rows itself.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import uuid
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .planning import DEFAULT_MAX_SLICE_BYTES, PlanStats, ScanBounds, SegmentSlice, plan_slices
from .scan import (RECORD_COLUMNS, SCHEMA_DDL, SPARK_TYPES, ColumnSelectionError, ScanStats, ddl, read_slice,
                   select_columns, write_stats)

try:  # Spark >= 4.1
    from pyspark.sql.datasource import (
        EqualNullSafe,
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )
    _HAVE_FILTERS = True
except ImportError:  # pragma: no cover - Spark 4.0
    _HAVE_FILTERS = False

__all__ = ["KafkaLogDataSource", "KafkaLogReader", "KafkaLogPushdownReader", "SliceInputPartition",
           "bounds_from_options"]


class SliceInputPartition(InputPartition):
    """One :class:`SegmentSlice` to read: plain fields only, so it pickles small."""

    def __init__(self, sl: SegmentSlice) -> None:
        self.value = dataclasses.astuple(sl)

    @property
    def slice(self) -> SegmentSlice:
        return SegmentSlice(*self.value)


def _opt(options, name: str, default=None):
    # Spark hands a case-insensitive dict; plain dicts (tests) may not be, so look the name up both ways
    if name in options:
        return options[name]
    low = name.lower()
    for k in options:
        if k.lower() == low:
            return options[k]
    return default


def _bool(v, name: str) -> bool:
    if v is None:
        return False
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no", ""):
        return False
    raise ValueError(f"option {name}: expected true or false, got {v!r}")


def _int(v, name: str) -> int | None:
    if v is None or str(v).strip() == "":
        return None
    try:
        return int(str(v).strip())
    except ValueError:
        raise ValueError(f"option {name}: expected an integer, got {v!r}") from None


ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def read_committed_option(options) -> bool:
    v = _opt(options, "isolationLevel")
    s = "read_uncommitted" if v is None else str(v).strip().lower()
    if s not in ISOLATION_LEVELS:
        raise ValueError(f"option isolationLevel: expected read_uncommitted or read_committed, got {v!r}")
    return s == "read_committed"


def bounds_from_options(options) -> ScanBounds:
    topics = _opt(options, "topics")
    partitions = _opt(options, "partitions")
    ts_lo = _int(_opt(options, "startingTimestamp"), "startingTimestamp")
    ts_hi = _int(_opt(options, "endingTimestamp"), "endingTimestamp")
    return ScanBounds(
        topics=None if topics is None else frozenset(t.strip() for t in str(topics).split(",") if t.strip()),
        partitions=None if partitions is None else frozenset(
            _int(p, "partitions") for p in str(partitions).split(",") if p.strip()),
        offset_lo=_int(_opt(options, "startingOffset"), "startingOffset"),
        offset_hi=_int(_opt(options, "endingOffset"), "endingOffset"),
        ts_lo_us=None if ts_lo is None else ts_lo * 1000,
        ts_hi_us=None if ts_hi is None else ts_hi * 1000,
        include_internal=_bool(_opt(options, "includeInternal"), "includeInternal"),
    )


def _to_us(v) -> int | None:
    """A pushed timestamp literal as epoch microseconds. Spark hands ``datetime`` (naive ones are local time, as
    ``TimestampType.fromInternal`` makes them)."""
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.astimezone()             # naive = the Python worker's local time zone
        delta = v - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return None


def _max(a, b):
    return b if a is None else (a if b is None else max(a, b))


def _min(a, b):
    return b if a is None else (a if b is None else min(a, b))


def columns_option(options) -> tuple[str, ...] | None:
    """The ``columns`` option as checked column names (``*``: all of them; None when absent)."""
    cols = _opt(options, "columns")
    if cols is None:
        return None
    if str(cols).strip() == "*":
        return tuple(SPARK_TYPES)
    names = [c.strip() for c in str(cols).split(",") if c.strip()]
    return select_columns((c, SPARK_TYPES.get(c, "?"), True) for c in names)


def columns_of_schema(schema, options) -> tuple[str, ...] | None:
    """The columns Spark asks the reader for: None for the whole default schema, else the checked subset."""
    option = columns_option(options)
    if schema is None:
        return option
    fields = [(f.name, f.dataType.simpleString(), f.nullable) for f in schema.fields]
    if option is None and fields == [(n, t, True) for n, t in SPARK_TYPES.items()]:
        return None
    cols = select_columns(fields)
    if option is not None and option != cols:
        raise ValueError(f"kafka-log: the schema's columns {list(cols)} differ from the columns option "
                         f"{list(option)}; give one of them")
    return cols


class KafkaLogReader(DataSourceReader):
    def __init__(self, options, columns: tuple[str, ...] | None = None) -> None:
        path = _opt(options, "path") or _opt(options, "paths")
        if not path:
            raise ValueError("kafka-log: give the log directory: spark.read.format('kafka-log').load('/path')")
        if isinstance(path, str) and path.startswith("["):
            path = ",".join(json.loads(path))
        self.path = str(path)
        self.bounds = bounds_from_options(options)
        self.ignore_corrupt = _bool(_opt(options, "ignoreCorruptBatches"), "ignoreCorruptBatches")
        self.max_slice_bytes = _int(_opt(options, "maxSliceBytes"), "maxSliceBytes") or DEFAULT_MAX_SLICE_BYTES
        use_idx = _opt(options, "useIndexes")
        self.use_indexes = True if use_idx is None else _bool(use_idx, "useIndexes")
        self.stats_path = _opt(options, "statsPath")
        self.empty_batches = _bool(_opt(options, "emptyBatches"), "emptyBatches")
        self.row_per_batch = _bool(_opt(options, "rowPerBatch"), "rowPerBatch")
        self.read_committed = read_committed_option(options)
        if self.row_per_batch:
            per_record = [c for c in (columns or SPARK_TYPES) if c in RECORD_COLUMNS]
            if per_record:
                raise ColumnSelectionError(
                    f"kafka-log: rowPerBatch gives one row per batch, so no record-level column: drop "
                    f"{', '.join(per_record)} from the schema (or the columns option)")
        self.columns = columns
        self.pushed: list[str] = []

    # -- filter pushdown (Spark >= 4.1; see KafkaLogPushdownReader) ---------------------------------------------
    def _push_filters(self, filters):
        for f in filters:
            if self._push(f):
                self.pushed.append(repr(f))
            else:
                yield f

    def _push(self, f) -> bool:
        """Fold ``f`` into ``self.bounds``; True if the reader now applies it exactly (Spark may drop it)."""
        col = getattr(f, "attribute", None)
        if not col or len(col) != 1 or not hasattr(f, "value"):
            return False
        col = col[0]
        b = self.bounds
        if col == "topic":
            if isinstance(f, (EqualTo, EqualNullSafe)) and isinstance(f.value, str):
                vals = {f.value}
            elif isinstance(f, In) and all(isinstance(v, str) for v in f.value):
                vals = set(f.value)
            else:
                return False
            self.bounds = dataclasses.replace(b, topics=frozenset(vals if b.topics is None else b.topics & vals))
            return True
        if col == "partition":
            if isinstance(f, (EqualTo, EqualNullSafe)) and isinstance(f.value, int):
                vals = {f.value}
            elif isinstance(f, In) and all(isinstance(v, int) for v in f.value):
                vals = set(f.value)
            else:
                return False
            self.bounds = dataclasses.replace(
                b, partitions=frozenset(vals if b.partitions is None else b.partitions & vals))
            return True
        if col == "offset":
            v = f.value if not isinstance(f, In) else None
            if isinstance(f, In):
                ints = [x for x in f.value if isinstance(x, int) and not isinstance(x, bool)]
                if len(ints) != len(f.value) or not ints:
                    return False
                self.bounds = dataclasses.replace(b, offset_lo=_max(b.offset_lo, min(ints)),
                                                  offset_hi=_min(b.offset_hi, max(ints) + 1))
                return False                # range only: Spark still evaluates the IN
            if not isinstance(v, int) or isinstance(v, bool):
                return False
            lo, hi = {
                EqualTo: (v, v + 1), EqualNullSafe: (v, v + 1), GreaterThan: (v + 1, None),
                GreaterThanOrEqual: (v, None), LessThan: (None, v), LessThanOrEqual: (None, v + 1),
            }.get(type(f), (False, False))
            if lo is False:
                return False
            self.bounds = dataclasses.replace(b, offset_lo=_max(b.offset_lo, lo), offset_hi=_min(b.offset_hi, hi))
            return not self.empty_batches      # empty-batch rows have a null offset: Spark must filter them
        if col == "timestamp":
            us = _to_us(getattr(f, "value", None))
            if us is None:
                return False
            lo, hi = {
                EqualTo: (us, us + 1), GreaterThan: (us + 1, None), GreaterThanOrEqual: (us, None),
                LessThan: (None, us), LessThanOrEqual: (None, us + 1),
            }.get(type(f), (False, False))
            if lo is False:
                return False
            self.bounds = dataclasses.replace(b, ts_lo_us=_max(b.ts_lo_us, lo), ts_hi_us=_min(b.ts_hi_us, hi))
            return not self.empty_batches
        return False

    # -- planning and reading ------------------------------------------------------------------------------------
    def partitions(self):
        stats = PlanStats()
        slices = plan_slices(self.path, self.bounds, max_slice_bytes=self.max_slice_bytes,
                             use_indexes=self.use_indexes, stats=stats, read_committed=self.read_committed)
        if self.stats_path:
            os.makedirs(self.stats_path, exist_ok=True)
            d = stats.as_dict()
            d["pushed_filters"] = list(self.pushed)
            d["bounds"] = repr(self.bounds)
            with open(os.path.join(self.stats_path, f"plan-{uuid.uuid4().hex}.json"), "w") as f:
                json.dump(d, f)
        return [SliceInputPartition(s) for s in slices]

    def read(self, partition) -> Iterator:
        if not isinstance(partition, SliceInputPartition):
            return                # no slices planned: Spark still runs one task with a placeholder partition
        stats = ScanStats()
        try:
            yield from read_slice(partition.slice, self.bounds, ignore_corrupt=self.ignore_corrupt, stats=stats,
                                  empty_batches=self.empty_batches, columns=self.columns,
                                  row_per_batch=self.row_per_batch, read_committed=self.read_committed)
        finally:
            if self.stats_path:
                from pyspark import TaskContext

                task = TaskContext.get()
                write_stats(self.stats_path, stats, None if task is None else task.stageId())


class KafkaLogPushdownReader(KafkaLogReader):
    """The reader with ``pushFilters``: Spark refuses a reader that defines it unless
    ``spark.sql.python.filterPushdown.enabled`` is true, so it is only handed out when that is the case."""

    def pushFilters(self, filters):
        return self._push_filters(filters)


def _pushdown_enabled() -> bool:
    """Whether Spark's planner will call ``pushFilters``. The data source API does not tell ``reader()``; look up
    the stack: Spark calls ``reader()`` from its filter-pushdown worker (``data_source_pushdown_filters``) only
    when pushdown is on, and its plain planning worker (``plan_data_source_read._main``) holds the setting in a
    local named ``enable_pushdown``. Unknown means no: pruning by options still works, and without pushdown Spark
    filters every row itself, so the answer is the same."""
    import sys

    f = sys._getframe(1)
    for _ in range(12):
        if f is None:
            return False
        if f.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        v = f.f_locals.get("enable_pushdown")
        if isinstance(v, bool):
            return v
        f = f.f_back
    return False


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafka-log").load(log_dir)``; see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    def schema(self) -> str:
        cols = columns_option(self.options)
        return SCHEMA_DDL if cols is None else ddl(cols)

    def reader(self, schema) -> KafkaLogReader:
        columns = columns_of_schema(schema, self.options)
        push = _opt(self.options, "pushdown")
        if _HAVE_FILTERS and (True if push is None else _bool(push, "pushdown")) and _pushdown_enabled():
            return KafkaLogPushdownReader(self.options, columns)
        return KafkaLogReader(self.options, columns)
