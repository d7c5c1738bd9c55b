"""Write a response's parts to a connection: bytes through the transport, file slices with sendfile(2).

uvloop has no ``loop.sendfile`` and refuses ``add_writer`` on a transport's own fd, so (as measured on
this machine, shared/notes/machine-facts.md) the socket is dup'ed once per connection. A response that
holds a file slice bypasses the transport as a whole: the transport's buffer is drained completely once,
then the response's byte parts go out with ``writev`` and its slices with ``os.sendfile``, all on the
duplicate (consecutive slices of one file are sent with one call), and only EAGAIN waits for
writability on the duplicate. Responses without a slice (and the bytes path, ``zero_copy=False``) use
the transport. The writer task writes one response at a time, so nothing else writes meanwhile and
the order on the wire is the order of the parts. The same path works on the stdlib loop.
"""

from __future__ import annotations

import asyncio
import os
import socket

_BYTES = (bytes, bytearray, memoryview)
_TCP_CORK = getattr(socket, "TCP_CORK", None)
_IOV_MAX = 512  # well under Linux's 1024
COPY_CHUNK = 256 * 1024  # a slice's piece when it is copied (TLS)


class SendStats:
    """Counters the zero-copy test and the metrics read: how many sendfile calls, how many bytes."""

    __slots__ = ("calls", "bytes", "copied_bytes")

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0
        self.copied_bytes = 0


class PartWriter:
    """One per connection; ``zero_copy=False`` reads slices into memory instead (TLS, or for comparison)."""

    def __init__(self, writer, stats: SendStats, zero_copy: bool = True) -> None:
        """``writer``: write(), drain(), get_extra_info() and transport, as a StreamWriter has."""
        self.writer = writer
        self.transport = writer.transport
        self.stats = stats
        self.zero_copy = zero_copy
        self._dup_fd: int | None = None
        self._dup_sock: socket.socket | None = None  # owns _dup_fd (for setsockopt)
        self._no_fd = False  # not a TCP socket (or TLS): never look again

    async def write(self, parts: list) -> None:
        if self.zero_copy and not self._no_fd:
            for part in parts:
                if not isinstance(part, _BYTES):
                    fd = self._socket_fd()
                    if fd is not None:
                        await self._write_direct(fd, parts)
                        return
                    break
        for part in parts:
            if isinstance(part, _BYTES):
                self.writer.write(part)
            else:
                # TLS (or zero_copy off): the slice is read and written in pieces of COPY_CHUNK, the transport
                # drained between them, so a 50 MB fetch never sits in memory whole
                for offset in range(0, len(part), COPY_CHUNK):
                    data = part.read_part(offset, COPY_CHUNK)
                    if len(data) != min(COPY_CHUNK, len(part) - offset):
                        raise ConnectionError("file slice shrank before it was sent")
                    self.stats.copied_bytes += len(data)
                    self.writer.write(data)
                    if offset + COPY_CHUNK < len(part):
                        await self.writer.drain()
        await self.writer.drain()

    def _socket_fd(self) -> int | None:
        if self._dup_fd is None:
            sock = self.writer.get_extra_info("socket")
            if (sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6)
                    or self.writer.get_extra_info("sslcontext") is not None):
                self._no_fd = True
                return None
            # socket(fileno=) keeps the shared file description's O_NONBLOCK as the loop set it
            fd = os.dup(sock.fileno())
            try:
                self._dup_sock = socket.socket(fileno=fd)
            except BaseException:
                os.close(fd)  # not left open when the wrapper cannot be made
                raise
            self._dup_fd = self._dup_sock.fileno()
        return self._dup_fd

    async def _drain_fully(self) -> None:
        t = self.transport
        if t.get_write_buffer_size() == 0:
            return
        # (low, high), as both loops return them; restored after the drain
        low, high = t.get_write_buffer_limits() if hasattr(t, "get_write_buffer_limits") else (16384, 65536)
        t.set_write_buffer_limits(high=0, low=0)
        try:
            await self.writer.drain()
        finally:
            t.set_write_buffer_limits(high=high, low=low)
        if t.get_write_buffer_size():
            raise ConnectionError("connection closed while draining")

    async def _write_direct(self, fd: int, parts: list) -> None:
        """The whole response on the duplicate fd, in order: byte runs with writev, slice runs with sendfile."""
        await self._drain_fully()
        # corked while the parts go out: the header bytes leave with the slice's first segment and the trailer
        # with its last, instead of each small write as a segment of its own (TCP_NODELAY) that wakes the reader
        # for a few bytes; uncorking sends what is left at once
        cork = self._cork(1)
        try:
            await self._write_parts(fd, parts)
        finally:
            if cork:
                self._cork(0)

    def _cork(self, on: int) -> bool:
        """TCP_CORK on the duplicate; False where the option is missing (not Linux)."""
        if _TCP_CORK is None or self._dup_sock is None:
            return False
        try:
            self._dup_sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, on)
        except OSError:
            return False
        return True

    async def _write_parts(self, fd: int, parts: list) -> None:
        n = len(parts)
        i = 0
        while i < n:
            if self.transport.is_closing():
                raise ConnectionError("connection closed while writing a response")
            part = parts[i]
            j = i + 1
            if isinstance(part, _BYTES):
                while j < n and isinstance(parts[j], _BYTES):
                    j += 1
                await self._send_bytes(fd, parts[i:j])
            else:
                in_fd, position, length = part.fd, part.position, part.length
                while j < n and not isinstance(parts[j], _BYTES) and parts[j].fd == in_fd \
                        and parts[j].position == position + length:
                    length += parts[j].length
                    j += 1
                await self._send_slice(fd, in_fd, position, length)
            i = j

    async def _send_bytes(self, fd: int, bufs: list) -> None:
        if len(bufs) > _IOV_MAX:
            for k in range(0, len(bufs), _IOV_MAX):
                await self._send_bytes(fd, bufs[k:k + _IOV_MAX])
            return
        total = sum(len(b) for b in bufs)
        sent = 0
        while True:
            try:
                n = os.writev(fd, bufs) if len(bufs) > 1 else os.write(fd, bufs[0])
            except (BlockingIOError, InterruptedError):
                await self._writable(fd)
                continue
            sent += n
            if sent >= total:
                return
            while n >= len(bufs[0]):  # a short write: drop what went out, resume mid-buffer
                n -= len(bufs[0])
                bufs = bufs[1:]
            if n:
                bufs = [memoryview(bufs[0])[n:], *bufs[1:]]
            await self._writable(fd)

    async def _send_slice(self, fd: int, in_fd: int, position: int, length: int) -> None:
        stats = self.stats
        sent = 0
        while sent < length:
            try:
                n = os.sendfile(fd, in_fd, position + sent, length - sent)
            except (BlockingIOError, InterruptedError):
                await self._writable(fd)
                continue
            stats.calls += 1
            if n == 0:
                raise ConnectionError("file slice shrank before it was sent")
            sent += n
            stats.bytes += n
            if sent < length:
                if self.transport.is_closing():
                    raise ConnectionError("connection closed during sendfile")
                await self._writable(fd)  # a short send: the socket buffer is full

    async def _writable(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        loop.add_writer(fd, ready)
        try:
            await fut
        finally:
            loop.remove_writer(fd)

    def close(self) -> None:
        if self._dup_sock is not None:
            try:
                self._dup_sock.close()
            finally:
                self._dup_sock = None
                self._dup_fd = None
