"""Base classes shared by every generated message and struct.

Generated classes only add ``__slots__``, an ``__init__`` with Kafka's defaults and per-version
encode/decode tables; equality, repr and the top-level encode/decode entry points live here once.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar

from protocol.errors import DecodeError, UnsupportedVersionError

_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "UNSET", "__slots__": ()})()
"""Sentinel for mutable defaults (arrays and structs), so ``None`` stays a real value (a null array)."""

ZERO_UUID = bytes(16)

_DECODE_FAILURES = (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError, OverflowError, MemoryError)


class Struct:
    """A schema struct: fields in ``__slots__`` plus ``unknown_tagged_fields`` kept for round trips."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_field_eq(getattr(self, n), getattr(other, n)) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__
                          if n != "unknown_tagged_fields" or getattr(self, n))
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts and lists, for logs and tests."""
        out = {}
        for n in self.__slots__:
            v = getattr(self, n)
            if isinstance(v, Struct):
                v = v.to_dict()
            elif isinstance(v, list):
                v = [x.to_dict() if isinstance(x, Struct) else x for x in v]
            elif isinstance(v, memoryview):
                v = bytes(v)
            out[n] = v
        return out


def _field_eq(a: Any, b: Any) -> bool:
    if isinstance(a, memoryview) or isinstance(b, memoryview):
        try:
            return bytes(a) == bytes(b)  # type: ignore[arg-type]
        except TypeError:
            return False
    return bool(a == b)


class Message(Struct):
    """A top-level schema: request, response, header or record value."""

    __slots__ = ()
    NAME: ClassVar[str]
    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[tuple[int, int]]
    _ENCODERS: ClassVar[dict[int, Any]]
    _DECODERS: ClassVar[dict[int, Any]]

    def encode_into(self, buf: bytearray, version: int, parts: list | None = None) -> None:
        """Append this message's encoding at ``version`` to ``buf``.

        Records fields holding a non-bytes object (a storage FileSlice) are passed through: ``buf``
        is flushed into ``parts`` and the object appended after it, h11-style.
        """
        try:
            enc = self._ENCODERS[version]
        except KeyError:
            raise UnsupportedVersionError(self.API_KEY if self.API_KEY is not None else -1, version) from None
        enc(self, buf, parts if parts is not None else _NO_PARTS)

    def encode(self, version: int) -> bytes:
        buf = bytearray()
        self.encode_into(buf, version)
        return bytes(buf)

    def encode_parts(self, version: int) -> list:
        """[bytes, FileSlice, bytes, ...]: the encoding with zero-copy records left in place."""
        buf = bytearray()
        parts: list = []
        self.encode_into(buf, version, parts)
        parts.append(bytes(buf))
        return [p for p in parts if len(p)]

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> "Message":
        """Decode a whole body; trailing bytes are ignored, as Kafka's readers do."""
        obj, _ = cls.decode_from(memoryview(data), 0, version)
        return obj

    @classmethod
    def decode_from(cls, mv: memoryview, pos: int, version: int) -> tuple["Message", int]:
        try:
            dec = cls._DECODERS[version]
        except KeyError:
            raise UnsupportedVersionError(cls.API_KEY if cls.API_KEY is not None else -1, version) from None
        try:
            return dec(mv, pos)
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"malformed {cls.NAME} v{version}: {exc}") from None


class _NoParts(list):
    """Parts sink for ``encode``: a file-backed records field cannot be flattened silently."""


_NO_PARTS = _NoParts()


def pass_through(buf: bytearray, parts: list, obj: Any) -> None:
    """Emit a non-bytes records value (a FileSlice) as its own part, flushing ``buf`` before it."""
    if parts is _NO_PARTS:
        raise TypeError(f"records field holds {type(obj).__name__}; use encode_parts()")
    parts.append(bytes(buf))
    parts.append(obj)
    buf.clear()
