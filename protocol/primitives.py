"""Kafka's variable-length primitives: unsigned varints, zigzag varint/varlong, tagged-field sections.

Fixed-width types are handled inline by generated code with precompiled ``struct.Struct`` objects;
what lives here is what cannot be a single ``unpack_from``.
"""

from __future__ import annotations

from protocol.errors import DecodeError

_MAX_UVARINT_BYTES = 5  # 32-bit unsigned varint
_MAX_UVARLONG_BYTES = 10


def read_uvarint(mv, pos: int) -> tuple[int, int]:
    """Unsigned 32-bit varint at ``pos`` -> (value, new pos). At most 5 bytes, as Kafka's ByteUtils."""
    value = 0
    shift = 0
    for i in range(_MAX_UVARINT_BYTES):
        b = mv[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0xFFFFFFFF:
                raise DecodeError("varint out of range")
            return value, pos + i + 1
        shift += 7
    raise DecodeError("varint is longer than 5 bytes")


def read_uvarlong(mv, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    for i in range(_MAX_UVARLONG_BYTES):
        b = mv[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0xFFFFFFFFFFFFFFFF:
                raise DecodeError("varlong out of range")
            return value, pos + i + 1
        shift += 7
    raise DecodeError("varlong is longer than 10 bytes")


def read_varint(mv, pos: int) -> tuple[int, int]:
    """Signed zigzag varint (records use these)."""
    v, pos = read_uvarint(mv, pos)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(mv, pos: int) -> tuple[int, int]:
    v, pos = read_uvarlong(mv, pos)
    return (v >> 1) ^ -(v & 1), pos


def uvarint(value: int) -> bytes:
    """Encode an unsigned varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Encode a signed zigzag varint (32-bit)."""
    return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong(value: int) -> bytes:
    """Encode a signed zigzag varlong (64-bit)."""
    return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_unknown_tags(buf: bytearray, tags: list[tuple[int, bytes]]) -> None:
    """Write a tagged-field section holding only fields this codec does not know (kept for round trips)."""
    buf += uvarint(len(tags))
    for tag, data in sorted(tags, key=_first):
        buf += uvarint(tag)
        buf += uvarint(len(data))
        buf += data


def write_tag_items(buf: bytearray, items: list[tuple[int, bytes]]) -> None:
    """Write a tagged-field section from (tag, encoded bytes) pairs, in ascending tag order."""
    items.sort(key=_first)
    buf += uvarint(len(items))
    for tag, data in items:
        buf += uvarint(tag)
        buf += uvarint(len(data))
        buf += data


def _first(item: tuple) -> int:
    return item[0]


def short(what: str = "field") -> DecodeError:
    return DecodeError(f"declared length of {what} exceeds the remaining bytes")
