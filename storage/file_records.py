"""A segment's ``.log`` file: append whole batches, slice without reading, scan batch headers (Kafka's
``FileRecords``).

The in-memory ``size`` is the logical end of the file: appends write at ``size`` and bump it only once the
write succeeded, so a torn or failed write is never visible to readers (and is cut off by recovery).
Readers snapshot ``size`` when they start, so a concurrent append is never half-served.

The descriptor lives in a :class:`FileHandle` that every user holds while using it (a slice handed to a response
too): an inactive segment's file is opened on first use and its handle dropped when idle (:mod:`storage.handles`),
and the descriptor closes when the last holder lets go, so it is never closed, or its number reused, under a reader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, NamedTuple

from protocol.errors import CorruptRecordError
from protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    parse_header,
)

from .fileio import FileIO, pread_exact
from .handles import INACTIVE_SEGMENT_FILES

__all__ = ["FileRecords", "FileSlice", "FileHandle", "LogOffsetPosition", "TimestampAndOffset"]

_SCAN_CHUNK = 16 * 1024


class LogOffsetPosition(NamedTuple):
    """Kafka's ``FileRecords.LogOffsetPosition``: the batch found (its last offset), where it starts, its size."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None


class FileHandle:
    """One open descriptor, closed when the last holder drops it (CPython frees it at once), or by :meth:`close`."""

    __slots__ = ("fd", "_io")

    def __init__(self, fd: int, file_io: FileIO) -> None:
        self.fd = fd
        self._io = file_io

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            self._io.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except (OSError, AttributeError, TypeError):
            pass  # at interpreter exit, or a descriptor the kernel already took back: nothing left to release


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``length`` bytes of an open file starting at ``position``: what a fetch returns instead of bytes.

    Hand ``fd``/``position``/``length`` to ``os.sendfile`` (zero copy), or call :meth:`read` for TLS.  The fd
    stays open at least ``file.delete.delay.ms`` after the segment is deleted (Kafka's rule too), so use the
    slice promptly.  If the log is truncated meanwhile (a follower truncation), fewer bytes may be available:
    ``sendfile`` then returns short and :meth:`read` returns what is there.
    """

    fd: int
    position: int
    length: int
    path: str = ""
    handle: FileHandle | None = None  # keeps ``fd`` open while the slice lives

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        return pread_exact(self.fd, self.length, self.position) if self.length else b""

    def read_part(self, offset: int, size: int) -> bytes:
        """``size`` bytes (fewer at the end) from ``offset`` within the slice: a TLS connection writes a large
        slice in bounded pieces instead of holding all of it in memory."""
        size = max(0, min(size, self.length - offset))
        return pread_exact(self.fd, size, self.position + offset) if size else b""

    def sendfile(self, out_fd: int, offset: int = 0) -> int:
        """``os.sendfile`` this slice (from ``offset`` within it) to ``out_fd``; returns bytes sent."""
        return os.sendfile(out_fd, self.fd, self.position + offset, self.length - offset)


EMPTY_SLICE = FileSlice(-1, 0, 0)


def _scan_headers(fd: int, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each whole batch in ``[start, end)`` of ``fd``, reading headers only."""
    pos = start
    while end - pos >= BATCH_HEADER_SIZE:
        want = min(_SCAN_CHUNK, end - pos)
        buf = os.pread(fd, want, pos)
        n = len(buf)
        if n < BATCH_HEADER_SIZE:
            return
        off = 0
        while n - off >= BATCH_HEADER_SIZE:
            h = _check_header(buf, off, pos + off)
            size = h.batch_length + LOG_OVERHEAD
            if pos + off + size > end:
                return
            yield pos + off, h
            off += size
        pos += off


def slice_batches(records: FileSlice, through_offset: int | None = None) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` of each whole batch of a read's slice, reading headers only (a share fetch acquires
    whole batches by them: ``FileRecords.batches_from`` over the slice's range); with ``through_offset``, up to the
    first batch whose last offset is at or past it (the rest of a large read is not looked at)."""
    if not records.length:
        return []
    scan = _scan_headers(records.fd, records.position, records.position + records.length)
    if through_offset is None:
        return list(scan)
    out = []
    for found in scan:
        out.append(found)
        if found[1].last_offset >= through_offset:
            break
    return out


def _check_header(buf, off: int, abs_pos: int) -> BatchHeader:
    length = int.from_bytes(buf[off + 8:off + 12], "big", signed=True)
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {length} at position {abs_pos} is smaller than the v2 header")
    magic = buf[off + MAGIC_OFFSET]
    if magic != MAGIC_V2:
        raise CorruptRecordError(f"invalid magic {magic} at position {abs_pos}")
    return parse_header(buf, off)


class FileRecords:
    """The ``.log`` file of one segment."""

    def __init__(self, path: str, fd: int | None, size: int, *, file_io: FileIO | None = None) -> None:
        self.path = path
        self.size = size
        self.file_io = file_io if file_io is not None else FileIO()
        self._handle: FileHandle | None = FileHandle(fd, self.file_io) if fd is not None else None
        self._closed = False
        self.releasable = False  # an inactive segment's: given back when idle

    @classmethod
    def open(cls, path: str, file_already_exists: bool = False, init_file_size: int = 0,
             preallocate: bool = False, *, file_io: FileIO | None = None, lazy: bool = False) -> "FileRecords":
        """Open (creating) the file; ``lazy`` (an existing inactive segment's): only its size now, the descriptor on
        first use."""
        io = file_io if file_io is not None else FileIO()
        if lazy and file_already_exists:
            records = cls(path, None, os.stat(path).st_size, file_io=io)
            records.releasable = True
            return records
        flags = os.O_RDWR | os.O_CREAT
        fd = io.open(path, flags)
        try:
            if preallocate and not file_already_exists and init_file_size > 0:
                io.ftruncate(fd, init_file_size)
                size = 0
            else:
                size = os.fstat(fd).st_size
        except BaseException:
            io.close(fd)
            raise
        return cls(path, fd, size, file_io=io)

    # ---- the descriptor --------------------------------------------------------------------------
    def handle(self) -> FileHandle:
        """The open descriptor (opened now if released or never opened); hold it while using ``.fd``."""
        h = self._handle
        if h is None:
            if self._closed:
                raise ValueError(f"{self.path} is closed")
            h = self._handle = FileHandle(self.file_io.open(self.path, os.O_RDWR), self.file_io)
        if self.releasable:
            INACTIVE_SEGMENT_FILES.touch(self)
        return h

    @property
    def is_open(self) -> bool:
        return self._handle is not None

    def make_releasable(self) -> None:
        """This is an inactive segment's file now: its descriptor may be given back while idle."""
        if not self.releasable:
            self.releasable = True
            if self._handle is not None:
                INACTIVE_SEGMENT_FILES.touch(self)

    def keep_open(self) -> None:
        """This is the active segment's file (again, after a truncation or at start-up): keep its descriptor."""
        if self.releasable:
            self.releasable = False
            INACTIVE_SEGMENT_FILES.forget(self)

    def try_release(self) -> bool:
        """Drop the descriptor (:mod:`storage.handles`); a reader or slice holding it keeps it open until done."""
        self._handle = None
        return True

    def _drop_handle(self) -> FileHandle | None:
        h, self._handle = self._handle, None
        if self.releasable:
            INACTIVE_SEGMENT_FILES.forget(self)
        return h

    # ---- writes ----------------------------------------------------------------------------------
    def append(self, data) -> int:
        """Write ``data`` at the logical end.  On failure the file is cut back and ``OSError`` propagates."""
        n = len(data)
        if n == 0:
            return 0
        pos = self.size
        io = self.file_io
        h = self.handle()
        try:
            io.pwrite_all(h.fd, data, pos)
        except OSError:
            # Remove whatever part of the write landed, so the tail is clean for the next append and for
            # recovery.  If this fails too the caller takes the log offline.
            io.ftruncate(h.fd, pos)
            raise
        self.size = pos + n
        return n

    def flush(self) -> None:
        # an idle file may have been released with unsynced pages: a new descriptor's fsync writes them
        self.file_io.fsync(self.handle().fd)

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size``; returns bytes removed (``FileRecords.truncateTo``)."""
        original = self.size
        if target_size > original or target_size < 0:
            raise ValueError(f"Attempt to truncate log segment {self.path} to {target_size} bytes failed, "
                             f" size of this log segment is {original} bytes.")
        h = self.handle()
        if target_size < os.fstat(h.fd).st_size:
            self.file_io.ftruncate(h.fd, target_size)
        self.size = target_size
        return original - target_size

    def trim(self) -> None:
        """Drop preallocated space past the logical end (``FileRecords.trim``)."""
        h = self.handle()
        if os.fstat(h.fd).st_size > self.size:
            self.file_io.ftruncate(h.fd, self.size)

    def close(self) -> None:
        """Trim and close.  A slice still held keeps the descriptor open until it is dropped."""
        if not self._closed:
            try:
                if self._handle is not None:  # a file never opened, or released, was trimmed when it rolled
                    self.trim()
            finally:
                self._closed = True
                self._drop_handle()

    def close_handlers(self) -> None:
        if not self._closed:
            self._closed = True
            self._drop_handle()

    def rename_to(self, path: str) -> None:
        try:
            self.file_io.rename(self.path, path)
        finally:
            self.path = path

    def update_parent_dir(self, parent: str) -> None:
        self.path = os.path.join(parent, os.path.basename(self.path))

    def delete_if_exists(self) -> bool:
        self.close_handlers()
        try:
            self.file_io.unlink(self.path)
            return True
        except FileNotFoundError:
            return False

    # ---- reads -----------------------------------------------------------------------------------
    def slice(self, position: int, length: int) -> FileSlice:
        end = min(self.size, position + length)
        h = self.handle()
        return FileSlice(h.fd, position, max(0, end - position), self.path, h)

    def read(self, position: int, length: int) -> bytes:
        end = min(self.size, position + length)
        if end <= position:
            return b""
        h = self.handle()
        return pread_exact(h.fd, end - position, position)

    def batches_from(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each whole batch in ``[start, end)``, reading headers only.

        Stops at a partial trailing batch; raises :class:`CorruptRecordError` on a nonsensical header
        (length below 49 or magic other than 2) — Kafka's ``FileLogInputStream`` does the same.
        """
        end = self.size if end is None else min(end, self.size)
        handle = self.handle()  # held while iterating
        yield from _scan_headers(handle.fd, start, end)

    def search_for_offset_with_size(self, target_offset: int, starting_position: int,
                                    first_base_at_most: int | None = None) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= ``target_offset``, scanning from ``starting_position``.

        ``first_base_at_most``: the batch at ``starting_position`` must start at or below this offset (an
        index entry's claim); otherwise :class:`CorruptRecordError` — the index that sent us here is wrong.
        """
        first = True
        for pos, h in self.batches_from(starting_position):
            if first:
                if first_base_at_most is not None and h[0] > first_base_at_most:
                    raise CorruptRecordError(f"index entry ({first_base_at_most}, {starting_position}) points at a "
                                             f"batch starting at {h[0]} in {self.path}")
                first = False
            last = h[0] + h[6]
            if last >= target_offset:
                return LogOffsetPosition(last, pos, h[1] + LOG_OVERHEAD)
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        max_ts, offset, epoch = -1, -1, -1
        for _, h in self.batches_from(starting_position):
            if h.max_timestamp > max_ts:
                max_ts, offset, epoch = h.max_timestamp, h.last_offset, h.partition_leader_epoch
        return TimestampAndOffset(max_ts, offset, None if epoch < 0 else epoch)

    def search_for_timestamp(self, target_timestamp: int, starting_position: int,
                             starting_offset: int) -> TimestampAndOffset | None:
        """The first record with timestamp >= target and offset >= ``starting_offset`` (decodes that batch)."""
        from protocol.record_codec import decode_batch

        for pos, h in self.batches_from(starting_position):
            if h.max_timestamp >= target_timestamp:
                data = self.read(pos, h.batch_length + LOG_OVERHEAD)
                _, records = decode_batch(data, 0, verify_crc=False)
                for r in records:
                    if r.timestamp >= target_timestamp and r.offset >= starting_offset:
                        epoch = h.partition_leader_epoch
                        return TimestampAndOffset(r.timestamp, r.offset, None if epoch < 0 else epoch)
        return None

    def __repr__(self) -> str:
        return f"FileRecords(path={self.path}, size={self.size})"
