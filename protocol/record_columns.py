"""Records sections decoded straight into Arrow-layout column buffers, for scans that hand columns to Arrow (the
Spark data source): int64 values, int32 offsets plus data for binary columns, LSB-first validity bitmaps. No
pyarrow here; ``spark_jobs.scan`` wraps the buffers without copying.

:class:`ColumnBuilder` is the compiled builder of ``protocol/_record_columns.c`` when it was built (``pip install``
compiles it; it is optional) and ``ODRADEK_PURE_RECORDS`` is not set, else :class:`PyColumnBuilder`, which decodes
with :func:`protocol.record_codec.decode_records_reference`. Both give the same buffers (a hypothesis test holds
them to it). The compiled parse follows the reference rule for rule; wherever the reference would raise, or a value
needs what only Python does (a header key that is not UTF-8), it adds nothing and the reference decodes the same
bytes, for its error or its records. So errors are always the reference's ``CorruptRecordError``.

A batch's records outside the offset or timestamp bounds are parsed (a corrupt record still raises) but not added.
Header keys that are not valid UTF-8 (Arrow strings must be) get U+FFFD where the bytes are invalid, as Python's
``"replace"`` error handler does.
"""

from __future__ import annotations

import os
from array import array
from typing import Final, NamedTuple, Sequence

from protocol.errors import CorruptRecordError
from protocol.record_codec import Record, decode_records_reference, encode_record

__all__ = ["COLUMNS", "ColumnBuffers", "ColumnBuilder", "PyColumnBuilder", "compiled", "want_flags"]

COLUMNS: Final = {"offset": 1, "timestamp": 2, "key": 4, "value": 8, "value_size": 16, "headers": 32}
"""The record-level columns a builder can fill, with their bit in ``want``."""

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
NO_TIMESTAMP: Final = -1


class ColumnBuffers(NamedTuple):
    """One chunk's columns, each buffer bytes-like (the compiled builder hands over its own memory, read-only,
    without a copy). A ``*_valid`` bitmap is None when that column has no nulls; columns not asked for are
    empty. ``timestamp`` is in microseconds (null where the record has none, -1, or where microseconds overflow an
    int64, beyond the year 294,000). ``header_offsets`` are list
    offsets into the ``header_count`` header entries (``hkey_*`` UTF-8, ``hvalue_*`` binary). ``batch_index`` is
    the caller's batch number of each row."""

    rows: int
    header_count: int
    offset: bytes
    offset_valid: bytes | None
    timestamp: bytes
    timestamp_valid: bytes | None
    key_offsets: bytes
    key_data: bytes
    key_valid: bytes | None
    value_offsets: bytes
    value_data: bytes
    value_valid: bytes | None
    value_size: bytes
    value_size_valid: bytes | None
    header_offsets: bytes
    hkey_offsets: bytes
    hkey_data: bytes
    hvalue_offsets: bytes
    hvalue_data: bytes
    hvalue_valid: bytes | None
    batch_index: bytes


def want_flags(columns: Sequence[str]) -> int:
    """The ``want`` bits of the record-level columns among ``columns`` (others are ignored)."""
    want = 0
    for c in columns:
        want |= COLUMNS.get(c, 0)
    return want


def _bounds(offset_lo, offset_hi, ts_lo_us, ts_hi_us) -> tuple[int, int, bool, int, int]:
    """Inclusive int64 bounds: offsets ``[lo, hi)``, and timestamps in us ``[lo, hi)`` as whole ms."""
    lo = _INT64_MIN if offset_lo is None else offset_lo
    hi = _INT64_MAX if offset_hi is None else offset_hi - 1
    ts_bounded = ts_lo_us is not None or ts_hi_us is not None
    ts_lo = _INT64_MIN if ts_lo_us is None else -(-ts_lo_us // 1000)   # t * 1000 >= lo
    ts_hi = _INT64_MAX if ts_hi_us is None else -(-ts_hi_us // 1000) - 1   # t * 1000 < hi
    if not (_INT64_MIN <= lo <= _INT64_MAX and _INT64_MIN <= hi <= _INT64_MAX):
        lo, hi = (1, 0) if lo > _INT64_MAX or hi < _INT64_MIN else (max(lo, _INT64_MIN), min(hi, _INT64_MAX))
    if not (_INT64_MIN <= ts_lo <= _INT64_MAX and _INT64_MIN <= ts_hi <= _INT64_MAX):
        if ts_lo > _INT64_MAX or ts_hi < _INT64_MIN:
            ts_lo, ts_hi = 1, 0
        else:
            ts_lo, ts_hi = max(ts_lo, _INT64_MIN), min(ts_hi, _INT64_MAX)
    return lo, hi, ts_bounded, ts_lo, ts_hi


def _decoded_within(data, count, base_offset, base_timestamp, log_append_time, bounds) -> list[Record]:
    """The reference's records of a section (or its error) that fall within ``bounds``; an offset or timestamp
    beyond int64 (a corrupt batch the C parse hands back) is an error, not a record silently out of bounds."""
    lo, hi, ts_bounded, ts_lo, ts_hi = bounds
    recs = decode_records_reference(data, count, base_offset, base_timestamp, log_append_time)
    for r in recs:
        if not (_INT64_MIN <= r.offset <= _INT64_MAX and _INT64_MIN <= r.timestamp <= _INT64_MAX):
            raise CorruptRecordError(f"record offset {r.offset} or timestamp {r.timestamp} is not an int64")
    return [r for r in recs if lo <= r.offset <= hi
            and not (ts_bounded and (r.timestamp == NO_TIMESTAMP or not ts_lo <= r.timestamp <= ts_hi))]


def _utf8_key(k: str) -> str:
    """A header key decoded with surrogateescape, as valid UTF-8 (U+FFFD where its bytes were not)."""
    if k.isascii():
        return k
    try:
        k.encode("utf-8")
        return k
    except UnicodeEncodeError:
        return k.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _bitmap(valid: list[bool]) -> bytes | None:
    if all(valid):
        return None
    out = bytearray((len(valid) + 7) // 8)
    for i, v in enumerate(valid):
        if v:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


class PyColumnBuilder:
    """The pure-Python builder: the reference decoder's records appended to Python arrays."""

    def __init__(self, want: int) -> None:
        self.want = want
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.data_bytes = 0
        self._offsets: list[int | None] = []
        self._timestamps: list[int] = []
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._header_offsets = array("i", [0])
        self._hkeys: list[bytes] = []
        self._hvalues: list[bytes | None] = []
        self._batch_index = array("i")

    def add_section(self, data, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None,
                    batch_index: int, offset_lo: int | None = None, offset_hi: int | None = None,
                    ts_lo_us: int | None = None, ts_hi_us: int | None = None) -> int:
        """Decode a records section (``count`` records filling ``data``) and add those of its records within the
        bounds (offsets ``[offset_lo, offset_hi)``, timestamps in us ``[ts_lo_us, ts_hi_us)``); the rows added.
        Raises the reference's ``CorruptRecordError`` and adds nothing when the section is corrupt."""
        recs = _decoded_within(data, count, base_offset, base_timestamp, log_append_time,
                               _bounds(offset_lo, offset_hi, ts_lo_us, ts_hi_us))
        for r in recs:
            self._offsets.append(r.offset)
            self._timestamps.append(r.timestamp)
            self._keys.append(r.key)
            self._values.append(r.value)
            for hk, hv in r.headers:
                self._hkeys.append(_utf8_key(hk).encode("utf-8"))
                self._hvalues.append(hv)
            self._header_offsets.append(len(self._hkeys))
            self._batch_index.append(batch_index)
            self.data_bytes += (len(r.key or b"") + len(r.value or b"")
                                + sum(len(hk) + len(hv or b"") for hk, hv in r.headers))
        self.rows += len(recs)
        return len(recs)

    def add_null_rows(self, batch_index: int, count: int = 1) -> None:
        """Rows with every record column null: one for a batch without records, or a batch's records when no
        record column is asked for."""
        for _ in range(count):
            self._offsets.append(None)
            self._timestamps.append(NO_TIMESTAMP)
            self._keys.append(None)
            self._values.append(None)
            self._header_offsets.append(len(self._hkeys))
            self._batch_index.append(batch_index)
        self.rows += count

    def finish(self) -> ColumnBuffers:
        """The buffers of the rows added; the builder starts over."""
        want = self.want
        empty_offsets = array("i", [0]).tobytes()

        def binary(items, valid=True):
            offs = array("i", [0])
            total = 0
            for b in items:
                total += 0 if b is None else len(b)
                offs.append(total)
            return offs.tobytes(), b"".join(b for b in items if b is not None), \
                (_bitmap([b is not None for b in items]) if valid else None)

        offset = offset_valid = timestamp = timestamp_valid = None
        if want & COLUMNS["offset"]:
            offset = array("q", [0 if o is None else o for o in self._offsets]).tobytes()
            offset_valid = _bitmap([o is not None for o in self._offsets])
        if want & COLUMNS["timestamp"]:
            us = [t * 1000 if t != NO_TIMESTAMP and _INT64_MIN <= t * 1000 <= _INT64_MAX else None
                  for t in self._timestamps]
            timestamp = array("q", [0 if t is None else t for t in us]).tobytes()
            timestamp_valid = _bitmap([t is not None for t in us])
        key = binary(self._keys) if want & COLUMNS["key"] else (empty_offsets, b"", None)
        value = binary(self._values) if want & COLUMNS["value"] else (empty_offsets, b"", None)
        value_size = value_size_valid = None
        if want & COLUMNS["value_size"]:
            value_size = array("i", [0 if v is None else len(v) for v in self._values]).tobytes()
            value_size_valid = _bitmap([v is not None for v in self._values])
        if want & COLUMNS["headers"]:
            header_offsets = self._header_offsets.tobytes()
            hkey_offsets, hkey_data, _ = binary(self._hkeys, valid=False)
            hvalue_offsets, hvalue_data, hvalue_valid = binary(self._hvalues)
        else:
            header_offsets, hkey_offsets, hkey_data, hvalue_offsets, hvalue_data, hvalue_valid = (
                empty_offsets, empty_offsets, b"", empty_offsets, b"", None)
        out = ColumnBuffers(self.rows, len(self._hkeys) if want & COLUMNS["headers"] else 0,
                            offset or b"", offset_valid, timestamp or b"", timestamp_valid, *key, *value,
                            value_size or b"", value_size_valid, header_offsets, hkey_offsets, hkey_data,
                            hvalue_offsets, hvalue_data, hvalue_valid, self._batch_index.tobytes())
        self._reset()
        return out


class _CompiledColumnBuilder:
    """The compiled builder, with the reference deciding whatever the C parse will not vouch for."""

    def __init__(self, want: int) -> None:
        self.want = want
        self._c = _CBuilder(want)

    @property
    def rows(self) -> int:
        return self._c.rows

    @property
    def data_bytes(self) -> int:
        return self._c.data_bytes

    def add_section(self, data, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None,
                    batch_index: int, offset_lo: int | None = None, offset_hi: int | None = None,
                    ts_lo_us: int | None = None, ts_hi_us: int | None = None) -> int:
        bounds = _bounds(offset_lo, offset_hi, ts_lo_us, ts_hi_us)
        lat = log_append_time is not None
        added = self._c.add_section(data, count, base_offset, base_timestamp, lat, log_append_time if lat else 0,
                                    batch_index, *bounds)
        if added >= 0:
            return added
        if added == -2:     # not corrupt, too big: the caller cuts chunks long before (spark_jobs.scan)
            raise ValueError(f"a records section of {len(data)} bytes does not fit what is left of one Arrow chunk "
                             f"(int32 offsets): finish() before adding it")
        # the reference decides: its error, or its records, each re-encoded canonically (header keys made UTF-8)
        recs = _decoded_within(data, count, base_offset, base_timestamp, log_append_time, bounds)
        for r in recs:
            one = bytearray()
            encode_record(one, 0, 0, r.key, r.value, [(_utf8_key(k), v) for k, v in r.headers])
            n = self._c.add_section(one, 1, r.offset, r.timestamp, lat, r.timestamp if lat else 0, batch_index,
                                    _INT64_MIN, _INT64_MAX, False, 0, 0)
            if n != 1:
                raise ValueError(f"record at offset {r.offset}, re-encoded, was refused ({n})")
        return len(recs)

    def add_null_rows(self, batch_index: int, count: int = 1) -> None:
        self._c.add_null_rows(batch_index, count)

    def finish(self) -> ColumnBuffers:
        return ColumnBuffers(*self._c.finish())


def _load():
    if os.environ.get("ODRADEK_PURE_RECORDS", "") not in ("", "0"):
        return None
    try:
        from protocol._record_columns import ColumnBuilder as builder
    except ImportError:      # installed without a C compiler: the pure builder runs
        return None
    return builder


_CBuilder = _load()


def compiled() -> bool:
    """Whether :class:`ColumnBuilder` is the compiled one."""
    return _CBuilder is not None


def ColumnBuilder(want: int):
    """A column builder for the columns in ``want`` (:data:`COLUMNS` bits): the compiled one when available."""
    return _CompiledColumnBuilder(want) if _CBuilder is not None else PyColumnBuilder(want)

