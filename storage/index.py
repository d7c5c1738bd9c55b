"""Sparse, memory-mapped, preallocated offset and time indexes (Kafka's ``AbstractIndex``, ``OffsetIndex``,
``TimeIndex``), byte for byte.

``.index`` entries are 8 bytes: a big-endian int32 offset relative to the segment's base offset and an
int32 byte position in the ``.log`` file.  ``.timeindex`` entries are 12 bytes: a big-endian int64
timestamp and an int32 relative offset; an entry (T, O) means "the biggest timestamp seen before O is T".

A new index file is preallocated (``ftruncate``) to ``max_index_size`` rounded down to a whole number of
entries; it is trimmed to its valid entries when the segment rolls or closes.  The file is memory-mapped on first
use, without keeping a descriptor (:mod:`storage.mapped_file`), and unmapped again when idle
(:mod:`storage.handles`); opening an index reads only its size and last entry.  When an
existing file is opened, every whole entry in it is taken as valid (Kafka's rule): indexes are never
trusted after an unclean shutdown — the loader rebuilds them from the log.  There are no checksums.
"""

from __future__ import annotations

import logging
import os
import struct
import threading

from .errors import CorruptIndexError, InvalidOffsetError
from .fileio import FileIO
from .handles import INDEX_MAPPINGS
from .mapped_file import MappedFile, map_file

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1
_INT_MAX = 2**31 - 1

__all__ = ["OffsetIndex", "TimeIndex", "NO_TIMESTAMP"]


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


class _AbstractIndex:
    ENTRY_SIZE = 0
    _fmt: struct.Struct

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, writable: bool = True, *,
                 file_io: FileIO | None = None) -> None:
        self.path = path
        self.file_io = file_io if file_io is not None else FileIO()
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self.lock = threading.RLock()
        self._mapping: MappedFile | None = None
        self._buf = None  # the mapping's buffer while mapped
        self.length = 0
        self.entries = 0
        self.max_entries = 0
        self._closed = False
        self._last_raw: bytes = b""  # the last whole entry's bytes when opened (read without mapping)
        self._create()

    # ---- file and mapping ----------------------------------------------------------------------
    def _create(self) -> None:
        """Create (preallocated) or open the file and learn its size and last entry; map nothing yet."""
        io = self.file_io
        newly_created = False
        try:
            fd = io.open(self.path, (os.O_RDWR if self.writable else os.O_RDONLY) | os.O_CREAT | os.O_EXCL)
            newly_created = True
        except FileExistsError:
            fd = io.open(self.path, os.O_RDWR if self.writable else os.O_RDONLY)
        try:
            if newly_created:
                if self.max_index_size < self.ENTRY_SIZE:
                    raise ValueError(f"Invalid max index size: {self.max_index_size}")
                io.ftruncate(fd, _round_down(self.max_index_size, self.ENTRY_SIZE))
            self.length = os.fstat(fd).st_size
            # a new index starts empty; a pre-existing one is assumed valid up to its last whole entry
            self.entries = 0 if newly_created else self.length // self.ENTRY_SIZE
            if self.entries:
                self._last_raw = os.pread(fd, self.ENTRY_SIZE, (self.entries - 1) * self.ENTRY_SIZE)
        finally:
            io.close(fd)
        self.max_entries = self.length // self.ENTRY_SIZE

    def _use(self) -> None:
        """Map the file if it is not mapped (first use, or released while idle) and note the use.  With the lock
        held: the mapping is read and written, and released, only under it."""
        if self._buf is None:
            if self._closed:
                raise ValueError(f"index {self.path} is closed")
            if self.length == 0:
                return
            io = self.file_io
            fd = io.open(self.path, os.O_RDWR if self.writable else os.O_RDONLY)
            try:
                self._mapping = map_file(fd, self.length, self.writable)
            finally:
                io.close(fd)
            self._buf = self._mapping.buf
        INDEX_MAPPINGS.touch(self)

    def _unmap(self) -> None:
        mapping, self._mapping, self._buf = self._mapping, None, None
        if mapping is not None:
            mapping.close()

    def try_release(self) -> bool:
        """Unmap while idle (:mod:`storage.handles`); the next use maps again.  False if in use right now."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            self._unmap()
            return True
        finally:
            self.lock.release()

    def resize(self, new_size: int) -> bool:
        """Set the file to ``new_size`` rounded down to whole entries (``AbstractIndex.resize``); the next use maps
        the new size."""
        with self.lock:
            rounded = _round_down(new_size, self.ENTRY_SIZE)
            if self.length == rounded:
                return False
            self._use()
            self.max_entries = rounded // self.ENTRY_SIZE
            if self.entries > self.max_entries:
                self.entries = self.max_entries
            self._on_resized()  # reads the last entry, through the old mapping
            self._unmap()
            io = self.file_io
            fd = io.open(self.path, os.O_RDWR)
            try:
                io.ftruncate(fd, rounded)
            finally:
                io.close(fd)
            self.length = rounded
            return True

    def _on_resized(self) -> None:
        pass

    def trim_to_valid_size(self) -> None:
        with self.lock:
            self.resize(self.ENTRY_SIZE * self.entries)

    def reset(self) -> None:
        """Remove every entry and grow back to the maximum size."""
        with self.lock:
            self.truncate()
            self.resize(self.max_index_size)

    def flush(self) -> None:
        with self.lock:
            if self._mapping is not None:
                self.file_io.msync(self._mapping, self.path)
            elif not self._closed and self.writable and self.length:
                # written through a mapping since released: the pages are in the page cache, the file's fsync
                # writes them
                fd = self.file_io.open(self.path, os.O_RDWR)
                try:
                    self.file_io.fsync(fd)
                finally:
                    self.file_io.close(fd)

    def close(self) -> None:
        """Trim to the valid entries and unmap (``AbstractIndex.close``)."""
        with self.lock:
            if self._closed:
                return
            if self.writable:
                self.trim_to_valid_size()
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap without writing anything (used when the disk may have failed, and before deletion)."""
        with self.lock:
            try:
                self._unmap()
            except OSError as e:  # pragma: no cover - munmap of a mapping we made does not fail
                log.warning("Unmapping %s failed: %s", self.path, e)
            self._closed = True
        INDEX_MAPPINGS.forget(self)

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            self.file_io.unlink(self.path)
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: str) -> None:
        try:
            self.file_io.rename(self.path, path)
        finally:
            self.path = path

    def update_parent_dir(self, parent: str) -> None:
        self.path = os.path.join(parent, os.path.basename(self.path))

    # ---- entries ---------------------------------------------------------------------------------
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def size_in_bytes(self) -> int:
        return self.ENTRY_SIZE * self.entries

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT_MAX:
            from .errors import LogSegmentOffsetOverflowError  # local: avoid a cycle in type checkers
            raise LogSegmentOffsetOverflowError(self, offset)
        return rel

    def can_append_offset(self, offset: int) -> bool:
        rel = offset - self.base_offset
        return 0 <= rel <= _INT_MAX

    def _truncate_to_entries(self, entries: int) -> None:
        self.entries = entries

    def _parse(self, n: int) -> tuple[int, int]:
        """Entry ``n`` as (key, value) — (offset, position) or (timestamp, offset)."""
        raise NotImplementedError

    def _warm_entries(self) -> int:
        return 8192 // self.ENTRY_SIZE

    def _slot_range_for(self, target: int, by_value: bool, largest_lower_bound: bool) -> int:
        """``AbstractIndex.indexSlotRangeFor``: binary search, trying the warm tail of the index first."""
        entries = self.entries
        if entries == 0:
            return -1
        k = 1 if by_value else 0
        parse = self._parse
        first_hot = max(0, entries - 1 - self._warm_entries())
        if parse(first_hot)[k] < target:
            lo, hi = first_hot, entries - 1
        else:
            if parse(0)[k] > target:
                return -1 if largest_lower_bound else 0
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = parse(mid)[k]
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        if largest_lower_bound:
            return lo
        return -1 if lo == entries - 1 else lo + 1

    def entries_list(self) -> list[tuple[int, int]]:
        """Every entry (for verification and tests)."""
        with self.lock:
            self._use()
            return [self._parse(i) for i in range(self.entries)]


class OffsetIndex(_AbstractIndex):
    """``.index``: (relative offset int32, position int32) entries."""

    ENTRY_SIZE = 8
    _fmt = struct.Struct(">ii")

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, writable: bool = True, *,
                 file_io: FileIO | None = None) -> None:
        super().__init__(path, base_offset, max_index_size, writable, file_io=file_io)
        self.last_offset = self._last_entry()[0]

    def _parse(self, n: int) -> tuple[int, int]:
        rel, pos = self._fmt.unpack_from(self._buf, n * 8)  # type: ignore[arg-type]
        return self.base_offset + rel, pos

    def _last_entry(self) -> tuple[int, int]:
        if self.entries == 0:
            return self.base_offset, 0
        if self._buf is None:  # just opened: the last entry was read with the file's size
            rel, pos = self._fmt.unpack_from(self._last_raw)
            return self.base_offset + rel, pos
        return self._parse(self.entries - 1)

    def _on_resized(self) -> None:
        self.last_offset = self._last_entry()[0]

    def sanity_check(self, log_size: int | None = None) -> None:
        """``OffsetIndex.sanityCheck`` plus: positions must lie inside the log and grow with offsets at the ends."""
        with self.lock:
            self._sanity_check(log_size)

    def _sanity_check(self, log_size: int | None) -> None:
        if self.entries != 0 and self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file {self.path} has non-zero size but the last offset is "
                f"{self.last_offset} which is less than the base offset {self.base_offset}")
        if self.length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self.length} bytes which is neither positive nor a "
                f"multiple of {self.ENTRY_SIZE}")
        if self.entries and log_size is not None:
            self._use()
            first_off, first_pos = self._parse(0)
            last_off, last_pos = self._parse(self.entries - 1)
            if first_off < self.base_offset or first_pos < 0 or last_pos >= max(log_size, 1) \
                    or last_pos < first_pos or last_off < first_off:
                raise CorruptIndexError(f"Index file {self.path} has entries outside its log (size {log_size})")

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """The largest entry with offset <= target, or ``(base_offset, 0)``."""
        with self.lock:
            if self.entries == 0:
                return self.base_offset, 0
            self._use()
            slot = self._slot_range_for(target_offset, False, True)
            if slot == -1:
                return self.base_offset, 0
            return self._parse(slot)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """The offset of the first entry at or past byte ``start_position + fetch_size``: outside a read of that
        many bytes from there, though not the smallest such offset (``OffsetIndex.fetchUpperBoundOffset``); None if
        no entry lies that far."""
        with self.lock:
            if self.entries == 0:
                return None
            self._use()
            slot = self._slot_range_for(start_position + fetch_size, True, False)
            return None if slot == -1 else self._parse(slot)[0]

    def entry(self, n: int) -> tuple[int, int]:
        with self.lock:
            if n >= self.entries:
                raise IndexError(f"Attempt to fetch the {n}th entry from index {self.path}, "
                                 f"which has size {self.entries}")
            self._use()
            return self._parse(n)

    def append(self, offset: int, position: int) -> None:
        # Appends come from the owning log's single writer, under the log's lock (as do resizes); the index's lock
        # is for the mapping (an idle release may unmap it). The entry is written before ``entries`` grows, so a
        # concurrent lookup never sees half of it.
        with self.lock:
            entries = self.entries
            if entries >= self.max_entries:
                raise ValueError(f"Attempt to append to a full index (size = {entries}).")
            if entries == 0 or offset > self.last_offset:
                rel = offset - self.base_offset
                if rel < 0 or rel > _INT_MAX:
                    self.relative_offset(offset)  # raises
                self._use()
                _pack_offset_entry(self._buf, entries * 8, rel, position)  # type: ignore[arg-type]
                self.entries = entries + 1
                self.last_offset = offset
            else:
                raise InvalidOffsetError(
                    f"Attempt to append an offset {offset} to position {entries} no larger than the last "
                    f"offset appended ({self.last_offset}) to {self.path}")

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        with self.lock:
            self._use()
            slot = self._slot_range_for(offset, False, True)
            if slot < 0:
                n = 0
            elif self._parse(slot)[0] == offset:
                n = slot
            else:
                n = slot + 1
            self._truncate_to_entries(n)

    def truncate(self) -> None:
        with self.lock:
            self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        self.entries = entries
        self.last_offset = self._last_entry()[0]


_pack_offset_entry = OffsetIndex._fmt.pack_into  # OffsetIndex.append runs once per produced batch or so


class TimeIndex(_AbstractIndex):
    """``.timeindex``: (timestamp int64, relative offset int32) entries."""

    ENTRY_SIZE = 12
    _fmt = struct.Struct(">qi")

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, writable: bool = True, *,
                 file_io: FileIO | None = None) -> None:
        super().__init__(path, base_offset, max_index_size, writable, file_io=file_io)
        self.last_entry = self._last_entry_from_file()

    def _parse(self, n: int) -> tuple[int, int]:
        ts, rel = self._fmt.unpack_from(self._buf, n * 12)  # type: ignore[arg-type]
        return ts, self.base_offset + rel

    def _last_entry_from_file(self) -> tuple[int, int]:
        if self.entries == 0:
            return NO_TIMESTAMP, self.base_offset
        if self._buf is None:  # just opened: the last entry was read with the file's size
            ts, rel = self._fmt.unpack_from(self._last_raw)
            return ts, self.base_offset + rel
        return self._parse(self.entries - 1)

    def _on_resized(self) -> None:
        self.last_entry = self._last_entry_from_file()

    def is_full(self) -> bool:
        # the last slot is reserved for the entry appended when the segment rolls
        return self.entries >= self.max_entries - 1

    def sanity_check(self, next_offset: int | None = None) -> None:
        with self.lock:
            self._sanity_check(next_offset)

    def _sanity_check(self, next_offset: int | None) -> None:
        last_ts, last_off = self.last_entry
        if self.entries != 0:
            self._use()
        if self.entries != 0 and last_ts < self._parse(0)[0]:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but the last "
                f"timestamp is {last_ts} which is less than the first timestamp {self._parse(0)[0]}")
        if self.entries != 0 and last_off < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but the last offset "
                f"is {last_off} which is less than the first offset {self.base_offset}")
        if self.length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Time index file {self.path} is corrupt, found {self.length} bytes which is neither positive "
                f"nor a multiple of {self.ENTRY_SIZE}")
        if self.entries and next_offset is not None and last_off >= max(next_offset, self.base_offset + 1):
            raise CorruptIndexError(f"Time index file {self.path} points past its segment's end offset {next_offset}")

    def entry(self, n: int) -> tuple[int, int]:
        with self.lock:
            if n >= self.entries:
                raise IndexError(f"Attempt to fetch the {n}th entry from time index {self.path} "
                                 f"which has size {self.entries}")
            self._use()
            return self._parse(n)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= target, or ``(NO_TIMESTAMP, base_offset)``."""
        with self.lock:
            if self.entries == 0:
                return NO_TIMESTAMP, self.base_offset
            self._use()
            slot = self._slot_range_for(target_timestamp, False, True)
            if slot == -1:
                return NO_TIMESTAMP, self.base_offset
            return self._parse(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        with self.lock:
            if not skip_full_check and self.is_full():
                raise ValueError(f"Attempt to append to a full time index (size = {self.entries}).")
            last_ts, last_off = self.last_entry
            if self.entries != 0 and offset < last_off:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than the last offset "
                    f"appended ({last_off}) to {self.path}")
            if self.entries != 0 and timestamp < last_ts:
                raise ValueError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {self.entries} no larger than the last "
                    f"timestamp appended ({last_ts}) to {self.path}")
            if timestamp > last_ts:
                if self.entries >= self.max_entries:
                    # only reachable with skip_full_check on an index that was trimmed; grow by one slot
                    self.resize((self.entries + 1) * self.ENTRY_SIZE)
                self._use()
                self._fmt.pack_into(self._buf, self.entries * 12, timestamp, self.relative_offset(offset))  # type: ignore[arg-type]
                self.entries += 1
                self.last_entry = (timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry pointing at an offset >= ``offset``."""
        with self.lock:
            self._use()
            slot = self._slot_range_for(offset, True, True)
            if slot < 0:
                n = 0
            elif self._parse(slot)[1] == offset:
                n = slot
            else:
                n = slot + 1
            self._truncate_to_entries(n)

    def truncate(self) -> None:
        with self.lock:
            self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        self.entries = entries
        self.last_entry = self._last_entry_from_file()
