"""kafka-python 3.x against the broker: admin create, produce under every codec, consume, seek.

kafka-python's codecs need python-snappy, lz4 and zstandard (dependencies of odradek itself). Its
producer is idempotent by default (InitProducerId + sequences). Consumers: group_id=None + assign.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.integration.conftest import (
    ALL_CODECS, PARTITIONS, assert_consumed, assert_keys_consistent, assert_matches_stored, assert_stored_codec,
    expected_records, murmur2_partition, stored_topic, timestamp_targets,
)

CODEC_NAMES = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        res = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])  # raises on error
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in res["topics"]] == [(topic, 0, partitions)]
    finally:
        admin.close()


def _consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         fetch_max_wait_ms=100, request_timeout_ms=15000)


def consume(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int], timeout: float = 30.0
            ) -> dict[int, list[tuple]]:
    c = _consumer(bootstrap)
    try:
        tps = {p: TopicPartition(topic, p) for p in starts}
        c.assign(list(tps.values()))
        for p, off in starts.items():
            c.seek(tps[p], off)
        out: dict[int, list[tuple]] = {p: [] for p in starts}
        deadline = time.monotonic() + timeout
        while any(len(out[p]) < ends[p] - starts[p] for p in starts):
            assert time.monotonic() < deadline, {p: len(v) for p, v in out.items()}
            for tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    out[tp.partition].append((m.offset, m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp))
        return out
    finally:
        c.close()


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_produce_consume_seek(broker, topic_name, codec):
    topic = topic_name(codec)
    create_topic(broker.bootstrap, topic)
    recs = expected_records(60, tag=f"kp-{codec}")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=CODEC_NAMES[codec], acks="all",
                             linger_ms=20, request_timeout_ms=15000)
    try:
        futures = [(r.i, producer.send(topic, key=r.key, value=r.value, headers=r.headers, timestamp_ms=r.timestamp))
                   for r in recs]
        producer.flush(timeout=30)
        placed = {}
        for i, f in futures:
            md = f.get(timeout=10)
            placed[i] = (md.partition, md.offset)
    finally:
        producer.close(timeout=10)

    stored = stored_topic(broker.data_dir, topic)
    assert_stored_codec(stored, codec)
    assert_matches_stored(stored, placed, recs)
    assert_keys_consistent(placed, recs, murmur2_partition)  # kafka-python's DefaultPartitioner: murmur2
    ends = {p: len(sp.records) for p, sp in stored.items()}

    assert_consumed(consume(broker.bootstrap, topic, {p: 0 for p in range(PARTITIONS)}, ends), stored)
    starts = {p: n // 2 for p, n in ends.items()}
    assert_consumed(consume(broker.bootstrap, topic, starts, ends), stored, starts)

    targets = timestamp_targets(stored)
    assert targets
    c = _consumer(broker.bootstrap)
    try:
        res = c.offsets_for_times({TopicPartition(topic, p): ts for p, (ts, _) in targets.items()})
        found = {tp.partition: ot.offset for tp, ot in res.items()}
        assert found == {p: off for p, (_, off) in targets.items()}
        for tp, ot in res.items():
            assert ot.timestamp == next(r.timestamp for r in stored[tp.partition].records if r.offset == ot.offset)
        late = c.offsets_for_times({TopicPartition(topic, 0): recs[-1].timestamp + 10_000})
        assert late[TopicPartition(topic, 0)] is None  # Kafka answers -1: no such record
        assert c.beginning_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 0}
        assert c.end_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): ends[0]}
    finally:
        c.close()
    assert_consumed(consume(broker.bootstrap, topic, found, ends), stored, found)
