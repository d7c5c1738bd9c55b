"""Zero-copy fetch: record bytes go from the segment files to the socket with sendfile(2), never through Python.

The broker counts sendfile calls and bytes (``Broker.send_stats``) and any record bytes it had to read into
memory instead (``copied_bytes``). After real consumers read a topic, the sendfile byte count covers at
least every stored batch they were served, and nothing was copied.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
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


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_tls_consumers_get_no_sendfile_bytes_and_plaintext_ones_do(tmp_path, event_loop, caplog):
    """Record bytes cannot go to a TLS socket with sendfile (they must be encrypted): over TLS the broker's
    odradek_network_sendfile_bytes stays 0 and odradek_network_copied_record_bytes covers what was served; the
    same topic read over PLAINTEXT then moves the sendfile counter and copies nothing more. On both event loops,
    and a TLS client's going logs nothing (the loops warn when eof_received asks to keep a TLS transport open)."""
    from broker import EmbeddedBroker
    from broker.testing.certificates import CertificateAuthority
    from tests.harness import scrape

    ca = CertificateAuthority(tmp_path / "ca")
    server = ca.issue("broker", server=True)
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                 "ssl.keystore.location": str(server.pem), "metrics.prometheus.listener": "127.0.0.1:0"}
    with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides, event_loop=event_loop) as b:
        topic = "tls-no-sendfile"
        create_topic(b.bootstrap, topic, partitions=2)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 10, "compression.type": "none"})
        for i in range(2000):
            p.produce(topic, key=b"k%d" % (i % 7), value=b"tls %05d " % i + bytes(range(256)) * 2)
            p.poll(0)
        assert p.flush(30) == 0
        stored = stored_topic(tmp_path / "data", topic, 2)
        record_bytes = sum(sp.bytes for sp in stored.values())
        ends = {q: len(sp.records) for q, sp in stored.items()}
        assert sum(ends.values()) == 2000

        def counters() -> tuple[float, float]:
            m = scrape(b.broker.metrics.port)
            return m["odradek_network_sendfile_bytes"], m["odradek_network_copied_record_bytes"]

        assert counters() == (0, 0)
        tls = {"bootstrap.servers": f"127.0.0.1:{b.broker.bound_port('SSL')}", "security.protocol": "SSL",
               "ssl.ca.location": str(ca.pem)}
        got = cfk_consume(tls["bootstrap.servers"], topic, {0: 0, 1: 0}, extra=tls)
        assert {q: len(v) for q, v in got.items()} == ends
        sent, copied = counters()
        assert sent == 0, f"{sent} bytes sent with sendfile over TLS"
        assert copied >= record_bytes
        assert not [r.getMessage() for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING]

        got = cfk_consume(b.bootstrap, topic, {0: 0, 1: 0})
        assert {q: len(v) for q, v in got.items()} == ends
        sent_after, copied_after = counters()
        assert sent_after >= record_bytes
        assert copied_after == copied
