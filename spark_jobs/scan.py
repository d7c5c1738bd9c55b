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
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from protocol.compression import CODEC_NAMES, DEFAULT_MAX_DECOMPRESSED_SIZE, NONE, decompress
from protocol.errors import CorruptRecordError, KafkaError
from protocol.record_codec import decode_records
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
])

SCHEMA_DDL = (
    "topic string, partition int, offset bigint, timestamp timestamp, timestamp_type int, key binary, "
    "value binary, headers array<struct<key:string,value:binary>>, base_offset bigint, last_offset bigint, "
    "partition_leader_epoch int, producer_id bigint, producer_epoch int, base_sequence int, "
    "is_transactional boolean, is_control boolean, compression string, batch_size_bytes int, "
    "uncompressed_bytes int, record_count int, "
    "max_timestamp bigint, delete_horizon_ms bigint, segment bigint, position bigint"
)

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


class _Columns:
    """Column builders for one output batch. Batch-level fields are stored once per batch and expanded with
    ``take``; headers are built as flat arrays plus list offsets."""

    __slots__ = ("offsets", "timestamps", "keys", "values", "hdr_offsets", "hdr_keys", "hdr_values", "batch_idx",
                 "b_cols", "n")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
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


_BATCH_FIELDS = ("timestamp_type", "base_offset", "last_offset", "partition_leader_epoch", "producer_id",
                 "producer_epoch", "base_sequence", "is_transactional", "is_control", "compression",
                 "batch_size_bytes", "uncompressed_bytes", "record_count", "max_timestamp", "delete_horizon_ms",
                 "position")


def _to_arrow(c: _Columns, sl: SegmentSlice) -> pa.RecordBatch:
    n = c.n
    idx = pa.array(c.batch_idx, pa.int32())
    batch_arrays = {}
    for name, col in zip(_BATCH_FIELDS, c.b_cols):
        batch_arrays[name] = pa.array(col, ARROW_SCHEMA.field(name).type).take(idx)
    header_struct = pa.StructArray.from_arrays(
        [pa.array(c.hdr_keys, pa.string()), pa.array(c.hdr_values, pa.binary())], names=["key", "value"])
    headers = pa.ListArray.from_arrays(pa.array(c.hdr_offsets, pa.int32()), header_struct, type=HEADER_TYPE)
    ms = pa.array(c.timestamps, pa.int64())
    ts = pc.if_else(pc.equal(ms, NO_TIMESTAMP), pa.scalar(None, pa.int64()), pc.multiply(ms, 1000)) \
        .cast(pa.timestamp("us", tz="UTC"))
    arrays = [
        pa.array([sl.topic] * n, pa.string()) if n else pa.array([], pa.string()),
        pa.array([sl.partition] * n, pa.int32()),
        pa.array(c.offsets, pa.int64()),
        ts,
        batch_arrays["timestamp_type"],
        pa.array(c.keys, pa.binary()),
        pa.array(c.values, pa.binary()),
        headers,
    ] + [batch_arrays[name] for name in _BATCH_FIELDS[1:-1]] + [
        pa.array([sl.base_offset] * n, pa.int64()),
        batch_arrays["position"],
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


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
               max_decompressed_size: int | None = None, empty_batches: bool = False) -> Iterator[pa.RecordBatch]:
    """Yield the slice's records that fall within ``bounds`` as Arrow batches of :data:`ARROW_SCHEMA`.

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
                             empty_batches)
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
          rows_per_batch: int, kw, empty_batches: bool = False) -> Iterator[pa.RecordBatch]:
    end = sl.end_pos
    scan = iter_batch_positions(mm, sl.start_pos, end)
    cols = _Columns()
    ts_lo_ms = None if ts_lo is None else -(-ts_lo // 1000)      # ceil: a record at ms t has t*1000 us
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
        try:
            # protocol.record_codec.decode_batch, unrolled to learn the uncompressed size on the way
            h = validate_batch(mm, pos)
            codec = attrs & COMPRESSION_MASK
            if h.records_count == 0:
                records, raw_len = [], 0
            else:
                with memoryview(mm) as mv, mv[pos + RECORDS_OFFSET:pos + h.batch_length + LOG_OVERHEAD] as section:
                    data = bytes(section) if codec == NONE else decompress(codec, section, kw)
                raw_len = len(data)
                records = decode_records(data, h.records_count, h.base_offset, h.base_timestamp,
                                         h.max_timestamp if attrs & TIMESTAMP_TYPE_MASK else None)
                del data
        except KafkaError as e:                    # CorruptRecordError, InvalidRecordError, UnsupportedMagic...
            _corrupt(stats, sl, pos, str(e), ignore_corrupt)
            continue
        stats.batches_decoded += 1
        stats.records_decoded += len(records)
        if not records:
            if empty_batches:
                bi = cols.add_batch((
                    (attrs & TIMESTAMP_TYPE_MASK) >> 3, h.base_offset, last_offset, h.partition_leader_epoch,
                    h.producer_id, h.producer_epoch, h.base_sequence, bool(attrs & TRANSACTIONAL_MASK),
                    bool(attrs & CONTROL_MASK), CODEC_NAMES.get(attrs & COMPRESSION_MASK, "unknown"),
                    h.batch_length + LOG_OVERHEAD, BATCH_HEADER_SIZE + raw_len, h.records_count, h.max_timestamp,
                    h.base_timestamp if attrs & DELETE_HORIZON_MASK else None, pos))
                cols.offsets.append(None)
                cols.timestamps.append(NO_TIMESTAMP)
                cols.keys.append(None)
                cols.values.append(None)
                cols.hdr_offsets.append(len(cols.hdr_keys))
                cols.batch_idx.append(bi)
                cols.n += 1
            continue
        if ts_lo is None and ts_hi is None and (off_lo is None or h.base_offset >= off_lo) \
                and (off_hi is None or last_offset < off_hi):
            keep = records                         # the whole batch is inside the bounds: no per-record test
        else:
            keep = [r for r in records
                    if (off_lo is None or r.offset >= off_lo) and (off_hi is None or r.offset < off_hi)
                    and (ts_lo is None or (r.timestamp != NO_TIMESTAMP and r.timestamp * 1000 >= ts_lo))
                    and (ts_hi is None or (r.timestamp != NO_TIMESTAMP and r.timestamp * 1000 < ts_hi))]
            if not keep:
                continue
        bi = cols.add_batch((
            (attrs & TIMESTAMP_TYPE_MASK) >> 3, h.base_offset, last_offset, h.partition_leader_epoch,
            h.producer_id, h.producer_epoch, h.base_sequence, bool(attrs & TRANSACTIONAL_MASK),
            bool(attrs & CONTROL_MASK), CODEC_NAMES.get(attrs & COMPRESSION_MASK, "unknown"),
            h.batch_length + LOG_OVERHEAD, BATCH_HEADER_SIZE + raw_len, h.records_count, h.max_timestamp,
            h.base_timestamp if attrs & DELETE_HORIZON_MASK else None, pos))
        n = len(keep)
        cols.offsets.extend([r.offset for r in keep])
        cols.timestamps.extend([r.timestamp for r in keep])          # ms; -1 (none) becomes null in _to_arrow
        cols.keys.extend([r.key for r in keep])
        cols.values.extend([r.value for r in keep])
        hk_list = cols.hdr_keys
        if any(r.headers for r in keep):
            hv_list, ho = cols.hdr_values, cols.hdr_offsets
            for r in keep:
                for hk, hv in r.headers:
                    hk_list.append(hk if hk.isascii() else _valid_utf8(hk))
                    hv_list.append(hv)
                ho.append(len(hk_list))
        else:
            cols.hdr_offsets.extend([len(hk_list)] * n)
        cols.batch_idx.extend([bi] * n)
        cols.n += n
        if cols.n >= rows_per_batch:
            stats.rows_emitted += cols.n
            yield _to_arrow(cols, sl)
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
        yield _to_arrow(cols, sl)
