"""Writes ``tests/data/c78cad6-single-node/``: a single node's data directory as the code of commit c78cad6 left it
(before a single node ran as a quorum of one voter: a metadata log of one epoch per start, no LeaderChange
batches, no ``quorum-state`` or ``recovery-point`` file). tests/broker/test_single_node_upgrade.py starts the
current code on a copy of it.

Run it from a checkout of c78cad6 (``git worktree add /tmp/c78cad6 c78cad6``) with this repository's venv::

    .venv/bin/python tests/data/make_c78cad6_single_node.py /tmp/c78cad6 tests/data/c78cad6-single-node

Three starts, each stopped with SIGTERM (a clean shutdown): topics with configs, committed offsets of a group,
and an idempotent producer's batches.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

CLUSTER_ID = "b2RyYWRlay11cGdyYWRlMQ"
GROUP = "upgrade-group"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(source: Path, data: Path, port: int) -> subprocess.Popen:
    overrides = {"node.id": 1, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(data),
                 "cluster.id": CLUSTER_ID, "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 1,
                 "group.initial.rebalance.delay.ms": 0}
    args = [sys.executable, "-m", "broker.cli", "serve"]
    for k, v in overrides.items():
        args += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(args, cwd=source, env={**os.environ, "PYTHONPATH": str(source)},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if "listening on" in line:
            return proc
    raise RuntimeError("the node did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def produce(bootstrap: str, topic: str, n: int, start: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0


def commit(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def main(source: Path, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    data = out / "log-dir"
    data.mkdir(parents=True)
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    expected = {"topics": {}, "offsets": {}, "records": {}}

    proc = serve(source, data, port)  # start 1: a topic with a config, records, committed offsets
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "123456789"})])["orders"].result(30)
    produce(bootstrap, "orders", 10, 0)
    commit(bootstrap, "orders", {0: 3, 1: 2})
    stop(proc)

    proc = serve(source, data, port)  # start 2: another topic, a changed config, more records and offsets
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic("events", 1, 1, config={"cleanup.policy": "compact"})])["events"].result(30)
    res = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=[
        ConfigEntry("max.message.bytes", "500000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(30)
    produce(bootstrap, "orders", 10, 10)
    commit(bootstrap, "orders", {0: 7, 1: 6})
    stop(proc)

    proc = serve(source, data, port)  # start 3: records on both topics
    produce(bootstrap, "orders", 4, 20)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3):
        p.produce("events", key=b"e", value=f"e{i}".encode(), partition=0)
    assert p.flush(30) == 0
    stop(proc)

    expected["topics"] = {"orders": {"partitions": 2, "configs": {"retention.ms": "123456789",
                                                                   "max.message.bytes": "500000"}},
                          "events": {"partitions": 1, "configs": {"cleanup.policy": "compact"}}}
    expected["offsets"] = {GROUP: {"orders": {"0": 7, "1": 6}}}
    expected["records"] = {"orders": {"0": 12, "1": 12}, "events": {"0": 3}}
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(f"wrote {out} at {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
