"""Restarts of ``odradek serve`` (a subprocess) on the same data directory.

* SIGTERM after 100k records: the broker exits 0, and after a restart every record is readable, at the
  same offsets, and Metadata answers as before (topics, topic ids, partitions, replicas, ISR, leaders),
  topic configs still apply, producer ids are not handed out again.
* SIGKILL in the middle of an acks=all produce loop: after a restart every acknowledged record is
  readable at the offset its delivery report gave, and each partition's offsets are contiguous from 0.

Leader epochs may grow across a restart (Kafka's controller fences the broker and elects it again,
bumping the epoch); they must never go back.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from protocol.errors import ErrorCode
from protocol.generated.messages import InitProducerIdRequest, MetadataRequest
from tests.integration.conftest import PARTITIONS, stored_topic
from tests.kafka_wire import KafkaWire
from tests.integration.test_bad_input import batch, end_offsets, produce as raw_produce
from tests.integration.test_confluent_kafka import consume, create_topic


def metadata(port: int) -> dict:
    with KafkaWire(port) as w:
        r = w.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return {
        "cluster_id": r.cluster_id,
        "controller_id": r.controller_id,
        "brokers": sorted((b.node_id, b.host, b.rack) for b in r.brokers),
        "topics": sorted(
            (t.name, t.topic_id, t.is_internal, t.error_code,
             tuple((p.partition_index, p.error_code, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes),
                    tuple(p.offline_replicas)) for p in sorted(t.partitions, key=lambda p: p.partition_index)))
            for t in r.topics),
        "epochs": {(t.name, p.partition_index): p.leader_epoch for t in r.topics for p in t.partitions},
    }


def assert_same_metadata(before: dict, after: dict) -> None:
    for k in ("cluster_id", "controller_id", "brokers", "topics"):
        assert after[k] == before[k], k
    assert after["epochs"].keys() == before["epochs"].keys()
    went_back = {tp: (before["epochs"][tp], e) for tp, e in after["epochs"].items() if e < before["epochs"][tp]}
    assert not went_back, went_back


def init_producer_id(port: int) -> int:
    with KafkaWire(port) as w:
        r = w.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                producer_id=-1, producer_epoch=-1))
    assert r.error_code == 0
    return r.producer_id


def test_sigterm_restart_keeps_100k_records_metadata_and_configs(broker_process):
    bp = broker_process().start()
    bulk, compacted = "bulk", "compacted"
    create_topic(bp.bootstrap, bulk)
    create_topic(bp.bootstrap, compacted, partitions=1, config={"cleanup.policy": "compact"})
    n = 100_000
    acked = [0]
    failed = []

    def on_delivery(err, msg):
        if err is None:
            acked[0] += 1
        else:
            failed.append(err)

    p = Producer({"bootstrap.servers": bp.bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                  "batch.size": 1_000_000, "queue.buffering.max.messages": 200_000, "acks": "all",
                  "compression.type": "lz4", "on_delivery": on_delivery})
    t0 = time.monotonic()
    for i in range(n):
        p.produce(bulk, value=b"%06d" % i, key=None if i % 2 else b"k%d" % (i % 1000))
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert (acked[0], failed) == (n, [])
    produce_s = time.monotonic() - t0
    before = metadata(bp.port)
    pid_before = init_producer_id(bp.port)
    stored_before = {q: [(r.offset, r.key, r.value) for r in sp.records]
                     for q, sp in stored_topic(bp.data_dir, bulk).items()}
    assert sum(len(v) for v in stored_before.values()) == n

    assert bp.terminate() == 0, bp.stderr_tail()
    bp.start()

    assert_same_metadata(before, metadata(bp.port))
    assert init_producer_id(bp.port) > pid_before  # producer ids are never reused
    got = consume(bp.bootstrap, bulk, {q: 0 for q in range(PARTITIONS)}, timeout=60)
    assert {q: [(o, k, v) for o, k, v, _, _ in recs] for q, recs in got.items()} == stored_before
    assert sorted(v for recs in got.values() for _, _, v, _, _ in recs) == [b"%06d" % i for i in range(n)]
    # the compacted topic's config came back from the metadata log: keyless records are still refused
    with KafkaWire(bp.port) as w:
        assert raw_produce(w, 9, compacted, {0: batch(keyed=False)})[0].error_code == ErrorCode.INVALID_RECORD
        assert raw_produce(w, 9, compacted, {0: batch(keyed=True)})[0].error_code == 0
    assert produce_s < 60


def test_sigkill_during_acks_all_produce_loses_no_acknowledged_record(broker_process):
    bp = broker_process().start()
    topic = "crash"
    create_topic(bp.bootstrap, topic)
    before = metadata(bp.port)
    acked: dict[tuple[int, int], bytes] = {}
    failed = [0]

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed[0] += 1

    p = Producer({"bootstrap.servers": bp.bootstrap, "acks": "all", "linger.ms": 2, "batch.num.messages": 500,
                  "message.timeout.ms": 4000, "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500,
                  "log_level": 0,  # the refused reconnects while the broker is down are expected
                  "on_delivery": on_delivery})
    seq = 0
    killed_at = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            p.produce(topic, value=b"crash-%08d" % seq, key=b"k%d" % (seq % 97) if seq % 3 else None)
        except BufferError:  # the local queue is full (the broker is down or slow): let it drain
            p.poll(0.05)
            continue
        seq += 1
        if seq % 100 == 0:
            p.poll(0)
        if killed_at is None and len(acked) >= 20_000:
            bp.kill()  # SIGKILL while produce requests are in flight
            killed_at = seq
        if killed_at is not None and seq >= killed_at + 2000:
            break
    assert killed_at is not None, f"only {len(acked)} records acknowledged in 30s"
    p.flush(15)  # what was not acknowledged fails with a timeout
    assert len(acked) + failed[0] == seq, (len(acked), failed[0], seq)

    bp.start()
    assert_same_metadata(before, metadata(bp.port))
    # Kafka's Partition.makeLeader calls maybeIncrementLeaderHW ("ISR could be down to 1"): with this broker
    # the only ISR member, the high watermark is the recovered log end right away, whatever the stale
    # replication-offset-checkpoint (written every 5 s and at clean shutdown) said
    on_disk = {q: len(sp.records) for q, sp in stored_topic(bp.data_dir, topic).items()}
    with KafkaWire(bp.port) as w:
        assert end_offsets(w, topic) == on_disk, "high watermark after the restart is not the log end offset"
    got = consume(bp.bootstrap, topic, {q: 0 for q in range(PARTITIONS)}, timeout=60)
    for q, recs in got.items():
        assert [o for o, *_ in recs] == list(range(len(recs))), f"partition {q}: offsets not contiguous"
    readable = {(q, o): v for q, recs in got.items() for o, _, v, _, _ in recs}
    lost = {pos: v for pos, v in acked.items() if readable.get(pos) != v}
    assert not lost, f"{len(lost)} acknowledged records lost or changed, e.g. {sorted(lost.items())[:5]}"
    # and the broker keeps appending after the crash, right after the recovered end
    p2 = Producer({"bootstrap.servers": bp.bootstrap, "acks": "all"})
    res = []
    p2.produce(topic, value=b"after", partition=0, on_delivery=lambda err, msg: res.append((err, msg.offset())))
    assert p2.flush(15) == 0
    assert res == [(None, len(got[0]))]
