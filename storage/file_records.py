"""A segment's ``.log`` file: append whole batches, slice without reading, scan batch headers (Kafka's
``FileRecords``).

The in-memory ``size`` is the logical end of the file: appends write at ``size`` and bump it only once the
write succeeded, so a torn or failed write is never visible to readers (and is cut off by recovery).
Readers snapshot ``size`` when they start, so a concurrent append is never half-served.
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

__all__ = ["FileRecords", "FileSlice", "LogOffsetPosition", "TimestampAndOffset"]

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

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        return pread_exact(self.fd, self.length, self.position) if self.length else b""

    def sendfile(self, out_fd: int, offset: int = 0) -> int:
        """``os.sendfile`` this slice (from ``offset`` within it) to ``out_fd``; returns bytes sent."""
        return os.sendfile(out_fd, self.fd, self.position + offset, self.length - offset)


EMPTY_SLICE = FileSlice(-1, 0, 0)


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

    def __init__(self, path: str, fd: int, size: int, *, file_io: FileIO | None = None) -> None:
        self.path = path
        self.fd = fd
        self.size = size
        self.file_io = file_io if file_io is not None else FileIO()
        self._closed = False

    @classmethod
    def open(cls, path: str, file_already_exists: bool = False, init_file_size: int = 0,
             preallocate: bool = False, *, file_io: FileIO | None = None) -> "FileRecords":
        io = file_io if file_io is not None else FileIO()
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

    # ---- writes ----------------------------------------------------------------------------------
    def append(self, data) -> int:
        """Write ``data`` at the logical end.  On failure the file is cut back and ``OSError`` propagates."""
        n = len(data)
        if n == 0:
            return 0
        pos = self.size
        io = self.file_io
        try:
            io.pwrite_all(self.fd, data, pos)
        except OSError:
            # Remove whatever part of the write landed, so the tail is clean for the next append and for
            # recovery.  If this fails too the caller takes the log offline.
            io.ftruncate(self.fd, pos)
            raise
        self.size = pos + n
        return n

    def flush(self) -> None:
        self.file_io.fsync(self.fd)

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size``; returns bytes removed (``FileRecords.truncateTo``)."""
        original = self.size
        if target_size > original or target_size < 0:
            raise ValueError(f"Attempt to truncate log segment {self.path} to {target_size} bytes failed, "
                             f" size of this log segment is {original} bytes.")
        if target_size < os.fstat(self.fd).st_size:
            self.file_io.ftruncate(self.fd, target_size)
        self.size = target_size
        return original - target_size

    def trim(self) -> None:
        """Drop preallocated space past the logical end (``FileRecords.trim``)."""
        if os.fstat(self.fd).st_size > self.size:
            self.file_io.ftruncate(self.fd, self.size)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.trim()
            finally:
                self.file_io.close(self.fd)

    def close_handlers(self) -> None:
        if not self._closed:
            self._closed = True
            self.file_io.close(self.fd)

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
        return FileSlice(self.fd, position, max(0, end - position), self.path)

    def read(self, position: int, length: int) -> bytes:
        end = min(self.size, position + length)
        if end <= position:
            return b""
        return pread_exact(self.fd, end - position, position)

    def batches_from(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each whole batch in ``[start, end)``, reading headers only.

        Stops at a partial trailing batch; raises :class:`CorruptRecordError` on a nonsensical header
        (length below 49 or magic other than 2) — Kafka's ``FileLogInputStream`` does the same.
        """
        end = self.size if end is None else min(end, self.size)
        fd = self.fd
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
