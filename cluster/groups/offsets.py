"""Committed offsets of one ``__consumer_offsets`` partition (Kafka's OffsetMetadataManager store)."""

from __future__ import annotations

import dataclasses

from protocol.generated.coordinator import OffsetCommitValue

NO_EXPIRE = -1


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = NO_EXPIRE  # only v1 records (OffsetCommit v2-v4 with a retention time)
    record_offset: int = -1  # where in __consumer_offsets the commit was written

    @classmethod
    def from_record(cls, record_offset: int, v: OffsetCommitValue) -> "OffsetAndMetadata":
        return cls(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp, record_offset)

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(offset=self.committed_offset, leader_epoch=self.leader_epoch,
                                 metadata=self.metadata, commit_timestamp=self.commit_timestamp_ms,
                                 expire_timestamp=self.expire_timestamp_ms)

    def value_version(self) -> int:
        return 1 if self.expire_timestamp_ms != NO_EXPIRE else 3

    def is_expired(self, base_timestamp_ms: int, now_ms: int, retention_ms: int) -> bool:
        """OffsetExpirationConditionImpl: an explicit expire timestamp wins (old clients' retention)."""
        if self.expire_timestamp_ms != NO_EXPIRE:
            return now_ms >= self.expire_timestamp_ms
        return now_ms - base_timestamp_ms >= retention_ms


class OffsetStore:
    def __init__(self) -> None:
        self.by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.by_group.get(group, {}).get(topic, {}).get(partition)

    def put(self, group: str, topic: str, partition: int, om: OffsetAndMetadata) -> None:
        self.by_group.setdefault(group, {}).setdefault(topic, {})[partition] = om

    def remove(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        topics = self.by_group.get(group)
        if topics is None:
            return None
        parts = topics.get(topic)
        if parts is None:
            return None
        old = parts.pop(partition, None)
        if not parts:
            del topics[topic]
        if not topics:
            del self.by_group[group]
        return old

    def group(self, group: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self.by_group.get(group, {})

    def count(self) -> int:
        return sum(len(ps) for ts in self.by_group.values() for ps in ts.values())


class PendingTransactionalOffsets:
    """Offsets committed inside open transactions (OffsetMetadataManager ``pendingTransactionalOffsets`` and
    ``openTransactionsByGroup``): held per producer id until the transaction's marker, then moved to the
    committed store (COMMIT) or dropped (ABORT)."""

    def __init__(self) -> None:
        self.by_producer: dict[int, OffsetStore] = {}
        self.open_by_group: dict[str, set[int]] = {}

    def put(self, producer_id: int, group: str, topic: str, partition: int, om: OffsetAndMetadata) -> None:
        self.by_producer.setdefault(producer_id, OffsetStore()).put(group, topic, partition, om)
        self.open_by_group.setdefault(group, set()).add(producer_id)

    def get(self, producer_id: int, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        store = self.by_producer.get(producer_id)
        return None if store is None else store.get(group, topic, partition)

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        for pid in self.open_by_group.get(group, ()):
            store = self.by_producer.get(pid)
            if store is not None and store.get(group, topic, partition) is not None:
                return True
        return False

    def has_open_transactions(self, group: str) -> bool:
        return group in self.open_by_group

    def pending_partitions(self, group: str) -> set[tuple[str, int]]:
        out: set[tuple[str, int]] = set()
        for pid in self.open_by_group.get(group, ()):
            store = self.by_producer.get(pid)
            if store is not None:
                out.update((t, p) for t, ps in store.group(group).items() for p in ps)
        return out

    def remove_partition(self, group: str, topic: str, partition: int) -> None:
        """A tombstone removes the partition's pending commits of every open transaction too."""
        for pid in self.open_by_group.get(group, ()):
            store = self.by_producer.get(pid)
            if store is not None:
                store.remove(group, topic, partition)

    def end(self, producer_id: int, commit: bool, committed: OffsetStore) -> int:
        """replayEndTransactionMarker: on COMMIT a pending offset replaces the stored one only if it was written
        later in the log (compaction of ``__consumer_offsets`` could otherwise materialise an older commit).
        Returns how many offsets were materialised."""
        pending = self.by_producer.pop(producer_id, None)
        if pending is None:
            return 0
        for group in pending.by_group:
            pids = self.open_by_group.get(group)
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del self.open_by_group[group]
        if not commit:
            return 0
        n = 0
        for group, topics in pending.by_group.items():
            for topic, parts in topics.items():
                for partition, om in parts.items():
                    existing = committed.get(group, topic, partition)
                    if existing is None or om.record_offset > existing.record_offset:
                        committed.put(group, topic, partition, om)
                        n += 1
        return n
