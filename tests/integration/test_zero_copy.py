"""Zero-copy fetch: record bytes go from the segment files to the socket with sendfile(2), never through Python.

The broker counts sendfile calls and bytes (``Broker.send_stats``) and any record bytes it had to read into
memory instead (``copied_bytes``). After real consumers read a topic, the sendfile byte count covers at
least every stored batch they were served, and nothing was copied.
"""

from __future__ import annotations

import asyncio

from confluent_kafka import Producer

from tests.integration.conftest import PARTITIONS, stored_topic
from tests.integration.test_aiokafka import consume as aio_consume
from tests.integration.test_confluent_kafka import consume as cfk_consume, create_topic
from tests.integration.test_kafka_python import consume as kp_consume


def test_fetch_serves_record_bytes_with_sendfile_only(broker, topic_name):
    topic = topic_name("zc")
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "compression.type": "none"})
    for i in range(3000):
        p.produce(topic, key=b"key-%d" % (i % 31), value=b"zero-copy %06d " % i + bytes(range(256)) * 2)
        p.poll(0)
    assert p.flush(30) == 0
    stored = stored_topic(broker.data_dir, topic)
    record_bytes = sum(sp.bytes for sp in stored.values())
    assert record_bytes > 1_500_000
    ends = {q: len(sp.records) for q, sp in stored.items()}
    assert sum(ends.values()) == 3000

    stats = broker.broker.send_stats
    for name, read in [
        ("confluent-kafka", lambda: cfk_consume(broker.bootstrap, topic, {q: 0 for q in range(PARTITIONS)})),
        ("kafka-python", lambda: kp_consume(broker.bootstrap, topic, {q: 0 for q in range(PARTITIONS)}, ends)),
        ("aiokafka",
         lambda: asyncio.run(aio_consume(broker.bootstrap, topic, {q: 0 for q in range(PARTITIONS)}, ends))),
    ]:
        calls, sent = stats.calls, stats.bytes
        got = read()
        assert {q: len(v) for q, v in got.items()} == ends, name
        assert stats.calls > calls, f"{name}: no sendfile call"
        assert stats.bytes - sent >= record_bytes, f"{name}: {stats.bytes - sent} bytes sent with sendfile, " \
                                                   f"{record_bytes} bytes of batches served"
        assert stats.copied_bytes == 0, f"{name}: {stats.copied_bytes} record bytes copied through Python"
