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
import pyarrow.compute as pc

from protocol.compression import CODEC_NAMES, DEFAULT_MAX_DECOMPRESSED_SIZE, NONE, decompress
from protocol.errors import CorruptRecordError, KafkaError
from protocol.record_codec import RecordColumns, decode_columns
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

__all__ = ["ARROW_SCHEMA", "SCHEMA_DDL", "ScanStats", "CorruptSegmentError", "read_slice", "SegmentChangedError"]

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

SCHEMA_DDL = ", ".join(f"{name} {t}" for name, t in SPARK_TYPES.items())


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


def write_stats(stats_dir: str, stats: ScanStats) -> None:
    os.makedirs(stats_dir, exist_ok=True)
    tmp = os.path.join(stats_dir, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "w") as f:
        json.dump(stats.as_dict(), f)
    os.replace(tmp, os.path.join(stats_dir, f"scan-{uuid.uuid4().hex}.json"))


RECORD_COLUMNS: Final = ("offset", "timestamp", "key", "value", "headers", "value_size")
"""Columns that need the records section decoded; every other column comes from the batch header (or the slice)."""

_BATCH_FIELDS: Final = ("timestamp_type", "base_offset", "last_offset", "partition_leader_epoch", "producer_id",
                        "producer_epoch", "base_sequence", "is_transactional", "is_control", "compression",
                        "batch_size_bytes", "uncompressed_bytes", "record_count", "max_timestamp",
                        "delete_horizon_ms", "position")


class _Columns:
    """Column lists for one output batch, only for the columns asked for. Batch-level fields are stored once per
    batch and expanded with ``take``; headers are built as flat arrays plus list offsets."""

    __slots__ = ("offsets", "timestamps", "keys", "values", "value_sizes", "hdr_offsets", "hdr_keys", "hdr_values",
                 "batch_idx", "b_cols", "n")

    def __init__(self) -> None:
        self.offsets: list[int | None] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.value_sizes: list[int | None] = []
        self.hdr_offsets: list[int] = [0]
        self.hdr_keys: list[str] = []
        self.hdr_values: list[bytes | None] = []
        self.batch_idx: list[int] = []
        self.b_cols: list[list] = [[] for _ in range(len(_BATCH_FIELDS))]
        self.n = 0

    def add_batch(self, values: tuple) -> int:
        for col, v in zip(self.b_cols, values):
            col.append(v)
        return len(self.b_cols[0]) - 1


def _to_arrow(c: _Columns, sl: SegmentSlice, schema: pa.Schema) -> pa.RecordBatch:
    """Arrays for the columns of ``schema`` only, each built in one call from its list."""
    n = c.n
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
            arr = pa.array(c.offsets, pa.int64())
        elif name == "timestamp":
            ms = pa.array(c.timestamps, pa.int64())
            arr = pc.if_else(pc.equal(ms, NO_TIMESTAMP), pa.scalar(None, pa.int64()), pc.multiply(ms, 1000)) \
                .cast(pa.timestamp("us", tz="UTC"))
        elif name == "key":
            arr = pa.array(c.keys, pa.binary())
        elif name == "value":
            arr = pa.array(c.values, pa.binary())
        elif name == "value_size":
            arr = pa.array(c.value_sizes, pa.int32())
        elif name == "headers":
            header_struct = pa.StructArray.from_arrays(
                [pa.array(c.hdr_keys, pa.string()), pa.array(c.hdr_values, pa.binary())], names=["key", "value"])
            arr = pa.ListArray.from_arrays(pa.array(c.hdr_offsets, pa.int32()), header_struct, type=HEADER_TYPE)
        else:
            if idx is None:
                idx = pa.array(c.batch_idx, pa.int32())
            arr = pa.array(c.b_cols[_BATCH_FIELDS.index(name)], ARROW_SCHEMA.field(name).type).take(idx)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _valid_utf8(s: str) -> str:
    """Header keys are decoded with surrogateescape; Arrow strings must be valid UTF-8."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _is_zero_fill(buf, pos: int, end: int) -> bool:
    """A preallocated (``log.preallocate``) active segment ends in zeros: no batch starts with 12 zero bytes."""
    return end - pos >= 1 and not any(buf[pos:min(end, pos + LOG_OVERHEAD)])


def read_slice(sl: SegmentSlice, bounds: ScanBounds | None = None, *, ignore_corrupt: bool = False,
               stats: ScanStats | None = None, rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
               max_decompressed_size: int | None = None, empty_batches: bool = False,
               columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
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
    """
    bounds = bounds or ScanBounds()
    stats = stats if stats is not None else ScanStats()
    off_lo = bounds.offset_lo
    off_hi = bounds.offset_hi
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
                             empty_batches, arrow_schema(columns))
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
          rows_per_batch: int, kw, empty_batches: bool, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    end = sl.end_pos
    scan = iter_batch_positions(mm, sl.start_pos, end)
    cols = _Columns()
    ts_lo_ms = None if ts_lo is None else -(-ts_lo // 1000)      # ceil: a record at ms t has t*1000 us
    wanted = set(schema.names)
    record_cols = wanted.intersection(RECORD_COLUMNS)
    want_offsets, want_ts, want_keys, want_values, want_headers, want_value_sizes = (
        c in wanted for c in RECORD_COLUMNS)
    want_raw_len = "uncompressed_bytes" in wanted
    while True:
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
        inside = (ts_lo is None and ts_hi is None and (off_lo is None or h.base_offset >= off_lo)
                  and (off_hi is None or last_offset < off_hi))   # every record of the batch is within the bounds
        rc = None
        try:
            # protocol.record_codec.decode_batch, unrolled to learn the uncompressed size on the way
            h = validate_batch(mm, pos)
            codec = attrs & COMPRESSION_MASK
            n = h.records_count
            raw_len = 0 if n == 0 else h.batch_length + LOG_OVERHEAD - RECORDS_OFFSET
            if n and (record_cols or not inside or (want_raw_len and codec != NONE)):
                with memoryview(mm) as mv, mv[pos + RECORDS_OFFSET:pos + h.batch_length + LOG_OVERHEAD] as section:
                    data = bytes(section) if codec == NONE else decompress(codec, section, kw)
                raw_len = len(data)
                if record_cols or not inside:
                    rc = decode_columns(data, n, h.base_offset, h.base_timestamp,
                                        h.max_timestamp if attrs & TIMESTAMP_TYPE_MASK else None)
                del data
        except KafkaError as e:                    # CorruptRecordError, InvalidRecordError, UnsupportedMagic...
            _corrupt(stats, sl, pos, str(e), ignore_corrupt)
            continue
        if rc is None and n:
            stats.batches_from_header += 1
        else:
            stats.batches_decoded += 1
            stats.records_decoded += n
        batch_row = ((attrs & TIMESTAMP_TYPE_MASK) >> 3, h.base_offset, last_offset, h.partition_leader_epoch,
                     h.producer_id, h.producer_epoch, h.base_sequence, bool(attrs & TRANSACTIONAL_MASK),
                     bool(attrs & CONTROL_MASK), CODEC_NAMES.get(codec, "unknown"), h.batch_length + LOG_OVERHEAD,
                     BATCH_HEADER_SIZE + raw_len, n, h.max_timestamp,
                     h.base_timestamp if attrs & DELETE_HORIZON_MASK else None, pos)
        if n == 0:
            if empty_batches:
                bi = cols.add_batch(batch_row)
                cols.offsets.append(None)
                cols.timestamps.append(NO_TIMESTAMP)
                cols.keys.append(None)
                cols.values.append(None)
                cols.value_sizes.append(None)
                cols.hdr_offsets.append(len(cols.hdr_keys))
                cols.batch_idx.append(bi)
                cols.n += 1
            continue
        if rc is not None and not inside:
            rc = _within(rc, off_lo, off_hi, ts_lo, ts_hi)
            n = len(rc.offsets)
            if not n:
                continue
        bi = cols.add_batch(batch_row)
        if want_offsets:
            cols.offsets.extend(rc.offsets)
        if want_ts:
            cols.timestamps.extend(rc.timestamps)           # ms; -1 (none) becomes null in _to_arrow
        if want_keys:
            cols.keys.extend(rc.keys)
        if want_values:
            cols.values.extend(rc.values)
        if want_value_sizes:
            cols.value_sizes.extend([None if v is None else len(v) for v in rc.values])
        if want_headers:
            hk_list = cols.hdr_keys
            if any(rc.headers):
                hv_list, ho = cols.hdr_values, cols.hdr_offsets
                for hs in rc.headers:
                    for hk, hv in hs:
                        hk_list.append(hk if hk.isascii() else _valid_utf8(hk))
                        hv_list.append(hv)
                    ho.append(len(hk_list))
            else:
                cols.hdr_offsets.extend([len(hk_list)] * n)
        cols.batch_idx.extend([bi] * n)
        cols.n += n
        if cols.n >= rows_per_batch:
            stats.rows_emitted += cols.n
            yield _to_arrow(cols, sl, schema)
            cols = _Columns()
    if scan.incomplete:
        pos = scan.position
        if sl.is_last_segment and sl.is_last_slice_of_segment:
            stats.torn_tails += 1               # a live segment's tail being written: not part of the snapshot
        else:
            _corrupt(stats, sl, pos, f"truncated batch: {end - pos} bytes left where a whole batch was expected",
                     ignore_corrupt)
    if cols.n:
        stats.rows_emitted += cols.n
        yield _to_arrow(cols, sl, schema)


def _within(rc: RecordColumns, off_lo, off_hi, ts_lo, ts_hi) -> RecordColumns:
    """The records of a batch straddling the bounds that lie within them (offsets exact, timestamps in us)."""
    keep = [i for i, (o, t) in enumerate(zip(rc.offsets, rc.timestamps))
            if (off_lo is None or o >= off_lo) and (off_hi is None or o < off_hi)
            and (ts_lo is None or (t != NO_TIMESTAMP and t * 1000 >= ts_lo))
            and (ts_hi is None or (t != NO_TIMESTAMP and t * 1000 < ts_hi))]
    if len(keep) == len(rc.offsets):
        return rc
    return RecordColumns(*([col[i] for i in keep] for col in rc))
