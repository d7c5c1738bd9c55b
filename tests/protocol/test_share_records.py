"""Kafka 4.2's share-group records (kio has none): the generated codec against fixtures written from the JSON.

Each fixture spells a record's bytes field by field in the order of its schema in ``protocol/codegen/kafka-4.2/
coordinator`` (the test checks that order against the JSON), with the encodings of Kafka's protocol guide:
keys are not flexible (int16-length strings), values are flexible (compact strings and arrays, a tagged-field
section closing every struct). The ``__consumer_offsets`` records (types 10-15) and the ``__share_group_state``
records (0 ShareSnapshot, 1 ShareUpdate) are also checked through their serdes: int16 record type + key, int16
value version + value.
"""

from __future__ import annotations

import json
import re
import struct
import uuid

import pytest

from cluster.groups.group_records import RECORD_TYPES, CoordinatorRecord, UnknownRecordType, decode_record
from cluster.groups.share_state_records import SHARE_STATE_RECORD_TYPES, decode_share_state_record
from protocol.codegen.schema import KAFKA_4_2_DIR
from protocol.generated import coordinator as C

T1 = uuid.UUID("00000000-0000-0000-0000-0000000000a1").bytes
T2 = uuid.UUID("00000000-0000-0000-0000-0000000000b2").bytes


def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)


def string(s):  # non-flexible string: int16 length
    b = s.encode()
    return i16(len(b)) + b


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def cstr(s):  # compact (nullable) string
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carray(items):  # compact array of already-encoded items
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def tags(*fields):  # tagged-field section: (tag, encoded value) pairs
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in fields)


# name, record type, key class, key kwargs, key field order, key bytes,
#       value class, value kwargs, value field order, value bytes
FIXTURES = [
    ("ShareGroupMemberMetadata", 10,
     C.ShareGroupMemberMetadataKey, dict(group_id="g1", member_id="m1"), ["GroupId", "MemberId"],
     string("g1") + string("m1"),
     C.ShareGroupMemberMetadataValue,
     dict(rack_id=None, client_id="c1", client_host="/10.0.0.1", subscribed_topic_names=["t1", "t2"]),
     ["RackId", "ClientId", "ClientHost", "SubscribedTopicNames"],
     cstr(None) + cstr("c1") + cstr("/10.0.0.1") + carray([cstr("t1"), cstr("t2")]) + NO_TAGS),
    ("ShareGroupMetadata", 11,
     C.ShareGroupMetadataKey, dict(group_id="g1"), ["GroupId"], string("g1"),
     C.ShareGroupMetadataValue, dict(epoch=7, metadata_hash=-1234567890123), ["Epoch", "MetadataHash"],
     i32(7) + i64(-1234567890123) + NO_TAGS),
    ("ShareGroupTargetAssignmentMetadata", 12,
     C.ShareGroupTargetAssignmentMetadataKey, dict(group_id="g1"), ["GroupId"], string("g1"),
     C.ShareGroupTargetAssignmentMetadataValue, dict(assignment_epoch=9), ["AssignmentEpoch"],
     i32(9) + NO_TAGS),
    ("ShareGroupTargetAssignmentMember", 13,
     C.ShareGroupTargetAssignmentMemberKey, dict(group_id="g1", member_id="m1"), ["GroupId", "MemberId"],
     string("g1") + string("m1"),
     C.ShareGroupTargetAssignmentMemberValue, "topic_partitions", ["TopicPartitions"],
     carray([T1 + carray([i32(0), i32(2)]) + NO_TAGS]) + NO_TAGS),
    ("ShareGroupCurrentMemberAssignment", 14,
     C.ShareGroupCurrentMemberAssignmentKey, dict(group_id="g1", member_id="m1"), ["GroupId", "MemberId"],
     string("g1") + string("m1"),
     C.ShareGroupCurrentMemberAssignmentValue, "current_assignment",
     ["MemberEpoch", "PreviousMemberEpoch", "State", "AssignedPartitions"],
     i32(5) + i32(4) + i8(0) + carray([T2 + carray([i32(1)]) + NO_TAGS]) + NO_TAGS),
    ("ShareGroupStatePartitionMetadata", 15,
     C.ShareGroupStatePartitionMetadataKey, dict(group_id="g1"), ["GroupId"], string("g1"),
     C.ShareGroupStatePartitionMetadataValue, "state_partitions",
     ["InitializingTopics", "InitializedTopics", "DeletingTopics"],
     carray([T1 + cstr("t1") + carray([i32(0)]) + i64(1_700_000_000_000) + NO_TAGS])
     + carray([])
     + carray([T2 + cstr("t2") + NO_TAGS]) + NO_TAGS),
]

SHARE_STATE_FIXTURES = [
    ("ShareSnapshot", 0,
     C.ShareSnapshotKey, dict(group_id="g1", topic_id=T1, partition=3), ["GroupId", "TopicId", "Partition"],
     string("g1") + T1 + i32(3),
     C.ShareSnapshotValue, "snapshot",
     ["SnapshotEpoch", "StateEpoch", "LeaderEpoch", "StartOffset", "DeliveryCompleteCount", "CreateTimestamp",
      "WriteTimestamp", "StateBatches"],
     i32(2) + i32(1) + i32(6) + i64(100) + i64(1_700_000_000_000) + i64(1_700_000_000_500)
     + carray([i64(100) + i64(109) + i8(2) + i16(1) + NO_TAGS])
     + tags((0, i32(10)))),  # DeliveryCompleteCount: tagged field 0 (KIP-1226), written when not -1
    ("ShareUpdate", 1,
     C.ShareUpdateKey, dict(group_id="g1", topic_id=T1, partition=3), ["GroupId", "TopicId", "Partition"],
     string("g1") + T1 + i32(3),
     C.ShareUpdateValue, "update",
     ["SnapshotEpoch", "LeaderEpoch", "StartOffset", "DeliveryCompleteCount", "StateBatches"],
     i32(2) + i32(6) + i64(-1) + carray([i64(110) + i64(110) + i8(4) + i16(5) + NO_TAGS]) + NO_TAGS),
]


def _value(value_cls, spec):
    """Values with nested structs, built from the generated module's struct classes."""
    if isinstance(spec, dict):
        return value_cls(**spec)
    mod = __import__(value_cls.__module__, fromlist=["x"])
    if spec == "topic_partitions":
        return value_cls(topic_partitions=[mod.TopicPartition(topic_id=T1, partitions=[0, 2])])
    if spec == "current_assignment":
        return value_cls(member_epoch=5, previous_member_epoch=4, state=0,
                         assigned_partitions=[mod.TopicPartitions(topic_id=T2, partitions=[1])])
    if spec == "state_partitions":
        return value_cls(
            initializing_topics=[mod.TopicPartitionsInfo(topic_id=T1, topic_name="t1", partitions=[0],
                                                         create_timestamp=1_700_000_000_000)],
            initialized_topics=[],
            deleting_topics=[mod.TopicInfo(topic_id=T2, topic_name="t2")])
    if spec == "snapshot":
        return value_cls(snapshot_epoch=2, state_epoch=1, leader_epoch=6, start_offset=100,
                         delivery_complete_count=10, create_timestamp=1_700_000_000_000,
                         write_timestamp=1_700_000_000_500,
                         state_batches=[mod.StateBatch(first_offset=100, last_offset=109, delivery_state=2,
                                                       delivery_count=1)])
    if spec == "update":  # DeliveryCompleteCount left at its default -1: not written
        return value_cls(snapshot_epoch=2, leader_epoch=6, start_offset=-1,
                         state_batches=[mod.StateBatch(first_offset=110, last_offset=110, delivery_state=4,
                                                       delivery_count=5)])
    raise AssertionError(spec)


def _json_fields(name: str) -> tuple[dict, list[str]]:
    text = (KAFKA_4_2_DIR / "coordinator" / f"{name}.json").read_text()
    raw = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
    return raw, [f["name"] for f in raw["fields"]]


ALL = [pytest.param(*f, id=f[0]) for f in FIXTURES + SHARE_STATE_FIXTURES]


@pytest.mark.parametrize("name,rtype,key_cls,key_kw,key_order,key_bytes,value_cls,value_spec,value_order,value_bytes",
                         ALL)
def test_record_matches_fixture(name, rtype, key_cls, key_kw, key_order, key_bytes, value_cls, value_spec,
                                value_order, value_bytes):
    raw_key, key_fields = _json_fields(f"{name}Key")
    raw_value, value_fields = _json_fields(f"{name}Value")
    assert (key_fields, value_fields) == (key_order, value_order), "fixture out of step with the JSON"
    assert raw_key["type"] == "coordinator-key" and raw_value["type"] == "coordinator-value"
    assert raw_key["apiKey"] == raw_value["apiKey"] == rtype
    assert key_cls.API_KEY == value_cls.API_KEY == rtype

    key = key_cls(**key_kw)
    value = _value(value_cls, value_spec)
    assert key.encode(0) == key_bytes
    assert value.encode(0) == value_bytes
    assert key_cls.decode(key_bytes, 0) == key
    assert value_cls.decode(value_bytes, 0) == value


@pytest.mark.parametrize("fixtures,table,decode", [
    pytest.param(FIXTURES, RECORD_TYPES, decode_record, id="__consumer_offsets"),
    pytest.param(SHARE_STATE_FIXTURES, SHARE_STATE_RECORD_TYPES, decode_share_state_record, id="__share_group_state"),
])
def test_record_serde(fixtures, table, decode):
    """int16 record type + key, int16 value version (0) + value; a tombstone's value is null."""
    for name, rtype, key_cls, key_kw, _, key_bytes, value_cls, value_spec, _, value_bytes in fixtures:
        assert table[rtype][:2] == (key_cls, value_cls), name
        rec = CoordinatorRecord(key_cls(**key_kw), _value(value_cls, value_spec))
        k, v = rec.encode()
        assert (k, v) == (i16(rtype) + key_bytes, i16(0) + value_bytes), name
        back = decode(k, v)
        assert (back.key, back.value, back.value_version) == (rec.key, rec.value, 0), name
        assert decode(k, None).value is None
        assert back.is_share_group == (table is RECORD_TYPES)


def test_share_state_types_are_not_consumer_offsets_types():
    """Types 0 and 1 mean OffsetCommit in __consumer_offsets and ShareSnapshot/ShareUpdate in __share_group_state;
    type 9 (ShareGroupPartitionMetadata, never released) is unknown in both."""
    snapshot_key = i16(0) + string("g1") + T1 + i32(3)
    assert isinstance(decode_share_state_record(snapshot_key, None).key, C.ShareSnapshotKey)
    with pytest.raises(UnknownRecordType):
        decode_share_state_record(i16(2) + string("g1"), None)
    with pytest.raises(UnknownRecordType):
        decode_record(i16(9) + string("g1"), None)


def test_a_newer_value_version_reads_as_version_0():
    """KIP-915: a value version above the known one only adds tagged fields; unknown tags are kept."""
    key = i16(11) + string("g1")
    value = i16(1) + i32(7) + i64(3) + tags((5, b"\x01\x02"))
    rec = decode_record(key, value)
    assert (rec.value.epoch, rec.value.metadata_hash, rec.value_version) == (7, 3, 1)
    assert rec.value.unknown_tagged_fields == [(5, b"\x01\x02")]
