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
