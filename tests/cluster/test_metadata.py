"""Metadata records, the image they build, and the controller's decisions."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, strategies as st

from cluster.controller import Controller, NewTopic, validate_topic_name
from cluster.metadata_image import MetadataImage
from cluster.metadata_serde import MetadataParseError, decode_record, encode_record
from protocol.errors import ErrorCode
from protocol.generated.metadata import ConfigRecord, TopicRecord
from protocol.primitives import uvarint


def registered(controller: Controller, image: MetadataImage, node_id: int = 1) -> MetadataImage:
    res = controller.register_broker(image, node_id, b"\x01" * 16, [("PLAINTEXT", "127.0.0.1", 9092)], None, 5, [])
    return image.apply(res.records, 0)


def commit(image: MetadataImage, records) -> MetadataImage:
    # round-trip every record through the serde, as the log does
    decoded = [decode_record(encode_record(r))[0] for r in records]
    return image.apply(decoded, image.offset + len(records))


def test_serde_frame_layout():
    rec = TopicRecord(name="t", topic_id=bytes(range(16)))
    data = encode_record(rec)
    assert data[:3] == bytes([1, 2, 0])  # frame version 1, TopicRecord api key 2, version 0
    assert decode_record(data) == (rec, 0)
    with pytest.raises(MetadataParseError):
        decode_record(data + b"\x00")  # garbage after the record
    with pytest.raises(MetadataParseError):
        decode_record(bytes([0]) + data[1:])  # frame version 0
    with pytest.raises(MetadataParseError):
        decode_record(uvarint(1) + uvarint(200) + uvarint(0))


def test_create_and_delete_topics():
    c = Controller(1, {"num.partitions": 3, "default.replication.factor": 1}, random.Random(1))
    image = registered(c, MetadataImage())
    res = c.create_topics(image, [NewTopic("a"), NewTopic("b.c", 2, 1, configs={"cleanup.policy": "compact"}),
                                  NewTopic("bad name"), NewTopic("x", 0), NewTopic("y", 1, 3)])
    codes = [r.error_code for r in res.response]
    assert codes == [0, 0, ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.INVALID_PARTITIONS,
                     ErrorCode.INVALID_REPLICATION_FACTOR]
    image = commit(image, res.records)
    assert sorted(image.topics_by_name) == ["a", "b.c"]
    assert len(image.topic("a").partitions) == 3
    p = image.topic("b.c").partitions[1]
    assert (p.leader, p.replicas, p.isr, p.leader_epoch) == (1, (1,), (1,), 0)
    assert dict(image.topic_config("b.c")) == {"cleanup.policy": "compact"}
    again = c.create_topics(image, [NewTopic("a"), NewTopic("b_c")])
    assert [r.error_code for r in again.response] == [ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_TOPIC_EXCEPTION]
    tid = image.topic("a").topic_id
    d = c.delete_topics(image, ["b.c", "nope"], [tid, bytes(16)])
    assert [r[2] for r in d.response] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, ErrorCode.UNKNOWN_TOPIC_ID]
    image2 = commit(image, d.records)
    assert image2.topics_by_name == {} and image2.configs == {}
    assert "a" in image.topics_by_name  # the old image is untouched


def test_validate_only_writes_nothing():
    c = Controller(1, {}, random.Random(1))
    image = registered(c, MetadataImage())
    res = c.create_topics(image, [NewTopic("t", 4, 1)], validate_only=True)
    assert res.records == [] and res.response[0].error_code == 0 and res.response[0].num_partitions == 4


def test_more_than_ten_thousand_partitions_in_one_request_is_a_policy_violation():
    """KAFKA-17870: the partitions a CreateTopics asks for (counts, the default for -1, assignments) are capped at
    10,000 per request; above it every topic of the request fails, nothing is created; exactly 10,000 is fine."""
    c = Controller(1, {"num.partitions": 5000}, random.Random(1))
    image = registered(c, MetadataImage())
    res = c.create_topics(image, [NewTopic("a", 5000, 1), NewTopic("b"), NewTopic("c", -1, -1, {0: [1]})])
    assert res.records == []
    assert [(r.name, r.error_code, r.error_message) for r in res.response] == [
        (n, ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.") for n in "abc"]
    ok = c.create_topics(image, [NewTopic("a", 5000, 1), NewTopic("b")], validate_only=True)
    assert [r.error_code for r in ok.response] == [0, 0]


def test_producer_id_blocks_never_repeat():
    c = Controller(1, {}, random.Random(1))
    image = registered(c, MetadataImage())
    seen = set()
    for _ in range(5):
        res = c.allocate_producer_ids(image, 1, 5)
        start, size = res.response
        block = set(range(start, start + size))
        assert not block & seen
        seen |= block
        image = commit(image, res.records)


@given(st.text(max_size=300))
def test_topic_name_validation_matches_kafka_rules(name):
    legal = (0 < len(name) <= 249 and name not in (".", "..")
             and all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in name))
    assert (validate_topic_name(name) is None) == legal


def test_config_record_delete():
    image = MetadataImage().apply([ConfigRecord(resource_type=2, resource_name="t", name="a", value="1"),
                                   ConfigRecord(resource_type=2, resource_name="t", name="b", value="2")], 1)
    image = image.apply([ConfigRecord(resource_type=2, resource_name="t", name="a", value=None)], 2)
    assert dict(image.topic_config("t")) == {"b": "2"}
