"""The tests' one broker-subprocess harness, a thin layer over the product's (broker/testing/embedded_cluster.py):
``BrokerProcess`` is ``odradek serve`` on 127.0.0.1 with an ephemeral port and the caller's data dir,
importing this checkout's code; restartable on the same data; stopped gracefully (SIGTERM) or not (SIGKILL);
its stderr (the broker's log) kept per start for assertions. ``ClusterProcesses`` is a KRaft cluster of them.

Every wait is bounded; a test owns its processes and closes them also when it fails (the fixtures do).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from broker.testing.embedded_cluster import (  # noqa: F401 - the tests import these from here
    ODRADEK, NodeProcess as BrokerProcess, ProcessCluster, quorum_leader_of, reserve_ports, wait_until,
)

REPO = Path(__file__).resolve().parents[1]


class ClusterProcesses(ProcessCluster):
    """A KRaft cluster of ``odradek serve`` processes on loopback: ``combined`` nodes run broker and controller,
    ``controllers`` run only the controller (voters without a broker listener), ``brokers`` only the broker
    (observers of the quorum). Voters get the ids from 1; ports are reserved per node for its lifetime.
    Kafka's defaults but ``offsets.topic.replication.factor=1``; the tests pass their timeouts as overrides."""

    def __init__(self, root: Path, combined: int = 3, brokers: int = 0, overrides: dict | None = None,
                 controllers: int = 0, fault_hook: bool = False) -> None:
        super().__init__(root, combined=combined, controllers=controllers, brokers=brokers, overrides=overrides,
                         fault_hook=fault_hook)


def scrape(port: int) -> dict[str, float]:
    """name{labels} -> value from a node's Prometheus endpoint."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


class MetricsPorts(Mapping[int, int]):
    """Node id -> its Prometheus port. Each node binds port 0 and prints the one it got, read at each lookup
    (a restart binds a new one): a port reserved up front and bound later can be taken in between."""

    def __init__(self, nodes: Mapping[int, BrokerProcess]) -> None:
        self._nodes = dict(nodes)
        for node in self._nodes.values():
            node.overrides["metrics.prometheus.listener"] = "127.0.0.1:0"

    def __getitem__(self, node_id: int) -> int:
        return self._nodes[node_id].metrics_port

    def __iter__(self) -> Iterator[int]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)
