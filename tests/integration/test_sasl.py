"""SASL_PLAINTEXT with real clients (issue 29): confluent-kafka, kafka-python, aiokafka, kcat and KafkaJS produce
and consume with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 on a listener beside a PLAINTEXT one; SCRAM users are made
with AlterUserScramCredentials (forwarded to the controller, committed as UserScramCredentialRecords) and listed by
DescribeUserScramCredentials; a wrong password and an unknown user give each client its authentication error;
librdkafka re-authenticates in place under ``connections.max.reauth.ms``; bad input before authentication closes
the connection and harms no one else."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import subprocess
import time
import uuid

import pytest

from broker import EmbeddedBroker
from tests.kafka_wire import KafkaWire

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PASSWORD = {"PLAIN": "alice-secret", "SCRAM-SHA-256": "scram256-secret", "SCRAM-SHA-512": "scram512-secret"}
USER = {"PLAIN": "alice", "SCRAM-SHA-256": "sam", "SCRAM-SHA-512": "sue"}
REAUTH_MS = 3000


def sasl_overrides(reauth_ms: int = 0) -> dict:
    prefix = "listener.name.sasl_plaintext."
    values = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              f"{prefix}sasl.enabled.mechanisms": ",".join(MECHANISMS),
              f"{prefix}plain.sasl.jaas.config": PLAIN_JAAS,
              f"{prefix}scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
              f"{prefix}scram-sha-512.sasl.jaas.config": SCRAM_JAAS}
    if reauth_ms:
        values["connections.max.reauth.ms"] = reauth_ms
    return values


def create_scram_users(plaintext_bootstrap: str, users: dict[str, tuple[str, str]]) -> None:
    """users: name -> (mechanism, password), through confluent-kafka's AdminClient (KIP-554)."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": plaintext_bootstrap})
    upserts = [UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism[m.replace("-", "_")], 8192),
                                            password.encode())
               for name, (m, password) in users.items()]
    for name, fut in admin.alter_user_scram_credentials(upserts).items():
        fut.result(20)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("sasl") / "d", overrides=sasl_overrides()) as b:
        plaintext = f"127.0.0.1:{b.broker.bound_port('PLAINTEXT')}"
        create_scram_users(plaintext, {USER[m]: (m, PASSWORD[m]) for m in MECHANISMS[1:]})
        b.sasl_bootstrap = f"127.0.0.1:{b.broker.bound_port('SASL_PLAINTEXT')}"
        b.plaintext_bootstrap = plaintext
        yield b


def new_topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


def confluent_conf(b, mechanism: str, user: str | None = None, password: str | None = None) -> dict:
    return {"bootstrap.servers": b.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user or USER[mechanism],
            "sasl.password": password or PASSWORD[mechanism]}


def confluent_round_trip(conf: dict, topic: str, n: int = 20) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer(conf)
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes_over_each_mechanism(sasl_broker, mechanism):
    assert confluent_round_trip(confluent_conf(sasl_broker, mechanism), new_topic()) == \
        [f"v{i}".encode() for i in range(20)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes_over_each_mechanism(sasl_broker, mechanism):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = new_topic()
    conf = dict(bootstrap_servers=sasl_broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username=USER[mechanism], sasl_plain_password=PASSWORD[mechanism])
    p = KafkaProducer(**conf)
    for i in range(10):
        p.send(topic, f"k{i}".encode(), partition=0)
    p.flush(30)
    p.close()
    c = KafkaConsumer(**conf, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    c.assign([TopicPartition(topic, 0)])
    got = [m.value for _, m in zip(range(10), c)]
    c.close()
    assert got == [f"k{i}".encode() for i in range(10)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_produces_and_consumes_over_each_mechanism(sasl_broker, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = new_topic()
    conf = dict(bootstrap_servers=sasl_broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username=USER[mechanism], sasl_plain_password=PASSWORD[mechanism])

    async def run() -> list[bytes]:
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
            got = []
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                for batch in (await c.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in batch)
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(10)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kcat_produces_and_consumes(sasl_broker, kcat_bin, mechanism):
    topic = new_topic()
    auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}",
            "-X", f"sasl.username={USER[mechanism]}", "-X", f"sasl.password={PASSWORD[mechanism]}"]
    values = "\n".join(f"c{i}" for i in range(10)) + "\n"
    out = subprocess.run([kcat_bin, "-b", sasl_broker.sasl_bootstrap, *auth, "-P", "-t", topic, "-p", "0"],
                         input=values.encode(), capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    out = subprocess.run([kcat_bin, "-b", sasl_broker.sasl_bootstrap, *auth, "-C", "-t", topic, "-p", "0",
                          "-o", "beginning", "-c", "10", "-e"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert out.stdout.decode().split() == [f"c{i}" for i in range(10)]


@pytest.mark.parametrize("mechanism", ["plain", "scram-sha-256", "scram-sha-512"])
def test_kafkajs_produces_and_consumes_over_each_mechanism(sasl_broker, kafkajs_dir, mechanism):
    upper = mechanism.upper()
    job = {"brokers": [sasl_broker.sasl_bootstrap], "topic": new_topic(), "mechanism": mechanism,
           "username": USER[upper], "password": PASSWORD[upper], "values": [f"j{i}" for i in range(10)]}
    out = subprocess.run(["node", str(kafkajs_dir / "sasl.js")], input=json.dumps(job).encode(),
                         capture_output=True, timeout=90, cwd=kafkajs_dir)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-4000:]
    assert json.loads(out.stdout) == {"read": job["values"]}


@pytest.mark.parametrize("mechanism, user, password", [
    ("SCRAM-SHA-256", "sam", "wrong"), ("SCRAM-SHA-256", "nobody", "x"), ("PLAIN", "alice", "wrong"),
    ("PLAIN", "nobody", "x")])
def test_a_wrong_password_and_an_unknown_user_give_each_client_its_authentication_error(
        sasl_broker, kafkajs_dir, caplog, mechanism, user, password):
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError, SaslAuthenticationFailedError

    errors = []
    producer = Producer({**confluent_conf(sasl_broker, mechanism, user, password), "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()
    del producer  # destroyed now: it would go on retrying after the broker stops
    # kafka-python logs each bootstrap attempt's SaslAuthenticationFailedError, then gives up bootstrapping
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaAdminClient(bootstrap_servers=sasl_broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                         bootstrap_timeout_ms=3000)
    assert SaslAuthenticationFailedError.__name__ in caplog.text
    job = {"brokers": [sasl_broker.sasl_bootstrap], "topic": "unused", "mechanism": mechanism.lower(),
           "username": user, "password": password, "values": [], "retries": 0}
    out = subprocess.run(["node", str(kafkajs_dir / "sasl.js")], input=json.dumps(job).encode(),
                         capture_output=True, timeout=60, cwd=kafkajs_dir)
    result = json.loads(out.stdout)
    assert result["error"] == "KafkaJSSASLAuthenticationError", result


def test_describe_user_scram_credentials_lists_mechanisms_and_iterations(sasl_broker):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": sasl_broker.plaintext_bootstrap})
    described = admin.describe_user_scram_credentials(["sam", "sue"]).result(20) \
        if hasattr(admin.describe_user_scram_credentials(["sam"]), "result") else \
        {u: f.result(20) for u, f in admin.describe_user_scram_credentials(["sam", "sue"]).items()}
    infos = {u: [(i.mechanism.name, i.iterations) for i in d.scram_credential_infos] for u, d in described.items()}
    assert infos == {"sam": [("SCRAM_SHA_256", 8192)], "sue": [("SCRAM_SHA_512", 8192)]}


def test_librdkafka_reauthenticates_in_place_and_keeps_consuming(tmp_path):
    """connections.max.reauth.ms 3000: a librdkafka producer and consumer working for 8 s re-authenticate
    (KIP-368) on the same connections; nothing they sent fails and no connection is closed for an expired
    session."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=sasl_overrides(REAUTH_MS)) as b:
        create_scram_users(f"127.0.0.1:{b.broker.bound_port('PLAINTEXT')}", {"sam": ("SCRAM-SHA-256", "pw")})
        conf = {"bootstrap.servers": f"127.0.0.1:{b.broker.bound_port('SASL_PLAINTEXT')}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "sam",
                "sasl.password": "pw"}
        topic = new_topic()
        p = Producer(conf)
        c = Consumer({**conf, "group.id": "reauth", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        sent = got = 0
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            p.produce(topic, f"r{sent}".encode(), partition=0)
            sent += 1
            p.poll(0)
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got += 1
        assert p.flush(20) == 0
        while got < sent:
            m = c.poll(1.0)
            assert m is not None, f"read {got} of {sent}"
            if m.error() is None:
                got += 1
        c.close()
        metrics = b.broker.metrics
        reauths = metrics.reauth_successes.labels("SASL_PLAINTEXT")._value.get()
        expired = metrics.expired_killed.labels("SASL_PLAINTEXT")._value.get()
        assert reauths >= 2 and expired == 0, (reauths, expired)


def _raw(port: int, payload: bytes) -> bytes:
    """Send one frame, return what comes back before the broker closes (b"" when it just closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data
                data += chunk
        except (socket.timeout, ConnectionResetError):
            return data


def test_bad_input_before_authentication_closes_that_connection_only(sasl_broker):
    from protocol.generated.messages import MetadataRequest

    port = sasl_broker.broker.bound_port("SASL_PLAINTEXT")
    with KafkaWire(port) as w:  # Metadata before SaslHandshake: closed, nothing answered
        w.send(3, 12, MetadataRequest(topics=None))
        assert w.recv_frame() is None
    # a 100 MB frame before authentication: over sasl.server.max.receive.size, closed before it is read
    assert _raw(port, struct.pack(">i", 100 * 1024 * 1024) + b"\0" * 1024) == b""
    # a GSSAPI token (not a Kafka request) as the first frame
    assert _raw(port, struct.pack(">i", 12) + b"\x60\x82\x01\x00garbage!") == b""
    # the other clients are served meanwhile
    assert confluent_round_trip(confluent_conf(sasl_broker, "SCRAM-SHA-256"), new_topic(), 3) == [b"v0", b"v1", b"v2"]


def test_a_thousand_connections_that_never_authenticate_are_closed_at_the_idle_timeout(tmp_path):
    """connections.max.idle.ms 1500: 1,000 connections that send nothing (and 100 that stop after SaslHandshake)
    are closed by the idle sweeper; the broker's RSS stays bounded and a real client is served meanwhile."""
    import resource

    overrides = {**sasl_overrides(), "connections.max.idle.ms": 1500}
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=overrides) as b:
        port = b.broker.bound_port("SASL_PLAINTEXT")
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(1000)]
        from protocol.generated.messages import SaslHandshakeRequest

        half = []
        for _ in range(100):
            w = KafkaWire(port)
            w.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            half.append(w)
        b.sasl_bootstrap = f"127.0.0.1:{port}"
        assert confluent_round_trip(confluent_conf(b, "PLAIN"), new_topic(), 3) == [b"v0", b"v1", b"v2"]
        deadline = time.monotonic() + 30
        for s in silent:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            assert s.recv(1) == b""  # closed by the broker
            s.close()
        for w in half:
            assert w.recv_frame() is None
            w.close()
        assert not [c for c in b.broker.server.connections if c.listener == "SASL_PLAINTEXT"]
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
        assert grown_mb < 200, grown_mb  # a connection costs its buffers, not a frame's declared size


def test_delegation_token_apis_answer_as_kafka_without_a_token_secret(sasl_broker):
    """Tokens are not built: on an authenticated SASL connection DELEGATION_TOKEN_AUTH_DISABLED, on PLAINTEXT
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (Kafka takes token requests only on authenticated channels)."""
    from protocol.errors import ErrorCode
    from protocol.generated.messages import (
        CreateDelegationTokenRequest, DescribeDelegationTokenRequest, ExpireDelegationTokenRequest,
        RenewDelegationTokenRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
    )

    calls = [(38, 3, CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1)),
             (39, 2, RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1000)),
             (40, 2, ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=1000)),
             (41, 3, DescribeDelegationTokenRequest(owners=None))]
    with KafkaWire(sasl_broker.broker.bound_port("SASL_PLAINTEXT")) as w:
        assert w.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        assert w.call(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret")).error_code == 0
        assert [w.call(k, v, body).error_code for k, v, body in calls] == \
            [ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED] * 4
    with KafkaWire(sasl_broker.broker.bound_port("PLAINTEXT")) as w:
        assert [w.call(k, v, body).error_code for k, v, body in calls] == \
            [ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED] * 4
