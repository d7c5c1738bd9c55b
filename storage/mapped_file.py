"""A shared memory mapping of a file that holds no file descriptor once made.

CPython's ``mmap.mmap`` keeps a duplicate of the descriptor it was given for as long as the mapping lives, so each
mapped index costs a descriptor: two per segment on top of its ``.log`` file, 30,000 for 10,000 partitions, more
than a usual ``ulimit -n``.  The JVM's ``FileChannel.map`` keeps none, and Kafka closes the index file right after
mapping it.  :func:`map_file` does the same through libc's ``mmap`` (ctypes): the kernel's mapping keeps the file
open, not a descriptor.  Where libc cannot be reached (not Linux), it falls back to ``mmap.mmap``.

The buffer is raw memory: reading or writing it after :meth:`MappedFile.close` would touch unmapped memory.  The
indexes (the only users) do both under their lock and drop the buffer in the same critical section that unmaps it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

__all__ = ["MappedFile", "map_file"]

_PROT_READ, _PROT_WRITE = 0x1, 0x2
_MAP_SHARED = 0x01
_MS_SYNC = 4
_MADV_RANDOM = 1
_MAP_FAILED = ctypes.c_void_p(-1).value


def _libc():
    if not os.uname().sysname == "Linux":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int64]
    for name in ("munmap", "msync", "madvise"):
        getattr(libc, name).restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


_LIBC = _libc()


def _raise_errno(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


class MappedFile:
    """``length`` bytes of a file mapped shared; ``buf`` is a writable (or read-only) buffer over them.

    Read-only mappings hand out a ``bytes``-like read-only view; writes to a read-only mapping raise ``TypeError``
    (``struct.pack_into`` refuses a read-only buffer), as they do with ``mmap.ACCESS_READ``.
    """

    __slots__ = ("_addr", "length", "buf")

    def __init__(self, fd: int, length: int, writable: bool) -> None:
        prot = _PROT_READ | (_PROT_WRITE if writable else 0)
        addr = _LIBC.mmap(None, length, prot, _MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            _raise_errno("mmap")
        self._addr = addr
        self.length = length
        array = (ctypes.c_char * length).from_address(addr)
        self.buf = array if writable else memoryview(array).toreadonly()
        # Entries are reached by binary search or appended one at a time, so the kernel's read-around on a page
        # fault (read_ahead_kb: often MiBs) only costs: the first append to a new, sparse index zero-filled that
        # whole window (~2 ms, under the log's lock, at every roll).
        _LIBC.madvise(addr, length, _MADV_RANDOM)  # advice only: a failure changes nothing

    def flush(self) -> None:
        """``msync(MS_SYNC)``: what ``MappedByteBuffer.force`` does."""
        if self._addr is not None and _LIBC.msync(self._addr, self.length, _MS_SYNC) != 0:
            _raise_errno("msync")

    def close(self) -> None:
        addr, self._addr = self._addr, None
        if isinstance(self.buf, memoryview):
            self.buf.release()
        self.buf = None
        if addr is not None and _LIBC.munmap(addr, self.length) != 0:
            _raise_errno("munmap")


class _PythonMapped:
    """The fallback: ``mmap.mmap`` (one duplicated descriptor per mapping)."""

    __slots__ = ("_mm", "length", "buf")

    def __init__(self, fd: int, length: int, writable: bool) -> None:
        self._mm = mmap.mmap(fd, length, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
        self.length = length
        self.buf = self._mm
        if hasattr(mmap, "MADV_RANDOM"):
            try:
                self._mm.madvise(mmap.MADV_RANDOM)
            except OSError:  # pragma: no cover - advice only
                pass

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        self.buf = None
        self._mm.close()


def map_file(fd: int, length: int, writable: bool) -> MappedFile | _PythonMapped:
    """Map ``length`` (> 0) bytes of the open file ``fd``; the caller may close ``fd`` right after."""
    if _LIBC is not None:
        return MappedFile(fd, length, writable)
    return _PythonMapped(fd, length, writable)
