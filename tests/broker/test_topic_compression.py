"""A topic's compression.type other than ``producer`` recompresses produced batches (LogValidator)."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker import EmbeddedBroker
from protocol.record_codec import decode_batch
from protocol.records import GZIP, NONE, ZSTD


def stored(b, topic):
    out = []
    for batch in b.broker.replicas.get(topic, 0).log.iter_batches(0):
        h, records = decode_batch(batch)
        out.append((h.compression, h.producer_id, [(r.key, r.value, r.headers) for r in records]))
    return out


def test_compression_type_recompresses_and_producer_passes_through(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "d") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        fs = admin.create_topics([NewTopic("z", 1, 1, config={"compression.type": "zstd"}),
                                  NewTopic("plain", 1, 1, config={"compression.type": "uncompressed"}),
                                  NewTopic("asis", 1, 1)])
        for f in fs.values():
            f.result(10)
        p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "gzip", "linger.ms": 5,
                      "enable.idempotence": True})
        for t in ("z", "plain", "asis"):
            for i in range(50):
                p.produce(t, key=b"k%d" % i, value=b"value-%d" % i * 5, headers=[("h", b"%d" % i)], partition=0)
        assert p.flush(20) == 0
        expected = [(b"k%d" % i, b"value-%d" % i * 5, [("h", b"%d" % i)]) for i in range(50)]
        for topic, codec in (("z", ZSTD), ("plain", NONE), ("asis", GZIP)):
            batches = stored(b, topic)
            assert {c for c, _, _ in batches} == {codec}, topic
            assert [r for _, _, rs in batches for r in rs] == expected
            assert all(pid >= 0 for _, pid, _ in batches)  # producer id/epoch/sequence kept
