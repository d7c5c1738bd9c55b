"""A segment's aborted-transaction index, ``<offset>.txnindex`` (Kafka's ``TransactionIndex`` and ``AbortedTxn``).

One 34-byte big-endian entry per transaction whose ABORT marker was written in the segment::

    int16 version (0)   int64 producerId   int64 firstOffset   int64 lastOffset (the marker's)   int64 lastStableOffset

``lastStableOffset`` is the LSO when the abort was written (the first offset of the earliest other open
transaction, else the marker's offset + 1).  A READ_COMMITTED fetch collects the entries overlapping the fetched
range from its segment on, until one whose LSO is past the range (no transaction aborted later can start inside it).

As Kafka's: the file is created by the first entry (most segments never get one), entries are appended with
increasing last offsets, it is never preallocated, and a recovered segment rebuilds it from the log with the
producer state.  Unlike Kafka's, no file descriptor stays open (there may be thousands of segments): a write opens
the file for the write, and the entries are read once, on first use, and kept in memory (aborts are rare, so
entries are few).  Reads here see every write, so the cache never goes stale.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
from typing import NamedTuple

from protocol.generated.messages.fetch_response import AbortedTransaction

from .errors import CorruptIndexError
from .fileio import FileIO, pread_exact

__all__ = ["AbortedTxn", "TransactionIndex", "TxnIndexSearchResult", "CURRENT_VERSION", "ENTRY_SIZE"]

CURRENT_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry.  ``version`` last so the usual construction reads like Kafka's ``new AbortedTxn(pid, first, last,
    lso)``."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    @classmethod
    def from_completed(cls, completed, last_stable_offset: int) -> "AbortedTxn":
        """``new AbortedTxn(completedTxn, lastStableOffset)``."""
        return cls(completed.producer_id, completed.first_offset, completed.last_offset, last_stable_offset)

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def from_bytes(cls, data, pos: int = 0) -> "AbortedTxn":
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        return cls(pid, first, last, lso, version)

    def as_aborted_transaction(self) -> AbortedTransaction:
        """What FetchResponse's ``aborted_transactions`` carries (``AbortedTxn.asAbortedTransaction``)."""
        return AbortedTransaction(producer_id=self.producer_id, first_offset=self.first_offset)

    def __repr__(self) -> str:
        return (f"AbortedTxn(version={self.version}, producerId={self.producer_id}, firstOffset={self.first_offset}, "
                f"lastOffset={self.last_offset}, lastStableOffset={self.last_stable_offset})")


class TxnIndexSearchResult(NamedTuple):
    """``TxnIndexSearchResult``: the overlapping entries, and whether later segments need not be searched."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


def _last_offset(t: AbortedTxn) -> int:
    return t.last_offset


class TransactionIndex:
    """``TransactionIndex``: building one does no I/O; the file is read on first use and written on append."""

    def __init__(self, start_offset: int, path: str, *, file_io: FileIO | None = None) -> None:
        self.start_offset = start_offset
        self.path = path
        self.file_io = file_io if file_io is not None else FileIO()
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._size = 0  # bytes of whole entries in the file: where the next entry goes
        self._unsynced = False  # written since the last flush
        self._lock = threading.RLock()  # the writer is the log (under its lock); the cleaner reads other segments

    @property
    def file(self) -> str:
        return self.path

    # ---- reading ---------------------------------------------------------------------------------
    def _read_file(self) -> tuple[list[AbortedTxn], int]:
        """Every whole entry in the file, and the file's size (0 if there is none)."""
        try:
            fd = self.file_io.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return [], 0
        try:
            size = os.fstat(fd).st_size
            data = pread_exact(fd, size, 0) if size else b""
        finally:
            self.file_io.close(fd)
        n = len(data) // ENTRY_SIZE
        return [AbortedTxn.from_bytes(data, i * ENTRY_SIZE) for i in range(n)], len(data)

    def _loaded(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            entries, _ = self._read_file()
            # a torn last entry (Kafka's reader skips it too) is overwritten by the next append
            self._entries, self._size = entries, len(entries) * ENTRY_SIZE
        return entries

    def all_aborted_txns(self) -> list[AbortedTxn]:
        with self._lock:
            return list(self._loaded())

    @property
    def last_offset(self) -> int | None:
        with self._lock:
            entries = self._loaded()
            return entries[-1].last_offset if entries else None

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The entries overlapping ``[fetch_offset, upper_bound_offset)``; complete once an entry's LSO reaches
        ``upper_bound_offset`` (``collectAbortedTxns``).

        Entries ending before ``fetch_offset`` are skipped by bisection (last offsets increase): their LSO is at
        most their last offset + 1 <= ``fetch_offset``, so none of them could have completed a search whose upper
        bound lies past ``fetch_offset``; otherwise every entry is looked at, as Kafka does."""
        with self._lock:
            entries = self._loaded()
            start = 0
            if upper_bound_offset > fetch_offset:
                start = bisect.bisect_left(entries, fetch_offset, key=_last_offset)
            out = []
            for i in range(start, len(entries)):
                t = entries[i]
                if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
                    out.append(t)
                if t.last_stable_offset >= upper_bound_offset:
                    return TxnIndexSearchResult(out, True)
            return TxnIndexSearchResult(out, False)

    def sanity_check(self) -> None:
        """``sanityCheck``: an entry ending below the segment's base offset means a corrupt file.  odradek also
        rejects what Kafka's reader would trip over or skip: a length that is not whole entries (a torn write), an
        unknown version, last offsets not increasing.  The loader rebuilds a corrupt index from the log."""
        with self._lock:
            entries, size = self._read_file()
            if size % ENTRY_SIZE:
                raise CorruptIndexError(f"Transaction index file {self.path} is corrupt, found {size} bytes which is "
                                        f"not a multiple of {ENTRY_SIZE}")
            prev = None
            for t in entries:
                if t.version != CURRENT_VERSION:
                    raise CorruptIndexError(f"Unexpected aborted transaction version {t.version} in transaction "
                                            f"index {self.path}, current version is {CURRENT_VERSION}")
                if t.last_offset < self.start_offset:
                    raise CorruptIndexError(f"Last offset of aborted transaction {t} in index {self.path} is less "
                                            f"than start offset {self.start_offset}")
                if prev is not None and t.last_offset <= prev:
                    raise CorruptIndexError(f"Last offset of aborted transaction {t} in index {self.path} is not "
                                            f"greater than the previous one {prev}")
                prev = t.last_offset
            self._entries, self._size = entries, size

    # ---- writing ---------------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its last offset must exceed the last one's (Kafka's IllegalArgumentException:
        ``ValueError``).  The file is created by the first entry."""
        with self._lock:
            entries = self._loaded()
            if entries and entries[-1].last_offset >= txn.last_offset:
                raise ValueError(f"The last offset of appended transactions must increase sequentially, but "
                                 f"{txn.last_offset} is not greater than current last offset "
                                 f"{entries[-1].last_offset} of index {self.path}")
            io = self.file_io
            fd = io.open(self.path, os.O_WRONLY | os.O_CREAT)
            try:
                io.pwrite_all(fd, txn.to_bytes(), self._size)
            finally:
                io.close(fd)
            entries.append(txn)
            self._size += ENTRY_SIZE
            self._unsynced = True

    def _truncate_file(self, size: int) -> None:
        try:
            fd = self.file_io.open(self.path, os.O_WRONLY)
        except FileNotFoundError:
            return
        try:
            self.file_io.ftruncate(fd, size)
        finally:
            self.file_io.close(fd)
        self._unsynced = True

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= ``offset`` (``truncateTo``)."""
        with self._lock:
            entries = self._loaded()
            i = bisect.bisect_left(entries, offset, key=_last_offset)
            if i < len(entries):
                self._truncate_file(i * ENTRY_SIZE)
                del entries[i:]
                self._size = i * ENTRY_SIZE

    def reset(self) -> None:
        """Remove every entry; the file, if any, stays (empty), as Kafka's ``reset``."""
        with self._lock:
            self._truncate_file(0)
            self._entries, self._size = [], 0

    def flush(self) -> None:
        """fsync what was written since the last flush (Kafka forces the channel if one is open)."""
        with self._lock:
            if not self._unsynced:
                return
            try:
                fd = self.file_io.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self._unsynced = False
                return
            try:
                self.file_io.fsync(fd)
            finally:
                self.file_io.close(fd)
            self._unsynced = False

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Forget the entries read (no descriptor is held); a later use reads the file again."""
        with self._lock:
            self._entries = None
            self._size = 0

    def delete_if_exists(self) -> bool:
        with self._lock:
            self._entries, self._size, self._unsynced = [], 0, False
            try:
                self.file_io.unlink(self.path)
                return True
            except FileNotFoundError:
                return False

    def rename_to(self, path: str) -> None:
        """Rename the file if there is one; the index is at ``path`` from now on either way (``renameTo``)."""
        with self._lock:
            try:
                self.file_io.rename(self.path, path)
            except FileNotFoundError:
                pass
            finally:
                self.path = path

    def update_parent_dir(self, parent: str) -> None:
        self.path = os.path.join(parent, os.path.basename(self.path))

    def __repr__(self) -> str:
        return f"TransactionIndex(startOffset={self.start_offset}, file={self.path})"
