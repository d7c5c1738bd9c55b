"""The storage engine's only door to the operating system's file API.

Every write, fsync, truncate, rename and unlink the storage package performs goes through a
:class:`FileIO` instance handed down from where the objects are built: ``LogManager(..., file_io=...)``,
``Log.open(..., file_io=...)`` (then its segments, indexes, checkpoints, producer snapshots and loader),
``LogCleaner(..., file_io=...)``, the checkpoint files' constructors.  Each defaults to a plain
:class:`FileIO`.  Tests pass a recording or failing subclass to simulate power loss (drop every write not
covered by an fsync) or a full disk (ENOSPC part-way through a write).  There is no module-level instance
to replace.

Reads (``os.pread``) do not go through here: they cannot lose data.
"""

from __future__ import annotations

import errno
import mmap
import os

__all__ = ["FileIO", "pread_exact", "is_plain"]


class FileIO:
    """Plain POSIX implementation."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pwrite_all(self, fd: int, data, offset: int) -> None:
        """Write all of ``data`` at ``offset``; a short write continues, an error raises ``OSError``."""
        n = os.pwrite(fd, data, offset)
        if n == len(data):
            return
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        total = len(view)
        done = n
        while done < total:
            n = os.pwrite(fd, view[done:] if done else view, offset + done)
            if n <= 0:  # pragma: no cover - the kernel reports ENOSPC as an error, not a 0 write
                raise OSError(errno.ENOSPC, "short write")
            done += n

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def fsync_dir(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def msync(self, mm: mmap.mmap, path: str) -> None:
        """Flush a memory-mapped index to disk (``MappedByteBuffer.force``)."""
        mm.flush()

    def write_file_atomic(self, path: str, data: bytes, sync: bool = True) -> None:
        """Write ``path`` via ``path.tmp`` + fsync + rename + directory fsync (Kafka's ``atomicMoveWithFallback``)."""
        tmp = path + ".tmp"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.pwrite_all(fd, data, 0)
            if sync:
                self.fsync(fd)
        finally:
            self.close(fd)
        self.rename(tmp, path)
        if sync:
            self.fsync_dir(os.path.dirname(os.path.abspath(path)))


def is_plain(io: FileIO) -> bool:
    """Whether ``io`` is the plain implementation, whose ``pwrite_all`` a hot path may replace by ``os.pwrite``."""
    return type(io) is FileIO


def pread_exact(fd: int, n: int, offset: int) -> bytes:
    """``os.pread`` that keeps reading until ``n`` bytes or end of file."""
    data = os.pread(fd, n, offset)
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = os.pread(fd, n - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)
