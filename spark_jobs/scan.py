"""Reading one planned slice of a segment into Arrow record batches. Runs on executors; no pyspark import.

Batch headers are walked with :func:`protocol.records.iter_batch_positions`; a batch that survives the header-level
filters (offset range, max timestamp, LogAppendTime upper bound) is CRC-checked, decompressed and decoded by
:func:`protocol.record_codec.decode_batch`, the same code the broker and the log cleaner use. Nothing else parses
records.

Counters (:class:`ScanStats`) say what was opened and decoded, so tests can assert on pruning rather than on time.
A reader given ``stats_dir`` also writes them there as one small JSON file per slice (Spark runs ``read`` in
worker processes, so in-process counters are invisible to the driver).
"""

from __future__ import annotations

import json
import mmap
import os
import uuid
from dataclasses import dataclass, field
from typing import Final, Iterable, Iterator, Sequence

import pyarrow as pa

from protocol.compression import CODEC_NAMES, DEFAULT_MAX_DECOMPRESSED_SIZE, NONE, decompress
from protocol.errors import CorruptRecordError, KafkaError
from protocol.record_columns import ColumnBuffers, ColumnBuilder, want_flags
from protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    iter_batch_positions,
    validate_batch,
)

from .planning import ScanBounds, SegmentSlice
from .transactions import AbortedRanges

__all__ = ["ARROW_SCHEMA", "DEFAULT_COLUMNS", "SCHEMA_DDL", "ScanStats", "CorruptSegmentError", "read_slice",
           "SegmentChangedError"]

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestamp_type", pa.int32()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", HEADER_TYPE),
    pa.field("base_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
    pa.field("partition_leader_epoch", pa.int32()),
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int32()),
    pa.field("base_sequence", pa.int32()),
    pa.field("is_transactional", pa.bool_()),
    pa.field("is_control", pa.bool_()),
    pa.field("compression", pa.string()),
    pa.field("batch_size_bytes", pa.int32()),
    pa.field("uncompressed_bytes", pa.int32()),
    pa.field("record_count", pa.int32()),
    pa.field("max_timestamp", pa.int64()),
    pa.field("delete_horizon_ms", pa.int64()),
    pa.field("segment", pa.int64()),
    pa.field("position", pa.int64()),
    pa.field("value_size", pa.int32()),
])

SPARK_TYPES: Final = {
    "topic": "string", "partition": "int", "offset": "bigint", "timestamp": "timestamp", "timestamp_type": "int",
    "key": "binary", "value": "binary", "headers": "array<struct<key:string,value:binary>>",
    "base_offset": "bigint", "last_offset": "bigint", "partition_leader_epoch": "int", "producer_id": "bigint",
    "producer_epoch": "int", "base_sequence": "int", "is_transactional": "boolean", "is_control": "boolean",
    "compression": "string", "batch_size_bytes": "int", "uncompressed_bytes": "int", "record_count": "int",
    "max_timestamp": "bigint", "delete_horizon_ms": "bigint", "segment": "bigint", "position": "bigint",
    "value_size": "int",
}
"""Each column's Spark type (``DataType.simpleString()``), in :data:`ARROW_SCHEMA` order."""

DEFAULT_COLUMNS: Final = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
                          "is_control")
"""The data source's schema when a read names no columns: the columns of Kafka's own Spark source (``key, value,
topic, partition, offset, timestamp, timestampType`` and, asked for, ``headers``; ``timestampType`` is spelled
``timestamp_type`` here, like every kafka-log column), and ``is_control`` to tell transaction markers from records.
Spark gives a Python data source no column pruning and converts every column of every row, so a default of all 25
columns made every query pay for the batch fields; they are a schema or ``option("columns", "*")`` away."""


def ddl(columns: Iterable[str]) -> str:
    """The Spark DDL of ``columns``."""
    return ", ".join(f"{name} {SPARK_TYPES[name]}" for name in columns)


SCHEMA_DDL = ddl(DEFAULT_COLUMNS)


class ColumnSelectionError(ValueError):
    """A user schema or ``columns`` option naming a column kafka-log does not have, or with another type."""


def select_columns(fields: Iterable[tuple[str, str, bool]]) -> tuple[str, ...]:
    """Check a requested schema, given as ``(name, simpleString type, nullable)`` per field, against
    :data:`SPARK_TYPES`; the column names in the order asked. Every kafka-log column can be null (a null key, an
    empty batch's row), so NOT NULL is refused too, rather than failing later in Spark's Arrow check."""
    names: list[str] = []
    for name, spark_type, nullable in fields:
        if name not in SPARK_TYPES:
            raise ColumnSelectionError(
                f"kafka-log has no column {name!r}; its columns are: {', '.join(SPARK_TYPES)}")
        if spark_type != SPARK_TYPES[name]:
            raise ColumnSelectionError(
                f"kafka-log column {name!r} is {SPARK_TYPES[name]}, not {spark_type}")
        if not nullable:
            raise ColumnSelectionError(f"kafka-log column {name!r} is nullable; drop NOT NULL from the schema")
        if name in names:
            raise ColumnSelectionError(f"kafka-log column {name!r} is asked for twice")
        names.append(name)
    if not names:
        raise ColumnSelectionError("kafka-log: the schema selects no columns")
    return tuple(names)


def arrow_schema(columns: Iterable[str] | None) -> pa.Schema:
    """:data:`ARROW_SCHEMA` restricted to ``columns`` (all when None), in their order."""
    if columns is None:
        return ARROW_SCHEMA
    return pa.schema([ARROW_SCHEMA.field(c) for c in columns])


DEFAULT_ROWS_PER_BATCH = 65536
MAX_CHUNK_BYTES: Final = 64 * 1024 * 1024
"""An Arrow chunk is handed on once its keys, values and headers reach this size, whatever its row count."""
NO_TIMESTAMP = -1


class CorruptSegmentError(CorruptRecordError):
    """A batch in a segment file failed its checks. The message names the file and the byte position."""


class SegmentChangedError(KafkaError):
    """A segment shrank or vanished between planning and reading (retention or the cleaner ran meanwhile)."""


@dataclass
class ScanStats:
    segments_opened: int = 0
    slices_read: int = 0
    bytes_mapped: int = 0
    batches_seen: int = 0
    batches_skipped_by_header: int = 0
    batches_skipped_txn: int = 0       # read_committed: control batches and aborted batches, by header
    batches_decoded: int = 0
    batches_from_header: int = 0       # rows made from the header alone: no record column asked for
    records_decoded: int = 0
    rows_emitted: int = 0
    corrupt_batches: int = 0
    torn_tails: int = 0
    corrupt: list[str] = field(default_factory=list)   # "file@position: reason", for reports (first 100)
    opened: list[str] = field(default_factory=list)    # segment paths opened (first 1000)

    def add(self, other: "ScanStats") -> None:
        for k, v in other.__dict__.items():
            if isinstance(v, list):
                getattr(self, k).extend(v)
            else:
                setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> "ScanStats":
        s = cls()
        for k, v in d.items():
            if hasattr(s, k):
                setattr(s, k, v)
        return s


def collect_stats(stats_dir: str) -> ScanStats:
    """Sum the per-slice JSON files a scan wrote into ``stats_dir``."""
    total = ScanStats()
    if not os.path.isdir(stats_dir):
        return total
    for name in sorted(os.listdir(stats_dir)):
        if name.startswith("scan-") and name.endswith(".json"):
            with open(os.path.join(stats_dir, name)) as f:
                total.add(ScanStats.from_dict(json.load(f)))
    return total


def write_stats(stats_dir: str, stats: ScanStats, stage: int | None = None) -> None:
    """One slice's counters as ``scan-[s<stage>-]<uuid>.json``, written whole by rename (the Spark stage that read
    the slice, when known, lets progress lines say what each stage scanned)."""
    os.makedirs(stats_dir, exist_ok=True)
    tmp = os.path.join(stats_dir, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "w") as f:
        json.dump(stats.as_dict(), f)
    tag = "" if stage is None else f"s{stage}-"
    os.replace(tmp, os.path.join(stats_dir, f"scan-{tag}{uuid.uuid4().hex}.json"))


RECORD_COLUMNS: Final = ("offset", "timestamp", "key", "value", "headers", "value_size")
"""Columns that need the records section decoded; every other column comes from the batch header (or the slice)."""

_BATCH_FIELDS: Final = ("timestamp_type", "base_offset", "last_offset", "partition_leader_epoch", "producer_id",
                        "producer_epoch", "base_sequence", "is_transactional", "is_control", "compression",
                        "batch_size_bytes", "uncompressed_bytes", "record_count", "max_timestamp",
                        "delete_horizon_ms", "position")


class _BatchFields:
    """The batch-level columns of one output chunk: a row (:data:`_BATCH_FIELDS`) per Kafka batch that gave rows,
    expanded per record with ``take`` on the builder's batch index."""

    __slots__ = ("rows", "_cols")

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self._cols: list | None = None

    @property
    def next_index(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list:
        if self._cols is None:
            self._cols = list(zip(*self.rows)) or [()] * len(_BATCH_FIELDS)
        return list(self._cols[_BATCH_FIELDS.index(name)])


def _buffer(b: bytes | None) -> pa.Buffer | None:
    return None if b is None else pa.py_buffer(b)


def _binary(arrow_type: pa.DataType, n: int, offsets: bytes, data: bytes, valid: bytes | None) -> pa.Array:
    return pa.Array.from_buffers(arrow_type, n, [_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)])


def _to_arrow(c: ColumnBuffers, batches: _BatchFields, sl: SegmentSlice, schema: pa.Schema) -> pa.RecordBatch:
    """Arrays for the columns of ``schema`` only: the record columns wrap the builder's buffers without copying."""
    n = c.rows
    idx = None
    arrays = []
    for name in schema.names:
        if name == "topic":
            arr = pa.repeat(pa.scalar(sl.topic, pa.string()), n)
        elif name == "partition":
            arr = pa.repeat(pa.scalar(sl.partition, pa.int32()), n)
        elif name == "segment":
            arr = pa.repeat(pa.scalar(sl.base_offset, pa.int64()), n)
        elif name == "offset":
            arr = pa.Array.from_buffers(pa.int64(), n, [_buffer(c.offset_valid), pa.py_buffer(c.offset)])
        elif name == "timestamp":
            arr = pa.Array.from_buffers(ARROW_SCHEMA.field("timestamp").type, n,
                                        [_buffer(c.timestamp_valid), pa.py_buffer(c.timestamp)])
        elif name == "key":
            arr = _binary(pa.binary(), n, c.key_offsets, c.key_data, c.key_valid)
        elif name == "value":
            arr = _binary(pa.binary(), n, c.value_offsets, c.value_data, c.value_valid)
        elif name == "value_size":
            arr = pa.Array.from_buffers(pa.int32(), n, [_buffer(c.value_size_valid), pa.py_buffer(c.value_size)])
        elif name == "headers":
            m = c.header_count
            header_struct = pa.StructArray.from_arrays(
                [_binary(pa.string(), m, c.hkey_offsets, c.hkey_data, None),
                 _binary(pa.binary(), m, c.hvalue_offsets, c.hvalue_data, c.hvalue_valid)], names=["key", "value"])
            list_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(c.header_offsets)])
            arr = pa.ListArray.from_arrays(list_offsets, header_struct, type=HEADER_TYPE)
        else:
            if idx is None:
                idx = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(c.batch_index)])
            arr = pa.array(batches.column(name), ARROW_SCHEMA.field(name).type).take(idx)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _is_zero_fill(buf, pos: int, end: int) -> bool:
    """A preallocated (``log.preallocate``) active segment ends in zeros: no batch starts with 12 zero bytes."""
    return end - pos >= 1 and not any(buf[pos:min(end, pos + LOG_OVERHEAD)])


def read_slice(sl: SegmentSlice, bounds: ScanBounds | None = None, *, ignore_corrupt: bool = False,
               stats: ScanStats | None = None, rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
               max_decompressed_size: int | None = None, empty_batches: bool = False,
               columns: Sequence[str] | None = None, row_per_batch: bool = False,
               read_committed: bool = False) -> Iterator[pa.RecordBatch]:
    """Yield the slice's records that fall within ``bounds`` as Arrow batches of :data:`ARROW_SCHEMA`, or of only
    ``columns`` (in that order; names checked by :func:`select_columns`).

    Only what the columns need is done: without one of :data:`RECORD_COLUMNS` a batch whole inside the bounds is
    not decompressed or decoded (its CRC is still checked, and its header's record count gives its rows); without
    ``value`` no value array is built (``value_size``, the value's length or null for a tombstone, is enough for
    queries that only ask whether a value is there or how big it is).

    ``empty_batches``: also yield one row for every batch holding no records (the log cleaner leaves such batches
    behind), with ``offset``, ``timestamp``, ``key`` and ``value`` null and the batch columns filled in; such a
    batch is kept when its offset range overlaps the offset bounds (timestamp bounds do not apply to it).

    Offset and timestamp bounds are applied exactly per record (so callers need not filter again); whole batches
    are skipped by header where the header proves no record can match, without CRC check or decompression.

    ``row_per_batch``: one row per batch (empty ones too) whose header survives the bounds, for batch-level columns
    only (none of :data:`RECORD_COLUMNS`); nothing is decompressed unless ``uncompressed_bytes`` is asked for.

    ``read_committed``: what a read_committed consumer gets, decided per batch from its header: control batches
    and the transactional batches inside one of ``sl.aborted`` (ranges of their producer) are skipped, and nothing
    at or above ``sl.stable_end`` (the LSO, when set) is read.
    """
    if row_per_batch and columns is not None and set(columns) & set(RECORD_COLUMNS):
        raise ColumnSelectionError(
            f"one row per batch has no record-level column: {sorted(set(columns) & set(RECORD_COLUMNS))}")
    bounds = bounds or ScanBounds()
    stats = stats if stats is not None else ScanStats()
    off_lo = bounds.offset_lo
    off_hi = bounds.offset_hi
    aborted = None
    if read_committed:
        aborted = AbortedRanges(sl.aborted)
        if sl.stable_end is not None:
            off_hi = sl.stable_end if off_hi is None else min(off_hi, sl.stable_end)
    ts_lo = bounds.ts_lo_us
    ts_hi = bounds.ts_hi_us
    kw = DEFAULT_MAX_DECOMPRESSED_SIZE if max_decompressed_size is None else max_decompressed_size
    try:
        f = open(sl.path, "rb")
    except FileNotFoundError:
        raise SegmentChangedError(f"segment {sl.path} was removed after the scan was planned") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < sl.end_pos:
            raise SegmentChangedError(f"segment {sl.path} shrank from {sl.end_pos} to {size} bytes after the scan "
                                      f"was planned (retention or the log cleaner ran meanwhile?)")
        stats.slices_read += 1
        if sl.start_pos == 0:
            stats.segments_opened += 1
            if len(stats.opened) < 1000:
                stats.opened.append(sl.path)
        if sl.end_pos == 0:
            return
        stats.bytes_mapped += sl.end_pos - sl.start_pos
        mm = mmap.mmap(f.fileno(), sl.end_pos, access=mmap.ACCESS_READ)
        try:
            yield from _walk(mm, sl, stats, off_lo, off_hi, ts_lo, ts_hi, ignore_corrupt, rows_per_batch, kw,
                             empty_batches, arrow_schema(columns), row_per_batch, aborted)
        finally:
            mm.close()


def _corrupt(stats: ScanStats, sl: SegmentSlice, pos: int, reason: str, ignore: bool) -> None:
    msg = f"{sl.path}@{pos}: {reason}"
    if not ignore:
        raise CorruptSegmentError(f"corrupt batch in segment {sl.path} at byte position {pos}: {reason} "
                                  f"(set ignoreCorruptBatches=true to skip and count such batches)")
    stats.corrupt_batches += 1
    if len(stats.corrupt) < 100:
        stats.corrupt.append(msg)


def _walk(mm, sl: SegmentSlice, stats: ScanStats, off_lo, off_hi, ts_lo, ts_hi, ignore_corrupt: bool,
          rows_per_batch: int, kw, empty_batches: bool, schema: pa.Schema, row_per_batch: bool,
          aborted: AbortedRanges | None = None) -> Iterator[pa.RecordBatch]:
    end = sl.end_pos
    scan = iter_batch_positions(mm, sl.start_pos, end)
    want = want_flags(schema.names)
    builder = ColumnBuilder(want)
    batches = _BatchFields()
    ts_lo_ms = None if ts_lo is None else -(-ts_lo // 1000)      # ceil: a record at ms t has t*1000 us
    want_raw_len = "uncompressed_bytes" in schema.names
    txn_mask = 0 if aborted is None else CONTROL_MASK | TRANSACTIONAL_MASK   # read_committed looks at these
    while True:
        if builder.rows >= rows_per_batch or builder.data_bytes >= MAX_CHUNK_BYTES:
            stats.rows_emitted += builder.rows
            yield _to_arrow(builder.finish(), batches, sl, schema)
            batches = _BatchFields()
        try:
            item = next(scan, None)
        except CorruptRecordError as e:
            pos = scan.position
            if sl.is_last_segment and sl.is_last_slice_of_segment and _is_zero_fill(mm, pos, end):
                stats.torn_tails += 1          # preallocated tail of the active segment: the log ends here
                break
            _corrupt(stats, sl, pos, f"{e} (the rest of the slice, {end - pos} bytes, cannot be framed)",
                     ignore_corrupt)
            break
        if item is None:
            break
        pos, h = item
        stats.batches_seen += 1
        last_offset = h.base_offset + h.last_offset_delta
        attrs = h.attributes
        if ((off_lo is not None and last_offset < off_lo) or (off_hi is not None and h.base_offset >= off_hi)
                or (ts_lo_ms is not None and h.max_timestamp < ts_lo_ms)
                or (ts_hi is not None and attrs & TIMESTAMP_TYPE_MASK and h.max_timestamp * 1000 >= ts_hi)):
            stats.batches_skipped_by_header += 1
            continue
        if attrs & txn_mask and (attrs & CONTROL_MASK or aborted.is_aborted(h.producer_id, h.base_offset,
                                                                            last_offset)):
            stats.batches_skipped_txn += 1
            continue
        inside = (ts_lo is None and ts_hi is None and (off_lo is None or h.base_offset >= off_lo)
                  and (off_hi is None or last_offset < off_hi))   # every record of the batch is within the bounds
        batch_index = batches.next_index
        decoded = False
        rows = 0
        try:
            # protocol.record_codec.decode_batch, unrolled to learn the uncompressed size on the way
            h = validate_batch(mm, pos)
            codec = attrs & COMPRESSION_MASK
            n = h.records_count
            raw_len = 0 if n == 0 else h.batch_length + LOG_OVERHEAD - RECORDS_OFFSET
            if n and ((not row_per_batch and (want or not inside)) or (want_raw_len and codec != NONE)):
                with memoryview(mm) as mv, mv[pos + RECORDS_OFFSET:pos + h.batch_length + LOG_OVERHEAD] as section:
                    data = section if codec == NONE else decompress(codec, section, kw)
                    raw_len = len(data)
                    if not row_per_batch and (want or not inside):
                        rows = builder.add_section(data, n, h.base_offset, h.base_timestamp,
                                                   h.max_timestamp if attrs & TIMESTAMP_TYPE_MASK else None,
                                                   batch_index, off_lo, off_hi, ts_lo, ts_hi)
                        decoded = True
                    del data
        except KafkaError as e:                    # CorruptRecordError, InvalidRecordError, UnsupportedMagic...
            _corrupt(stats, sl, pos, str(e), ignore_corrupt)
            continue
        if row_per_batch:
            stats.batches_from_header += 1
            builder.add_null_rows(batch_index, 1)
        elif n == 0:
            stats.batches_decoded += 1
            if not empty_batches:
                continue
            builder.add_null_rows(batch_index, 1)
        elif decoded:
            stats.batches_decoded += 1
            stats.records_decoded += n
            if not rows:
                continue
        else:                                      # no record column asked for, every record inside the bounds
            stats.batches_from_header += 1
            builder.add_null_rows(batch_index, n)
        batches.rows.append((
            (attrs & TIMESTAMP_TYPE_MASK) >> 3, h.base_offset, last_offset, h.partition_leader_epoch, h.producer_id,
            h.producer_epoch, h.base_sequence, bool(attrs & TRANSACTIONAL_MASK), bool(attrs & CONTROL_MASK),
            CODEC_NAMES.get(codec, "unknown"), h.batch_length + LOG_OVERHEAD, BATCH_HEADER_SIZE + raw_len, n,
            h.max_timestamp, h.base_timestamp if attrs & DELETE_HORIZON_MASK else None, pos))
    if scan.incomplete:
        pos = scan.position
        if sl.is_last_segment and sl.is_last_slice_of_segment:
            stats.torn_tails += 1               # a live segment's tail being written: not part of the snapshot
        else:
            _corrupt(stats, sl, pos, f"truncated batch: {end - pos} bytes left where a whole batch was expected",
                     ignore_corrupt)
    if builder.rows:
        stats.rows_emitted += builder.rows
        yield _to_arrow(builder.finish(), batches, sl, schema)
