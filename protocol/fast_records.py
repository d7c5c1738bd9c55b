"""The compiled record decoder behind :func:`protocol.record_codec.decode_records`: aiokafka's C reader
(``aiokafka.record._crecords.DefaultRecordBatch``, a maintained Cython extension), when it is importable.

aiokafka is an optional accelerator, not a runtime dependency: it comes with the ``spark`` and ``test`` extras, and
without it (or with ``ODRADEK_PURE_RECORDS=1`` in the environment) :mod:`protocol.record_codec`'s pure-Python
decoder runs, which stays the reference. Callers never choose: ``decode_batch`` / ``decode_records`` dispatch.

The C reader is fed only what it reads the same way as the reference, and its answer is kept only when it is
provably the reference's answer; otherwise :func:`decode_records` returns None and ``record_codec`` runs the
reference on the same bytes, for its records or its error. So results and errors are the reference's by
construction:

* Decompression stays odradek's (:func:`protocol.compression.decompress`, bounded against bombs, same errors): the
  C reader gets a synthetic uncompressed CreateTime header (base offset, base timestamp, count) followed by the
  records section, then 16 zero bytes outside the buffer it is given. Its varint reader does not check bounds
  (it reads until a byte below 0x80), so the zero padding is what stops a varint that runs off the end: it reads
  at most two bytes past the end, into the padding, never into foreign memory.
* Any exception from the C reader (its ``CorruptRecordException``, ``UnicodeDecodeError`` on a header key the
  reference decodes with ``surrogateescape``, ``OverflowError``, ``MemoryError``) hands the batch to the reference.
* Where the two readers could both succeed and disagree, the C reader is more lenient: it reads a record's
  attributes as a varint (Kafka: one byte), accepts int32 fields of up to 10 varint bytes (Kafka: 5, bits above 32
  dropped) and wraps int64 sums. So each decoded record is re-measured in C (``DefaultRecordBatchBuilder
  .size_in_bytes``: minimal varints, one attributes byte), the offset delta must fit an int32 and the timestamp
  delta an int64, and the sizes must add up to the section's length exactly. Equality means every varint was
  minimal and every attributes byte single, hence the same field boundaries and values as the reference's parse.
  Anything else (including legal but non-minimal varints, which no client writes) is decoded by the reference.
"""

from __future__ import annotations

import os
import struct
from typing import Final

# aiokafka's package import pulls in its whole client (~0.1 s), so it is loaded on the first decode, not here.
_UNLOADED: Final = object()
_CBatch = _UNLOADED
_size_in_bytes = None

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
# maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount: attributes 0 (uncompressed, CreateTime).
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_PAD: Final = bytes(16)
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1


def _load() -> None:
    global _CBatch, _size_in_bytes
    try:
        if os.environ.get("ODRADEK_PURE_RECORDS", "") not in ("", "0"):
            raise ImportError("ODRADEK_PURE_RECORDS is set")
        from aiokafka.record._crecords.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
        sizer = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 0)
        sizer.append(0, 0, None, None, [])  # first timestamp 0: size_in_bytes(delta, ts_delta, ...) measures ts_delta
        _size_in_bytes = sizer.size_in_bytes
        _CBatch = DefaultRecordBatch
    except ImportError:  # aiokafka not installed (or built without its C extension): the reference runs
        _CBatch = None


def available() -> bool:
    """Whether the compiled decoder is in use (loads it on first call)."""
    if _CBatch is _UNLOADED:
        _load()
    return _CBatch is not None


def name() -> str:
    """What decodes records in this process, for reports and benchmarks."""
    return "aiokafka C (_crecords)" if available() else "pure Python (protocol.record_codec)"


def decode_records(data, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None,
                   record_type: type) -> list | None:
    """The records of an uncompressed records section as ``record_type`` objects (``protocol.record_codec.Record``),
    exactly as the reference decoder gives them; None when the compiled decoder is not there or cannot vouch for
    its answer (corrupt or unusual input): the caller then runs the reference, for its records or its error."""
    if _CBatch is _UNLOADED:
        _load()
    if _CBatch is None:
        return None
    try:
        return _decode_c(data, count, base_offset, base_timestamp, log_append_time, record_type)
    except Exception:  # noqa: BLE001 - whatever the C reader objects to, the reference decides
        return None


class _Mismatch(Exception):
    pass


def _decode_c(data, count, base_offset, base_timestamp, log_append_time, Record):
    n = len(data)
    buf = b"".join((_HEADER.pack(base_offset, 0, -1, 2, 0, 0, 0, base_timestamp, 0, -1, -1, -1, count), data,
                    _PAD))
    batch = _CBatch(memoryview(buf)[:len(buf) - len(_PAD)])  # the padding stays in memory, past the view's end
    out = []
    append = out.append
    new = object.__new__
    size_in_bytes = _size_in_bytes
    total = 0
    for r in batch:
        key = r.key
        value = r.value
        headers = r.headers
        ts = r.timestamp
        offset = r.offset
        delta = offset - base_offset
        if not _INT32_MIN <= delta <= _INT32_MAX:
            raise _Mismatch
        # OverflowError if the timestamp delta is not an int64 (the C reader wrapped a sum)
        total += size_in_bytes(delta, ts - base_timestamp, key, value, headers)
        rec = new(Record)
        rec.key = key
        rec.value = value
        rec.headers = headers
        rec.timestamp = ts if log_append_time is None else log_append_time
        rec.offset_delta = delta
        rec.offset = offset
        append(rec)
    if total != n:
        raise _Mismatch
    return out
