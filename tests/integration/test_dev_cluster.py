"""``odradek dev-cluster``: a local cluster from one command (three combined nodes, or three controllers and
three brokers), a client bootstraps from what it prints, and SIGTERM stops every node; ``--override`` values
reach every node typed as Kafka types them."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import subprocess
import time

import pytest

from protocol.generated.messages import DescribeConfigsRequest, MetadataRequest
from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from tests.harness import ODRADEK, REPO
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def free_base_port() -> int:
    """A base port with base..base+5 and base+100..base+102 free right now."""
    for base in range(21000, 60000, 397):
        ports = [base + i for i in range(6)] + [base + 100 + i for i in range(3)]
        socks = []
        try:
            for p in ports:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def start_dev_cluster(tmp_path, args: list[str]) -> tuple[subprocess.Popen, int, str | None]:
    """``odradek dev-cluster ARGS`` on a free port range: (process, base port, the bootstrap servers it printed
    within 30 s, or None)."""
    base = free_base_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([*ODRADEK, "dev-cluster", *args, "--data", str(tmp_path / "dc"),
                             "--base-port", str(base)], stdout=subprocess.PIPE, text=True, env=env)
    bootstrap = None
    deadline = time.monotonic() + 30
    while bootstrap is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("bootstrap servers: "):
            bootstrap = line.split(": ", 1)[1].strip()
    return proc, base, bootstrap


TOPOLOGIES = {"3 combined": (["--nodes", "3"], [1, 2, 3], [1, 2, 3]),
              "3 controllers + 3 brokers": (["--controllers", "3", "--brokers", "3"], [4, 5, 6], range(1, 7))}


OVERRIDES = ["num.partitions=4", "default.replication.factor=3", "log.retention.ms=60000",
             "auto.create.topics.enable=false"]
LONG, BOOLEAN, INT = 5, 1, 3  # DescribeConfigsResponse.ConfigType


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_dev_cluster_serves_with_its_overrides_typed_and_stops(tmp_path, topology):
    """The cluster prints the brokers' addresses, a client bootstraps from them, and SIGTERM stops every node
    (each formatted with ``odradek format`` first). Each --override is written into every node's YAML and read by
    its Kafka type: a topic created without a partition count or replication factor gets the controller's 4 and
    3, every broker describes log.retention.ms as LONG 60000 and auto.create.topics.enable as BOOLEAN false, and a
    Metadata request creates nothing."""
    args, broker_ids, node_ids = TOPOLOGIES[topology]
    proc, base, bootstrap = start_dev_cluster(tmp_path, args + [a for o in OVERRIDES for a in ("--override", o)])
    try:
        assert bootstrap == ",".join(f"127.0.0.1:{base + i - 1}" for i in broker_ids)
        assert "num.partitions: 4\n" in (tmp_path / "dc" / f"node{broker_ids[0]}.yaml").read_text()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while True:  # no partition count or replication factor: the controller's defaults
            try:
                admin.create_topics([NewTopic("typed", num_partitions=-1, replication_factor=-1)])["typed"].result(10)
                break
            except (confluent_kafka.KafkaException, concurrent.futures.TimeoutError) as exc:
                if isinstance(exc, confluent_kafka.KafkaException) and \
                        exc.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        deadline = time.monotonic() + 30
        while ("typed" not in (md := admin.list_topics(timeout=10)).topics or sorted(md.brokers) != broker_ids) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        partitions = md.topics["typed"].partitions
        assert len(partitions) == 4 and all(len(p.replicas) == 3 for p in partitions.values())
        for i in broker_ids:
            with KafkaWire(base + i - 1) as c:
                resp = c.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
                    resource_type=4, resource_name=str(i), configuration_keys=[
                        "log.retention.ms", "auto.create.topics.enable", "num.partitions"])]))
                got = {e.name: (e.value, e.config_type) for e in resp.results[0].configs}
                assert resp.results[0].error_code == 0 and got == {
                    "log.retention.ms": ("60000", LONG), "auto.create.topics.enable": ("false", BOOLEAN),
                    "num.partitions": ("4", INT)}, (i, got)
                # auto.create.topics.enable=false: asking for an unknown topic creates nothing
                md_resp = c.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="nope")],
                                                        allow_auto_topic_creation=True))
                assert [(t.name, t.error_code) for t in md_resp.topics] == [("nope", 3)]  # UNKNOWN_TOPIC_OR_PARTITION
        time.sleep(1)  # a creation would have reached the brokers' metadata by now
        assert "nope" not in admin.list_topics(timeout=10).topics
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        for i in node_ids:
            text = (tmp_path / "dc" / f"node{i}.log").read_text()
            assert "shutting down" in text and "Formatting" in text  # formatted with odradek format first
        voters = [i for i in node_ids if i not in broker_ids or len(node_ids) == 3]
        assert all((tmp_path / "dc" / f"node{i}" / "bootstrap.checkpoint").exists() for i in voters)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["pkill", "-9", "-f", str(tmp_path / "dc")], check=False)


def test_dev_cluster_refuses_an_override_its_type_cannot_parse(tmp_path):
    out = subprocess.run([*ODRADEK, "dev-cluster", "--override", "num.partitions='4'", "--data", str(tmp_path / "dc"),
                          "--base-port", "1"], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 2
    assert "Invalid value '4' for configuration num.partitions: Not a number of type INT" in out.stderr
    assert not (tmp_path / "dc").exists()  # refused before any node was started
