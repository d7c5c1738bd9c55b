"""KafkaJS 2.x (npm) against the broker: admin createTopics, produce under every codec, admin offsets.

KafkaJS compresses with gzip natively; snappy, lz4 and zstd come from codec packages (kafkajs-snappy,
@2l/kafkajs-lz4, and a small zstd codec over zstd-codec in js/matrix.js). KafkaJS has no consumer
without a consumer group, and odradek has no groups yet, so:
* consuming back (byte-exact, in order per partition, and from an offset) is done with confluent-kafka;
* seeking is shown with KafkaJS' own admin API: ``fetchTopicOffsets`` (ListOffsets earliest/latest) and
  ``fetchTopicOffsetsByTimestamp`` (ListOffsets by timestamp).
The gzip run uses KafkaJS' idempotent producer.
"""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from tests.integration.conftest import (
    ALL_CODECS, PARTITIONS, assert_consumed, assert_keys_consistent, assert_matches_stored, assert_stored_codec,
    expected_records, murmur2_partition, stored_topic,
)
from tests.integration.test_confluent_kafka import consume


def run_matrix_js(js_dir, job: dict) -> dict:
    out = subprocess.run(["node", str(js_dir / "matrix.js")], input=json.dumps(job).encode(), capture_output=True,
                         timeout=90, cwd=js_dir)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-4000:]
    return json.loads(out.stdout)


def b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafkajs_produce_and_admin_offsets(broker, kafkajs_dir, topic_name, codec):
    topic = topic_name(codec)
    recs = expected_records(60, tag=f"kjs-{codec}")
    targets = [recs[20].timestamp - 5, recs[45].timestamp, recs[-1].timestamp + 10_000]
    res = run_matrix_js(kafkajs_dir, {
        "brokers": [broker.bootstrap], "topic": topic, "partitions": PARTITIONS, "codec": codec,
        "idempotent": codec == "gzip", "timestamps": targets,
        "records": [{"key": b64(r.key), "value": b64(r.value), "headers": [[k, b64(v)] for k, v in r.headers],
                     "timestamp": r.timestamp} for r in recs],
    })
    assert res["created"] is True

    stored = stored_topic(broker.data_dir, topic)
    assert_stored_codec(stored, codec)
    # where each record went: KafkaJS reports one base offset per partition for the send
    sent = {m["partition"]: m for m in res["sent"]}
    assert all(m["errorCode"] == 0 and m["topicName"] == topic and m["baseOffset"] == "0" for m in sent.values()), sent
    placed = {}
    for p, sp in stored.items():
        for r in sp.records:
            placed[int(r.value.split(b" ")[1])] = (p, r.offset)
    assert sorted(placed) == [r.i for r in recs]
    assert set(sent) == {p for p, sp in stored.items() if sp.records}
    assert_matches_stored(stored, placed, recs)
    assert_keys_consistent(placed, recs, murmur2_partition)  # KafkaJS' DefaultPartitioner: Java's murmur2
    if codec == "gzip":
        assert all(h.producer_id >= 0 and h.base_sequence == 0 for sp in stored.values() for h in sp.batches)

    # read back with another client, from the start and from an offset
    assert_consumed(consume(broker.bootstrap, topic, {p: 0 for p in range(PARTITIONS)}), stored)
    starts = {p: len(sp.records) // 2 for p, sp in stored.items()}
    assert_consumed(consume(broker.bootstrap, topic, starts), stored, starts)

    # KafkaJS admin: earliest/latest and by timestamp
    ends = {p: len(sp.records) for p, sp in stored.items()}
    assert {int(o["partition"]): (o["low"], o["high"]) for o in res["offsets"]} == {
        p: ("0", str(n)) for p, n in ends.items()}
    for ts in targets:
        got = {int(o["partition"]): int(o["offset"]) for o in res["byTimestamp"][str(ts)]}
        # the first offset at or after ts; none (Kafka's -1): KafkaJS substitutes the end offset
        want = {p: next((r.offset for r in sp.records if r.timestamp >= ts), ends[p]) for p, sp in stored.items()}
        assert got == want, ts
