"""confluent-kafka (librdkafka) against the broker: admin create, produce under every codec, consume, seek.

Consumers use manual assignment with a group.id but no commits (consumer groups are a later issue).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import (
    ALL_CODECS, PARTITIONS, assert_consumed, assert_keys_consistent, assert_matches_stored, assert_stored_codec,
    crc32_partition, expected_records, stored_topic, timestamp_targets,
)


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=config or {})], request_timeout=15)
    futures[topic].result(timeout=20)


def produce(bootstrap: str, topic: str, recs, codec: str = "none", extra: dict | None = None
            ) -> dict[int, tuple[int, int]]:
    """Produce ``recs`` (no explicit partition: librdkafka's partitioner chooses); returns {i: (partition, offset)}
    from the delivery reports."""
    placed: dict[int, tuple[int, int]] = {}
    errors = []

    def on_delivery(err, msg, i):
        if err is not None:
            errors.append((i, err))
        else:
            placed[i] = (msg.partition(), msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20, "acks": "all",
                  "message.timeout.ms": 20000, **(extra or {})})
    for r in recs:
        p.produce(topic, key=r.key, value=r.value, headers=r.headers, timestamp=r.timestamp,
                  on_delivery=lambda err, msg, i=r.i: on_delivery(err, msg, i))
        p.poll(0)
    remaining = p.flush(30)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, errors
    return placed


def consume(bootstrap: str, topic: str, starts: dict[int, int], timeout: float = 30.0,
            extra: dict | None = None) -> dict[int, list[tuple]]:
    """Read each partition from ``starts[p]`` to its end (partition EOF): {p: [(offset, key, value, headers, ts)]};
    ``extra``: more consumer settings (a TLS listener's)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"matrix-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                  **(extra or {})})
    try:
        c.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
        out: dict[int, list[tuple]] = {p: [] for p in starts}
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(starts):
            assert time.monotonic() < deadline, f"partitions {set(starts) - eof} did not reach their end in {timeout}s"
            for m in c.consume(1000, timeout=0.5):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    eof.add(m.partition())
                    continue
                out[m.partition()].append((m.offset(), m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]))
        return out
    finally:
        c.close()


def offsets_for_times(bootstrap: str, topic: str, targets: dict[int, int]) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"matrix-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})
    try:
        res = c.offsets_for_times([TopicPartition(topic, p, ts) for p, ts in targets.items()], timeout=15)
        for tp in res:
            assert tp.error is None, tp.error
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_confluent_kafka_produce_consume_seek(broker, topic_name, codec):
    topic = topic_name(codec)
    create_topic(broker.bootstrap, topic)
    recs = expected_records(60, tag=f"cfk-{codec}")
    placed = produce(broker.bootstrap, topic, recs, codec)

    stored = stored_topic(broker.data_dir, topic)
    assert_stored_codec(stored, codec)
    assert_matches_stored(stored, placed, recs)
    # librdkafka's default partitioner (consistent_random): CRC32 of the key
    assert_keys_consistent(placed, recs, crc32_partition)
    assert len({placed[r.i][0] for r in recs}) > 1, "everything went to one partition"

    # consume everything back, byte-exact, in order per partition
    assert_consumed(consume(broker.bootstrap, topic, {p: 0 for p in range(PARTITIONS)}), stored)
    # seek by offset: from the middle of each partition
    starts = {p: len(sp.records) // 2 for p, sp in stored.items()}
    assert_consumed(consume(broker.bootstrap, topic, starts), stored, starts)
    # seek by timestamp: ListOffsets by timestamp finds the first record at or after the target
    targets = timestamp_targets(stored)
    assert targets
    found = offsets_for_times(broker.bootstrap, topic, {p: ts for p, (ts, _) in targets.items()})
    assert found == {p: off for p, (_, off) in targets.items()}
    assert_consumed(consume(broker.bootstrap, topic, found), stored, found)
    # past the last timestamp: no offset (librdkafka reports the end, -1)
    late = offsets_for_times(broker.bootstrap, topic, {0: recs[-1].timestamp + 10_000})
    assert late[0] in (-1, len(stored[0].records))


def test_confluent_kafka_explicit_partition_and_null_values(broker, topic_name):
    """An explicit partition is honoured; null values and null header values survive."""
    topic = topic_name("explicit")
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    delivered = []
    for i in range(9):
        p.produce(topic, partition=i % PARTITIONS, key=None if i % 2 else b"k%d" % i,
                  value=None if i % 4 == 0 else b"v%d" % i, headers=[("h", None), ("h", b"x")],
                  on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert p.flush(20) == 0
    assert all(err is None for err, _, _ in delivered)
    stored = stored_topic(broker.data_dir, topic)
    for part, sp in stored.items():
        vals = [(r.key, r.value, r.headers) for r in sp.records]
        want = [(None if i % 2 else b"k%d" % i, None if i % 4 == 0 else b"v%d" % i, [("h", None), ("h", b"x")])
                for i in range(9) if i % PARTITIONS == part]
        assert vals == want
    got = consume(broker.bootstrap, topic, {q: 0 for q in range(PARTITIONS)})
    assert [(k, v) for _, k, v, _, _ in got[1]] == [(None, b"v1"), (b"k4", None), (None, b"v7")]


def test_confluent_kafka_future_timestamps_rejected_past_one_hour(broker, topic_name):
    """Kafka 4.x: message.timestamp.after.max.ms defaults to one hour; a later CreateTime is INVALID_TIMESTAMP
    (error 32) and nothing of that batch is stored; a topic may lift the bound."""
    topic, lifted = topic_name("future"), topic_name("future-ok")
    create_topic(broker.bootstrap, topic, partitions=1)
    create_topic(broker.bootstrap, lifted, partitions=1, config={"message.timestamp.after.max.ms": "86400000"})
    now = int(time.time() * 1000)
    for t in (topic, lifted):
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.timeout.ms": 15000})
        reports = []
        for i, ts in enumerate((now + 2 * 3_600_000, now + 30 * 60_000)):
            p.produce(t, value=b"v%d" % i, partition=0, timestamp=ts,
                      on_delivery=lambda err, msg, i=i: reports.append((i, err, msg.offset())))
            assert p.flush(20) == 0
        reports.sort()
        if t == topic:
            assert reports[0][1] is not None and reports[0][1].code() == KafkaError.INVALID_TIMESTAMP
            assert reports[1][1] is None and reports[1][2] == 0  # the rejected batch took no offset
        else:
            assert [(i, err, off) for i, err, off in reports] == [(0, None, 0), (1, None, 1)]
