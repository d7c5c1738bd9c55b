"""docker/compose.yaml without Docker: exactly its nodes as local ``odradek container-run`` processes, each
configured from its own compose ``environment`` (broker/testing/compose_cluster.py; ports remapped to free loopback
ports, container host names to 127.0.0.1). From one node's bootstrap confluent-kafka creates a replication
factor 3 topic; kcat and confluent-kafka produce (acks=all); one node is killed with SIGKILL and producing goes
on; it restarts on its data and every record is consumed by kcat and by confluent-kafka. Bad input on the same
cluster: a second node with a running node's id refuses to start, naming the conflict, and the others serve.

Also: docker-compose (Debian's 1.29, as ``make test`` installs it) accepts both compose files
(``config -q``, no daemon needed), and ``odradek container-run`` refuses the issue's other bad inputs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from broker.testing.compose_cluster import ComposeCluster, read_compose
from broker.testing.embedded_cluster import FAST_FAILOVER, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "compose.yaml"
ISOLATED = REPO / "docker" / "compose-isolated.yaml"
TOPIC = "compose-check"


@pytest.mark.parametrize("path", [COMPOSE, ISOLATED], ids=lambda p: p.name)
def test_docker_compose_accepts_the_file(path):
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail("docker-compose is not installed (make test installs it: `make docker-compose`)")
    out = subprocess.run([exe, "-f", str(path), "config", "-q"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_the_compose_files_follow_the_issue():
    combined = yaml.safe_load(COMPOSE.read_text())["services"]
    assert len(combined) == 3 and not any("depends_on" in s for s in combined.values())
    published = sorted(p for s in read_compose(COMPOSE).values() for p in s.published)
    assert published == [19092, 19308, 29092, 29308, 39092, 39308]
    for svc in combined.values():
        assert svc["image"] == "odradek:latest" and svc["build"]["dockerfile"] == "docker/Dockerfile"
        assert svc["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller" and svc["volumes"]
    isolated = yaml.safe_load(ISOLATED.read_text())["services"]
    controllers = [n for n, s in isolated.items() if s["environment"]["KAFKA_PROCESS_ROLES"] == "controller"]
    brokers = [n for n, s in isolated.items() if s["environment"]["KAFKA_PROCESS_ROLES"] == "broker"]
    assert len(controllers) == 3 and len(brokers) == 3
    for n in brokers:
        assert isolated[n]["depends_on"] == {c: {"condition": "service_healthy"} for c in controllers}
    for n in controllers:
        assert "depends_on" not in isolated[n] and "KAFKA_ADVERTISED_LISTENERS" not in isolated[n]["environment"]


def _produce_confluent(bootstrap: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                  "message.timeout.ms": 30000})
    errors = []
    for v in values:
        p.produce(TOPIC, v, on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(35) == 0 and not errors, errors


def _produce_kcat(kcat: str, bootstrap: str, values: list[bytes]) -> None:
    out = subprocess.run([kcat, "-b", bootstrap, "-P", "-t", TOPIC, "-X", "acks=all", "-X", "linger.ms=5",
                          "-X", "message.timeout.ms=30000"], input=b"\n".join(values) + b"\n",
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()


def _consume_kcat(kcat: str, bootstrap: str, want: int) -> list[bytes]:
    out = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q",
                          "-f", "%s\n"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.splitlines()


def _consume_confluent(bootstrap: str, want: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compose-check", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        c.close()
    return got


@pytest.fixture
def compose_cluster(tmp_path):
    c = ComposeCluster(COMPOSE, tmp_path / "compose", free_ports=True, overrides=FAST_FAILOVER)
    try:
        c.start(timeout=60)
        yield c
    finally:
        c.close()


def test_the_compose_files_nodes_as_processes_survive_a_kill(compose_cluster, kcat_bin, tmp_path):
    c = compose_cluster
    assert sorted(c.nodes) == sorted(read_compose(COMPOSE))  # exactly the file's nodes
    first = c.brokers()[0]
    one = c.bootstrap_of(first)
    admin = AdminClient({"bootstrap.servers": one})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(20)
    wait_until(lambda: all(len(p.replicas) == 3 and len(p.isrs) == 3 for p in
                           admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions.values()), 20, 0.2,
               "3 in-sync replicas of every partition")
    everyone = c.bootstrap_servers
    sent = [f"kcat-{i}".encode() for i in range(200)]
    _produce_kcat(kcat_bin, one, sent[:100])
    cf = [f"cf-{i}".encode() for i in range(400)]
    _produce_confluent(everyone, cf[:200])

    victim = c.brokers()[1]
    c.kill(victim)  # kill -9
    live = ",".join(c.bootstrap_of(n) for n in c.brokers() if n != victim)
    _produce_confluent(live, cf[200:300])
    _produce_kcat(kcat_bin, live, sent[100:])

    c.restart(victim, timeout=60)
    _produce_confluent(everyone, cf[300:])
    want = sorted(sent + cf)
    got = wait_until(lambda: (g := _consume_kcat(kcat_bin, everyone, len(want))) and len(g) >= len(want) and g,
                     30, 0.5, "kcat reads every record")
    assert sorted(got) == want
    assert sorted(_consume_confluent(everyone, len(want))) == want
    assert c.health(victim) is None

    # a second node with the id of a running voter: refused, naming the conflict; the others keep serving
    dup_env = {**c.env[victim], "KAFKA_LOG_DIRS": str(tmp_path / "dup"),
               "KAFKA_LISTENERS": c.env[victim]["KAFKA_LISTENERS"].replace("127.0.0.1:", "127.0.0.2:")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    out = subprocess.run([sys.executable, "-m", "broker.cli", "container-run", "--mounted-config-dir",
                          str(tmp_path / "none")], env={**env, **dup_env, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "is node id" in out.stderr and "used twice" in out.stderr, out.stderr
    assert not (tmp_path / "dup" / "meta.properties").exists()
    assert all(c.health(n) is None for n in c.nodes)


def _container_run(tmp_path, env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "CLUSTER_ID"}
    return subprocess.run([sys.executable, "-m", "broker.cli", "container-run", "--mounted-config-dir",
                           str(tmp_path / "none")], env={**base, **env, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=timeout)


NODE = {"KAFKA_NODE_ID": "1", "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
        "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER"}


def test_container_run_refuses_bad_input_naming_the_conflict(tmp_path):
    data = tmp_path / "data"
    env = {**NODE, "KAFKA_LOG_DIRS": str(data)}
    # a quorum list that places this node elsewhere
    out = _container_run(tmp_path, {**env, "CLUSTER_ID": "4lyNbu7BTvSSFnUGRHl5jw",
                                    "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@127.0.0.1:5,2@127.0.0.1:2"})
    assert out.returncode == 1 and "lists this node (1) at 127.0.0.1:5" in out.stderr, out.stderr
    # a quorum list without this node
    out = _container_run(tmp_path, {**env, "CLUSTER_ID": "4lyNbu7BTvSSFnUGRHl5jw",
                                    "KAFKA_CONTROLLER_QUORUM_VOTERS": "2@127.0.0.1:2,3@127.0.0.1:3"})
    assert out.returncode == 1 and "must be included in the set of voters" in out.stderr, out.stderr
    # no CLUSTER_ID on a new volume of a 3-voter quorum
    out = _container_run(tmp_path, env)
    assert out.returncode == 1 and "CLUSTER_ID is not set and the log dirs are not formatted" in out.stderr
    assert not data.exists() or not any(data.iterdir())
    # a controller-only node with advertised listeners
    out = _container_run(tmp_path, {**env, "CLUSTER_ID": "4lyNbu7BTvSSFnUGRHl5jw", "KAFKA_PROCESS_ROLES": "controller",
                                    "KAFKA_LISTENERS": "CONTROLLER://127.0.0.1:1",
                                    "KAFKA_ADVERTISED_LISTENERS": "CONTROLLER://127.0.0.1:1"})
    assert out.returncode == 1 and "KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller" in out.stderr
    # a volume formatted for another cluster
    subprocess.run([sys.executable, "-m", "broker.cli", "format", "--override", f"log.dirs={data}",
                    "--override", "node.id=1", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA"], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    out = _container_run(tmp_path, {**env, "CLUSTER_ID": "4lyNbu7BTvSSFnUGRHl5jw"})
    assert out.returncode == 1 and "CLUSTER_ID is 4lyNbu7BTvSSFnUGRHl5jw, but the log dirs are formatted for " \
        "cluster AAAAAAAAAAAAAAAAAAAAAA" in out.stderr, out.stderr
    # ... or for another node id
    out = _container_run(tmp_path, {**env, "CLUSTER_ID": "AAAAAAAAAAAAAAAAAAAAAA", "KAFKA_NODE_ID": "2",
                                    "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:2"})
    assert out.returncode == 1 and "Stored node id 1 doesn't match previous node id 2" in out.stderr, out.stderr
