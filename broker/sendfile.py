"""Write a response's parts to a connection: bytes through the transport, file slices with sendfile(2).

uvloop has no ``loop.sendfile`` and refuses ``add_writer`` on a transport's own fd, so (as measured on
this machine, shared/notes/machine-facts.md) the socket is dup'ed once per connection, the transport's
buffer is drained completely before a slice is sent, and EAGAIN waits for writability on the
duplicate. The same path works on the stdlib loop.
"""

from __future__ import annotations

import asyncio
import os
import socket


class SendStats:
    """Counters the zero-copy test and the metrics read: how many sendfile calls, how many bytes."""

    __slots__ = ("calls", "bytes", "copied_bytes")

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0
        self.copied_bytes = 0


class PartWriter:
    """One per connection; ``zero_copy=False`` reads slices into memory instead (TLS, or for comparison)."""

    def __init__(self, writer: asyncio.StreamWriter, stats: SendStats, zero_copy: bool = True) -> None:
        self.writer = writer
        self.transport = writer.transport
        self.stats = stats
        self.zero_copy = zero_copy
        self._dup_fd: int | None = None

    async def write(self, parts: list) -> None:
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                self.writer.write(part)
            elif self.zero_copy and self._socket_fd() is not None:
                await self._sendfile(part)
            else:
                data = part.read()
                if len(data) != len(part):
                    raise ConnectionError("file slice shrank before it was sent")
                self.stats.copied_bytes += len(data)
                self.writer.write(data)
        await self.writer.drain()

    def _socket_fd(self) -> int | None:
        if self._dup_fd is None:
            sock = self.writer.get_extra_info("socket")
            if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
                return None
            self._dup_fd = os.dup(sock.fileno())
        return self._dup_fd

    async def _drain_fully(self) -> None:
        t = self.transport
        if t.get_write_buffer_size() == 0:
            return
        high, low = t.get_write_buffer_limits() if hasattr(t, "get_write_buffer_limits") else (65536, 16384)
        t.set_write_buffer_limits(high=0, low=0)
        try:
            await self.writer.drain()
        finally:
            t.set_write_buffer_limits(high=high, low=low)

    async def _sendfile(self, part) -> None:
        await self._drain_fully()
        fd = self._dup_fd
        assert fd is not None
        loop = asyncio.get_running_loop()
        sent = 0
        length = len(part)
        while sent < length:
            if self.transport.is_closing():
                raise ConnectionError("connection closed during sendfile")
            try:
                n = os.sendfile(fd, part.fd, part.position + sent, length - sent)
            except (BlockingIOError, InterruptedError):
                await _writable(loop, fd)
                continue
            self.stats.calls += 1
            if n == 0:
                raise ConnectionError("file slice shrank before it was sent")
            sent += n
            self.stats.bytes += n

    def close(self) -> None:
        if self._dup_fd is not None:
            try:
                os.close(self._dup_fd)
            finally:
                self._dup_fd = None


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    fut = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_writer(fd, ready)
    try:
        await fut
    finally:
        loop.remove_writer(fd)
