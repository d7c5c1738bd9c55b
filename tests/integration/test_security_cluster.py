"""Security between nodes (issue 29): three combined nodes whose replication, transaction markers and controller
channel run over an INTERNAL SASL_SSL listener with SCRAM-SHA-512 (the brokers' credential bootstrapped with the
cluster, KIP-900) and whose KRaft quorum runs over an mTLS CONTROLLER listener. A client over SASL_SSL writes with
acks=all and min.insync.replicas=2 through a kill -9 of a partition leader; every acknowledged record is read back.
(The PLAINTEXT listener stays for the harness' readiness checks only.)"""

from __future__ import annotations

import time

import pytest

from broker.quorum.bootstrap_metadata import parse_add_scram, write_bootstrap
from broker.testing.embedded_cluster import EmbeddedCluster, reserve_ports
from cluster.controller import BOOTSTRAP_FEATURES
from tests.harness import MetricsPorts, scrape
from broker.testing.certificates import CertificateAuthority

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"
TOPIC = "secured"


@pytest.fixture
def secure_cluster(tmp_path):
    ca = CertificateAuthority(tmp_path / "certs")
    node_cert = ca.issue("node", server=True)
    client_cert = ca.issue("client")
    c = EmbeddedCluster(brokers=3, data_dir=tmp_path / "data", overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(node_cert.pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.pem),
        "listener.name.controller.ssl.client.auth": "required",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            f'{SCRAM} username="broker" password="broker-secret";',
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "offsets.topic.replication.factor": 3, "min.insync.replicas": 2})
    internal = dict(zip(c.broker_ports, reserve_ports(len(c.broker_ports))))
    for i, node in c.nodes.items():
        node.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{c.broker_ports[i]},"
                                       f"INTERNAL://127.0.0.1:{internal[i]},"
                                       f"CONTROLLER://127.0.0.1:{c.controller_ports[i]}")
        node.overrides["advertised.listeners"] = (f"PLAINTEXT://127.0.0.1:{c.broker_ports[i]},"
                                                  f"INTERNAL://127.0.0.1:{internal[i]}")
        # odradek format --add-scram on every voter: the brokers' own credential exists from the first commit
        write_bootstrap(node.data_dir, dict(BOOTSTRAP_FEATURES), [
            parse_add_scram("SCRAM-SHA-512=[name=broker,password=broker-secret]"),
            parse_add_scram("SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]")])
    c.metrics = MetricsPorts(c.nodes)
    c.internal_bootstrap = ",".join(f"127.0.0.1:{p}" for p in internal.values())
    c.ca, c.client_cert = ca, client_cert
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_replication_and_the_quorum_run_over_sasl_ssl_and_mtls_through_a_leader_kill(secure_cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    c = secure_cluster
    conf = {"bootstrap.servers": c.internal_bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(c.ca.pem), "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": "alice-secret"}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
    acked: list[bytes] = []

    def send(n0: int, n1: int) -> None:
        p = Producer({**conf, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000})
        for i in range(n0, n1):
            p.produce(TOPIC, f"r{i}".encode(), partition=i % 3,
                      on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
        assert p.flush(90) == 0

    send(0, 300)
    victim = c.leader_of(TOPIC, 0)
    c.kill(victim)
    send(300, 600)
    c.restart(victim)
    consumer = Consumer({**conf, "group.id": "secured-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(got) < len(acked) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.add(m.value())
    consumer.close()
    assert len(acked) == 600 and got == set(acked)
    # no secret in DescribeConfigs, a node's log, its command line or its metrics
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(30)
    jaas = entries["listener.name.internal.scram-sha-512.sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive
    for i, node in c.nodes.items():
        cmdline = open(f"/proc/{node.proc.pid}/cmdline", "rb").read()
        texts = [cmdline, node.stderr_tail(10_000_000).encode(), repr(scrape(c.metrics[i])).encode()]
        for secret in (b"broker-secret", b"alice-secret"):
            assert not any(secret in t for t in texts), (i, secret)
    # odradek healthcheck's checks with the node's own credentials: SASL_SSL/SCRAM broker, mTLS controller
    from broker.config import BrokerConfig
    from broker.container import check_broker, check_controller

    for i, node in c.nodes.items():
        config = BrokerConfig({k: str(v) if hasattr(v, "__fspath__") else v for k, v in node.overrides.items()})
        port = int(node.overrides["listeners"].split("INTERNAL://127.0.0.1:")[1].split(",")[0])
        assert check_broker(config, "127.0.0.1", port, 10) is None, i
        assert check_controller(config, 10) is None, i
    # odradek cluster status --command-config, as Kafka's tools take client properties
    import subprocess
    import sys

    props = c.ca.dir / "client.properties"
    props.write_text(f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={c.ca.pem}\n"
                     f"sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={SCRAM} username=\"alice\" "
                     f"password=\"alice-secret\";\n")
    out = subprocess.run([sys.executable, "-m", "broker.cli", "cluster", "status", "--bootstrap-server",
                          c.internal_bootstrap.split(",")[0], "--command-config", str(props)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "leader" in out.stdout.lower(), out.stderr
    # the followers fetched over INTERNAL: SCRAM logins on every node's INTERNAL listener, none failed
    for i in c.nodes:
        metrics = scrape(c.metrics[i])
        assert metrics.get('kafka_server_socketservermetrics_successful_authentication_total{listener="INTERNAL"}',
                           0) > 0, i
        assert metrics.get('kafka_server_socketservermetrics_failed_authentication_total{listener="INTERNAL"}',
                           0) == 0, i


def test_an_embedded_cluster_secured_with_one_argument(tmp_path):
    """EmbeddedCluster(security="SASL_SSL"): SCRAM users, certificates and the nodes' links made for a test suite;
    client_config(user) reaches it; the harness' own probes (leader_of) authenticate too."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedCluster(brokers=3, data_dir=tmp_path, security="SASL_SSL", users=("app",)) as c:
        conf = c.client_config("app")
        assert conf["security.protocol"] == "SASL_SSL"
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("sec", 1, 3)])["sec"].result(30)
        p = Producer({**conf, "acks": "all"})
        p.produce("sec", b"hello", partition=0)
        assert p.flush(30) == 0
        assert c.leader_of("sec", 0) in c.nodes
        consumer = Consumer({**conf, "group.id": "g", "enable.auto.commit": False})
        consumer.assign([TopicPartition("sec", 0, 0)])
        m = None
        for _ in range(40):
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                break
        consumer.close()
        assert m is not None and m.value() == b"hello"
        for node in c.nodes.values():
            assert oct((node.data_dir.parent / f"{node.data_dir.name}.yaml").stat().st_mode & 0o777) == "0o600"
