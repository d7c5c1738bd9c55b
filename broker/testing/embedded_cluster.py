"""A replicated KRaft cluster of ``odradek serve`` processes on loopback, for test suites:
``with EmbeddedCluster(brokers=3) as c: ... c.bootstrap_servers``, with faults on demand (kill -9, restart,
SIGSTOP/SIGCONT, a network partition through the test-only fault hook, broker/network/fault_injection.py).

The pieces, shared with the project's own tests (tests/harness.py is a thin layer over them):

* ``NodeProcess``: one ``odradek serve`` subprocess on a data dir, restartable on the same data; its stderr
  (the node's log) kept per start; stopped gracefully (SIGTERM) or not (SIGKILL).
* ``ProcessCluster``: nodes laid out as ``odradek dev-cluster`` lays them out (broker/testing/dev_cluster.py
  ``node_configs``) on ports reserved for the cluster's lifetime; start, stop and faults per node.
* ``EmbeddedCluster``: a ``ProcessCluster`` with test-friendly defaults, a temporary data dir, a context
  manager, and questions a test asks (``leader_of``, ``controller``).

Every wait is bounded. A node never outlives the Python process that started it: killed at interpreter
exit (atexit) and, when started from the main thread on Linux, by the kernel when that process dies
however it dies (``PR_SET_PDEATHSIG``, set by the node itself at start; not from other threads, since
the kernel sends it when the starting *thread* ends).
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from broker.config import DEFAULTS
from broker.network.blocking_request import request
from broker.testing.dev_cluster import node_configs, node_ids
from broker.network.fault_injection import CONFIG_KEY as FAULT_HOOK_KEY, RULE_CHANGED as FAULT_RULE_LINE
from protocol.generated.messages import MetadataRequest
from protocol.generated.messages.metadata_request import MetadataRequestTopic

# the directory holding the ``broker`` package: a node imports the same code as its parent
SOURCE_ROOT = Path(__file__).resolve().parents[2]  # <root>/broker/testing/this file
# ``odradek`` (the console script's entry point) for this interpreter and this code
ODRADEK = [sys.executable, "-m", "broker.cli"]
TEST_CLUSTER_ID = "b2RyYWRlay10ZXN0LWNsdQ"

# failover in seconds rather than Kafka's tens of seconds: elections, broker fencing, ISR shrink
FAST_FAILOVER = {"controller.quorum.election.timeout.ms": 500, "controller.quorum.fetch.timeout.ms": 1000,
                 "controller.quorum.election.backoff.max.ms": 300, "controller.quorum.request.timeout.ms": 1000,
                 "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500,
                 "replica.lag.time.max.ms": 4000}
#: the same settings at Kafka's defaults, for the cases a cluster test keeps at the timers users run with
KAFKA_DEFAULT_TIMERS = {k: DEFAULTS[k] for k in FAST_FAILOVER}

_PARENT_ENV = "ODRADEK_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_LIVE: set["NodeProcess"] = set()  # started and not yet seen to exit: killed at interpreter exit


def _kill_live_nodes() -> None:
    for node in list(_LIVE):
        try:
            node.kill()
        except Exception:  # noqa: BLE001 - the others still go
            pass


atexit.register(_kill_live_nodes)


def _die_with_parent() -> None:
    """In a node started by ``NodeProcess``: SIGKILL when the starting thread's process dies."""
    parent = int(os.environ.pop(_PARENT_ENV, "0") or 0)
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # reparented before prctl: the parent may already be gone
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(1)


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
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class NodeProcess:
    """``odradek serve`` in a subprocess (port 0 unless its overrides name listeners); restartable on the same
    data dir. ``prefix`` is prepended to the command (e.g. ``ip netns exec NS``). ``command`` runs another
    ``odradek`` command instead of ``serve`` with the overrides (``["container-run"]``), and ``env`` replaces the
    ``KAFKA_*`` and ``CLUSTER_ID`` variables of this process's environment for it."""

    def __init__(self, data_dir: Path, overrides: dict | None = None, prefix: list[str] | None = None,
                 command: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.command = None if command is None else list(command)
        self.env = None if env is None else dict(env)
        self.overrides = dict(overrides or {})
        self.prefix = list(prefix or [])
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self._stderr = None
        self._port_box: list[int] = []
        self._metrics_box: list[int] = []
        self.stdout_lines: collections.deque[str] = collections.deque(maxlen=10_000)
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0, wait: bool = True) -> "NodeProcess":
        """Spawn the node and (``wait``) return once it listens; ``wait_started`` finishes a start that did
        not wait (cluster nodes start together: each waits for a quorum of the others)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        # one node, as config/single-node.yaml, unless the overrides say otherwise
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
                 "log.dirs": self.data_dir, "metrics.prometheus.listener": "",
                 "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
                 "transaction.state.log.min.isr": 1, "share.coordinator.state.topic.replication.factor": 1,
                 "share.coordinator.state.topic.min.isr": 1, **self.overrides}
        # the properties go in a file only its owner reads, never on the command line: they may hold passwords
        # (ps shows every process's argv)
        config_path = self.data_dir.parent / f"{self.data_dir.name}.yaml"
        fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump({k: (None if v == "" else v if isinstance(v, (int, float, bool, type(None))) else str(v))
                            for k, v in props.items()}, f)
        args = [*self.prefix, sys.executable, "-m", "broker.testing.node_runner", "serve", "--config",
                str(config_path)]
        if self.command is not None:
            args = [*self.prefix, sys.executable, "-m", "broker.testing.node_runner", *self.command]
        self.starts += 1
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = open(self.data_dir.parent / f"broker-{self.data_dir.name}-{self.starts}.stderr", "wb")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT),
                                                                       os.environ.get("PYTHONPATH")]))}
        env.pop(_PARENT_ENV, None)
        if self.env is not None:
            env = {k: v for k, v in env.items() if not k.startswith("KAFKA_") and k != "CLUSTER_ID"}
            env.update(self.env)
        if threading.current_thread() is threading.main_thread():
            env[_PARENT_ENV] = str(os.getpid())
        self.proc = subprocess.Popen(args, cwd=self.data_dir.parent, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, env=env)
        _LIVE.add(self)
        port: list[int] = []
        metrics: list[int] = []
        proc = self.proc
        lines = self.stdout_lines

        def read_ports() -> None:
            assert proc.stdout is not None
            # reads stdout to its end, so the node never blocks on a full pipe
            for line in proc.stdout:
                lines.append(line)  # the last 10,000 lines of every start: a test greps them for secrets
                m = re.search(r"listening on \w+://[^\s:]+:(\d+)", line)
                if m and not port:  # the first listener
                    port.append(int(m.group(1)))
                m = re.search(r"metrics on http://[^\s]*:(\d+)/metrics", line)
                if m:
                    metrics.append(int(m.group(1)))

        threading.Thread(target=read_ports, name=f"odradek-{self.data_dir.name}-stdout", daemon=True).start()
        self._port_box = port
        self._metrics_box = metrics
        if wait:
            self.wait_started(timeout)
        return self

    def wait_started(self, timeout: float = 60.0) -> "NodeProcess":
        assert self.proc is not None
        port = self._port_box
        deadline = time.monotonic() + timeout
        while not port:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node exited with {self.proc.returncode} before listening:\n{self.stderr_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"node did not start within {timeout}s:\n{self.stderr_tail()}")
            time.sleep(0.02)
        self.port = port[0]
        return self

    @property
    def metrics_port(self) -> int:
        """The current start's Prometheus port, as the node printed it: start it with
        ``metrics.prometheus.listener`` ``127.0.0.1:0`` (a port reserved up front and bound later can be
        taken by another process in between)."""
        deadline = time.monotonic() + 10
        while not self._metrics_box:
            if time.monotonic() > deadline or not self.alive():
                raise RuntimeError(f"node printed no metrics port:\n{self.stderr_tail()}")
            time.sleep(0.02)
        return self._metrics_box[0]

    def stderr_tail(self, n: int = 4000) -> str:
        if self._stderr is None:
            return ""
        if not self._stderr.closed:
            self._stderr.flush()
        data = Path(self._stderr.name).read_bytes()
        return data[-n:].decode(errors="replace")

    @property
    def log_path(self) -> Path:
        """The current start's stderr: the node's log."""
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
        """SIGTERM and wait: a graceful stop (of a paused node too); returns the exit code."""
        self.send_sigterm()
        return self.wait_exit(timeout)

    def send_sigterm(self) -> None:
        """SIGTERM (and SIGCONT, for a paused node), once: a second SIGTERM can land after the node's event loop
        has closed and taken its handler with it, and kill the process instead (exit -15)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the exit a ``send_sigterm`` asked for; kill -9 and fail after ``timeout``."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"node ignored SIGTERM for {timeout}s:\n{self.stderr_tail()}")

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing (a GC pause, a frozen VM)."""
        assert self.proc is not None and self.proc.poll() is None
        self.proc.send_signal(signal.SIGSTOP)

    def running(self) -> bool:
        """Alive and not stopped by SIGSTOP (a paused node takes in nothing until it is resumed)."""
        if not self.alive():
            return False
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rpartition(")")[2].split()[0] not in ("T", "t", "Z")

    def resume(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL (also of a paused node): no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        _LIVE.discard(self)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.terminate(timeout=15)
            except AssertionError:
                pass
        _LIVE.discard(self)
        if self._stderr is not None:
            self._stderr.close()


def quorum_leader_of(nodes: dict[int, NodeProcess]) -> tuple[int, int]:
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


NO_FAULTS = {"drop": [], "drop_api_keys": []}  # a fault-hook rule that drops nothing


class ProcessCluster:
    """A KRaft cluster of ``odradek serve`` processes under ``root`` (``node<id>`` each): ``combined`` nodes run
    broker and controller, ``controllers`` only the controller (voters without a broker listener), ``brokers``
    only the broker (observers of the quorum). Voters get the ids from 1 (combined first), then the brokers;
    ports are reserved per node for the cluster's lifetime. ``fault_hook`` gives every node the test-only
    fault file that ``isolate`` and ``heal`` write."""

    def __init__(self, root: Path, combined: int = 3, controllers: int = 0, brokers: int = 0,
                 overrides: dict | None = None, fault_hook: bool = False, cluster_id: str = TEST_CLUSTER_ID) -> None:
        self.root = Path(root)
        self.listener_ports: dict[str, dict[int, int]] = {}  # add_listener's: name -> node id -> port
        self.fault_hook = fault_hook
        voter_ids, broker_ids = node_ids(combined, controllers, brokers)
        ports = reserve_ports(len(broker_ids) + len(voter_ids))
        self.broker_ports = dict(zip(broker_ids, ports[:len(broker_ids)]))
        self.controller_ports = dict(zip(voter_ids, ports[len(broker_ids):]))
        configs = node_configs(self.root, self.controller_ports, self.broker_ports, overrides, cluster_id,
                               {i: {FAULT_HOOK_KEY: self._fault_file(i)} for i in sorted(
                                   set(voter_ids) | set(broker_ids))} if fault_hook else None)
        self.nodes: dict[int, NodeProcess] = {}
        self._rules: dict[int, dict] = {}  # the fault rule last written per node (absent: NO_FAULTS)
        for i, props in configs.items():
            data = Path(props["log.dirs"])
            data.mkdir(parents=True, exist_ok=True)
            self.nodes[i] = NodeProcess(data, props)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.broker_ports.values())

    @property
    def broker_ids(self) -> list[int]:
        return list(self.broker_ports)

    def client_address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.broker_ports[node_id]}"

    def add_listener(self, name: str, protocol: str, settings: dict | None = None) -> dict[int, int]:
        """Another client listener on every broker, before ``start``: ``name`` speaking ``protocol`` (SSL,
        SASL_PLAINTEXT, ...) on a port reserved per broker, advertised beside the others and added to
        ``listener.security.protocol.map``; ``settings`` are its ``listener.name.<name>.*`` properties (without
        the prefix). Node id -> port; ``listener_bootstrap(name)`` is its bootstrap list."""
        name = name.upper()
        ports = dict(zip(self.broker_ports, reserve_ports(len(self.broker_ports))))
        prefix = f"listener.name.{name.lower()}."
        for i, node in self.nodes.items():
            props = node.overrides
            props["listener.security.protocol.map"] = ",".join(filter(None, (
                props.get("listener.security.protocol.map") or "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"{name}:{protocol}")))
            props.update({f"{prefix}{k}": v for k, v in (settings or {}).items()})
            if i in ports:
                props["listeners"] = f"{props['listeners']},{name}://127.0.0.1:{ports[i]}"
                props["advertised.listeners"] = f"{props['advertised.listeners']},{name}://127.0.0.1:{ports[i]}"
        self.listener_ports[name] = ports
        return ports

    def listener_bootstrap(self, name: str) -> str:
        """``127.0.0.1:port,...`` of every broker's listener ``name`` (``add_listener``)."""
        return ",".join(f"127.0.0.1:{p}" for p in self.listener_ports[name.upper()].values())

    def start(self, node_id: int | None = None, timeout: float = 60.0) -> None:
        """Start one node (or all, together), retrying a node while its reserved port is still held."""
        ids = [node_id] if node_id is not None else list(self.nodes)
        for i in ids:
            self.nodes[i].start(wait=False)
        deadline = time.monotonic() + timeout
        for i in ids:
            for attempt in range(20):
                try:
                    self.nodes[i].wait_started(max(1.0, deadline - time.monotonic()))
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

    def _set_faults(self, node_id: int, drop: list[int], api_keys: list[int] | None = None) -> None:
        """Write the node's rule and, when it changes one a running node holds, wait until the node has taken it
        (it polls the file every 0.1 s and logs each change): a test that went on at once raced the node (a
        partition move meant to stall on a cut link completed before the cut)."""
        path = self._fault_file(node_id)
        rule = {"drop": sorted(drop), "drop_api_keys": sorted(api_keys or [])}
        node = self.nodes[node_id]
        changed = rule != self._rules.get(node_id, NO_FAULTS)
        seen = node.log_lines(FAULT_RULE_LINE) if changed and node.running() else None
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rule))
        os.replace(tmp, path)  # the node never reads half a file
        self._rules[node_id] = rule
        if seen is not None:
            wait_until(lambda: node.log_lines(FAULT_RULE_LINE) > seen or not node.running(), 10, 0.02,
                       f"node {node_id} to take its fault rule {rule}")

    def drop_requests(self, node_id: int, to: list[int], api_keys: list[int] | None = None) -> None:
        """One-way: ``node_id``'s requests to the nodes ``to`` (only those of ``api_keys``, when named) are lost
        (``[]`` restores them); the rest of its traffic flows. ``isolate`` is this in both directions for every
        peer."""
        assert self.fault_hook, "start the cluster with fault_hook=True"
        self._set_faults(node_id, to, api_keys)

    def isolate(self, node_id: int) -> None:
        """Cut ``node_id`` off from every other node (both directions); clients still reach it."""
        assert self.fault_hook, "start the cluster with fault_hook=True"
        self._set_faults(node_id, [i for i in self.nodes if i != node_id])
        for i in self.nodes:
            if i != node_id:
                self._set_faults(i, [node_id])

    def heal(self) -> None:
        """Undo every ``isolate``: all nodes reach each other again."""
        for i in self.nodes:
            self._set_faults(i, [])

    def terminate(self, timeout: float = 30.0) -> dict[int, int]:
        """A graceful stop of every node (SIGTERM, controlled shutdown) in Kafka's order: the broker-only nodes
        first, together, then the voters one at a time; node id -> exit code. A broker's controlled shutdown needs
        the controller quorum to confirm it: brokers stopped after the controllers each waited out their grace
        (10 s) for an answer that could not come. The voters go one by one, so each leaves a quorum that has its
        last records (voters stopped together can leave one with an uncommitted tail that no other log has); a
        combined node stopped last has no quorum for its own controlled shutdown and waits out its grace."""
        codes: dict[int, int] = {}
        brokers_only = [i for i in self.nodes if i not in self.controller_ports and self.nodes[i].alive()]
        for i in brokers_only:
            self.nodes[i].send_sigterm()
        for i in brokers_only:
            codes[i] = self.nodes[i].wait_exit(timeout)
        for i in self.controller_ports:
            if self.nodes[i].alive():
                codes[i] = self.nodes[i].terminate(timeout)
        return codes

    def close(self) -> None:
        """SIGKILL every node (a test cluster has nothing worth a graceful shutdown) and close its log."""
        for n in self.nodes.values():
            n.kill()
        for n in self.nodes.values():
            n.close()


class EmbeddedCluster(ProcessCluster):
    """A replicated KRaft cluster on 127.0.0.1 for a test suite, one ``odradek serve`` process per node::

        with EmbeddedCluster(brokers=3) as c:
            admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
            ...
            c.kill(c.leader_of("orders", 0))   # kill -9 the partition's leader
            c.restart(node)                    # the same node again, on its data

    ``brokers`` nodes run broker and controller in one process (ids 1..brokers), unless ``controllers`` is
    given: then ``controllers`` controller-only nodes (ids 1..controllers) and ``brokers`` broker-only nodes
    (the next ids). Ports are ephemeral (reserved for the cluster's lifetime, so a restarted node comes back
    at the same address); data goes to a temporary directory removed by ``stop`` unless ``data_dir`` is
    given (then ``data_dir/node<id>``, kept, and a second cluster on it restarts the same cluster).

    ``overrides`` (Kafka property names) go to every node, over these test-friendly defaults:

    * failover in seconds: ``broker.session.timeout.ms=3000``, ``broker.heartbeat.interval.ms=500``,
      ``replica.lag.time.max.ms=4000``, ``controller.quorum.election.timeout.ms=500``,
      ``controller.quorum.fetch.timeout.ms=1000``, ``controller.quorum.election.backoff.max.ms=300``,
      ``controller.quorum.request.timeout.ms=1000`` (``FAST_FAILOVER``);
    * ``offsets.topic.replication.factor=min(3, brokers)`` so a group's coordinator fails over with its
      ``__consumer_offsets`` partition, and ``offsets.topic.num.partitions=6`` so that topic is made quickly;
    * ``group.initial.rebalance.delay.ms=0``: a group's first assignment does not wait 3 s for more members;
    * ``transaction.state.log.replication.factor=min(3, brokers)``, ``transaction.state.log.min.isr=min(2,
      brokers)`` and ``transaction.state.log.num.partitions=6``: a transaction coordinator that fails over;
    * ``share.coordinator.state.topic.replication.factor=min(3, brokers)``, ``share.coordinator.state.topic.min.isr=
      min(2, brokers)`` and ``share.coordinator.state.topic.num.partitions=6``: likewise the share coordinator.

    Everything else is Kafka's default (``default.replication.factor=1``, ``min.insync.replicas=1``).

    ``start`` (or entering the ``with``) returns once every broker is registered, unfenced and answering
    Metadata, so an RF=``brokers`` topic can be created at once; it raises, with the failing node's log, after
    ``start_timeout`` seconds. ``stop`` (also on leaving the ``with``, on an exception too) kills every node;
    no node outlives the Python process that started it. Each node's log is ``c.nodes[id].log_path``.

    ``security="SASL_SSL"`` secures every listener: clients and replication speak SASL_SSL with SCRAM-SHA-512
    (the nodes' own credential and the users of ``users``, default ``client``, bootstrapped as ``odradek format
    --add-scram`` does), the quorum speaks mTLS; a CA and certificates for 127.0.0.1 are made under the data dir,
    passwords live in 0600 files, never on a command line. ``c.client_config(user)`` is a confluent-kafka
    configuration for that user. ``acls`` (AccessControlEntryRecords) are bootstrapped with them. With
    ``authorizer=True`` the nodes run Kafka's StandardAuthorizer, their own principals (the certificate's on the
    quorum, ``secure_cluster.NODE_USER`` between brokers) its super users; every other principal needs ACLs.
    """

    def __init__(self, brokers: int = 3, controllers: int = 0, data_dir: str | Path | None = None,
                 overrides: dict | None = None, start_timeout: float = 60.0, security: str | None = None,
                 users: tuple[str, ...] = ("client",), acls: tuple = (), authorizer: bool = False) -> None:
        if brokers < 1 or controllers < 0:
            raise ValueError("a cluster needs at least one broker (and a non-negative number of controllers)")
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="odradek-cluster-")
            data_dir = self._tmp.name
        self.start_timeout = start_timeout
        self._paused: set[int] = set()
        self._isolated: set[int] = set()
        defaults = {**FAST_FAILOVER, "offsets.topic.replication.factor": min(3, brokers),
                    "offsets.topic.num.partitions": 6, "group.initial.rebalance.delay.ms": 0,
                    "transaction.state.log.replication.factor": min(3, brokers),
                    "transaction.state.log.min.isr": min(2, brokers), "transaction.state.log.num.partitions": 6,
                    "share.coordinator.state.topic.replication.factor": min(3, brokers),
                    "share.coordinator.state.topic.min.isr": min(2, brokers),
                    "share.coordinator.state.topic.num.partitions": 6}
        self._security = None
        if security is not None:
            if security != "SASL_SSL":
                raise ValueError(f"security={security!r}: SASL_SSL is the secured cluster this harness makes")
            from broker.testing.secure_cluster import SecureSetup

            self._security = SecureSetup(Path(data_dir) / "security", users, authorizer)
            defaults.update(self._security.node_properties())
        super().__init__(Path(data_dir), combined=0 if controllers else brokers, controllers=controllers,
                         brokers=brokers if controllers else 0, overrides={**defaults, **(overrides or {})},
                         fault_hook=True)
        if self._security is not None:
            for node in self.nodes.values():
                self._security.bootstrap(node.data_dir, acls)
        elif acls or authorizer:
            raise ValueError("acls= and authorizer= need security=\"SASL_SSL\": without it every client is "
                             "User:ANONYMOUS")

    @property
    def security(self):
        """The ``SecureSetup`` of a ``security=`` cluster (its CA, passwords), else None."""
        return self._security

    def client_config(self, user: str = "client") -> dict:
        """A confluent-kafka (librdkafka) configuration reaching this cluster as ``user``."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self._security is not None:
            config.update(self._security.client_config(user))
        return config

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:port,...`` of every broker, for a client's ``bootstrap.servers``."""
        return self.bootstrap

    # ---- lifecycle ------------------------------------------------------------------------------------------

    def start(self, node_id: int | None = None, timeout: float | None = None) -> "EmbeddedCluster":
        """Start every node (or one) and wait until the brokers among them are unfenced and serving."""
        timeout = self.start_timeout if timeout is None else timeout
        ids = [node_id] if node_id is not None else list(self.nodes)
        deadline = time.monotonic() + timeout
        try:
            super().start(node_id, timeout)
            for i in ids:
                self._paused.discard(i)
                if i in self.broker_ports:
                    self._wait_serving(i, node_id is None, max(1.0, deadline - time.monotonic()))
        except BaseException:
            if node_id is None:
                self.stop()
            raise
        return self

    def restart(self, node_id: int, timeout: float | None = None) -> None:
        """Start a killed node again on its data, at its address; returns once it serves (a broker is
        registered and unfenced again; its replicas then catch up and rejoin the ISRs on their own)."""
        if self.nodes[node_id].alive():
            raise RuntimeError(f"node {node_id} is running: kill it first")
        self.start(node_id, timeout)

    def stop(self) -> None:
        """Kill every node and remove the temporary data dir (a given ``data_dir`` is kept)."""
        self.close()
        self._paused.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "EmbeddedCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- faults ---------------------------------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """kill -9 the node (nothing of its shutdown runs); ``restart`` brings it back."""
        self.nodes[node_id].kill()
        self._paused.discard(node_id)

    def pause(self, node_id: int) -> None:
        """SIGSTOP the node: its sockets stay open but it answers nothing (a long GC pause, a frozen VM)."""
        self.nodes[node_id].pause()
        self._paused.add(node_id)

    def resume(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        self.nodes[node_id].resume()
        self._paused.discard(node_id)

    def isolate(self, node_id: int) -> None:
        """Partition the node from every other node (both directions); clients still reach it."""
        super().isolate(node_id)
        self._isolated = {node_id}

    def heal(self) -> None:
        """Undo ``isolate``."""
        super().heal()
        self._isolated = set()

    # ---- questions ------------------------------------------------------------------------------------------

    def _answering(self) -> list[int]:
        """Brokers a request can go to: running, not paused, not cut off (their view is current)."""
        ids = [i for i in self.broker_ports if self.nodes[i].alive() and i not in self._paused]
        return [i for i in ids if i not in self._isolated] or ids

    def _metadata(self, node_id: int, topics: list[str] | None):
        return request(self.broker_ports[node_id], MetadataRequest(
            topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False), 12, timeout=5.0,
            security=self._security.probe_security() if self._security is not None else None)

    def _wait_serving(self, node_id: int, everyone: bool, timeout: float) -> None:
        """Until the broker answers Metadata naming itself (it is registered, unfenced and has caught up with
        the metadata log) and, with ``everyone``, every broker."""
        want = set(self.broker_ports) if everyone else {node_id}

        def serving() -> bool:
            if not self.nodes[node_id].alive():
                raise RuntimeError(f"node {node_id} exited:\n{self.nodes[node_id].stderr_tail()}")
            return want <= {b.node_id for b in self._metadata(node_id, []).brokers}

        try:
            wait_until(serving, timeout, 0.1, f"broker {node_id} registered, unfenced and serving",
                       retry=(OSError, ValueError))
        except AssertionError as exc:
            raise TimeoutError(f"{exc}\n{self.nodes[node_id].stderr_tail()}") from None

    def leader_of(self, topic: str, partition: int = 0, timeout: float = 30.0) -> int:
        """The partition's leader (a node id) as a running broker answers Metadata, waiting up to ``timeout``
        seconds for the topic to exist and the partition to have a leader. Right after a kill the answer may
        still name the dead node until its session times out (``broker.session.timeout.ms``)."""
        def leader() -> int | None:
            for i in self._answering():
                try:
                    md = self._metadata(i, [topic])
                except (OSError, ValueError):
                    continue
                for t in md.topics:
                    for p in t.partitions if t.error_code == 0 else ():
                        if p.partition_index == partition and p.error_code == 0 and p.leader_id >= 0:
                            return p.leader_id
                return None
            return None

        found = wait_until(lambda: (lead := leader()) is not None and (lead,), timeout, 0.1,
                           f"a leader of {topic}-{partition}")
        return found[0]

    def controller(self, timeout: float = 30.0) -> int:
        """The active controller's node id (the metadata quorum's leader: the newest epoch's leader among the
        running nodes), waiting up to ``timeout`` seconds while there is none."""
        def active() -> int | None:
            _, leader = quorum_leader_of({i: n for i, n in self.nodes.items() if i not in self._paused})
            return (leader,) if leader >= 0 and self.nodes[leader].alive() and leader not in self._paused else None

        return wait_until(active, timeout, 0.1, "an active controller")[0]

