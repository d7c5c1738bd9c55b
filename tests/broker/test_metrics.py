"""The Prometheus endpoint counts exactly what was produced and fetched (per batch, byte for byte)."""

from __future__ import annotations

import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from broker import EmbeddedBroker


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_match_traffic(tmp_path):
    n = 1000
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides={"metrics.prometheus.listener": "127.0.0.1:0"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("m", 2, 1)])["m"].result(10)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "compression.type": "lz4"})
        for i in range(n):
            p.produce("m", key=b"k%d" % i, value=b"x" * (i % 50), headers=[("h", b"1")])
        assert p.flush(20) == 0
        mid = scrape(b.broker.metrics.port)
        assert mid[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "m"),))] == n
        stored = sum(b.broker.replicas.get("m", i).log.size for i in range(2))
        assert mid[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "m"),))] == stored
        assert mid[("kafka_log_log_size", (("partition", "0"), ("topic", "m")))] + \
            mid[("kafka_log_log_size", (("partition", "1"), ("topic", "m")))] == stored
        ends = sum(mid[("kafka_log_log_logendoffset", (("partition", str(i)), ("topic", "m")))] for i in range(2))
        assert ends == n

        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 10})
        c.assign([TopicPartition("m", 0, 0), TopicPartition("m", 1, 0)])
        got = 0
        deadline = time.time() + 20
        while got < n and time.time() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got += 1
        c.close()
        assert got == n
        after = scrape(b.broker.metrics.port)
        out = after[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "m"),))]
        assert out == stored  # each batch was served once, whole
        assert after[("odradek_network_sendfile_bytes", ())] == stored
        assert after[("odradek_network_copied_record_bytes", ())] == 0
        produce_requests = sum(v for k, v in after.items()
                               if k[0] == "kafka_network_requestmetrics_requests_total"
                               and ("request", "Produce") in k[1])
        assert produce_requests >= 1
        assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
        assert any(k[0] == "kafka_network_requestmetrics_totaltimems_count" and ("request", "Fetch") in k[1]
                   for k in after)
        assert after[("kafka_server_socketservermetrics_connection_count", (("listener", "PLAINTEXT"),))] >= 1
