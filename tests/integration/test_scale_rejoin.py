"""The cluster at scale (issue 31): 3 combined nodes, 1,000 partitions x RF 3, broker session 4 s. A broker is
killed with -9 and restarted; it leads nothing and is in no ISR, so it must rejoin every ISR it belongs to.

* every ISR is full again within 30 s of the process starting;
* no other broker is fenced (the controllers' logs);
* the leaders' ISR changes went in few AlterPartition requests (fewer than partitions / 10), and every broker's
  heartbeats reached the controller with gaps below half the session.

``ODRADEK_SOAK=1`` runs 3,000 partitions.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from broker.testing.embedded_cluster import FAST_FAILOVER
from tests.harness import scrape, ClusterProcesses, MetricsPorts, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3000 if os.environ.get("ODRADEK_SOAK") else 1000
PER_TOPIC = 100
SESSION_MS = 4000
OVERRIDES = {**FAST_FAILOVER, "broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 1000,
             "replica.lag.time.max.ms": 5000, "offsets.topic.replication.factor": 3}
FENCING = re.compile(r"Fencing broker (\d+) because its session has timed out")


def isr_gaps(a: AdminClient, topics: list[str]) -> int:
    """Partitions whose ISR is not all three replicas (or that the answering broker does not know yet)."""
    md = a.list_topics(timeout=20)
    gaps = 0
    for t in topics:
        parts = md.topics[t].partitions if t in md.topics else {}
        gaps += PER_TOPIC - sum(1 for p in parts.values() if len(p.isrs) == 3)
    return gaps


def start_with_topics(c: ClusterProcesses, partitions: int, socket_timeout_ms: int = 20000
                      ) -> tuple[AdminClient, list[str]]:
    """Start ``c``, wait for every broker to be unfenced, create ``partitions`` as topics of ``PER_TOPIC`` (RF 3)
    and wait for every ISR to be full."""
    c.start()
    for i in c.broker_ports:
        wait_until(lambda i=i: c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, what=f"{i} unfenced")
    a = AdminClient({"bootstrap.servers": c.bootstrap, "socket.timeout.ms": socket_timeout_ms})
    topics = [f"scale-{n}" for n in range(partitions // PER_TOPIC)]
    for f in a.create_topics([NewTopic(t, PER_TOPIC, 3) for t in topics], operation_timeout=60).values():
        f.result(120)
    wait_until(lambda: isr_gaps(a, topics) == 0, 120, 1.0, "every ISR full after creation", retry=(Exception,))
    return a, topics


def fenced(c: ClusterProcesses) -> list[int]:
    """Every broker a controller fenced for session expiry, in every node's logs of every start."""
    out = []
    for node in c.nodes.values():
        for path in sorted(node.data_dir.parent.glob(f"broker-{node.data_dir.name}-*.stderr")):
            out += [int(m.group(1)) for m in FENCING.finditer(path.read_text(errors="replace"))]
    return out


def test_a_restarted_broker_rejoins_a_thousand_isrs_without_fencing_anyone(tmp_path):
    c = ClusterProcesses(tmp_path, overrides=OVERRIDES)
    metrics = MetricsPorts(c.nodes)
    try:
        a, topics = start_with_topics(c, PARTITIONS)

        _, controller = c.quorum_leader()
        victim = min(set(c.nodes) - {controller})
        c.nodes[victim].kill()
        wait_until(lambda: fenced(c) == [victim], 30, 0.2, f"broker {victim} fenced")
        wait_until(lambda: isr_gaps(a, topics) == PARTITIONS, 60, 1.0, f"broker {victim} out of every ISR",
                   retry=(Exception,))
        others = [i for i in c.nodes if i != victim]
        sent_before = {i: scrape(metrics[i])["odradek_server_alterpartition_requests_total"] for i in others}
        _, controller = c.quorum_leader()
        batches_before = scrape(metrics[controller])["odradek_controller_metadata_batches_total"]

        started = time.monotonic()
        c.start(victim)
        wait_until(lambda: isr_gaps(a, topics) == 0, 60, 0.5, "every ISR full after the restart", retry=(Exception,))
        rejoined_s = time.monotonic() - started
        sent = {i: scrape(metrics[i])["odradek_server_alterpartition_requests_total"] - sent_before[i]
                for i in others}
        assert c.quorum_leader()[1] == controller, "the controller moved during the rejoin"
        at_controller = scrape(metrics[controller])
        gap_ms = at_controller["odradek_controller_broker_contact_gap_max_ms"]
        batches = at_controller["odradek_controller_metadata_batches_total"] - batches_before
        print(f"\n{PARTITIONS} partitions: every ISR full {rejoined_s:.1f} s after the restart; AlterPartition "
              f"requests {sent}; metadata batches {batches:.0f}; largest heartbeat gap at the controller "
              f"{gap_ms:.0f} ms; fenced {fenced(c)}")
        assert rejoined_s <= 30
        assert fenced(c) == [victim], "a healthy broker was fenced"
        assert sum(sent.values()) < PARTITIONS / 10
        assert gap_ms < SESSION_MS / 2
    finally:
        c.close()
