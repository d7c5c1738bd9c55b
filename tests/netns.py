"""A private network of Linux network namespaces for cluster fault tests: one namespace per node and a
"switch" namespace holding two bridges, all linked only to each other.

Every node has two links: one on the cluster bridge (``10.231.0.<id>``: Raft, controller RPCs and replica
fetches, the CONTROLLER and INTERNAL listeners) and one on the client bridge (``10.231.1.<id>``: the
PLAINTEXT listener clients use). The switch namespace has ``10.231.1.254`` on the client bridge and is where
the test's clients run (``in_netns``). Taking a node's cluster link down cuts it off from every other node
at once while its clients still reach it: a leader isolated from the quorum and from its followers.

The addresses come from ``TEST_RANGE`` and exist only inside these namespaces; nothing is routed anywhere
else. Every namespace is deleted on ``close`` (also when a test fails).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

from tests.harness import BrokerProcess, quorum_leader_of

TEST_RANGE = ipaddress.ip_network("10.231.0.0/23")  # .0.x: the cluster links, .1.x: the client links
CLUSTER_NET, CLIENT_NET = list(TEST_RANGE.subnets(new_prefix=24))
CLIENT_HOST = str(CLIENT_NET[254])
CLONE_NEWNET = 0x40000000


def unshare_works() -> bool:
    """Network namespaces are possible here (the only reason a namespace test may skip)."""
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@contextmanager
def in_netns(name: str):
    """Run the calling thread inside namespace ``name`` (threads it starts stay there); back out at exit."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} failed")
        try:
            yield
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the test's own namespace failed")
    finally:
        os.close(own)
        os.close(target)


class NetnsLab:
    """The namespaces and links for nodes ``1..n``."""

    def __init__(self, nodes: int) -> None:
        tag = f"odk{os.getpid() % 100000}"
        self.switch = f"{tag}-sw"
        self.node_ns = {i: f"{tag}-n{i}" for i in range(1, nodes + 1)}
        self._made: list[str] = []

    def cluster_ip(self, node: int) -> str:
        return str(CLUSTER_NET[node])

    def client_ip(self, node: int) -> str:
        return str(CLIENT_NET[node])

    def create(self) -> "NetnsLab":
        try:
            for ns in [self.switch, *self.node_ns.values()]:
                _ip("netns", "add", ns)
                self._made.append(ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            for bridge in ("brc", "brk"):
                _ip("-n", self.switch, "link", "add", bridge, "type", "bridge")
                _ip("-n", self.switch, "link", "set", bridge, "up")
            _ip("-n", self.switch, "addr", "add", f"{CLIENT_HOST}/24", "dev", "brk")
            for i, ns in self.node_ns.items():
                for kind, bridge, address in (("c", "brc", self.cluster_ip(i)), ("k", "brk", self.client_ip(i))):
                    near, far = f"{kind}{i}", f"{kind}{i}p"
                    _ip("-n", self.switch, "link", "add", near, "type", "veth", "peer", "name", far)
                    _ip("-n", self.switch, "link", "set", far, "netns", ns)
                    _ip("-n", self.switch, "link", "set", near, "master", bridge)
                    _ip("-n", self.switch, "link", "set", near, "up")
                    _ip("-n", ns, "addr", "add", f"{address}/24", "dev", far)
                    _ip("-n", ns, "link", "set", far, "up")
        except BaseException:
            self.close()
            raise
        return self

    def prefix(self, node: int) -> list[str]:
        return ["ip", "netns", "exec", self.node_ns[node]]

    def cut(self, node: int) -> None:
        """Take ``node``'s cluster link down: no other node reaches it, nor it them; clients still do."""
        _ip("-n", self.node_ns[node], "link", "set", f"c{node}p", "down")

    def mend(self, node: int) -> None:
        _ip("-n", self.node_ns[node], "link", "set", f"c{node}p", "up")

    def close(self) -> None:
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        self._made = []


class NetnsCluster:
    """Combined broker+controller nodes, one per namespace, listening on their lab addresses."""

    def __init__(self, root: Path, lab: NetnsLab, overrides: dict | None = None) -> None:
        self.lab = lab
        ids = list(lab.node_ns)
        voters = ",".join(f"{i}@{lab.cluster_ip(i)}:9093" for i in ids)
        self.nodes: dict[int, BrokerProcess] = {}
        for i in ids:
            data = Path(root) / f"node{i}"
            data.mkdir(parents=True, exist_ok=True)
            self.nodes[i] = BrokerProcess(data, {
                "node.id": i, "process.roles": "broker,controller",
                "listeners": f"PLAINTEXT://{lab.client_ip(i)}:9092,INTERNAL://{lab.cluster_ip(i)}:9094,"
                             f"CONTROLLER://{lab.cluster_ip(i)}:9093",
                "advertised.listeners": f"PLAINTEXT://{lab.client_ip(i)}:9092,INTERNAL://{lab.cluster_ip(i)}:9094",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL", "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters, "cluster.id": "b2RyYWRlay10ZXN0LWNsdQ",
                "offsets.topic.replication.factor": 1, **(overrides or {})}, prefix=lab.prefix(i))

    @property
    def bootstrap(self) -> str:
        return ",".join(self.client_address(i) for i in self.nodes)

    @property
    def broker_ids(self) -> list[int]:
        return list(self.nodes)

    def client_address(self, node_id: int) -> str:
        return f"{self.lab.client_ip(node_id)}:9092"

    def quorum_leader(self) -> tuple[int, int]:
        return quorum_leader_of(self.nodes)

    def start(self, node_id: int | None = None, timeout: float = 60.0) -> None:
        ids = [node_id] if node_id is not None else list(self.nodes)
        for i in ids:
            self.nodes[i].start(wait=False)
        for i in ids:
            self.nodes[i].wait_started(timeout)

    def close(self) -> None:
        for n in self.nodes.values():
            n.kill()
        for n in self.nodes.values():
            n.close()
