"""Leader epoch -> start offset cache backed by ``leader-epoch-checkpoint`` (Kafka's ``LeaderEpochFileCache``).

Used by OffsetForLeaderEpoch (:meth:`LeaderEpochFileCache.end_offset_for`) and by replication to find
where a follower's log diverges.  Every change is written to the checkpoint file (tmp + fsync + rename)
before the call returns.
"""

from __future__ import annotations

import bisect
import logging
import threading

from .checkpoints import EpochEntry, LeaderEpochCheckpointFile

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

__all__ = ["LeaderEpochFileCache", "EpochEntry", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]


class LeaderEpochFileCache:
    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None, entries: list[EpochEntry] | None = None) -> None:
        self.checkpoint = checkpoint
        self._lock = threading.RLock()
        self._epochs: list[int] = []  # sorted epochs
        self._entries: dict[int, EpochEntry] = {}
        #: the entry with the largest epoch, or None; every mutation refreshes it (the append fast path reads it)
        self.latest: EpochEntry | None = None
        self.latest_epoch_value = UNDEFINED_EPOCH  #: ``latest.epoch``, or -1: the append fast path reads it
        initial = entries if entries is not None else (checkpoint.read() if checkpoint is not None else [])
        for e in initial:
            self._assign(e)
        self._refresh_latest()

    def _refresh_latest(self) -> None:
        epochs = self._epochs
        self.latest = self._entries[epochs[-1]] if epochs else None
        self.latest_epoch_value = self.latest.epoch if epochs else UNDEFINED_EPOCH

    # ---- mutation --------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; entries it contradicts are dropped.  Returns whether
        anything changed; with ``flush=False`` the caller writes the checkpoint (:meth:`flush`) itself, as the
        replica manager does for many partitions at once."""
        with self._lock:
            changed = self._assign(EpochEntry(epoch, start_offset))
            if changed and flush:
                self._write()
            return changed

    def is_latest(self, epoch: int, start_offset: int) -> bool:
        """True if ``assign(epoch, start_offset)`` would change nothing (the append fast path)."""
        latest = self.latest
        return latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset

    def _is_update_needed(self, entry: EpochEntry) -> bool:
        latest = self.latest_entry()
        return latest is None or entry.epoch != latest.epoch or entry.start_offset < latest.start_offset

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {entry}")
        if not self._is_update_needed(entry):
            return False
        # remove entries that violate monotonicity, from the end
        removed = []
        while self._epochs:
            last = self._entries[self._epochs[-1]]
            if last.epoch >= entry.epoch or last.start_offset >= entry.start_offset:
                removed.append(last)
                self._epochs.pop()
                del self._entries[last.epoch]
            else:
                break
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("New epoch entry %s caused truncation of conflicting entries %s.", entry, removed)
        bisect.insort(self._epochs, entry.epoch)
        self._entries[entry.epoch] = entry
        self._refresh_latest()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry whose start offset is >= ``end_offset`` (``truncateFromEndAsyncFlush``)."""
        with self._lock:
            latest = self.latest_entry()
            if end_offset >= 0 and latest is not None and latest.start_offset >= end_offset:
                while self._epochs and self._entries[self._epochs[-1]].start_offset >= end_offset:
                    del self._entries[self._epochs.pop()]
                self._refresh_latest()
                self._write()

    truncate_to = truncate_from_end

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the last of them is moved to start at it."""
        with self._lock:
            removed = []
            while self._epochs and self._entries[self._epochs[0]].start_offset <= start_offset:
                removed.append(self._entries.pop(self._epochs.pop(0)))
            if removed:
                first = EpochEntry(removed[-1].epoch, start_offset)
                bisect.insort(self._epochs, first.epoch)
                self._entries[first.epoch] = first
                self._refresh_latest()
                if removed != [first]:  # the usual start-up case puts back the entry it took: the file is as it was
                    self._write()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._entries.clear()
            self.latest = None
            self.latest_epoch_value = UNDEFINED_EPOCH
            self._write()

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._entries.clear()
            self.latest = None
            self.latest_epoch_value = UNDEFINED_EPOCH

    def _write(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.write(self.epoch_entries())

    def flush(self) -> None:
        with self._lock:
            self._write()

    # ---- queries ---------------------------------------------------------------------------------
    def epoch_entries(self) -> list[EpochEntry]:
        with self._lock:
            return [self._entries[e] for e in self._epochs]

    def non_empty(self) -> bool:
        return bool(self._epochs)

    def latest_entry(self) -> EpochEntry | None:
        epochs = self._epochs
        return self._entries[epochs[-1]] if epochs else None

    def latest_epoch(self) -> int | None:
        epochs = self._epochs
        return epochs[-1] if epochs else None

    def earliest_entry(self) -> EpochEntry | None:
        epochs = self._epochs
        return self._entries[epochs[0]] if epochs else None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        with self._lock:
            if epoch is None:
                epoch = self.latest_epoch()
                if epoch is None:
                    return None
            i = bisect.bisect_left(self._epochs, epoch) - 1
            return self._epochs[i] if i >= 0 else None

    def next_epoch(self, epoch: int) -> int | None:
        with self._lock:
            i = bisect.bisect_right(self._epochs, epoch)
            return self._epochs[i] if i < len(self._epochs) else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        return self._entries.get(epoch)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch (``LeaderEpochFileCache.endOffsetFor``).

        The epoch is the largest known epoch <= ``requested_epoch``; its end offset is the start offset of the
        next larger epoch, or ``log_end_offset`` for the latest epoch.  ``(-1, -1)`` when undefined.
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            latest = self.latest_epoch()
            if latest is not None and latest == requested_epoch:
                return requested_epoch, log_end_offset
            i = bisect.bisect_right(self._epochs, requested_epoch)
            if i >= len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            higher = self._entries[self._epochs[i]]
            if i == 0:
                return requested_epoch, higher.start_offset
            floor = self._entries[self._epochs[i - 1]]
            return floor.epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        with self._lock:
            previous = None
            for e in self._epochs:
                entry = self._entries[e]
                if entry.start_offset == offset:
                    return e
                if entry.start_offset > offset:
                    return previous
                previous = e
            return previous

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        with self._lock:
            copy = LeaderEpochFileCache(None, self.epoch_entries())
        if start_offset >= 0:
            copy.truncate_from_start(start_offset)
        copy.truncate_from_end(end_offset)
        return copy.epoch_entries()

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.epoch_entries()})"
