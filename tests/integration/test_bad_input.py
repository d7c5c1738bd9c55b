"""Bad produce input through the running broker, on a raw socket: Kafka's error code for that partition,
nothing appended, the connection (and other clients) unaffected, the broker alive.

What Kafka 4.x answers (KafkaApis.handleProduceRequest, ProduceRequest.validateRecords, ReplicaManager
.appendToLocalLog, UnifiedLog.analyzeAndValidateRecords, LogValidator):
* CRC mismatch: CORRUPT_MESSAGE (CorruptRecordException from ``batch.ensureValid()``);
* magic 0/1, or more than one batch for a partition: INVALID_RECORD (``validateRecords``);
* zstd below Produce v7: UNSUPPORTED_COMPRESSION_TYPE;
* acks not in {-1, 0, 1}: INVALID_REQUIRED_ACKS for every partition;
* Produce v0-v2 (advertised for librdkafka, KAFKA-18659, but not served): UNSUPPORTED_VERSION per partition;
* a batch larger than the topic's ``max.message.bytes``: MESSAGE_TOO_LARGE;
* a keyless record on a compacted topic: INVALID_RECORD with a record error naming the record's index.
The errors Kafka raises before the log (``validateRecords``) or as known storage exceptions (corrupt, too
large) carry no error message and no record errors; only LogValidator's RecordValidationException does
(``hasCustomErrorMessage``).
"""

from __future__ import annotations

import os
import struct
import time
import zlib

import pytest
from confluent_kafka import Producer

from protocol.errors import ErrorCode
from protocol.generated.messages import (
    ApiVersionsRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest, RequestHeader,
)
from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch
from protocol.records import ZSTD
from tests.integration.conftest import PARTITIONS, stored_topic
from tests.kafka_wire import KafkaWire
from tests.integration.test_confluent_kafka import create_topic


def batch(n: int = 3, keyed: bool = True, compression: int = 0, value_size: int = 20, keyless_at=()) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(key=None if (not keyed or i in keyless_at) else b"k%d" % i,
                               value=(b"v%d-" % i).ljust(value_size, b"x"), headers=[("h", b"1")], timestamp=now)
                        for i in range(n)], compression=compression)


def corrupt(b: bytes) -> bytes:
    out = bytearray(b)
    out[-1] ^= 0xFF  # a byte of the last record: the CRC no longer matches
    return bytes(out)


def legacy_message_set(magic: int, value: bytes = b"legacy") -> bytes:
    """One message in the pre-0.11 format (magic 0 or 1) as old clients sent it."""
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", int(time.time() * 1000)) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(msg)) + msg


def topic_id(w: KafkaWire, topic: str) -> bytes:
    r = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    (t,) = r.topics
    assert t.error_code == 0
    return t.topic_id


def produce(w: KafkaWire, version: int, topic: str, parts: dict[int, bytes], acks: int = -1):
    td = TopicProduceData(name=topic if version < 13 else "",
                          partition_data=[PartitionProduceData(index=p, records=b) for p, b in parts.items()])
    if version >= 13:
        td.topic_id = topic_id(w, topic)
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[td])
    if acks == 0:
        w.send(0, version, req)
        return None
    resp = w.call(0, version, req)
    (tr,) = resp.responses
    return {p.index: p for p in tr.partition_responses}


def end_offsets(w: KafkaWire, topic: str, partitions=range(PARTITIONS)) -> dict[int, int]:
    r = w.call(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                                for p in partitions])]))
    return {p.partition_index: p.offset for p in r.topics[0].partitions}


def assert_plain_error(pr, code: int, version: int) -> None:
    """An error as Kafka's ``new PartitionResponse(error)`` carries it: offsets -1, no message, no record errors."""
    assert pr.error_code == code, (ErrorCode(pr.error_code).name, ErrorCode(code).name)
    assert (pr.base_offset, pr.log_append_time_ms) == (-1, -1)
    if version >= 8:
        assert pr.record_errors == [] and pr.error_message is None, (pr.record_errors, pr.error_message)


@pytest.fixture
def topic(broker, topic_name):
    t = topic_name("bad")
    create_topic(broker.bootstrap, t)
    return t


@pytest.mark.parametrize("version", [3, 7, 8, 11, 13])
def test_corrupt_crc_is_corrupt_message_and_nothing_is_appended(broker, topic, version):
    with KafkaWire(broker.port) as w:
        # partition 0 gets a corrupted batch, partition 1 a good one in the same request
        res = produce(w, version, topic, {0: corrupt(batch()), 1: batch()})
        assert_plain_error(res[0], ErrorCode.CORRUPT_MESSAGE, version)
        assert res[1].error_code == 0 and res[1].base_offset == 0
        assert end_offsets(w, topic) == {0: 0, 1: 3, 2: 0}
        # the same connection keeps working
        assert w.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")).error_code == 0
        res = produce(w, version, topic, {0: batch(2)})
        assert res[0].error_code == 0 and res[0].base_offset == 0
    stored = stored_topic(broker.data_dir, topic)
    assert [len(stored[p].records) for p in range(PARTITIONS)] == [2, 3, 0]


def test_corrupt_batch_with_acks_0_closes_the_connection(broker, topic):
    with KafkaWire(broker.port) as w:
        produce(w, 9, topic, {0: corrupt(batch())}, acks=0)
        assert w.recv_frame() is None  # Kafka closes an acks=0 connection on any produce error
    with KafkaWire(broker.port) as w:
        assert end_offsets(w, topic) == {0: 0, 1: 0, 2: 0}


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_invalid_record(broker, topic, magic):
    with KafkaWire(broker.port) as w:
        for version in (3, 9):
            res = produce(w, version, topic, {0: legacy_message_set(magic)})
            assert_plain_error(res[0], ErrorCode.INVALID_RECORD, version)
        assert end_offsets(w, topic) == {0: 0, 1: 0, 2: 0}


def test_two_batches_in_one_partition_is_invalid_record(broker, topic):
    with KafkaWire(broker.port) as w:
        for version in (3, 11):
            res = produce(w, version, topic, {0: batch() + batch()})
            assert_plain_error(res[0], ErrorCode.INVALID_RECORD, version)
        assert end_offsets(w, topic) == {0: 0, 1: 0, 2: 0}


def test_zstd_below_produce_v7_is_unsupported_compression_type(broker, topic):
    with KafkaWire(broker.port) as w:
        res = produce(w, 6, topic, {0: batch(compression=ZSTD)})
        assert_plain_error(res[0], ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, 6)
        assert res[0].error_code == 76
        assert end_offsets(w, topic) == {0: 0, 1: 0, 2: 0}
        res = produce(w, 7, topic, {0: batch(compression=ZSTD)})
        assert res[0].error_code == 0
    (h,) = stored_topic(broker.data_dir, topic)[0].batches
    assert h.compression == ZSTD


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_bad_acks_is_invalid_required_acks_for_every_partition(broker, topic, acks):
    with KafkaWire(broker.port) as w:
        res = produce(w, 9, topic, {0: batch(), 1: batch()}, acks=acks)
        for p in (0, 1):
            assert_plain_error(res[p], ErrorCode.INVALID_REQUIRED_ACKS, 9)
        assert end_offsets(w, topic) == {0: 0, 1: 0, 2: 0}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_unsupported_version_per_partition(broker, topic, version):
    with KafkaWire(broker.port) as w:
        res = produce(w, version, topic, {0: batch(), 2: batch()})
        for p in (0, 2):
            assert res[p].error_code == ErrorCode.UNSUPPORTED_VERSION
            assert res[p].base_offset == -1
        assert end_offsets(w, topic) == {0: 0, 1: 0, 2: 0}


def test_batch_larger_than_max_message_bytes_is_message_too_large(broker, topic_name):
    t = topic_name("small")
    create_topic(broker.bootstrap, t, config={"max.message.bytes": "1024"})
    with KafkaWire(broker.port) as w:
        big = build_batch([Record(key=b"k", value=os.urandom(3000), timestamp=int(time.time() * 1000))])
        for version in (3, 9):
            res = produce(w, version, t, {0: big})
            assert_plain_error(res[0], ErrorCode.MESSAGE_TOO_LARGE, version)
        small = batch(2)
        assert len(small) < 1024
        res = produce(w, 9, t, {0: small})
        assert res[0].error_code == 0
        assert end_offsets(w, t) == {0: 2, 1: 0, 2: 0}


def test_keyless_record_on_compacted_topic_is_invalid_record(broker, topic_name):
    t = topic_name("compact")
    create_topic(broker.bootstrap, t, config={"cleanup.policy": "compact"})
    with KafkaWire(broker.port) as w:
        for version in (3, 9):
            res = produce(w, version, t, {0: batch(keyed=False)})
            assert res[0].error_code == ErrorCode.INVALID_RECORD
            assert res[0].base_offset == -1
        assert end_offsets(w, t) == {0: 0, 1: 0, 2: 0}
        res = produce(w, 9, t, {0: batch(keyed=True)})
        assert res[0].error_code == 0
        assert end_offsets(w, t)[0] == 3


def test_keyless_record_errors_name_each_keyless_record(broker, topic_name):
    """LogValidator.validateKey: one RecordError per keyless record, with that record's index in the batch, and
    the partition's error message summarising them (Produce v8+)."""
    t = topic_name("compact-idx")
    create_topic(broker.bootstrap, t, config={"cleanup.policy": "compact"})
    with KafkaWire(broker.port) as w:
        res = produce(w, 9, t, {0: batch(n=5, keyless_at=(1, 3))})
        pr = res[0]
        assert pr.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in pr.record_errors] == [1, 3]
        assert all(e.batch_index_error_message.startswith(
            f"Compacted topic cannot accept message without key in topic partition {t}-0")
            for e in pr.record_errors)
        assert pr.error_message.startswith("One or more records have been rejected due to 2 record errors")
        assert end_offsets(w, t) == {0: 0, 1: 0, 2: 0}


def test_oversized_and_malformed_frames_close_only_that_connection(broker, topic):
    with KafkaWire(broker.port) as bystander:
        with KafkaWire(broker.port) as w:
            w.sock.sendall(struct.pack(">i", 200 * 1024 * 1024))  # above socket.request.max.bytes
            assert w.recv_frame() is None
        with KafkaWire(broker.port) as w:
            # a Produce v9 header followed by a truncated body
            payload = RequestHeader(0, 9, 1, "x").encode(2) + b"\x00\x01\xff\xff"
            w.sock.sendall(struct.pack(">i", len(payload)) + payload)
            assert w.recv_frame() is None
        res = produce(bystander, 9, topic, {0: batch()})
        assert res[0].error_code == 0


def test_other_clients_unaffected_by_bad_input(broker, topic):
    """A librdkafka producer connected before, during and after a burst of bad requests keeps producing."""
    delivered = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    cb = lambda err, msg: delivered.append((err, msg.partition(), msg.offset()))  # noqa: E731
    p.produce(topic, value=b"before", partition=2, on_delivery=cb)
    assert p.flush(15) == 0
    with KafkaWire(broker.port) as w:
        for bad in (corrupt(batch()), legacy_message_set(1), batch() + batch()):
            p.produce(topic, value=b"during", partition=2, on_delivery=cb)
            p.poll(0)
            assert produce(w, 9, topic, {2: bad})[2].error_code != 0
    p.produce(topic, value=b"after", partition=2, on_delivery=cb)
    assert p.flush(15) == 0
    assert [(e, part, off) for e, part, off in delivered] == [(None, 2, i) for i in range(5)]
    assert [r.value for r in stored_topic(broker.data_dir, topic)[2].records] == [
        b"before", b"during", b"during", b"during", b"after"]
