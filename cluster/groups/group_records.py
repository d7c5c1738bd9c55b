"""``__consumer_offsets`` records in Kafka's format, the group-to-partition mapping and the embedded
consumer protocol.

A record's key is ``int16 version`` + the key struct, its value ``int16 version`` + the value struct,
and a tombstone has a null value (GroupCoordinatorRecordSerde). The key version names the record
type (0/1 OffsetCommit, 2 GroupMetadata, 3-8 the ConsumerGroup* records, 10-15 the ShareGroup* records
of Kafka 4.2), so Kafka's own tooling (kafka-console-consumer with the offsets formatter, kafka-dump-log
--offsets-decoder) can read what odradek writes. Value versions follow GroupCoordinatorRecordHelpers:
OffsetCommitValue v3 (v1 when an expire timestamp is set, i.e. a v2-v4 OffsetCommit with a retention
time), GroupMetadataValue v3, the consumer and share group values v0. The share group keys are Kafka 4.x
``coordinator-key`` schemas: the record type is their ``apiKey`` and the key struct itself is version 0
(the same bytes as the older schemas' "version = record type" form the other keys keep).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from protocol.generated.coordinator import (
    ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue, GroupMetadataKey,
    GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue, ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey, ShareGroupMetadataValue, ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue, ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue,
)


# key version -> (key class, value class, value version written)
RECORD_TYPES: dict[int, tuple[type, type, int]] = {
    0: (OffsetCommitKey, OffsetCommitValue, 3),
    1: (OffsetCommitKey, OffsetCommitValue, 3),
    2: (GroupMetadataKey, GroupMetadataValue, 3),
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue, 0),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue, 0),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, 0),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue, 0),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue, 0),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue, 0),
    # 9 was ShareGroupPartitionMetadata, removed before share groups were released (Kafka 4.1)
    10: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue, 0),
    11: (ShareGroupMetadataKey, ShareGroupMetadataValue, 0),
    12: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue, 0),
    13: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue, 0),
    14: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue, 0),
    15: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue, 0),
}
SHARE_GROUP_RECORD_TYPES = frozenset(range(10, 16))
# key class -> (record type, value version written); OffsetCommitKey writes type 1 (type 0 is read only)
_KEY_TYPE: dict[type, tuple[int, int]] = {cls: (v, vv) for v, (cls, _, vv) in RECORD_TYPES.items() if v != 0}


def register_key_types(table: dict[int, tuple[type, type, int]]) -> None:
    """Let :class:`CoordinatorRecord` encode another coordinator's records (``__share_group_state``'s)."""
    for v, (cls, _, vv) in table.items():
        _KEY_TYPE[cls] = (v, vv)


def _key_struct_version(key_cls: type, record_type: int) -> int:
    """The version the key struct is encoded at: the record type for the older schemas (``"validVersions": "3"``),
    0 for Kafka 4.x ``coordinator-key`` schemas (``"apiKey": 11, "validVersions": "0"``)."""
    lo, hi = key_cls.VALID_VERSIONS
    return record_type if lo <= record_type <= hi else lo


@dataclasses.dataclass
class CoordinatorRecord:
    """One ``__consumer_offsets`` record: a key struct and a value struct (None: tombstone)."""

    key: Any
    value: Any = None
    value_version: int | None = None

    @property
    def key_version(self) -> int:
        return _KEY_TYPE[type(self.key)][0]

    @property
    def is_share_group(self) -> bool:
        """A ShareGroup* record (types 10-15, KIP-932)."""
        return self.key_version in SHARE_GROUP_RECORD_TYPES

    def encode(self) -> tuple[bytes, bytes | None]:
        kv = self.key_version
        key = struct.pack(">h", kv) + self.key.encode(_key_struct_version(type(self.key), kv))
        if self.value is None:
            return key, None
        vv = self.value_version if self.value_version is not None else _KEY_TYPE[type(self.key)][1]
        return key, struct.pack(">h", vv) + self.value.encode(vv)


class UnknownRecordType(Exception):
    """A record type this coordinator does not know (streams groups, a newer Kafka): skipped on load."""


def decode_record(key: bytes, value: bytes | None,
                  table: dict[int, tuple[type, type, int]] = RECORD_TYPES) -> CoordinatorRecord:
    """A ``__consumer_offsets`` record (or, given its table, another coordinator's)."""
    (kv,) = struct.unpack_from(">h", key, 0)
    spec = table.get(kv)
    if spec is None:
        raise UnknownRecordType(f"Unknown record type {kv}")
    key_cls, value_cls, _ = spec
    k = key_cls.decode(memoryview(key)[2:], _key_struct_version(key_cls, kv))
    if value is None:
        return CoordinatorRecord(k, None)
    (vv,) = struct.unpack_from(">h", value, 0)
    lo, hi = value_cls.VALID_VERSIONS
    # KIP-915: a newer value version only adds tagged fields; read it with the newest one we know
    return CoordinatorRecord(k, value_cls.decode(memoryview(value)[2:], min(max(vv, lo), hi)), vv)


# ---- group id -> __consumer_offsets partition ---------------------------------------------------------------


def java_string_hashcode(s: str) -> int:
    """``String.hashCode()``: s[0]*31^(n-1) + ... over UTF-16 code units, in int32 arithmetic."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """``Utils.abs(groupId.hashCode()) % numPartitions`` (GroupCoordinatorService.partitionFor)."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ---- the embedded consumer protocol (ConsumerProtocolSubscription/Assignment.json, clients module) ------------

CONSUMER_PROTOCOL_TYPE = "consumer"


class SchemaError(ValueError):
    """Malformed embedded consumer protocol bytes (Kafka's SchemaException)."""


class _Reader:
    __slots__ = ("b", "pos")

    def __init__(self, b: bytes) -> None:
        self.b = bytes(b)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.b):
            raise SchemaError("buffer underflow")
        out = self.b[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise SchemaError("null string")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SchemaError(str(exc)) from None

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def array(self, fn) -> list:
        n = self.i32()
        if n < 0:
            raise SchemaError("null array")
        if n > len(self.b):
            raise SchemaError("array length exceeds the buffer")
        return [fn() for _ in range(n)]

    def at_end(self) -> bool:
        return self.pos >= len(self.b)


@dataclasses.dataclass
class Subscription:
    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[tuple[str, list[int]]] = dataclasses.field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


@dataclasses.dataclass
class ConsumerAssignment:
    version: int
    partitions: list[tuple[str, list[int]]]
    user_data: bytes | None = None


def _topic_partitions(r: _Reader) -> tuple[str, list[int]]:
    t = r.string()
    return t, r.array(r.i32)


def parse_subscription(data: bytes) -> Subscription:
    """Any version: fields of versions above 3 are ignored (every version has v0 as a prefix)."""
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise SchemaError(f"negative consumer protocol version {version}")
    topics = r.array(r.string)
    user_data = r.bytes_()
    sub = Subscription(version, topics, user_data)
    if version >= 1:
        sub.owned_partitions = r.array(lambda: _topic_partitions(r))
    if version >= 2:
        sub.generation_id = r.i32()
    if version >= 3:
        sub.rack_id = r.string(nullable=True)
    return sub


def parse_assignment(data: bytes) -> ConsumerAssignment:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise SchemaError(f"negative consumer protocol version {version}")
    parts = r.array(lambda: _topic_partitions(r))
    return ConsumerAssignment(version, parts, r.bytes_())


def _w_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += struct.pack(">h", -1)
    else:
        b = s.encode("utf-8")
        out += struct.pack(">h", len(b)) + b


def _w_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(b)) + bytes(b)


def _w_topic_partitions(out: bytearray, parts: list[tuple[str, list[int]]]) -> None:
    out += struct.pack(">i", len(parts))
    for topic, ps in parts:
        _w_string(out, topic)
        out += struct.pack(">i", len(ps))
        for p in ps:
            out += struct.pack(">i", p)


def serialize_assignment(parts: list[tuple[str, list[int]]], version: int = 0, user_data: bytes | None = None
                         ) -> bytes:
    """ConsumerProtocol.serializeAssignment at ``version`` (the layout is the same from v0 to v3)."""
    out = bytearray(struct.pack(">h", max(0, min(version, 3))))
    _w_topic_partitions(out, parts)
    _w_bytes(out, user_data)
    return bytes(out)


def serialize_subscription(sub: Subscription) -> bytes:
    v = max(0, min(sub.version, 3))
    out = bytearray(struct.pack(">h", v))
    out += struct.pack(">i", len(sub.topics))
    for t in sub.topics:
        _w_string(out, t)
    _w_bytes(out, sub.user_data)
    if v >= 1:
        _w_topic_partitions(out, sub.owned_partitions)
    if v >= 2:
        out += struct.pack(">i", sub.generation_id)
    if v >= 3:
        _w_string(out, sub.rack_id)
    return bytes(out)


def consumer_protocol_version(data: bytes) -> int:
    """ConsumerProtocol.deserializeVersion: the leading int16 (0 when absent)."""
    if len(data) < 2:
        raise SchemaError("buffer underflow")
    return struct.unpack_from(">h", data, 0)[0]
