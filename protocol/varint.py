"""Kafka's varints, in one place: unsigned varints (protocol lengths, tagged fields) and zigzag varint/varlong
(record fields), encoded and decoded by one loop each.

Decoding is bounded by ``end`` and ``max_bytes`` (5 for a varint, 10 for a varlong, as Kafka's ByteUtils) and
never reads past either; the caller names the error class it reports bad input with (DecodeError for
protocol frames, CorruptRecordError inside record batches).
"""

from __future__ import annotations

from typing import Final

from protocol.errors import CorruptRecordError

MAX_VARINT_BYTES: Final = 5
MAX_VARLONG_BYTES: Final = 10
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


# ---- encoding --------------------------------------------------------------------------------------------------

def append_unsigned(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def unsigned(n: int) -> bytes:
    """An unsigned varint as bytes."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    append_unsigned(out, n)
    return bytes(out)


def append_varint(out: bytearray, n: int) -> None:
    """Zigzag varint of a signed 32-bit value; ValueError outside int32."""
    if -64 <= n < 64:  # one byte: the common case for deltas, lengths of small keys, header counts
        out.append(((n << 1) ^ (n >> 31)) & 0xFF)
        return
    if not _INT32_MIN <= n <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {n}")
    append_unsigned(out, ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def append_varlong(out: bytearray, n: int) -> None:
    """Zigzag varint of a signed 64-bit value; ValueError outside int64."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {n}")
    append_unsigned(out, ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def encode_varint(n: int) -> bytes:
    """Zigzag varint of a signed 32-bit value (1-5 bytes)."""
    out = bytearray()
    append_varint(out, n)
    return bytes(out)


def encode_varlong(n: int) -> bytes:
    """Zigzag varint of a signed 64-bit value (1-10 bytes)."""
    out = bytearray()
    append_varlong(out, n)
    return bytes(out)


def size_of_varint(n: int) -> int:
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (z.bit_length() + 6) // 7)


# ---- decoding --------------------------------------------------------------------------------------------------

def read_unsigned(buf, pos: int, end: int, max_bytes: int, error: type[Exception] = CorruptRecordError
                  ) -> tuple[int, int]:
    """An unsigned varint of at most ``max_bytes`` bytes that ends before ``end`` -> (value, next position)."""
    result = 0
    shift = 0
    limit = pos + max_bytes
    if limit > end:
        limit = end
    while pos < limit:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    if pos >= end:
        raise error("truncated varint")
    raise error(f"varint longer than {max_bytes} bytes")


def decode_varint(buf, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """A zigzag varint (at most 5 bytes) -> (value, next position). Bits above 32 in the 5th byte are dropped,
    as Java's ``ByteUtils.readVarint`` does."""
    stop = len(buf) if end is None else end
    b = buf[pos] if pos < stop else None
    if b is not None and b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    r, pos = read_unsigned(buf, pos, stop, MAX_VARINT_BYTES)
    r &= 0xFFFFFFFF
    return (r >> 1) ^ -(r & 1), pos


def decode_varlong(buf, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """A zigzag varlong (at most 10 bytes) -> (value, next position)."""
    r, pos = read_unsigned(buf, pos, len(buf) if end is None else end, MAX_VARLONG_BYTES)
    r &= 0xFFFFFFFFFFFFFFFF
    return (r >> 1) ^ -(r & 1), pos
