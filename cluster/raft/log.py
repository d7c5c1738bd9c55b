"""The replicated log as the Raft core sees it (Kafka's ReplicatedLog), and an in-memory one for simulation.

Entries carry the epoch of the leader that appended them; the epoch boundaries (Kafka's leader epoch cache)
decide where two logs diverge. What is not yet flushed can be lost by a crash: ``MemoryLog.crash()`` drops
it, as a power loss would.
"""

from __future__ import annotations

import dataclasses
import enum
from bisect import bisect_right
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Entry:
    """One record batch: ``count`` records at offsets ``offset`` .. ``next_offset - 1``, appended, fetched,
    committed and truncated whole, so one controller decision is applied all or not at all."""

    offset: int
    epoch: int
    data: Any
    control: bool = False  # a LeaderChangeMessage: the leader's first entry of its epoch
    count: int = 1

    @property
    def next_offset(self) -> int:
        return self.offset + self.count


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
        self.snapshots: list[Snapshot] = []  # oldest first; the log before the oldest may be deleted

    @property
    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None

    @property
    def earliest_snapshot(self) -> Snapshot | None:
        return self.snapshots[0] if self.snapshots else None

    def snapshot_with_id(self, end_offset: int, epoch: int) -> Snapshot | None:
        for s in self.snapshots:
            if (s.end_offset, s.epoch) == (end_offset, epoch):
                return s
        return None

    # ---- reading ----------------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self.entries[-1].next_offset if self.entries else self.start_offset

    @property
    def last_fetched_epoch(self) -> int:
        if self.entries:
            return self.entries[-1].epoch
        latest = self.latest_snapshot
        return latest.epoch if latest is not None else 0

    def _index(self, offset: int) -> int:
        """The index of the entry holding ``offset`` (len(entries) past the end)."""
        i = bisect_right(self.entries, offset, key=lambda e: e.offset) - 1
        if i < 0:
            return 0
        return i if offset < self.entries[i].next_offset else i + 1

    def entry(self, offset: int) -> Entry | None:
        """The entry (batch) holding ``offset``."""
        if offset < self.start_offset or offset >= self.end_offset:
            return None
        return self.entries[self._index(offset)]

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        i = self._index(max(offset, self.start_offset))
        return tuple(self.entries[i:i + max_entries])

    def read_until(self, offset: int, end: int) -> tuple[Entry, ...]:
        """The whole entries from the one holding ``offset`` that end at or below ``end``."""
        out = []
        for e in self.entries[self._index(max(offset, self.start_offset)):]:
            if e.next_offset > end:
                break
            out.append(e)
        return tuple(out)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's LeaderEpochFileCache.endOffsetFor: (the largest epoch <= ``epoch``, the offset where the next
        epoch starts, or the log end for the latest epoch); with no epoch <= ``epoch`` held, (``epoch``, the start
        of the first newer one)."""
        last_epoch = self.last_fetched_epoch
        if epoch >= last_epoch:
            return last_epoch, self.end_offset
        base = self.earliest_snapshot
        if base is not None and base.end_offset != self.start_offset:
            base = None  # the log reaches below the oldest snapshot: its entries tell the epochs
        if base is not None and base.epoch > epoch:
            return epoch, self.start_offset
        found_epoch = base.epoch if base is not None else -1
        for e in self.entries:
            if e.epoch > epoch:
                return (found_epoch if found_epoch >= 0 else epoch), e.offset
            found_epoch = e.epoch
        return found_epoch, self.end_offset

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidOffsetAndEpoch:
        """ReplicatedLog.validateOffsetAndEpoch: may a follower that has ``offset`` entries whose last one has
        ``epoch`` go on from there (VALID), must it truncate (DIVERGING, to the returned epoch's end) or does it
        need the latest snapshot (SNAPSHOT): it is behind the log start, or its last epoch is older than the
        oldest snapshot's."""
        if self.start_offset == 0 and offset == 0:
            return ValidOffsetAndEpoch(Validation.VALID, 0, 0)
        early = self.earliest_snapshot
        if early is not None and (offset < self.start_offset or epoch < early.epoch
                                  or (offset == self.start_offset and epoch != early.epoch)):
            latest = self.snapshots[-1]
            return ValidOffsetAndEpoch(Validation.SNAPSHOT, latest.end_offset, latest.epoch)
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
        """Drop every entry that reaches ``offset`` or beyond (a batch is never split)."""
        if offset < self.start_offset:
            raise ValueError(f"truncation to {offset} below the log start {self.start_offset}")
        del self.entries[self._index(offset):]
        self.flushed_offset = min(self.flushed_offset, self.end_offset)

    def flush(self) -> None:
        self.flushed_offset = self.end_offset

    def crash(self) -> None:
        """A power loss: what was not flushed is gone."""
        while self.entries and self.entries[-1].next_offset > self.flushed_offset:
            self.entries.pop()

    # ---- snapshots ----------------------------------------------------------------------------------------

    def create_snapshot(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` (at or below the high watermark, the caller checks); the log before it stays until
        retention deletes it (``clean``), so a follower a little behind still fetches entries, not the snapshot."""
        latest = self.latest_snapshot
        floor = latest.end_offset if latest is not None else self.start_offset
        if snapshot.end_offset > self.end_offset or snapshot.end_offset < floor:
            raise ValueError(f"snapshot at {snapshot.end_offset} outside [{floor}, {self.end_offset}]")
        if latest is not None and latest.end_offset == snapshot.end_offset:
            return
        self.snapshots.append(snapshot)

    def delete_before_snapshot(self, snapshot: Snapshot) -> bool:
        """KafkaMetadataLog.deleteBeforeSnapshot: advance the log start to a kept ``snapshot`` (not past the
        latest) and forget the entries and snapshots before it."""
        latest = self.latest_snapshot
        if (snapshot not in self.snapshots or latest is None or snapshot.end_offset <= self.start_offset
                or snapshot.end_offset > latest.end_offset):
            return False
        del self.entries[:self._index(snapshot.end_offset)]
        self.start_offset = snapshot.end_offset
        self.flushed_offset = max(self.flushed_offset, self.start_offset)
        self.snapshots = [s for s in self.snapshots if s.end_offset >= snapshot.end_offset]
        return True

    def clean(self, should_clean: Callable[[Snapshot], bool]) -> bool:
        """KafkaMetadataLog.cleanSnapshots: oldest first, while ``should_clean(snapshot)`` says a snapshot may
        go, delete the log before the next one. The latest snapshot always stays."""
        cleaned = False
        for older, newer in list(zip(self.snapshots, self.snapshots[1:])):
            if not (should_clean(older) and self.delete_before_snapshot(newer)):
                break
            cleaned = True
        return cleaned

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """A follower behind the leader's log start takes the leader's snapshot: its own log is replaced."""
        self.snapshots = [snapshot]
        self.entries = []
        self.start_offset = snapshot.end_offset
        self.flushed_offset = snapshot.end_offset
