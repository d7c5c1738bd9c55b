"""``odradek dev-cluster``: a local KRaft cluster of ``odradek serve`` processes on loopback.

``--nodes N`` combined broker+controller nodes, or ``--controllers C --brokers B`` separate ones (broker-only
nodes observe the quorum). Each node gets its directory under ``--data``, formatted with one cluster id on
the first run (``odradek format``) and kept across runs (a second run restarts the same cluster), a broker
port from ``--base-port`` (9092, 9093, ...) and a controller port 100 above it.
Prints the bootstrap servers; Ctrl-C or SIGTERM stops every node (SIGTERM: controlled shutdown).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from broker.config import ConfigException, parse_property

CLUSTER_ID = "b2RyYWRlay1kZXYtY2x1c3Q"  # a fixed id, so a second run finds the same cluster


def node_ids(combined: int, controllers: int, brokers: int) -> tuple[list[int], list[int]]:
    """(voter ids, broker ids): ``combined`` broker+controller nodes from id 1, then ``controllers``
    controller-only nodes, then ``brokers`` broker-only nodes."""
    voters = list(range(1, combined + controllers + 1))
    return voters, voters[:combined] + list(range(len(voters) + 1, len(voters) + brokers + 1))


def node_configs(data: Path, controller_ports: dict[int, int], broker_ports: dict[int, int],
                 extra: dict | None = None, cluster_id: str = CLUSTER_ID,
                 per_node: dict[int, dict] | None = None) -> dict[int, dict]:
    """node id -> Kafka properties for every node of a loopback cluster whose voters listen for the quorum on
    ``controller_ports`` and whose brokers serve clients on ``broker_ports`` (node id -> port); ``extra``
    goes to every node, ``per_node`` to one."""
    quorum = ",".join(f"{i}@127.0.0.1:{p}" for i, p in controller_ports.items())
    out = {}
    for i in sorted(set(controller_ports) | set(broker_ports)):
        roles = [r for r, ports in (("broker", broker_ports), ("controller", controller_ports)) if i in ports]
        listeners = []
        if i in broker_ports:
            listeners.append(f"PLAINTEXT://127.0.0.1:{broker_ports[i]}")
        if i in controller_ports:
            listeners.append(f"CONTROLLER://127.0.0.1:{controller_ports[i]}")
        props = {"node.id": i, "process.roles": ",".join(roles), "listeners": ",".join(listeners),
                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_ports[i]}" if i in broker_ports else None,
                 "controller.listener.names": "CONTROLLER", "controller.quorum.voters": quorum,
                 "log.dirs": str(data / f"node{i}"), "cluster.id": cluster_id,
                 "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
                 "transaction.state.log.min.isr": 1, "share.coordinator.state.topic.replication.factor": 1,
                 "share.coordinator.state.topic.min.isr": 1, "metrics.prometheus.listener": None}
        props.update(extra or {})
        props.update((per_node or {}).get(i, {}))
        out[i] = props
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="odradek dev-cluster", description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=3, help="combined broker+controller nodes (default 3)")
    ap.add_argument("--controllers", type=int, help="controller-only nodes (with --brokers)")
    ap.add_argument("--brokers", type=int, help="broker-only nodes (with --controllers)")
    ap.add_argument("--data", default="./data/dev-cluster", help="a directory per node is made under it")
    ap.add_argument("--base-port", type=int, default=9092)
    ap.add_argument("--override", action="append", default=[], metavar="key=value",
                    help="a property for every node")
    ap.add_argument("--compose", metavar="FILE", help="run a compose file's nodes instead (docker/compose.yaml), "
                    "configured from their environment as in the containers: broker/testing/compose_cluster.py")
    ap.add_argument("--free-ports", action="store_true", help="with --compose: published ports get free ports too")
    args = ap.parse_args(argv)
    if args.compose:  # broker/cli.py hands --compose to broker/testing/compose_cluster.py before this parser
        ap.error("--compose: run it as `odradek dev-cluster --compose FILE`")
    if (args.controllers is None) != (args.brokers is None):
        ap.error("--controllers and --brokers go together")
    combined = 0 if args.controllers is not None else args.nodes
    if (combined or args.controllers) < 1 or (args.brokers is not None and args.brokers < 1):
        ap.error("a cluster needs at least one controller and one broker")
    extra = {}
    for item in args.override:
        k, sep, v = item.partition("=")
        if not sep:
            ap.error(f"override {item!r} is not key=value")
        try:  # typed as `odradek serve --override` reads it, so the node's YAML holds num.partitions: 4, not '4'
            extra[k.strip()] = parse_property(k.strip(), v)
        except ConfigException as exc:
            ap.error(str(exc))
    data = Path(args.data).resolve()
    voters, brokers = node_ids(combined, args.controllers or 0, args.brokers or 0)
    # brokers on base-port, base-port+1, ... by node id; controllers 100 above
    # a group's coordinator fails over with its __consumer_offsets partition (``--override`` still wins)
    extra = {"offsets.topic.replication.factor": min(3, len(brokers)),
             "transaction.state.log.replication.factor": min(3, len(brokers)),
             "transaction.state.log.min.isr": min(2, len(brokers)), "transaction.state.log.num.partitions": 6,
             "share.coordinator.state.topic.replication.factor": min(3, len(brokers)),
             "share.coordinator.state.topic.min.isr": min(2, len(brokers)),
             "share.coordinator.state.topic.num.partitions": 6, **extra}
    configs = node_configs(data, {i: args.base_port + 100 + i - 1 for i in voters},
                           {i: args.base_port + i - 1 for i in brokers}, extra)
    procs: dict[int, subprocess.Popen] = {}
    formats = {}
    for i, props in configs.items():
        (data / f"node{i}").mkdir(parents=True, exist_ok=True)
        (data / f"node{i}.yaml").write_text(yaml.safe_dump(props, sort_keys=False))
        # every node formatted with the one cluster id, as kafka-storage.sh format -t (a rerun keeps the data)
        formats[i] = subprocess.Popen([sys.executable, "-m", "broker.cli", "format", "--config",
                                       str(data / f"node{i}.yaml"), "--cluster-id", CLUSTER_ID, "--ignore-formatted"],
                                      stdout=open(data / f"node{i}.log", "ab"), stderr=subprocess.STDOUT)
    for i, f in formats.items():
        if f.wait(timeout=120) != 0:
            print(f"formatting node {i} failed: see {data / f'node{i}.log'}", file=sys.stderr)
            return 1
    for i in configs:
        log = open(data / f"node{i}.log", "ab")
        procs[i] = subprocess.Popen([sys.executable, "-m", "broker.cli", "serve", "--config",
                                     str(data / f"node{i}.yaml")], stdout=log, stderr=subprocess.STDOUT)
    bootstrap = ",".join(f"127.0.0.1:{args.base_port + i - 1}" for i, p in configs.items()
                         if "broker" in p["process.roles"])
    print(f"odradek dev-cluster: {len(procs)} nodes, data and logs in {data}", flush=True)
    print(f"bootstrap servers: {bootstrap}", flush=True)
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    while not stopping:
        for i, p in procs.items():
            if p.poll() is not None:
                print(f"node {i} exited with {p.returncode}: see {data / f'node{i}.log'}", flush=True)
                stopping.append(True)
        time.sleep(0.5)
    print("stopping every node", flush=True)
    # the broker-only nodes first, together, while the quorum can still confirm their controlled shutdowns (as
    # ProcessCluster.terminate), then the voters together: every node signalled at once left brokers whose
    # confirmation was lost with the controller that granted it waiting out their 10 s grace; voters one at a time
    # would leave the last combined node without a quorum for its own (its grace, every time)
    voter_set = set(voters)
    for group in ([i for i in procs if i not in voter_set], [i for i in procs if i in voter_set]):
        for i in group:
            if procs[i].poll() is None:
                procs[i].send_signal(signal.SIGTERM)
        for i in group:
            try:
                procs[i].wait(timeout=30)
            except subprocess.TimeoutExpired:
                procs[i].kill()
    return 0
