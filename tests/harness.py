"""The tests' one broker-subprocess harness: ``odradek serve`` on 127.0.0.1 with an ephemeral port and the
caller's data dir, importing this checkout's code; restartable on the same data; stopped gracefully
(SIGTERM) or not (SIGKILL); its stderr (the broker's log) kept per start for assertions.

Every wait is bounded; a test owns its processes and closes them also when it fails (the fixtures do).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ``odradek serve`` (the console script's entry point), importing this checkout's code
ODRADEK = [sys.executable, "-m", "broker.cli"]


class BrokerProcess:
    """``odradek serve`` in a subprocess on an ephemeral port; restartable on the same data dir."""

    def __init__(self, data_dir: Path, overrides: dict | None = None, prefix: list[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.prefix = list(prefix or [])  # e.g. ``ip netns exec NS``: where the process runs
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self._stderr = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0, wait: bool = True) -> "BrokerProcess":
        """Spawn the broker and (``wait``) return once it listens; ``wait_started`` finishes a start that did
        not wait (cluster nodes start together: each waits for a quorum of the others)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        args = [*self.prefix, *ODRADEK, "serve", "--config", str(REPO / "config" / "single-node.yaml"),
                "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0",
                "--override", f"log.dirs={self.data_dir}", "--override", "metrics.prometheus.listener="]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        self.starts += 1
        self._stderr = open(self.data_dir.parent / f"broker-{self.data_dir.name}-{self.starts}.stderr", "wb")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(args, cwd=self.data_dir.parent, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, env=env)
        port: list[int] = []

        def read_port() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                m = re.search(r"listening on \w+://[^\s:]+:(\d+)", line)  # the first listener
                if m:
                    port.append(int(m.group(1)))
                    break
            # keep draining stdout so the broker never blocks on a full pipe
            for _ in self.proc.stdout:
                pass

        threading.Thread(target=read_port, daemon=True).start()
        self._port_box = port
        if wait:
            self.wait_started(timeout)
        return self

    def wait_started(self, timeout: float = 60.0) -> "BrokerProcess":
        assert self.proc is not None
        port = self._port_box
        deadline = time.monotonic() + timeout
        while not port:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode} before listening:\n{self.stderr_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker did not start within {timeout}s:\n{self.stderr_tail()}")
            time.sleep(0.02)
        self.port = port[0]
        return self

    def stderr_tail(self, n: int = 4000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        data = Path(self._stderr.name).read_bytes()
        return data[-n:].decode(errors="replace")

    # ---- what tests look at ---------------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        """The current start's stderr: the broker's log."""
        assert self._stderr is not None
        return Path(self._stderr.name)

    def log_lines(self, pattern: str) -> int:
        """How many lines of the current start's log match ``pattern``."""
        assert self._stderr is not None
        if not self._stderr.closed:
            self._stderr.flush()
        return sum(1 for line in self.log_path.read_text(errors="replace").splitlines() if re.search(pattern, line))

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return -1.0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a graceful stop; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"broker ignored SIGTERM for {timeout}s:\n{self.stderr_tail()}")

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing (a GC pause, a frozen VM)."""
        assert self.proc is not None and self.proc.poll() is None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.terminate(timeout=15)
            except AssertionError:
                pass
        if self._stderr is not None:
            self._stderr.close()


def quorum_leader_of(nodes: dict[int, BrokerProcess]) -> tuple[int, int]:
    """(epoch, leader id) from the live nodes' quorum-state files: the newest epoch that has a leader."""
    best = (-1, -1)
    for node in nodes.values():
        if not node.alive():
            continue
        try:
            state = json.loads((node.data_dir / "__cluster_metadata-0" / "quorum-state").read_text())
        except (OSError, ValueError):
            continue
        if state["leaderId"] >= 0 and state["leaderEpoch"] > best[0]:
            best = (state["leaderEpoch"], state["leaderId"])
    return best


def wait_until(cond, timeout: float = 20.0, interval: float = 0.05, what: str = "condition",
               retry: tuple[type[BaseException], ...] = ()):
    """Poll ``cond`` until it returns something true (returned) or ``timeout`` passes (AssertionError naming
    ``what``); exceptions of the ``retry`` types count as "not yet" (a cluster that is still electing)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
            last = v
        except retry as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def reserve_ports(n: int) -> list[int]:
    """``n`` free ports on 127.0.0.1, each kept by its node for the cluster's lifetime (voters need known
    addresses; a restarted node binds the same one again)."""
    import socket

    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class ClusterProcesses:
    """A KRaft cluster of ``odradek serve`` processes on loopback: ``combined`` nodes run broker and controller,
    ``controllers`` run only the controller (voters without a broker listener), ``brokers`` only the broker
    (observers of the quorum). Voters get the ids from 1; ports are reserved per node for its lifetime."""

    def __init__(self, root: Path, combined: int = 3, brokers: int = 0, overrides: dict | None = None,
                 controllers: int = 0, fault_hook: bool = False) -> None:
        self.root = Path(root)
        self.fault_hook = fault_hook
        voter_ids = list(range(1, combined + controllers + 1))
        ids = voter_ids + list(range(len(voter_ids) + 1, len(voter_ids) + brokers + 1))
        broker_ids = voter_ids[:combined] + ids[len(voter_ids):]
        ports = reserve_ports(len(broker_ids) + len(voter_ids))
        self.broker_ports = dict(zip(broker_ids, ports[:len(broker_ids)]))
        self.controller_ports = dict(zip(voter_ids, ports[len(broker_ids):]))
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.controller_ports.items())
        self.nodes: dict[int, BrokerProcess] = {}
        for i in ids:
            data = self.root / f"node{i}"
            data.mkdir(parents=True, exist_ok=True)
            listeners = []
            if i in self.broker_ports:
                listeners.append(f"PLAINTEXT://127.0.0.1:{self.broker_ports[i]}")
            if i in self.controller_ports:
                listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_ports[i]}")
            roles = ",".join(r for r, has in (("broker", i in self.broker_ports),
                                              ("controller", i in self.controller_ports)) if has)
            self.nodes[i] = BrokerProcess(data, {
                "node.id": i, "process.roles": roles, "listeners": ",".join(listeners),
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.broker_ports[i]}"
                if i in self.broker_ports else "",
                "controller.listener.names": "CONTROLLER", "controller.quorum.voters": voters,
                "cluster.id": "b2RyYWRlay10ZXN0LWNsdQ", "offsets.topic.replication.factor": 1,
                **({"odradek.test.fault.injection.file": self._fault_file(i)} if fault_hook else {}),
                **(overrides or {})})

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.broker_ports.values())

    @property
    def broker_ids(self) -> list[int]:
        return list(self.broker_ports)

    def client_address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.broker_ports[node_id]}"

    def start(self, node_id: int | None = None, timeout: float = 60.0) -> None:
        """Start one node (or all, together), retrying a node while its reserved port is still held."""
        ids = [node_id] if node_id is not None else list(self.nodes)
        for i in ids:
            self.nodes[i].start(wait=False)
        for i in ids:
            for attempt in range(20):
                try:
                    self.nodes[i].wait_started(timeout)
                    break
                except RuntimeError:
                    if "address already in use" not in self.nodes[i].stderr_tail() or attempt == 19:
                        raise
                    time.sleep(0.5)
                    self.nodes[i].start(wait=False)

    def quorum_leader(self) -> tuple[int, int]:
        return quorum_leader_of(self.nodes)

    # ---- the broker's test-only fault hook (fault_hook=True): each node drops its requests to named nodes ----

    def _fault_file(self, node_id: int) -> Path:
        return self.root / f"faults-{node_id}.json"

    def _set_faults(self, node_id: int, drop: list[int]) -> None:
        path = self._fault_file(node_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"drop": sorted(drop)}))
        os.replace(tmp, path)  # the node never reads half a file

    def isolate(self, node_id: int) -> None:
        """Cut ``node_id`` off from every other node (both directions); clients still reach it."""
        assert self.fault_hook, "start the cluster with fault_hook=True"
        self._set_faults(node_id, [i for i in self.nodes if i != node_id])
        for i in self.nodes:
            if i != node_id:
                self._set_faults(i, [node_id])

    def heal(self) -> None:
        for i in self.nodes:
            self._set_faults(i, [])

    def close(self) -> None:
        for n in self.nodes.values():
            n.kill()
        for n in self.nodes.values():
            n.close()
