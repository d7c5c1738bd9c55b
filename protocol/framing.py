"""Kafka's size-prefixed frames: a reader that takes partial chunks and never trusts a length."""

from __future__ import annotations

from collections import deque
from struct import Struct

from protocol.errors import DecodeError, FrameTooLargeError

_SIZE = Struct(">i")

DEFAULT_MAX_FRAME = 104857600  # socket.request.max.bytes


class FrameReader:
    """Accumulates bytes and yields complete frames (without their 4-byte size).

    Bytes come in through ``feed(data)``, or without a copy through the receive-into pair that
    asyncio's BufferedProtocol uses: ``get_buffer()`` is a writable view for the socket to fill and
    ``buffer_updated(n)`` says how many bytes arrived. Small frames share a scratch buffer and are
    copied out of it; a frame larger than half of it is received straight into its own buffer, so a
    produce request's records are copied once, by the kernel.

    The declared size is checked against ``max_frame_size`` before anything is buffered for the
    frame, as Kafka's NetworkReceive does (InvalidReceiveException closes the connection). A frame's
    own buffer grows with what arrives (at most DIRECT_STEP ahead), so a huge declared size costs
    nothing until its bytes come. A bad size is reported by ``next_frame`` after the good frames
    before it.
    """

    SCRATCH = 64 * 1024
    DIRECT_STEP = 1024 * 1024

    __slots__ = ("_scratch", "_view", "_start", "_end", "_frame", "_filled", "_size", "_ready", "_error",
                 "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self._scratch = bytearray(self.SCRATCH)
        self._view = memoryview(self._scratch)
        self._start = 0  # unparsed bytes of the scratch buffer are [_start, _end)
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being received in place
        self._filled = 0
        self._size = 0
        self._ready: deque[bytearray] = deque()
        self._error: DecodeError | None = None
        self.max_frame_size = max_frame_size

    # ---- receive-into --------------------------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go (the previous view must be released)."""
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):
                frame += bytes(min(self._size - len(frame), max(len(frame), self.DIRECT_STEP)))
            return memoryview(frame)[self._filled:]
        if self._end == self.SCRATCH:
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, n: int) -> None:
        """``n`` bytes were written into the last ``get_buffer()`` view."""
        if self._frame is not None:
            self._filled += n
            if self._filled == self._size:
                self._ready.append(self._frame)
                self._frame = None
            return
        self._end += n
        if self._error is None:
            self._parse()

    def _parse(self) -> None:
        s = self._scratch
        while True:
            start = self._start
            avail = self._end - start
            if avail < 4:
                break
            (size,) = _SIZE.unpack_from(s, start)
            if size < 0:
                self._error = DecodeError(f"negative frame size {size}")
                break
            if size > self.max_frame_size:
                self._error = FrameTooLargeError(
                    f"frame of {size} bytes exceeds the maximum of {self.max_frame_size}")
                break
            if avail - 4 >= size:
                self._ready.append(s[start + 4:start + 4 + size])
                self._start = start + 4 + size
                continue
            if size > self.SCRATCH // 2:  # receive the rest in place
                have = avail - 4
                # a step plus the scratch size: a response of a megabyte of records and its framing lands
                # without regrowing (and copying) the buffer
                frame = bytearray(min(size, max(have, self.DIRECT_STEP + self.SCRATCH)))
                frame[:have] = self._view[start + 4:self._end]
                self._frame, self._filled, self._size = frame, have, size
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _compact(self) -> None:
        n = self._end - self._start
        self._scratch[:n] = self._view[self._start:self._end]
        self._start, self._end = 0, n

    # ---- plain API -----------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        mv = memoryview(data)
        pos = 0
        while pos < len(mv):
            buf = self.get_buffer()
            n = min(len(buf), len(mv) - pos)
            buf[:n] = mv[pos:pos + n]
            buf.release()
            self.buffer_updated(n)
            pos += n

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames (sizes of frames already split off excluded)."""
        return self._end - self._start + (self._filled if self._frame is not None else 0) + sum(map(len, self._ready))

    def next_frame(self) -> bytearray | None:
        """One complete frame, or None if more bytes are needed. Raises DecodeError on a bad size.

        Frames are mutable so the broker can stamp offsets into produced batches in place.
        """
        if self._ready:
            return self._ready.popleft()
        if self._error is not None:
            raise self._error
        return None


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + payload
