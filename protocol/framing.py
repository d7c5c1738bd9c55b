"""Kafka's size-prefixed frames: a reader that takes partial chunks and never trusts a length."""

from __future__ import annotations

from struct import Struct

from protocol.errors import DecodeError, FrameTooLargeError

_SIZE = Struct(">i")

DEFAULT_MAX_FRAME = 104857600  # socket.request.max.bytes


class FrameReader:
    """Accumulates bytes and yields complete frames (without their 4-byte size).

    The declared size is checked against ``max_frame_size`` before any buffering for the frame,
    as Kafka's NetworkReceive does (InvalidReceiveException closes the connection).
    """

    __slots__ = ("_buf", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._need = -1  # size of the frame being read, -1 while reading the size
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def next_frame(self) -> bytearray | None:
        """One complete frame, or None if more bytes are needed. Raises DecodeError on a bad size.

        Frames are mutable so the broker can stamp offsets into produced batches in place.
        """
        buf = self._buf
        if self._need < 0:
            if len(buf) < 4:
                return None
            (size,) = _SIZE.unpack_from(buf, 0)
            if size < 0:
                raise DecodeError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLargeError(f"frame of {size} bytes exceeds the maximum of {self.max_frame_size}")
            self._need = size
            del buf[:4]
        if len(buf) < self._need:
            return None
        frame = buf[: self._need]
        del buf[: self._need]
        self._need = -1
        return frame


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + payload
