"""The replicated log as the Raft core sees it (Kafka's ReplicatedLog), and an in-memory one for simulation.

Entries carry the epoch of the leader that appended them; the epoch boundaries (Kafka's leader epoch cache)
decide where two logs diverge. What is not yet flushed can be lost by a crash: ``MemoryLog.crash()`` drops
it, as a power loss would.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


@dataclasses.dataclass(frozen=True)
class Entry:
    offset: int
    epoch: int
    data: Any
    control: bool = False  # a LeaderChangeMessage: the leader's first entry of its epoch


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A KRaft snapshot: the application state up to (not including) ``end_offset``, whose last entry had
    ``epoch`` (``<end_offset>-<epoch>.checkpoint``)."""

    end_offset: int
    epoch: int
    data: Any


class Validation(enum.Enum):
    VALID = "valid"
    DIVERGING = "diverging"
    SNAPSHOT = "snapshot"


@dataclasses.dataclass(frozen=True)
class ValidOffsetAndEpoch:
    kind: Validation
    offset: int = -1
    epoch: int = -1


class MemoryLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.start_offset = 0
        self.flushed_offset = 0  # everything below it survives a crash
        self.snapshot: Snapshot | None = None

    # ---- reading ----------------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self.entries)

    @property
    def last_fetched_epoch(self) -> int:
        if self.entries:
            return self.entries[-1].epoch
        return self.snapshot.epoch if self.snapshot is not None else 0

    def entry(self, offset: int) -> Entry | None:
        i = offset - self.start_offset
        return self.entries[i] if 0 <= i < len(self.entries) else None

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        i = max(0, offset - self.start_offset)
        return tuple(self.entries[i:i + max_entries])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's LeaderEpochFileCache.endOffsetFor: (the largest epoch <= ``epoch``, the offset where the next
        epoch starts, or the log end for the latest epoch); with no epoch <= ``epoch`` held, (``epoch``, the start
        of the first newer one)."""
        last_epoch = self.last_fetched_epoch
        if epoch >= last_epoch:
            return last_epoch, self.end_offset
        snap = self.snapshot
        if snap is not None and snap.epoch > epoch:
            return epoch, self.start_offset
        found_epoch = snap.epoch if snap is not None else -1
        for e in self.entries:
            if e.epoch > epoch:
                return (found_epoch if found_epoch >= 0 else epoch), e.offset
            found_epoch = e.epoch
        return found_epoch, self.end_offset

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidOffsetAndEpoch:
        """ReplicatedLog.validateOffsetAndEpoch: may a follower that has ``offset`` entries whose last one has
        ``epoch`` go on from there (VALID), must it truncate (DIVERGING, to the returned epoch's end) or does it
        need the snapshot (SNAPSHOT)?"""
        snap = self.snapshot
        if snap is not None and (offset < self.start_offset or (offset == self.start_offset
                                                                 and epoch != snap.epoch)):
            return ValidOffsetAndEpoch(Validation.SNAPSHOT, snap.end_offset, snap.epoch)
        if offset < self.start_offset:
            return ValidOffsetAndEpoch(Validation.SNAPSHOT, -1, -1)
        end_epoch, end = self.end_offset_for_epoch(epoch)
        if end_epoch != epoch or end < offset:
            return ValidOffsetAndEpoch(Validation.DIVERGING, end, end_epoch)
        return ValidOffsetAndEpoch(Validation.VALID, offset, epoch)

    # ---- writing ----------------------------------------------------------------------------------------

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        for e in entries:
            if e.offset != self.end_offset:
                raise ValueError(f"non-contiguous append at {e.offset}, log end {self.end_offset}")
            if e.epoch < self.last_fetched_epoch:
                raise ValueError(f"epoch {e.epoch} below the log's last epoch {self.last_fetched_epoch}")
            self.entries.append(e)

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise ValueError(f"truncation to {offset} below the log start {self.start_offset}")
        del self.entries[offset - self.start_offset:]
        self.flushed_offset = min(self.flushed_offset, offset)

    def flush(self) -> None:
        self.flushed_offset = self.end_offset

    def crash(self) -> None:
        """A power loss: what was not flushed is gone."""
        del self.entries[max(0, self.flushed_offset - self.start_offset):]

    # ---- snapshots ----------------------------------------------------------------------------------------

    def create_snapshot(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` (at or below the high watermark, the caller checks) and drop the log before it."""
        if snapshot.end_offset > self.end_offset or snapshot.end_offset < self.start_offset:
            raise ValueError(f"snapshot at {snapshot.end_offset} outside the log [{self.start_offset}, "
                             f"{self.end_offset}]")
        self.snapshot = snapshot
        del self.entries[:snapshot.end_offset - self.start_offset]
        self.start_offset = snapshot.end_offset
        self.flushed_offset = max(self.flushed_offset, self.start_offset)

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """A follower behind the leader's log start takes the leader's snapshot: its own log is replaced."""
        self.snapshot = snapshot
        self.entries = []
        self.start_offset = snapshot.end_offset
        self.flushed_offset = snapshot.end_offset
