"""Real clients on a secured three-node cluster (issue 29): confluent-kafka, kafka-python, aiokafka, kcat and
KafkaJS produce (acks=all), consume and make an admin call over SSL with a client certificate, SASL_PLAINTEXT and
SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, on three nodes whose replication runs over SASL_SSL/SCRAM and
whose quorum runs over mTLS; all five keep producing through a kill -9 of a partition leader and every acknowledged
record is read back; a wrong password, an unknown user and a foreign CA each give each client its own error; on a
listener with ``connections.max.reauth.ms=3000`` librdkafka re-authenticates in place (KIP-368), a SaslAuthenticate
v0 client (kafka-python speaking Kafka 2.0) is disconnected at its session's end and reconnects, and a client whose
credentials change to another user is refused on re-authentication. No secret (the users' and nodes' passwords,
the listeners' JAAS configs, a failed login's wrong password) is in DescribeConfigs, a node's log, stdout, argv,
environment or metrics.

One cluster for the module: its client listeners sit beside the harness' own (EmbeddedCluster(security=...):
``PLAINTEXT`` is SASL_SSL/SCRAM-SHA-512, the nodes' inter-broker listener; ``CONTROLLER`` mTLS):
CLIENT_SSL (SSL, ssl.client.auth=required), CLIENT_SASL_PLAINTEXT, CLIENT_SASL_SSL and REAUTH (SASL_SSL with
connections.max.reauth.ms=3000), each advertised. Re-authentication runs 8 s here, 20 s under ``ODRADEK_SOAK=1``.
The kill -9 comes last: the killed node is not restarted."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import threading
import time
import uuid

import pytest

from broker.testing.certificates import CertificateAuthority
from broker.testing.embedded_cluster import EmbeddedCluster, wait_until
from tests.harness import MetricsPorts, scrape

SOAK = os.environ.get("ODRADEK_SOAK") == "1"
REAUTH_SECONDS = 20 if SOAK else 8
REAUTH_MS = 3000
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USERS = ("app", "other", "legacy")
# (security protocol, SASL mechanism): every cell a client is shown in
CELLS = [("SSL", None)] + [(p, m) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in MECHANISMS]
CELL_IDS = [p if m is None else f"{p}-{m}" for p, m in CELLS]
LISTENER = {"SSL": "CLIENT_SSL", "SASL_PLAINTEXT": "CLIENT_SASL_PLAINTEXT", "SASL_SSL": "CLIENT_SASL_SSL"}
N = 10  # records per cell
log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    d = tmp_path_factory.mktemp("secured")
    c = EmbeddedCluster(brokers=3, data_dir=d / "cluster", security="SASL_SSL", users=USERS,
                        overrides={"min.insync.replicas": 2, "default.replication.factor": 3})
    passwords = c.security.passwords
    plain = f"{PLAIN_MODULE} required " + " ".join(f'user_{u}="{passwords[u]}"' for u in USERS) + ";"
    sasl = {"sasl.enabled.mechanisms": ",".join(MECHANISMS), "plain.sasl.jaas.config": plain,
            "scram-sha-256.sasl.jaas.config": SCRAM_JAAS, "scram-sha-512.sasl.jaas.config": SCRAM_JAAS}
    c.add_listener("CLIENT_SSL", "SSL", {"ssl.client.auth": "required"})
    c.add_listener("CLIENT_SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl)
    c.add_listener("CLIENT_SASL_SSL", "SASL_SSL", sasl)
    c.add_listener("REAUTH", "SASL_SSL", {**sasl, "connections.max.reauth.ms": REAUTH_MS})
    c.metrics = MetricsPorts(c.nodes)
    ca = c.security.ca
    foreign = CertificateAuthority(d / "foreign", "foreign-ca")
    c.certs = {"ca": ca.pem, "app": ca.issue("app"), "mallory": foreign.issue("mallory"), "foreign-ca": foreign.pem}
    with c:
        yield c


def password(c, user: str) -> str:
    return c.security.passwords.get(user, "no-such-password")


def new_topic(client: str) -> str:
    return f"{client}-{uuid.uuid4().hex[:6]}"


# ---- each client's configuration for a cell -------------------------------------------------------------------

def librdkafka_conf(c, protocol: str, mechanism: str | None, user: str = "app", secret: str | None = None,
                    listener: str | None = None, cert: str = "app", ca: str = "ca") -> dict:
    conf = {"bootstrap.servers": c.listener_bootstrap(listener or LISTENER[protocol]), "security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(c.certs[ca])
    if protocol == "SSL":
        conf.update({"ssl.certificate.location": str(c.certs[cert].cert), "ssl.key.location": str(c.certs[cert].key)})
    else:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                     "sasl.password": secret if secret is not None else password(c, user)})
    return conf


def kafka_python_conf(c, protocol: str, mechanism: str | None, user: str = "app", secret: str | None = None,
                      listener: str | None = None, cert: str = "app", ca: str = "ca") -> dict:
    conf = dict(bootstrap_servers=c.listener_bootstrap(listener or LISTENER[protocol]).split(","),
                security_protocol=protocol)
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl_cafile"] = str(c.certs[ca])
    if protocol == "SSL":
        conf.update(ssl_certfile=str(c.certs[cert].cert), ssl_keyfile=str(c.certs[cert].key))
    else:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=secret if secret is not None else password(c, user))
    return conf


def aiokafka_conf(c, protocol: str, mechanism: str | None, user: str = "app", secret: str | None = None,
                  cert: str = "app", ca: str = "ca") -> dict:
    from aiokafka.helpers import create_ssl_context

    conf = dict(bootstrap_servers=c.listener_bootstrap(LISTENER[protocol]).split(","), security_protocol=protocol)
    if protocol == "SSL":
        conf["ssl_context"] = create_ssl_context(cafile=str(c.certs[ca]), certfile=str(c.certs[cert].cert),
                                                 keyfile=str(c.certs[cert].key))
    elif protocol == "SASL_SSL":
        conf["ssl_context"] = create_ssl_context(cafile=str(c.certs[ca]))
    if protocol != "SSL":
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=secret if secret is not None else password(c, user))
    return conf


def kafkajs_connection(c, protocol: str, mechanism: str | None, user: str = "app", secret: str | None = None,
                       cert: str = "app", ca: str = "ca") -> dict:
    conn: dict = {"brokers": c.listener_bootstrap(LISTENER[protocol]).split(",")}
    if protocol in ("SSL", "SASL_SSL"):
        conn["ssl"] = {"ca": str(c.certs[ca])}
    if protocol == "SSL":
        conn["ssl"].update(cert=str(c.certs[cert].cert), key=str(c.certs[cert].key))
    else:
        conn["sasl"] = {"mechanism": mechanism.lower(), "username": user,
                        "password": secret if secret is not None else password(c, user)}
    return conn


def kcat_args(conf: dict) -> list[str]:
    args = ["-b", conf["bootstrap.servers"]]
    for k, v in conf.items():
        if k != "bootstrap.servers":
            args += ["-X", f"{k}={v}"]
    return args


def values(prefix: str, n: int = N) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


# ---- every client in every cell: create the topic (admin), produce with acks=all, read back -------------------

@pytest.mark.parametrize("protocol, mechanism", CELLS, ids=CELL_IDS)
def test_confluent_kafka_in_each_cell(secured, protocol, mechanism):
    from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = librdkafka_conf(secured, protocol, mechanism)
    topic = new_topic("ck")
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    p = Producer({**conf, "acks": "all"})
    for v in values("c"):
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0
    consumer = Consumer({**conf, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(200):  # 0.2 s each: at most 40 s
        if len(got) == N:
            break
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    assert got == values("c")
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    assert len(described.partitions[0].replicas) == 3


@pytest.mark.parametrize("protocol, mechanism", CELLS, ids=CELL_IDS)
def test_kafka_python_in_each_cell(secured, protocol, mechanism):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    conf = kafka_python_conf(secured, protocol, mechanism)
    topic = new_topic("kp")
    admin = KafkaAdminClient(**conf)
    try:
        admin.create_topics([NewTopic(topic, 1, 3)])
        # created when the controller commits it; the broker asked learns of it a moment later
        wait_until(lambda: topic in admin.list_topics(), 20, 0.1, f"{topic} listed")
    finally:
        admin.close()
    p = KafkaProducer(**conf, acks="all")
    futures = [p.send(topic, v, partition=0) for v in values("k")]
    p.flush(30)
    assert all(f.get(1) is not None for f in futures)
    p.close()
    consumer = KafkaConsumer(**conf, auto_offset_reset="earliest", consumer_timeout_ms=20000)
    consumer.assign([TopicPartition(topic, 0)])
    got = [m.value for _, m in zip(range(N), consumer)]
    consumer.close()
    assert got == values("k")


@pytest.mark.parametrize("protocol, mechanism", CELLS, ids=CELL_IDS)
def test_aiokafka_in_each_cell(secured, protocol, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    conf = aiokafka_conf(secured, protocol, mechanism)
    topic = new_topic("ak")

    async def run() -> list[bytes]:
        admin = AIOKafkaAdminClient(**conf)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 1, 3)])
        finally:
            await admin.close()
        p = AIOKafkaProducer(**conf, acks="all")
        await p.start()
        try:
            for v in values("a"):
                await p.send_and_wait(topic, v, partition=0)
        finally:
            await p.stop()
        consumer = AIOKafkaConsumer(**conf, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            got: list[bytes] = []
            for _ in range(80):  # 0.5 s each: at most 40 s
                if len(got) >= N:
                    break
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in batch)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == values("a")


@pytest.mark.parametrize("protocol, mechanism", CELLS, ids=CELL_IDS)
def test_kcat_in_each_cell(secured, kcat_bin, protocol, mechanism):
    """kcat has no admin calls: its metadata listing (-L) is the one it makes; every broker is listed at its
    address on this cell's listener (advertised.listeners per listener). The topic is auto-created (RF 3)."""
    conf = librdkafka_conf(secured, protocol, mechanism)
    args = kcat_args(conf)
    topic = new_topic("kc")
    out = subprocess.run([kcat_bin, *args, "-P", "-t", topic, "-p", "0", "-X", "acks=all"],
                         input=b"\n".join(values("t")) + b"\n", capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    out = subprocess.run([kcat_bin, *args, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(N), "-e"],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert out.stdout.split() == values("t")
    out = subprocess.run([kcat_bin, *args, "-L", "-J", "-t", topic], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    listing = json.loads(out.stdout)
    assert sorted(b["name"] for b in listing["brokers"]) == sorted(conf["bootstrap.servers"].split(","))
    assert [len(p["replicas"]) for t in listing["topics"] for p in t["partitions"]] == [3]


def test_kafkajs_in_each_cell(secured, kafkajs_dir):
    """One node process for every cell: admin createTopics and fetchTopicOffsets, a producer with acks=-1 and a
    consumer in a group."""
    cells = {cid: kafkajs_connection(secured, p, m) for cid, (p, m) in zip(CELL_IDS, CELLS)}
    job = {"mode": "cells", "cells": cells, "topic": new_topic("js"), "values": [f"j{i}" for i in range(N)]}
    out = subprocess.run(["node", str(kafkajs_dir / "secure.js")], input=json.dumps(job).encode(),
                         capture_output=True, timeout=240, cwd=kafkajs_dir)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-4000:]
    result = json.loads(out.stdout)
    assert result == {cid: {"read": job["values"], "offsets": [{"partition": 0, "high": N}]} for cid in CELL_IDS}


# ---- a wrong password, an unknown user, a foreign CA: each client's own error ---------------------------------
# (the SASL cases on SASL_SSL; SASL_PLAINTEXT's are test_sasl.py's). "foreign-cert": a client certificate of a CA
# the brokers do not trust (the broker refuses it); "foreign-trust": a client trusting only that other CA (it
# refuses the brokers' certificate).
FAILURES = {"wrong-password": dict(protocol="SASL_SSL", mechanism="SCRAM-SHA-256", user="app", secret="wrong"),
            "unknown-user": dict(protocol="SASL_SSL", mechanism="PLAIN", user="nobody", secret="x"),
            "foreign-cert": dict(protocol="SSL", mechanism=None, cert="mallory"),
            "foreign-trust": dict(protocol="SASL_SSL", mechanism="SCRAM-SHA-512", ca="foreign-ca")}
# what the broker's refusal of a client certificate looks like to a client: the TLS alert Kafka sends is not
# sent by asyncio's and uvloop's TLS (cpython gh-98078), so the clients see the connection closed
CLOSED = ("unexpected eof", "closed", "disconnected", "alert")


def test_confluent_kafka_refused(secured):
    from confluent_kafka import KafkaError, Producer

    seen = {}
    for case, kw in FAILURES.items():
        errors: list = []
        p = Producer({**librdkafka_conf(secured, **kw), "error_cb": errors.append})
        for _ in range(50):  # 0.2 s each
            if errors:
                break
            p.poll(0.2)
        del p  # destroyed now: it would go on retrying
        seen[case] = errors[0] if errors else None
    assert seen["wrong-password"].code() == KafkaError._AUTHENTICATION, seen
    assert seen["unknown-user"].code() == KafkaError._AUTHENTICATION, seen
    assert "Authentication failed" in seen["unknown-user"].str()
    assert seen["foreign-cert"].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), seen
    # librdkafka reports the failed verification as _SSL or, from another code path, _TRANSPORT
    assert seen["foreign-trust"].code() in (KafkaError._SSL, KafkaError._TRANSPORT) and \
        "certificate verify failed" in seen["foreign-trust"].str(), seen


def test_kafka_python_refused(secured, caplog):
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError

    logs = {}
    for case, kw in FAILURES.items():
        caplog.clear()
        # kafka-python logs each bootstrap attempt's failure, then gives up bootstrapping
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
            KafkaAdminClient(**kafka_python_conf(secured, **kw), bootstrap_timeout_ms=1500)
        logs[case] = caplog.text
    assert "SaslAuthenticationFailedError" in logs["wrong-password"]
    assert "SaslAuthenticationFailedError" in logs["unknown-user"]
    assert any(s in logs["foreign-cert"] for s in CLOSED), logs["foreign-cert"]
    assert "CERTIFICATE_VERIFY_FAILED" in logs["foreign-trust"]


def test_aiokafka_refused(secured, caplog):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def start(conf) -> None:
        p = AIOKafkaProducer(**conf)
        try:
            await p.start()
        finally:
            await p.stop()

    logs = {}
    for case, kw in FAILURES.items():
        caplog.clear()
        # aiokafka logs each bootstrap server's failure, then raises "Unable to bootstrap"
        with caplog.at_level(logging.ERROR, logger="aiokafka"), pytest.raises(KafkaConnectionError):
            asyncio.run(start(aiokafka_conf(secured, **kw)))
        logs[case] = caplog.text
    assert "SaslAuthenticationFailed" in logs["wrong-password"]
    assert "SaslAuthenticationFailed" in logs["unknown-user"]
    assert any(s in logs["foreign-cert"] for s in CLOSED), logs["foreign-cert"]
    assert "CERTIFICATE_VERIFY_FAILED" in logs["foreign-trust"]


def test_kcat_refused(secured, kcat_bin):
    procs = {case: subprocess.Popen([kcat_bin, *kcat_args(librdkafka_conf(secured, **kw)), "-L", "-m", "3"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for case, kw in FAILURES.items()}
    out = {}
    for case, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        out[case] = (proc.returncode, err.decode(errors="replace"))
    assert all(rc != 0 for rc, _ in out.values()), out
    assert "SASL authentication error: Authentication failed" in out["wrong-password"][1]
    assert "SASL authentication error: Authentication failed" in out["unknown-user"][1]
    assert any(s in out["foreign-cert"][1] for s in CLOSED), out["foreign-cert"]
    assert "certificate could not be verified" in out["foreign-trust"][1]


def test_kafkajs_refused(secured, kafkajs_dir):
    results = {}
    for case, kw in FAILURES.items():
        conn = kafkajs_connection(secured, **kw)
        job = {"brokers": conn["brokers"], "ssl": conn.get("ssl"), "topic": "unused", "values": [], "retries": 0,
               **({"mechanism": conn["sasl"]["mechanism"], "username": conn["sasl"]["username"],
                   "password": conn["sasl"]["password"]} if "sasl" in conn else {})}
        out = subprocess.run(["node", str(kafkajs_dir / "sasl.js")], input=json.dumps(job).encode(),
                             capture_output=True, timeout=60, cwd=kafkajs_dir)
        results[case] = json.loads(out.stdout)
    assert results["wrong-password"]["error"] == "KafkaJSSASLAuthenticationError", results
    assert results["unknown-user"]["error"] == "KafkaJSSASLAuthenticationError", results
    assert any(s in results["foreign-cert"]["message"].lower() for s in CLOSED), results
    assert "unable to verify" in results["foreign-trust"]["message"], results


# ---- re-authentication (KIP-368) on the REAUTH listener: connections.max.reauth.ms=3000 -----------------------

def scrape_listener(c, listener: str) -> dict[str, float]:
    """The SocketServerMetrics counters of one listener, summed over the running nodes."""
    out: dict[str, float] = {}
    for i in c.nodes:
        if c.nodes[i].alive():
            for name, value in scrape(c.metrics[i]).items():
                if name.endswith(f'_total{{listener="{listener}"}}'):
                    key = name.split("{")[0].removeprefix("kafka_server_socketservermetrics_").removesuffix("_total")
                    out[key] = out.get(key, 0) + value
    return out


def test_reauthentication_in_place_a_v0_client_reconnecting_and_a_principal_change_refused(secured):
    """For REAUTH_SECONDS, at once on the REAUTH listener: a librdkafka producer and consumer (SCRAM-SHA-256)
    re-authenticate on their connections (no disconnect, KIP-368); kafka-python speaking SaslAuthenticate v0
    (api_version 2.0) cannot, so the brokers close each of its connections when its session ends and it
    reconnects; a librdkafka producer (PLAIN) whose credentials change to another user is refused on
    re-authentication ("Cannot change principals") and reconnects as that user. Every record is acknowledged and
    read back."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaProducer

    c = secured
    before = scrape_listener(c, "REAUTH")
    conf = librdkafka_conf(c, "SASL_SSL", "SCRAM-SHA-256", listener="REAUTH")
    topic = new_topic("reauth")
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    stats: dict[str, dict] = {}
    switch_errors: list = []
    in_place_errors: list = []

    def keep_stats(name):
        return lambda s: stats.__setitem__(name, json.loads(s))

    in_place = Producer({**conf, "acks": "all", "statistics.interval.ms": 500, "stats_cb": keep_stats("producer"),
                         "error_cb": in_place_errors.append})
    consumer = Consumer({**conf, "group.id": topic, "enable.auto.commit": False, "statistics.interval.ms": 500,
                         "stats_cb": keep_stats("consumer"), "error_cb": in_place_errors.append})
    consumer.assign([TopicPartition(topic, 0, 0)])
    switching = Producer({**librdkafka_conf(c, "SASL_SSL", "PLAIN", listener="REAUTH"), "acks": "all",
                          "error_cb": switch_errors.append})
    legacy = KafkaProducer(**kafka_python_conf(c, "SASL_SSL", "SCRAM-SHA-512", user="legacy", listener="REAUTH"),
                           acks="all", api_version=(2, 0, 0))  # SaslAuthenticate v0: no session lifetime
    acked: dict[str, list[bytes]] = {"in-place": [], "switching": [], "legacy": []}
    futures = []
    read: list[bytes] = []

    def on_delivery(name):
        return lambda err, msg: err is None and acked[name].append(msg.value())

    sent, switched = 0, False
    started = time.monotonic()
    while time.monotonic() - started < REAUTH_SECONDS:
        in_place.produce(topic, f"i{sent}".encode(), partition=0, on_delivery=on_delivery("in-place"))
        switching.produce(topic, f"s{sent}".encode(), partition=0, on_delivery=on_delivery("switching"))
        futures.append((f"l{sent}".encode(), legacy.send(topic, f"l{sent}".encode(), partition=0)))
        sent += 1
        in_place.poll(0)
        switching.poll(0)
        while True:  # a record per client every 20 ms, reading meanwhile
            m = consumer.poll(max(0.0, started + sent * 0.02 - time.monotonic()))
            if m is None:
                break
            if m.error() is None:
                read.append(m.value())
        if not switched and time.monotonic() - started > REAUTH_SECONDS / 3:
            switching.set_sasl_credentials("other", password(c, "other"))  # used at the next authentication
            switched = True
    assert in_place.flush(60) == 0 and switching.flush(60) == 0
    legacy.flush(60)
    for value, future in futures:
        future.get(1)  # raises if not acknowledged
        acked["legacy"].append(value)
    legacy.close()
    assert {k: len(v) for k, v in acked.items()} == {k: sent for k in acked}
    deadline = time.monotonic() + 60
    while len(read) < 3 * sent and time.monotonic() < deadline:
        read.extend(m.value() for m in consumer.consume(1000, 0.2) if m.error() is None)
    stats.clear()
    for _ in range(100):  # the figures of a statistics interval after the run; 0.1 s each
        if len(stats) == 2:
            break
        consumer.poll(0.05)
        in_place.poll(0.05)
    consumer.close()
    assert sorted(read) == sorted(v for values in acked.values() for v in values)
    # librdkafka kept its connections to the brokers (re-authenticated on them, no error) ...
    for name in ("producer", "consumer"):
        brokers = [b for b in stats[name]["brokers"].values() if b["nodeid"] >= 0]
        assert brokers and all(b["disconnects"] == 0 for b in brokers), (name, brokers)
    assert not in_place_errors, in_place_errors
    # ... the change of user was refused on re-authentication, then accepted on a new connection
    assert switch_errors and switch_errors[0].code() == KafkaError._AUTHENTICATION, switch_errors
    assert "Cannot change principals during re-authentication from User.app: User.other" in switch_errors[0].str()
    after = scrape_listener(c, "REAUTH")
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    log.info("re-authentication for %d s: %d records per client, REAUTH listener counters %s", REAUTH_SECONDS,
             sent, delta)
    assert delta.get("successful_reauthentication", 0) >= REAUTH_SECONDS * 1000 // REAUTH_MS, delta
    assert delta.get("failed_reauthentication", 0) >= 1, delta
    # the v0 client's connections were closed at their sessions' end (it reconnected: everything acknowledged)
    assert delta.get("expired_connections_killed", 0) >= 1, delta


def test_the_nodes_link_over_sasl_ssl_scram_and_the_quorum_over_mtls(secured):
    """Each node's inter-broker listener (the harness' ``PLAINTEXT``, SASL_SSL/SCRAM-SHA-512) and controller
    listener (SSL, client certificates required) authenticated its peers and refused nobody; the client SSL
    listener counted the client certificates' handshakes and a failed SASL login counts on its listener."""
    for i, port in secured.metrics.items():
        metrics = scrape(port)
        for listener in ("PLAINTEXT", "CONTROLLER"):
            ok = f'kafka_server_socketservermetrics_successful_authentication_total{{listener="{listener}"}}'
            failed = f'kafka_server_socketservermetrics_failed_authentication_total{{listener="{listener}"}}'
            assert metrics.get(ok, 0) > 0 and metrics.get(failed, 0) == 0, (i, listener)
    totals = {name: scrape_listener(secured, name) for name in ("CLIENT_SSL", "CLIENT_SASL_SSL")}
    assert totals["CLIENT_SSL"].get("successful_authentication", 0) > 0, totals
    assert totals["CLIENT_SASL_SSL"].get("failed_authentication", 0) > 0, totals  # test_*_refused's


# ---- no secret in DescribeConfigs, the nodes' logs, their argv, environment or metrics ------------------------

def test_no_secret_in_describe_configs_logs_argv_environ_or_metrics(secured):
    """Every secret the cluster was given (the SCRAM users' and the nodes' passwords, each listener's JAAS config
    with PLAIN's ``user_<name>`` passwords) and the wrong passwords of failed logins appear in no DescribeConfigs
    answer (a PASSWORD config is ``value=null, is_sensitive=true``, its synonyms too), in no node's log (stderr of
    every start) or stdout, in no node's /proc/<pid>/cmdline or /proc/<pid>/environ and in no node's metrics."""
    import secrets as token

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, ConfigResource

    from broker.security.secrets import is_sensitive

    c = secured
    # failed logins first (so their passwords are looked for in what they leave behind): PLAIN sends the
    # password itself, in the clear on SASL_PLAINTEXT; SCRAM a proof of it
    wrong = {}
    for protocol, mechanism, user in (("SASL_PLAINTEXT", "PLAIN", "app"), ("SASL_SSL", "PLAIN", "nobody"),
                                      ("SASL_SSL", "SCRAM-SHA-512", "app")):
        secret = f"wrong-{token.token_urlsafe(12)}"
        errors: list = []
        p = Producer({**librdkafka_conf(c, protocol, mechanism, user=user, secret=secret), "error_cb": errors.append})
        for _ in range(100):  # 0.2 s each
            if errors:
                break
            p.poll(0.2)
        del p
        wrong[(protocol, mechanism, user)] = secret
        assert errors and "Authentication failed" in errors[0].str(), (protocol, mechanism, errors)
    sensitive = {i: {k: str(v) for k, v in node.overrides.items() if is_sensitive(k)} for i, node in c.nodes.items()}
    given = {*c.security.passwords.values(), *(v for values in sensitive.values() for v in values.values())}
    assert any('user_app="' in v for v in sensitive[1].values())  # PLAIN's users are among the secrets
    secrets = {s.encode() for s in given | set(wrong.values())}
    assert len(secrets) >= len(c.security.passwords) + 3 + 1

    def leaked(text: bytes) -> list[bytes]:
        return [s for s in secrets if s in text]

    # DescribeConfigs of each broker, as the nodes' own (super) user, synonyms included (librdkafka asks for them)
    admin = AdminClient(librdkafka_conf(c, "SASL_SSL", "SCRAM-SHA-512", user="odradek-node"))
    brokers = [i for i, node in c.nodes.items() if node.alive()]
    for i in brokers:  # librdkafka: one BROKER resource per call
        resource = ConfigResource(ConfigResource.Type.BROKER, str(i))
        entries = admin.describe_configs([resource], request_timeout=30)[resource].result(30)
        described = [(name, e.value, e.is_sensitive) for name, e in entries.items()]
        described += [(s.name, s.value, s.is_sensitive) for e in entries.values() for s in e.synonyms.values()]
        assert any(e.synonyms for e in entries.values()), resource  # synonyms were asked for and answered
        assert not leaked(repr(described).encode()), resource
        for name, value, sensitive_flag in described:
            if is_sensitive(name):
                assert value is None and sensitive_flag, (resource, name)
        for name in sensitive[int(resource.name)]:
            assert name in entries and entries[name].value is None and entries[name].is_sensitive, (resource, name)
    # every node's log (stderr) of every start and its stdout, argv, environment and metrics text
    import urllib.request

    assert sum(node.log_lines("authentication failed") for node in c.nodes.values()) >= 3  # the failures logged

    for i, node in c.nodes.items():
        # the control: the node's properties file holds them (readable by its owner only), and the grep finds them
        config_file = node.data_dir.parent / f"{node.data_dir.name}.yaml"
        assert oct(config_file.stat().st_mode & 0o777) == "0o600" and len(leaked(config_file.read_bytes())) >= 2
        for n in range(1, node.starts + 1):
            log_file = node.data_dir.parent / f"broker-{node.data_dir.name}-{n}.stderr"
            assert not leaked(log_file.read_bytes()), (i, log_file)
        assert not leaked("".join(node.stdout_lines).encode()), i
        for part in ("cmdline", "environ"):
            assert not leaked(open(f"/proc/{node.proc.pid}/{part}", "rb").read()), (i, part)
        text = urllib.request.urlopen(f"http://127.0.0.1:{c.metrics[i]}/metrics", timeout=10).read()
        assert b"kafka_server_socketservermetrics" in text and not leaked(text), i


# ---- the five clients producing through a kill -9 of a partition leader (last: the node stays down) -----------

class Worker:
    """One client producing with acks=all in the background until ``stop``: ``acked`` is what it was told was
    written."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.acked: list[bytes] = []
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def run(self) -> None:
        raise NotImplementedError

    def values(self):
        """This worker's values, paced (one every 10 ms at most), until stopped."""
        for i in range(1_000_000):
            if self.stopping.wait(0.01):
                return
            yield f"{self.name}-{i}".encode()


def start_workers(c, topic: str, kafkajs_dir, kcat_bin, stop_file) -> list[Worker]:
    class ConfluentWorker(Worker):  # SASL_SSL SCRAM-SHA-256
        def run(self) -> None:
            from confluent_kafka import Producer

            p = Producer({**librdkafka_conf(c, "SASL_SSL", "SCRAM-SHA-256"), "acks": "all",
                          "enable.idempotence": True, "message.timeout.ms": 60000})
            for v in self.values():
                p.produce(topic, v, partition=0,
                          on_delivery=lambda err, msg: err is None and self.acked.append(msg.value()))
                p.poll(0)
            p.flush(60)

    class KafkaPythonWorker(Worker):  # SASL_PLAINTEXT PLAIN
        def run(self) -> None:
            from kafka import KafkaProducer

            p = KafkaProducer(**kafka_python_conf(c, "SASL_PLAINTEXT", "PLAIN"), acks="all")
            for v in self.values():
                p.send(topic, v, partition=0).add_callback(lambda _md, v=v: self.acked.append(v))
            p.flush(60)
            p.close()

    class AiokafkaWorker(Worker):  # SSL with a client certificate
        def run(self) -> None:
            from aiokafka import AIOKafkaProducer
            from aiokafka.errors import KafkaError

            async def produce() -> None:
                p = AIOKafkaProducer(**aiokafka_conf(c, "SSL", None), acks="all")
                await p.start()
                try:
                    for v in self.values():
                        try:
                            await p.send_and_wait(topic, v, partition=0)
                            self.acked.append(v)
                        except KafkaError:  # not acknowledged: not counted
                            pass
                finally:
                    await p.stop()

            asyncio.run(produce())

    class KcatWorker(Worker):  # SASL_SSL SCRAM-SHA-512, 20 records per kcat run: acknowledged when it exits 0
        def run(self) -> None:
            args = kcat_args(librdkafka_conf(c, "SASL_SSL", "SCRAM-SHA-512"))
            batch: list[bytes] = []
            for v in self.values():
                batch.append(v)
                if len(batch) == 20:
                    out = subprocess.run([kcat_bin, *args, "-P", "-t", topic, "-p", "0", "-X", "acks=all"],
                                         input=b"\n".join(batch) + b"\n", capture_output=True, timeout=120)
                    if out.returncode == 0:
                        self.acked.extend(batch)
                    batch = []

    class KafkaJSWorker(Worker):  # SASL_PLAINTEXT SCRAM-SHA-512, in one node process printing each acknowledgement
        def run(self) -> None:
            job = {"mode": "run", "connection": kafkajs_connection(c, "SASL_PLAINTEXT", "SCRAM-SHA-512"),
                   "topic": topic, "prefix": f"{self.name}-", "stopFile": str(stop_file), "maxSeconds": 180}
            proc = subprocess.Popen(["node", str(kafkajs_dir / "secure.js")], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=kafkajs_dir)
            try:
                proc.stdin.write(json.dumps(job).encode())
                proc.stdin.close()
                for line in proc.stdout:  # ends when the process does: at most maxSeconds
                    self.acked.append(line.strip())
                assert proc.wait(60) == 0, proc.stderr.read().decode(errors="replace")[-4000:]
            finally:
                proc.kill()
                proc.wait()

    workers = [ConfluentWorker("confluent"), KafkaPythonWorker("kafka-python"), AiokafkaWorker("aiokafka"),
               KcatWorker("kcat"), KafkaJSWorker("kafkajs")]
    for w in workers:
        w.thread.start()
    return workers


def test_every_client_produces_through_a_kill_of_a_partition_leader(secured, kafkajs_dir, kcat_bin, tmp_path):
    """The five clients, each over another cell, write with acks=all to one partition (RF 3, min.insync.replicas
    2) while its leader is killed with SIGKILL; each goes on being acknowledged after the kill (by the new leader:
    the old one is dead), and every acknowledged record is read back."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    c = secured
    conf = librdkafka_conf(c, "SASL_SSL", "SCRAM-SHA-512")
    topic = new_topic("kill")
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    stop_file = tmp_path / "stop"
    workers = start_workers(c, topic, kafkajs_dir, kcat_bin, stop_file)
    try:
        wait_until(lambda: all(len(w.acked) >= 40 or w.error for w in workers), 60, 0.1,
                   "every client acknowledged before the kill")
        victim = c.leader_of(topic, 0)
        at_kill = {w.name: len(w.acked) for w in workers}
        c.kill(victim)
        wait_until(lambda: all(len(w.acked) >= at_kill[w.name] + 40 or w.error for w in workers), 90, 0.1,
                   "every client acknowledged after the kill")
    finally:
        stop_file.touch()
        for w in workers:
            w.stopping.set()
        for w in workers:
            w.thread.join(120)
    assert not [w for w in workers if w.thread.is_alive()]
    assert {w.name: w.error for w in workers if w.error} == {}
    acked = {v for w in workers for v in w.acked}
    assert all(len(w.acked) > 0 for w in workers)
    consumer = Consumer({**conf, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: set[bytes] = set()
    deadline = time.monotonic() + 60
    while not acked <= read and time.monotonic() < deadline:
        read.update(m.value() for m in consumer.consume(1000, 0.2) if m.error() is None)
    consumer.close()
    assert acked - read == set(), f"{len(acked - read)} acknowledged records lost"
    log.info("through the kill of node %d: acknowledged %s (at the kill %s), all %d read back", victim,
             {w.name: len(w.acked) for w in workers}, at_kill, len(acked))
    wait_until(lambda: c.leader_of(topic, 0) != victim, 30, 0.2, "a new leader of partition 0")
