"""Real clients on a secured three-node cluster (issue 29): confluent-kafka, kafka-python, aiokafka, kcat and
KafkaJS produce (acks=all), consume and make an admin call over SSL with a client certificate, SASL_PLAINTEXT and
SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, on three nodes whose replication runs over SASL_SSL/SCRAM and
whose quorum runs over mTLS; all five keep producing through a kill -9 of a partition leader and every acknowledged
record is read back; a wrong password, an unknown user and a foreign CA each give each client its own error; on a
listener with ``connections.max.reauth.ms=3000`` librdkafka and kafka-python re-authenticate in place (KIP-368), a
SaslAuthenticate v0 client is disconnected at its session's end and reconnects, and a client whose credentials
change to another user is refused on re-authentication.

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
import time
import uuid

import pytest

from broker.testing.certificates import CertificateAuthority
from broker.testing.embedded_cluster import EmbeddedCluster
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
        assert topic in admin.list_topics()
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
    assert seen["foreign-trust"].code() == KafkaError._SSL and "certificate verify failed" in \
        seen["foreign-trust"].str(), seen


def test_kafka_python_refused(secured, caplog):
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError

    logs = {}
    for case, kw in FAILURES.items():
        caplog.clear()
        # kafka-python logs each bootstrap attempt's failure, then gives up bootstrapping
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
            KafkaAdminClient(**kafka_python_conf(secured, **kw), bootstrap_timeout_ms=2000)
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
    for _ in range(600):  # 0.1 s each: at most 60 s
        if len(read) >= 3 * sent:
            break
        m = consumer.poll(0.1)
        if m is not None and m.error() is None:
            read.append(m.value())
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
    assert delta["successful_reauthentication"] >= REAUTH_SECONDS * 1000 // REAUTH_MS, delta
    assert delta["failed_reauthentication"] >= 1, delta
    # the v0 client's connections were closed at their sessions' end (it reconnected: everything acknowledged)
    assert delta["expired_connections_killed"] >= 1, delta
