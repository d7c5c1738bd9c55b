"""``odradek dev-cluster --compose docker/compose.yaml``: a compose file's nodes as local processes on loopback.

Each service of the file becomes one ``odradek container-run`` process (the image's entry point) with the
service's own ``environment``, so its configuration is derived exactly as in the container
(broker/config/container_config.py). What differs is only what a machine without containers needs:

* every container host name (the service name, its ``hostname`` and ``container_name``) is 127.0.0.1, and
  listeners bind 127.0.0.1;
* every port a node binds gets a free loopback port of its own (all containers bind the same ports); a port
  the file publishes keeps its host port (``localhost:19092`` stays ``127.0.0.1:19092``) unless ``free_ports``;
  addresses in ``KAFKA_ADVERTISED_LISTENERS``, ``KAFKA_CONTROLLER_QUORUM_VOTERS`` and
  ``KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS`` follow: ``odradek-2:9093`` is node odradek-2's port for its
  container port 9093, ``localhost:29092`` the port of whichever node publishes 29092;
* the log dirs are ``<data>/<service>`` (``<data>/<service>/<n>`` for several).

The rewritten variables are passed as variables (``KAFKA_LISTENERS`` always explicitly: a listener derived from
the advertised ones would bind 0.0.0.0). All nodes start together (``depends_on`` waits are not needed: a broker
retries until the controllers answer).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from broker.config import parse_listeners
from broker.config.config_types import ConfigException
from broker.config.container_config import ContainerConfigError, from_environ, property_to_env, voters_of
from broker.testing.embedded_cluster import NodeProcess, reserve_ports, wait_until

_LOCAL = ("localhost", "127.0.0.1", "::1")
_ANY = ("", "0.0.0.0", "::", "[::]")


@dataclass
class ComposeService:
    name: str
    hostnames: set[str]
    environment: dict[str, str]
    published: dict[int, int] = field(default_factory=dict)  # host port -> container port


def _env_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def _port_pairs(ports) -> dict[int, int]:
    out = {}
    for p in ports or ():
        if isinstance(p, dict):  # long syntax
            if p.get("published") is not None:
                out[int(p["published"])] = int(p["target"])
            continue
        text = str(p).split("/")[0]
        parts = text.split(":")
        if len(parts) >= 2 and parts[-2].isdigit():
            out[int(parts[-2])] = int(parts[-1])
    return out


def read_compose(path: str | Path) -> dict[str, ComposeService]:
    """The services of a compose file: names, host names, environment (``NAME: value`` or ``NAME=value``
    items), published ports."""
    doc = yaml.safe_load(Path(path).read_text()) or {}
    out = {}
    for name, svc in (doc.get("services") or {}).items():
        env = svc.get("environment") or {}
        if isinstance(env, list):
            env = dict(item.partition("=")[::2] for item in env)
        hostnames = {name} | {svc[k] for k in ("hostname", "container_name") if svc.get(k)}
        out[name] = ComposeService(name, hostnames, {str(k): _env_value(v) for k, v in env.items()},
                                   _port_pairs(svc.get("ports")))
    return out


class ComposeCluster:
    """The services of ``compose_file`` as ``odradek container-run`` processes under ``root`` (one directory
    per service). ``overrides``: Kafka properties for every node, passed as ``KAFKA_*`` variables."""

    def __init__(self, compose_file: str | Path, root: str | Path, free_ports: bool = True,
                 overrides: dict | None = None) -> None:
        self.root = Path(root)
        self.services = read_compose(compose_file)
        configs = {n: from_environ(s.environment, None) for n, s in self.services.items()}
        self.props = {n: c.properties for n, c in configs.items()}
        # container ports each node binds -> its loopback port
        binds: dict[str, list[int]] = {}
        for n, props in self.props.items():
            ports = [lst.port for lst in parse_listeners(str(props.get("listeners") or ""))]
            metrics = props.get("metrics.prometheus.listener")
            if metrics:
                ports.append(int(str(metrics).rpartition(":")[2]))
            binds[n] = ports
        free = iter(reserve_ports(sum(map(len, binds.values()))))
        self.port_map: dict[str, dict[int, int]] = {}
        for n, ports in binds.items():
            keep = {c: h for h, c in self.services[n].published.items()} if not free_ports else {}
            self.port_map[n] = {p: keep.get(p) or next(free) for p in ports}
        self.env = {n: self._node_env(n, overrides or {}) for n in self.services}
        self.nodes: dict[str, NodeProcess] = {}
        for n, env in self.env.items():
            data = self.root / n
            data.mkdir(parents=True, exist_ok=True)
            self.nodes[n] = NodeProcess(data, command=["container-run", "--mounted-config-dir",
                                                       str(data / "no-mounted-config")], env=env)

    # ---- addresses ------------------------------------------------------------------------------------------

    def _service_of(self, host: str) -> str | None:
        for n, s in self.services.items():
            if host in s.hostnames:
                return n
        return None

    def address(self, owner: str, host: str, port: int, bind: bool = False) -> tuple[str, int]:
        """Where ``host:port`` as seen from service ``owner`` is on loopback."""
        if bind or host in _ANY:
            return "127.0.0.1", self.port_map[owner].get(port, port)
        target = self._service_of(host)
        if target is not None:
            return "127.0.0.1", self.port_map[target].get(port, port)
        if host in _LOCAL:
            for n, s in self.services.items():
                if port in s.published:
                    return "127.0.0.1", self.port_map[n].get(s.published[port], port)
            return "127.0.0.1", port
        return host, port

    def _listeners(self, owner: str, text: str, bind: bool) -> str:
        out = []
        for lst in parse_listeners(text):
            host, port = self.address(owner, lst.host, lst.port, bind)
            out.append(f"{lst.name}://{host}:{port}")
        return ",".join(out)

    def _node_env(self, n: str, overrides: dict) -> dict[str, str]:
        props = self.props[n]
        env = {k: v for k, v in self.services[n].environment.items()
               if k not in ("KAFKA_LOG_DIRS", "KAFKA_LOG_DIR", "KAFKA_METADATA_LOG_DIR")}
        env["KAFKA_LISTENERS"] = self._listeners(n, str(props.get("listeners") or ""), bind=True)
        if props.get("advertised.listeners"):
            env["KAFKA_ADVERTISED_LISTENERS"] = self._listeners(n, str(props["advertised.listeners"]), bind=False)
        voters = voters_of(props)
        if voters:
            env["KAFKA_CONTROLLER_QUORUM_VOTERS"] = ",".join(
                f"{i}@%s:%d" % self.address(n, h, p) for i, (h, p) in voters.items())
        if props.get("controller.quorum.bootstrap.servers"):
            items = []
            for item in str(props["controller.quorum.bootstrap.servers"]).split(","):
                h, _, p = item.strip().rpartition(":")
                items.append("%s:%d" % self.address(n, h, int(p)))
            env["KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS"] = ",".join(items)
        if props.get("metrics.prometheus.listener"):
            port = int(str(props["metrics.prometheus.listener"]).rpartition(":")[2])
            env["KAFKA_METRICS_PROMETHEUS_LISTENER"] = "127.0.0.1:%d" % self.address(n, "", port, bind=True)[1]
        dirs = [d for d in str(props.get("log.dirs") or props.get("log.dir") or "").split(",") if d.strip()]
        env["KAFKA_LOG_DIRS"] = ",".join(str(self.root / n / "data" / (str(i) if len(dirs) > 1 else ""))
                                         .rstrip("/") for i in range(max(1, len(dirs))))
        if props.get("metadata.log.dir"):
            env["KAFKA_METADATA_LOG_DIR"] = str(self.root / n / "metadata")
        for k, v in overrides.items():
            env[property_to_env(k)] = _env_value(v)
        return env

    # ---- what clients use -----------------------------------------------------------------------------------

    def brokers(self) -> list[str]:
        return [n for n, p in self.props.items() if "broker" in str(p.get("process.roles", "broker,controller"))]

    def bootstrap_of(self, n: str) -> str:
        """The node's address for a client on this machine: its advertised listener for the host
        (``localhost:...`` in the file), else its first advertised listener."""
        text = str(self.props[n].get("advertised.listeners") or self.props[n].get("listeners"))
        listeners = parse_listeners(text)
        chosen = next((lst for lst in listeners if lst.host in _LOCAL), listeners[0])
        return "%s:%d" % self.address(n, chosen.host, chosen.port)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.bootstrap_of(n) for n in self.brokers())

    # ---- lifecycle ------------------------------------------------------------------------------------------

    def start(self, name: str | None = None, timeout: float = 60.0) -> "ComposeCluster":
        """Start every node (or one) and return once each is healthy (``odradek healthcheck``'s checks)."""
        names = [name] if name is not None else list(self.nodes)
        for n in names:
            self.nodes[n].start(wait=False)
        deadline = time.monotonic() + timeout
        for n in names:
            self.nodes[n].wait_started(max(1.0, deadline - time.monotonic()))
        for n in names:
            self.wait_healthy(n, max(1.0, deadline - time.monotonic()))
        return self

    def health(self, n: str) -> str | None:
        """None when the node is healthy, else why not (broker/container.py's checks)."""
        from broker.container import check_broker, check_controller, load

        if not self.nodes[n].alive():
            return "not running"
        _, config, _ = load(str(self.root / n / "no-mounted-config"), environ=self.env[n])
        if "broker" in config.process_roles:
            lst = next(x for x in config.listeners if x.name not in config.controller_listener_names)
            return check_broker(config, "127.0.0.1", lst.port, 5.0)
        return check_controller(config, 5.0)

    def wait_healthy(self, n: str, timeout: float = 60.0) -> None:
        try:
            wait_until(lambda: self.health(n) is None, timeout, 0.2, f"{n} healthy")
        except AssertionError as exc:
            raise TimeoutError(f"{exc}: {self.health(n)}\n{self.nodes[n].stderr_tail()}") from None

    def kill(self, n: str) -> None:
        self.nodes[n].kill()

    def restart(self, n: str, timeout: float = 60.0) -> None:
        self.start(n, timeout)

    def close(self) -> None:
        for node in self.nodes.values():
            node.kill()
        for node in self.nodes.values():
            node.close()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every node (controlled shutdown) and wait."""
        for node in self.nodes.values():
            if node.alive():
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            if node.proc is not None:
                try:
                    node.proc.wait(timeout=timeout)
                except Exception:  # noqa: BLE001 - killed below
                    pass
        self.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="odradek dev-cluster --compose", description=__doc__.splitlines()[0])
    ap.add_argument("--compose", required=True, help="a compose file (docker/compose.yaml)")
    ap.add_argument("--data", default="./data/dev-compose", help="a directory per service is made under it")
    ap.add_argument("--free-ports", action="store_true",
                    help="published ports get free ports too (default: they keep their host port)")
    ap.add_argument("--override", action="append", default=[], metavar="key=value",
                    help="a property for every node")
    args = ap.parse_args(argv)
    overrides = {}
    for item in args.override:
        k, sep, v = item.partition("=")
        if not sep:
            ap.error(f"override {item!r} is not key=value")
        overrides[k] = v
    data = Path(args.data).resolve()
    try:
        cluster = ComposeCluster(args.compose, data, args.free_ports, overrides)
    except (ConfigException, ContainerConfigError) as exc:  # a service's KAFKA_* value its key's type refuses
        print(f"odradek dev-cluster: {args.compose}: {exc}", file=sys.stderr)
        return 2
    stopping: list[bool] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    print(f"odradek dev-cluster: {len(cluster.nodes)} nodes of {args.compose}, data and logs in {data}", flush=True)
    for n, env in cluster.env.items():
        ports = ", ".join(f"{c}->{h}" for c, h in cluster.port_map[n].items())
        print(f"  {n}: {env.get('KAFKA_PROCESS_ROLES', 'broker,controller')} node {env.get('KAFKA_NODE_ID', '1')}, "
              f"ports {ports}", flush=True)
    try:
        cluster.start(timeout=120)
    except (RuntimeError, TimeoutError) as exc:
        print(f"odradek dev-cluster: {exc}", file=sys.stderr)
        cluster.close()
        return 1
    print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
    while not stopping:
        for n, node in cluster.nodes.items():
            if not node.alive():
                print(f"{n} exited: see {node.log_path}", flush=True)
                stopping.append(True)
        time.sleep(0.5)
    print("stopping every node", flush=True)
    cluster.stop()
    return 0

