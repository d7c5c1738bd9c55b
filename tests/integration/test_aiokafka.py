"""aiokafka against the broker: admin create, produce under every codec, consume, seek.

aiokafka 0.14 speaks pre-flexible versions only (Produce <= 8, Fetch <= 11, Metadata <= 5, ListOffsets <= 5).
Consumers: group_id=None + assign. The gzip and zstd runs use the idempotent producer.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.integration.conftest import (
    ALL_CODECS, PARTITIONS, assert_consumed, assert_keys_consistent, assert_matches_stored, assert_stored_codec,
    expected_records, murmur2_partition, stored_topic, timestamp_targets,
)

CODEC_NAMES = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


async def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await asyncio.wait_for(admin.start(), 20)
    try:
        resp = await asyncio.wait_for(admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=15000), 20)
        errors = [(t[0], t[1]) for t in resp.topic_errors]
        assert errors == [(topic, 0)], resp
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, recs, codec: str, idempotent: bool) -> dict[int, tuple[int, int]]:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=CODEC_NAMES[codec], acks="all",
                         linger_ms=20, enable_idempotence=idempotent, request_timeout_ms=15000)
    await asyncio.wait_for(p.start(), 20)
    try:
        futs = [await p.send(topic, key=r.key, value=r.value, headers=r.headers, timestamp_ms=r.timestamp)
                for r in recs]
        mds = await asyncio.wait_for(asyncio.gather(*futs), 30)
        return {r.i: (md.partition, md.offset) for r, md in zip(recs, mds)}
    finally:
        await asyncio.wait_for(p.stop(), 20)


def _consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                            fetch_max_wait_ms=100, request_timeout_ms=15000)


async def consume(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int], timeout: float = 30.0
                  ) -> dict[int, list[tuple]]:
    c = _consumer(bootstrap)
    await asyncio.wait_for(c.start(), 20)
    try:
        tps = {p: TopicPartition(topic, p) for p in starts}
        c.assign(list(tps.values()))
        for p, off in starts.items():
            c.seek(tps[p], off)
        out: dict[int, list[tuple]] = {p: [] for p in starts}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while any(len(out[p]) < ends[p] - starts[p] for p in starts):
            assert loop.time() < deadline, {p: len(v) for p, v in out.items()}
            for tp, msgs in (await c.getmany(timeout_ms=500)).items():
                for m in msgs:
                    out[tp.partition].append((m.offset, m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp))
        return out
    finally:
        await c.stop()


async def scenario(bootstrap: str, data_dir, topic: str, codec: str) -> None:
    await create_topic(bootstrap, topic)
    recs = expected_records(60, tag=f"aio-{codec}")
    placed = await produce(bootstrap, topic, recs, codec, idempotent=codec in ("gzip", "zstd"))

    stored = stored_topic(data_dir, topic)
    assert_stored_codec(stored, codec)
    assert_matches_stored(stored, placed, recs)
    assert_keys_consistent(placed, recs, murmur2_partition)  # aiokafka's DefaultPartitioner: murmur2
    if codec in ("gzip", "zstd"):
        assert all(h.producer_id >= 0 and h.base_sequence >= 0 for sp in stored.values() for h in sp.batches)
    ends = {p: len(sp.records) for p, sp in stored.items()}

    assert_consumed(await consume(bootstrap, topic, {p: 0 for p in range(PARTITIONS)}, ends), stored)
    starts = {p: n // 2 for p, n in ends.items()}
    assert_consumed(await consume(bootstrap, topic, starts, ends), stored, starts)

    targets = timestamp_targets(stored)
    assert targets
    c = _consumer(bootstrap)
    await asyncio.wait_for(c.start(), 20)
    try:
        res = await asyncio.wait_for(
            c.offsets_for_times({TopicPartition(topic, p): ts for p, (ts, _) in targets.items()}), 20)
        found = {tp.partition: ot.offset for tp, ot in res.items()}
        assert found == {p: off for p, (_, off) in targets.items()}
        late = await asyncio.wait_for(c.offsets_for_times({TopicPartition(topic, 0): recs[-1].timestamp + 10_000}), 20)
        assert late[TopicPartition(topic, 0)] is None
        ends_seen = await asyncio.wait_for(c.end_offsets([TopicPartition(topic, p) for p in ends]), 20)
        assert {tp.partition: off for tp, off in ends_seen.items()} == ends
    finally:
        await c.stop()
    assert_consumed(await consume(bootstrap, topic, found, ends), stored, found)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_aiokafka_produce_consume_seek(broker, topic_name, codec):
    asyncio.run(asyncio.wait_for(scenario(broker.bootstrap, broker.data_dir, topic_name(codec), codec), 120))
