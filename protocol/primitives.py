"""Kafka's variable-length primitives: unsigned varints, zigzag varint/varlong, tagged-field sections.

Fixed-width types are handled inline by generated code with precompiled ``struct.Struct`` objects;
what lives here is what cannot be a single ``unpack_from``.
"""

from __future__ import annotations

from protocol.errors import DecodeError
from protocol.varint import MAX_VARINT_BYTES, MAX_VARLONG_BYTES, encode_varint, encode_varlong, read_unsigned, unsigned

def read_uvarint(mv, pos: int) -> tuple[int, int]:
    """Unsigned 32-bit varint at ``pos`` -> (value, new pos). At most 5 bytes, as Kafka's ByteUtils."""
    b = mv[pos]
    if b < 0x80:
        return b, pos + 1
    value, pos = read_unsigned(mv, pos, len(mv), MAX_VARINT_BYTES, DecodeError)
    if value > 0xFFFFFFFF:
        raise DecodeError("varint out of range")
    return value, pos


def read_uvarlong(mv, pos: int) -> tuple[int, int]:
    value, pos = read_unsigned(mv, pos, len(mv), MAX_VARLONG_BYTES, DecodeError)
    if value > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong out of range")
    return value, pos


def read_varint(mv, pos: int) -> tuple[int, int]:
    """Signed zigzag varint (records use these)."""
    v, pos = read_uvarint(mv, pos)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(mv, pos: int) -> tuple[int, int]:
    v, pos = read_uvarlong(mv, pos)
    return (v >> 1) ^ -(v & 1), pos


uvarint = unsigned  # the generated codecs' name for an unsigned varint
varint = encode_varint
varlong = encode_varlong


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
