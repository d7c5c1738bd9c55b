"""TLS listeners with real clients (issue 29): confluent-kafka, kafka-python, aiokafka, kcat and KafkaJS over SSL with
client certificates (mTLS: PKCS12 keystore, PEM truststore, the certificate's subject mapped to the principal by
``ssl.principal.mapping.rules``) and over SASL_SSL with SCRAM (a PEM keystore); a client of a foreign CA, or one
speaking plaintext to a TLS port, is refused and nobody else is hurt; no sendfile on TLS (record data is copied
through the TLS layer)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import time
import uuid

import pytest

from broker import EmbeddedBroker
from broker.testing.embedded_cluster import wait_until
from tests.integration.test_sasl import PLAIN_JAAS, SCRAM_JAAS, create_scram_users
from broker.testing.certificates import STORE_PASSWORD, CertificateAuthority

RULES = "RULE:^CN=([^,]+),O=odradek-tests$/$1/L,DEFAULT"


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(d / "ca")
    foreign = CertificateAuthority(d / "foreign", "foreign-ca")
    certs = {"ca": ca, "server": ca.issue("broker", server=True), "alice": ca.issue("Alice"),
             "mallory": foreign.issue("mallory")}
    ssl_prefix, sasl_prefix = "listener.name.ssl.", "listener.name.sasl_ssl."
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "connections.max.idle.ms": 3000,  # the TLS handshake's bound too
        "ssl.principal.mapping.rules": RULES,
        f"{ssl_prefix}ssl.keystore.type": "PKCS12", f"{ssl_prefix}ssl.keystore.location": str(certs["server"].p12),
        f"{ssl_prefix}ssl.keystore.password": STORE_PASSWORD,
        f"{ssl_prefix}ssl.truststore.type": "PEM", f"{ssl_prefix}ssl.truststore.location": str(ca.pem),
        f"{ssl_prefix}ssl.client.auth": "required",
        f"{sasl_prefix}ssl.keystore.type": "PEM", f"{sasl_prefix}ssl.keystore.location": str(certs["server"].pem),
        f"{sasl_prefix}sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        f"{sasl_prefix}plain.sasl.jaas.config": PLAIN_JAAS,
        f"{sasl_prefix}scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.client.auth": "required",  # not prefixed: ignored on SASL_SSL (KIP-684)
    }
    with EmbeddedBroker(data_dir=d / "data", overrides=overrides) as b:
        create_scram_users(f"127.0.0.1:{b.broker.bound_port('PLAINTEXT')}", {"sue": ("SCRAM-SHA-512", "sue-pw")})
        b.ssl_bootstrap = f"127.0.0.1:{b.broker.bound_port('SSL')}"
        b.sasl_ssl_bootstrap = f"127.0.0.1:{b.broker.bound_port('SASL_SSL')}"
        b.certs = certs
        yield b


def new_topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


def ssl_conf(b, who: str = "alice", ca: str = "ca") -> dict:
    c = b.certs[who]
    return {"bootstrap.servers": b.ssl_bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(b.certs[ca].pem), "ssl.certificate.location": str(c.cert),
            "ssl.key.location": str(c.key)}


def sasl_ssl_conf(b) -> dict:
    return {"bootstrap.servers": b.sasl_ssl_bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(b.certs["ca"].pem), "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "sue",
            "sasl.password": "sue-pw"}


def round_trip(conf: dict, topic: str, n: int = 20) -> list[bytes]:
    from tests.integration.test_sasl import confluent_round_trip
    return confluent_round_trip(conf, topic, n)


def principals(b, listener: str) -> set[str]:
    return {c.principal for c in list(b.broker.server.connections) if c.listener == listener}


def test_confluent_kafka_over_mtls_is_the_certificates_mapped_principal_and_sends_no_file_bytes(tls):
    stats = tls.broker.server.send_stats
    sent_before, copied_before = stats.bytes, stats.copied_bytes
    from confluent_kafka import Producer

    assert round_trip(ssl_conf(tls), new_topic(), 200) == [f"v{i}".encode() for i in range(200)]
    p = Producer(ssl_conf(tls))
    p.produce(new_topic(), b"x")
    assert p.flush(20) == 0
    assert principals(tls, "SSL") == {"User:alice"}  # CN=Alice,O=odradek-tests through the rule, lower-cased
    assert stats.bytes == sent_before  # no sendfile on TLS
    assert stats.copied_bytes > copied_before


def test_confluent_kafka_over_sasl_ssl_with_scram(tls):
    assert round_trip(sasl_ssl_conf(tls), new_topic()) == [f"v{i}".encode() for i in range(20)]


def test_kafka_python_over_mtls_and_sasl_ssl(tls):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    certs = tls.certs
    for conf in (dict(bootstrap_servers=tls.ssl_bootstrap, security_protocol="SSL", ssl_cafile=str(certs["ca"].pem),
                      ssl_certfile=str(certs["alice"].cert), ssl_keyfile=str(certs["alice"].key)),
                 dict(bootstrap_servers=tls.sasl_ssl_bootstrap, security_protocol="SASL_SSL",
                      ssl_cafile=str(certs["ca"].pem), sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="sue",
                      sasl_plain_password="sue-pw")):
        topic = new_topic()
        p = KafkaProducer(**conf)
        for i in range(10):
            p.send(topic, f"k{i}".encode(), partition=0)
        p.flush(30)
        p.close()
        c = KafkaConsumer(**conf, auto_offset_reset="earliest", consumer_timeout_ms=10000)
        c.assign([TopicPartition(topic, 0)])
        got = [m.value for _, m in zip(range(10), c)]
        c.close()
        assert got == [f"k{i}".encode() for i in range(10)], conf["security_protocol"]


def test_aiokafka_over_mtls_and_sasl_ssl(tls):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    certs = tls.certs
    mtls = create_ssl_context(cafile=str(certs["ca"].pem), certfile=str(certs["alice"].cert),
                              keyfile=str(certs["alice"].key))
    server_only = create_ssl_context(cafile=str(certs["ca"].pem))

    async def run(conf) -> list[bytes]:
        topic = new_topic()
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(10):
                await p.send_and_wait(topic, f"a{i}".encode(), partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**conf, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(topic, 0)])
            got, deadline = [], time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                for batch in (await c.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in batch)
            return got
        finally:
            await c.stop()

    for conf in (dict(bootstrap_servers=tls.ssl_bootstrap, security_protocol="SSL", ssl_context=mtls),
                 dict(bootstrap_servers=tls.sasl_ssl_bootstrap, security_protocol="SASL_SSL",
                      ssl_context=server_only, sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="sue",
                      sasl_plain_password="sue-pw")):
        assert asyncio.run(run(conf)) == [f"a{i}".encode() for i in range(10)], conf["security_protocol"]


def test_kcat_over_mtls(tls, kcat_bin):
    c = tls.certs
    x = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={c['ca'].pem}", "-X",
         f"ssl.certificate.location={c['alice'].cert}", "-X", f"ssl.key.location={c['alice'].key}"]
    topic = new_topic()
    out = subprocess.run([kcat_bin, "-b", tls.ssl_bootstrap, *x, "-P", "-t", topic, "-p", "0"],
                         input=b"t0\nt1\nt2\n", capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    out = subprocess.run([kcat_bin, "-b", tls.ssl_bootstrap, *x, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                          "-c", "3", "-e"], capture_output=True, timeout=60)
    assert out.stdout.decode().split() == ["t0", "t1", "t2"], out.stderr.decode()[-2000:]


@pytest.mark.parametrize("mode", ["mtls", "sasl_ssl"])
def test_kafkajs_over_mtls_and_sasl_ssl(tls, kafkajs_dir, mode):
    c = tls.certs
    job = {"topic": new_topic(), "values": [f"j{i}" for i in range(5)]}
    if mode == "mtls":
        job.update(brokers=[tls.ssl_bootstrap], ssl={"ca": str(c["ca"].pem), "cert": str(c["alice"].cert),
                                                      "key": str(c["alice"].key)})
    else:
        job.update(brokers=[tls.sasl_ssl_bootstrap], ssl={"ca": str(c["ca"].pem)}, mechanism="scram-sha-512",
                   username="sue", password="sue-pw")
    out = subprocess.run(["node", str(kafkajs_dir / "sasl.js")], input=json.dumps(job).encode(),
                         capture_output=True, timeout=90, cwd=kafkajs_dir)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-4000:]
    assert json.loads(out.stdout) == {"read": job["values"]}


def test_a_client_of_a_foreign_ca_and_one_without_a_certificate_are_refused(tls):
    from confluent_kafka import KafkaError, Producer

    for conf in (ssl_conf(tls, "mallory"),
                 {k: v for k, v in ssl_conf(tls).items() if k not in ("ssl.certificate.location", "ssl.key.location")}):
        errors = []
        p = Producer({**conf, "error_cb": errors.append})
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            p.poll(0.2)
        assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), \
            errors
    # a client that does not trust the broker's CA refuses the broker
    ctx = ssl.create_default_context(cafile=str(tls.certs["mallory"].cert))
    with socket.create_connection(("127.0.0.1", tls.broker.bound_port("SSL")), timeout=5) as s:
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(s, server_hostname="127.0.0.1")
    assert round_trip(ssl_conf(tls), new_topic(), 3) == [b"v0", b"v1", b"v2"]


def failed_authentications(b, listener: str) -> float:
    return b.broker.metrics.auth_failures.labels(listener)._value.get()


def test_plaintext_on_a_tls_port_and_half_a_client_hello_are_closed_and_counted(tls):
    """Neither reaches the connection's code (asyncio hears of a TLS connection after its handshake): each is
    closed, counted as a failed authentication as Kafka counts a failed SSL handshake, and logged."""
    port = tls.broker.bound_port("SSL")
    before = failed_authentications(tls, "SSL")
    quotas = tls.broker.server.quotas.plane("SSL")
    source = ("127.0.0.5", 0)  # this test's own address, counted apart from the other tests' clients
    # a port probe: gone before any handshake
    socket.create_connection(("127.0.0.1", port), timeout=10, source_address=source).close()
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=source) as s:  # a request, in clear
        s.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00")
        assert s.recv(1024) == b""
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=source) as s:  # half a ClientHello
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        started = time.monotonic()
        assert s.recv(1024) == b""
        assert time.monotonic() - started < 9
    wait_until(lambda: failed_authentications(tls, "SSL") >= before + 2, 10, 0.05, "both counted")
    # none of the three is left in the connection quotas' count; the probe is no failed authentication (Kafka's
    # EOFException during a handshake is not an SslAuthenticationException)
    wait_until(lambda: quotas.get("127.0.0.5") == 0, 10, 0.05, "the connection count back")
    assert failed_authentications(tls, "SSL") == before + 2
    assert round_trip(sasl_ssl_conf(tls), new_topic(), 3) == [b"v0", b"v1", b"v2"]


def test_sighup_reloads_the_stores_new_connections_get_the_new_ca_and_a_dropped_one_is_refused(tmp_path):
    """A node whose keystore and truststore files are replaced (a new CA) and that gets SIGHUP: new connections are
    served with the new certificate, a client certificate of the dropped CA is refused, an open connection keeps
    working."""
    import shutil
    import signal

    from broker.testing.embedded_cluster import reserve_ports
    from tests.harness import BrokerProcess, wait_until

    old_ca, new_ca = CertificateAuthority(tmp_path / "old"), CertificateAuthority(tmp_path / "new", "new-ca")
    live = tmp_path / "live"
    live.mkdir()
    old_server, old_client = old_ca.issue("broker", server=True), old_ca.issue("Alice")
    new_server, new_client = new_ca.issue("broker", server=True), new_ca.issue("Bob")
    shutil.copy(old_server.pem, live / "server.pem")
    shutil.copy(old_ca.pem, live / "ca.pem")
    plain, tls_port = reserve_ports(2)
    node = BrokerProcess(tmp_path / "data", overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(live / "server.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(live / "ca.pem"),
        "ssl.client.auth": "required"})
    node.start()
    try:
        def conf(ca, client) -> dict:
            return {"bootstrap.servers": f"127.0.0.1:{tls_port}", "security.protocol": "SSL",
                    "ssl.ca.location": str(ca.pem), "ssl.certificate.location": str(client.cert),
                    "ssl.key.location": str(client.key)}

        assert round_trip(conf(old_ca, old_client), "before", 3) == [b"v0", b"v1", b"v2"]
        open_conn = ssl.create_default_context(cafile=str(old_ca.pem))
        open_conn.load_cert_chain(str(old_client.cert), str(old_client.key))
        kept = open_conn.wrap_socket(socket.create_connection(("127.0.0.1", tls_port), timeout=10),
                                     server_hostname="127.0.0.1")
        shutil.copy(new_server.pem, live / "server.pem")
        shutil.copy(new_ca.pem, live / "ca.pem")
        seen = node.log_lines("TLS stores reloaded")
        node.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: node.log_lines("TLS stores reloaded") > seen, 20, 0.1, "the reload")
        assert round_trip(conf(new_ca, new_client), "after", 3) == [b"v0", b"v1", b"v2"]
        refused = ssl.create_default_context(cafile=str(new_ca.pem))
        refused.load_cert_chain(str(old_client.cert), str(old_client.key))  # a certificate of the dropped CA
        with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as s:
            try:  # TLS 1.3: the client may finish its side first; the broker then closes without an answer
                tls_sock = refused.wrap_socket(s, server_hostname="127.0.0.1")
                tls_sock.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00")
                answer = tls_sock.recv(1)
            except (ssl.SSLError, OSError):
                answer = b""
            assert answer == b""
        # the connection opened before the reload still answers (ApiVersions v0)
        kept.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00")
        assert len(kept.recv(4)) == 4
        kept.close()
    finally:
        node.kill()
        node.close()


API_VERSIONS_V0 = b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00"


def answers(port: int, ca, client) -> bool:
    """Whether a TLS client trusting only ``ca`` and showing ``client``'s certificate gets an ApiVersions answer (a
    refused certificate: TLS 1.3 may let the client finish its side; the broker then closes without an answer)."""
    context = ssl.create_default_context(cafile=str(ca.pem))
    context.load_cert_chain(str(client.cert), str(client.key))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            tls_sock = context.wrap_socket(s, server_hostname="127.0.0.1")
            tls_sock.sendall(API_VERSIONS_V0)
            return len(tls_sock.recv(4)) == 4
        except (ssl.SSLError, OSError):
            return False


def test_incremental_alter_configs_of_the_listener_stores_reloads_them_and_a_restart_keeps_them(tmp_path):
    """IncrementalAlterConfigs of ``listener.name.ssl.ssl.keystore.location`` / truststore settings on the broker's
    resource (Kafka's per-broker dynamic config): a bad keystore and a certificate of another subject are refused
    and change nothing; new stores at new paths serve new connections at once (a client of the new CA gets in, one
    of the dropped CA is refused), an open connection keeps working, the password is described as sensitive, the
    same path re-submitted after its file changed is read again, and a restarted node serves the stores last set."""
    import shutil

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType,
    )

    from broker.testing.embedded_cluster import reserve_ports
    from protocol.generated.messages import IncrementalAlterConfigsRequest
    from protocol.generated.messages import incremental_alter_configs_request as iac
    from tests.harness import BrokerProcess, wait_until
    from tests.kafka_wire import KafkaWire

    old_ca, new_ca = CertificateAuthority(tmp_path / "old"), CertificateAuthority(tmp_path / "new", "new-ca")
    third_ca = CertificateAuthority(tmp_path / "third", "third-ca")
    old_server, old_client = old_ca.issue("broker", server=True), old_ca.issue("Alice")
    new_server, new_client = new_ca.issue("broker", server=True), new_ca.issue("Bob")
    third_client, impostor = third_ca.issue("Carol"), new_ca.issue("not-the-broker", server=True)
    stores = tmp_path / "stores-v2"  # the new stores at new paths, as an operator rotates them
    stores.mkdir()
    shutil.copy(new_server.p12, stores / "keystore.p12")
    shutil.copy(new_ca.p12, stores / "truststore.p12")
    plain, tls_port = reserve_ports(2)
    node = BrokerProcess(tmp_path / "data", overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
        "listener.name.ssl.ssl.keystore.type": "PEM", "listener.name.ssl.ssl.keystore.location": str(old_server.pem),
        "listener.name.ssl.ssl.truststore.type": "PEM", "listener.name.ssl.ssl.truststore.location": str(old_ca.pem),
        "ssl.client.auth": "required"})
    node.start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
    prefix = "listener.name.ssl."

    def alter(settings: dict, name: str = "1") -> None:
        resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
            ConfigEntry(prefix + k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    def refused(settings: dict, name: str = "1") -> tuple[str, str]:
        with pytest.raises(KafkaException) as e:
            alter(settings, name)
        return e.value.args[0].name(), e.value.args[0].str()

    def reloads() -> int:
        return node.log_lines(r"TLS stores reloaded for SSL \(dynamic broker config\)")

    new_stores = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(stores / "keystore.p12"),
                  "ssl.keystore.password": STORE_PASSWORD, "ssl.truststore.type": "PKCS12",
                  "ssl.truststore.location": str(stores / "truststore.p12"), "ssl.truststore.password": STORE_PASSWORD}
    try:
        assert answers(tls_port, old_ca, old_client)
        kept = ssl.create_default_context(cafile=str(old_ca.pem))
        kept.load_cert_chain(str(old_client.cert), str(old_client.key))
        kept = kept.wrap_socket(socket.create_connection(("127.0.0.1", tls_port), timeout=10),
                                server_hostname="127.0.0.1")
        # refused, changing nothing: a keystore that is not there, one of another subject, the cluster-default
        # level, a bare (unprefixed) store key, another broker's id, a key that cannot be dynamic here
        assert refused({**new_stores, "ssl.keystore.location": str(stores / "missing.p12")}) == \
            ("INVALID_REQUEST", "Invalid dynamic configuration")
        assert refused({"ssl.keystore.location": str(impostor.pem)}) == \
            ("INVALID_REQUEST", "Invalid dynamic configuration")
        assert node.log_lines("Keystore DistinguishedName does not match") == 1
        # librdkafka sends a BROKER resource to that broker, and none without a name: the raw requests
        with KafkaWire(plain) as wire:
            answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
                resource_type=4, resource_name=name, configs=[iac.AlterableConfig(
                    name=prefix + k, config_operation=0, value=v) for k, v in new_stores.items()])
                for name in ("", "2")]))
        assert [(r.error_code, r.error_message) for r in answer.responses] == [  # INVALID_REQUEST
            (42, "Cannot update these configs at default cluster level, broker id must be specified: Set(" +
             ", ".join(sorted(prefix + k for k in new_stores)) + ")"),
            (42, "Unexpected broker id, expected 1, but received 2")]
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
            "ssl.keystore.location", "x", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException, match="only per-listener using the listener prefix"):
            admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        assert refused({"num.network.threads": "10"}) == ("INVALID_CONFIG", "Cannot update these configs "
                                                          "dynamically: Set(listener.name.ssl.num.network.threads)")
        assert reloads() == 0 and answers(tls_port, old_ca, old_client)

        alter(new_stores)
        wait_until(lambda: reloads() == 1, 20, 0.1, "the reload")
        assert answers(tls_port, new_ca, new_client)  # the new keystore (a client trusting only the new CA)
        assert not answers(tls_port, new_ca, old_client)  # the old CA is no longer trusted
        assert not answers(tls_port, old_ca, old_client)
        kept.sendall(API_VERSIONS_V0)  # the connection opened before the change still answers
        assert len(kept.recv(4)) == 4
        kept.close()
        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
        entries = next(iter(described.values())).result(timeout=30)
        location, password = entries[prefix + "ssl.keystore.location"], entries[prefix + "ssl.keystore.password"]
        dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert (location.value, location.source, location.is_read_only) == (str(stores / "keystore.p12"), dynamic,
                                                                            False)
        assert (password.value, password.is_sensitive, password.source) == (None, True, dynamic)

        # the same path again, its file now a truststore of another CA: read again (KAFKA-14136)
        shutil.copy(third_ca.p12, stores / "truststore.p12")
        alter({"ssl.truststore.location": str(stores / "truststore.p12")})
        wait_until(lambda: reloads() == 2, 20, 0.1, "the reload of the re-submitted truststore")
        assert answers(tls_port, new_ca, third_client) and not answers(tls_port, new_ca, new_client)

        node.terminate()
        node.start()
        assert answers(tls_port, new_ca, third_client)  # the dynamic stores, not the static ones
        assert not answers(tls_port, old_ca, old_client)
        assert round_trip({"bootstrap.servers": f"127.0.0.1:{tls_port}", "security.protocol": "SSL",
                           "ssl.ca.location": str(new_ca.pem), "ssl.certificate.location": str(third_client.cert),
                           "ssl.key.location": str(third_client.key)}, "after-restart", 3) == [b"v0", b"v1", b"v2"]
    finally:
        node.kill()
        node.close()


def test_the_inter_broker_listener_rotates_its_ca_through_a_truststore_of_both_and_the_nodes_links_follow(tmp_path):
    """On the inter-broker listener, straight to a new CA is refused (peers on the old stores could no longer shake
    hands: SslEngineValidator); a truststore of both CAs, then the new keystore, are accepted, and this node's own
    links to that listener (replication, as peers' followers) use them too, also after a restart."""
    from protocol.generated.messages import AlterConfigsRequest, IncrementalAlterConfigsRequest
    from protocol.generated.messages import alter_configs_request as ac
    from protocol.generated.messages import incremental_alter_configs_request as iac
    from tests.kafka_wire import KafkaWire

    old_ca, new_ca = CertificateAuthority(tmp_path / "old"), CertificateAuthority(tmp_path / "new", "new-ca")
    both = tmp_path / "both.pem"
    both.write_bytes(old_ca.pem.read_bytes() + new_ca.pem.read_bytes())
    old_key, new_key = old_ca.issue("broker", server=True), new_ca.issue("broker", server=True)
    prefix = "listener.name.ssl."
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL",
                 "ssl.endpoint.identification.algorithm": "",
                 f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(old_key.pem),
                 f"{prefix}ssl.truststore.type": "PEM", f"{prefix}ssl.truststore.location": str(old_ca.pem),
                 f"{prefix}ssl.client.auth": "required"}
    with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides) as b:
        links = b.broker.links

        def alter(settings: dict) -> tuple[int, str | None]:
            with KafkaWire(b.broker.bound_port("PLAINTEXT")) as wire:
                r = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
                    resource_type=4, resource_name="1", configs=[iac.AlterableConfig(
                        name=prefix + k, config_operation=0, value=str(v)) for k, v in settings.items()])]))
            return r.responses[0].error_code, r.responses[0].error_message

        def trusted() -> int:
            return len(links.security.ssl.get_ca_certs())

        assert trusted() == 1
        assert alter({"ssl.keystore.location": new_key.pem, "ssl.truststore.location": new_ca.pem}) == \
            (42, "Invalid dynamic configuration")
        # the legacy AlterConfigs is checked the same way (validate_only: nothing changes)
        with KafkaWire(b.broker.bound_port("PLAINTEXT")) as wire:
            legacy = [wire.call(33, 2, AlterConfigsRequest(validate_only=True, resources=[ac.AlterConfigsResource(
                resource_type=4, resource_name="1", configs=[ac.AlterableConfig(
                    name=prefix + "ssl.truststore.location", value=str(path))])])).responses[0].error_code
                for path in (tmp_path / "missing.pem", both)]
        assert legacy == [42, 0] and trusted() == 1
        assert alter({"ssl.truststore.location": both}) == (0, None)
        wait_until(lambda: trusted() == 2, 20, 0.05, "the links' new truststore")
        assert answers(b.broker.bound_port("SSL"), old_ca, new_ca.issue("Bob"))  # the new CA's clients get in
        assert alter({"ssl.keystore.location": new_key.pem}) == (0, None)
        wait_until(lambda: answers(b.broker.bound_port("SSL"), new_ca, old_ca.issue("Alice")), 20, 0.1,
                   "the new keystore")
    # restarted: the stores last set, though they would not shake hands with the static ones (old CA only)
    with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides) as b:
        assert answers(b.broker.bound_port("SSL"), new_ca, old_ca.issue("Alice"))
        assert len(b.broker.links.security.ssl.get_ca_certs()) == 2
