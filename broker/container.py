"""The image's commands: ``odradek container-run`` (the entry point; broker/cli.py's ``container_run`` on the
checks here), ``odradek healthcheck`` (its HEALTHCHECK) and ``odradek random-uuid``.

``container-run [NAME=value ...]``: the node's configuration from its environment as Apache Kafka's image
builds it (broker/config/container_config.py: ``KAFKA_*`` variables, a mounted ``/mnt/shared/config/server.properties``,
``CLUSTER_ID``), checked before anything is written (a quorum list that cannot name this node, a volume
formatted for another cluster or node id, a missing ``CLUSTER_ID`` on a new volume of a multi-node cluster,
another running node at this voter's quorum address); the log dirs formatted with ``CLUSTER_ID`` when they are
not yet (as ``odradek format``); then it serves in the same process, exactly as ``odradek serve``
(SIGTERM: controlled shutdown). A node that cannot start exits 1 with the conflict named.

``healthcheck``: exit 0 only when this node serves. A node with the broker role: ApiVersions, then Metadata on
its own client listener (the one the environment gives it, or ``--bootstrap host:port``) must list this node id
at this node's advertised address: a fenced or unregistered broker is not in Metadata's brokers, and a second
node started with the same id is listed at the other node's address. A controller-only node: DescribeQuorum on
its controller listener, answered, and the quorum has a leader (asked of the other voters when this one does
not lead). Not a bare TCP connect.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from broker.config import BrokerConfig, ConfigException, Listener
from broker.config.container_config import (
    MOUNTED_CONFIG_DIR, ContainerConfig, ContainerConfigError, cluster_id_problem, from_environ, quorum_problem,
    voters_of,
)

log = logging.getLogger("odradek.container")

_LOCAL_HOSTS = ("", "0.0.0.0", "::", "[::]")


def _mounted(config_dir: str) -> str | None:
    path = Path(config_dir) / "server.properties"
    return path.read_text() if path.is_file() else None


def load(config_dir: str = MOUNTED_CONFIG_DIR, args: list[str] | tuple[str, ...] = (),
         environ=None) -> tuple[ContainerConfig, BrokerConfig, list[str]]:
    """(container config, broker config, warnings) from the environment (ContainerConfigError,
    ConfigException)."""
    cfg = from_environ(os.environ if environ is None else environ, _mounted(config_dir), args,
                       read_file=lambda path: Path(path).read_text())
    config = BrokerConfig(cfg.properties)
    warnings = cfg.warnings + config.validate()
    return cfg, config, warnings


def formatted_ids(config: BrokerConfig) -> tuple[set[str], bool]:
    from storage.checkpoints import MetaProperties

    ids, unformatted = set(), False
    for d in config.log_dirs:
        p = d / "meta.properties"
        if p.exists():
            m = MetaProperties.read(str(p))
            if m.cluster_id:
                ids.add(m.cluster_id)
        else:
            unformatted = True
    return ids, unformatted


def _answers_kafka(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether something at host:port answers ApiVersions (a running node)."""
    from broker.network.blocking_request import request
    from protocol.generated.messages import ApiVersionsRequest

    try:
        request(port, ApiVersionsRequest(client_software_name="odradek-container-run",
                                         client_software_version="1"), 3, timeout=timeout, host=host)
        return True
    except (OSError, ValueError, ConnectionError):
        return False


def preflight(cfg: ContainerConfig, config: BrokerConfig) -> str | None:
    """The conflict that keeps this node from starting, or None."""
    problem = quorum_problem(config.values)
    if problem:
        return problem
    ids, unformatted = formatted_ids(config)
    problem = cluster_id_problem(cfg, ids, unformatted)
    if problem:
        return problem
    voters = voters_of(config.values)
    if config.node_id in voters and "controller" in config.process_roles:
        host, port = voters[config.node_id]
        # nothing of ours listens yet: whatever answers at our quorum address is another node with our id
        if _answers_kafka(host, port):
            return (f"another running node already answers at {host}:{port}, node {config.node_id}'s address in "
                    f"controller.quorum.voters: is node id {config.node_id} used twice?")
    return None


def _client_listener(config: BrokerConfig) -> Listener:
    controller = config.controller_listener_names
    bound = [lst for lst in config.listeners if lst.name not in controller]
    inter = config.get("inter.broker.listener.name")
    for lst in bound:
        if lst.name == inter:
            return lst
    return bound[0]


def _host(listener: Listener) -> str:
    return "127.0.0.1" if listener.host in _LOCAL_HOSTS else listener.host


def check_broker(config: BrokerConfig, host: str, port: int, timeout: float, check_address: bool = True
                 ) -> str | None:
    """None when the broker at host:port answers ApiVersions and lists this node in Metadata (at one of its
    advertised addresses, with ``check_address``); else what is wrong."""
    from broker.network.blocking_request import request
    from protocol.generated.messages import ApiVersionsRequest, MetadataRequest

    from broker.security.node_links import link_security

    try:  # the node's own credentials for the listener, as its replication links use them
        security = link_security(config, _client_listener(config).name)
        versions = request(port, ApiVersionsRequest(client_software_name="odradek-healthcheck",
                                                    client_software_version="1"), 3, timeout=timeout, host=host,
                           security=security)
        if versions.error_code:
            return f"ApiVersions at {host}:{port} answered error {versions.error_code}"
        md = request(port, MetadataRequest(topics=[], allow_auto_topic_creation=False), 12, timeout=timeout,
                     host=host, security=security)
    except (OSError, ValueError, ConnectionError) as exc:
        return f"no answer at {host}:{port}: {exc}"
    mine = [b for b in md.brokers if b.node_id == config.node_id]
    if not mine:
        return (f"node {config.node_id} is not among the registered, unfenced brokers "
                f"({sorted(b.node_id for b in md.brokers)}) that {host}:{port} knows")
    advertised = config.advertised_listeners
    b = mine[0]
    if check_address and not any(b.port == a.port and (a.host in _LOCAL_HOSTS or a.host == b.host) for a in advertised):
        return (f"node {config.node_id} is registered at {b.host}:{b.port}, not at this node's advertised "
                f"{', '.join(f'{a.host}:{a.port}' for a in advertised)}: another node uses id {config.node_id}")
    return None


def check_controller(config: BrokerConfig, timeout: float) -> str | None:
    """None when this controller answers DescribeQuorum and the quorum has a leader."""
    from broker.network.blocking_request import request
    from protocol.generated.messages import DescribeQuorumRequest
    from protocol.generated.messages.describe_quorum_request import PartitionData, TopicData

    body = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                   partitions=[PartitionData(partition_index=0)])])
    names = config.controller_listener_names
    own = [lst for lst in config.listeners if lst.name in names]
    if not own:
        return "no controller listener in listeners"
    targets = [(_host(own[0]), own[0].port)]
    targets += [(h, p) for i, (h, p) in sorted(voters_of(config.values).items()) if i != config.node_id]
    answered_self = False
    from broker.security.node_links import link_security

    security = link_security(config, config.controller_listener, controller=True)
    for n, (host, port) in enumerate(targets):
        try:
            part = request(port, body, 0, timeout=timeout, host=host, security=security).topics[0].partitions[0]
        except (OSError, ValueError, ConnectionError, IndexError) as exc:
            if n == 0:
                return f"this controller does not answer DescribeQuorum at {host}:{port}: {exc}"
            continue
        answered_self = answered_self or n == 0
        if part.error_code == 0 and part.leader_id >= 0:
            return None
    return "the quorum has no leader" if answered_self else "this controller does not answer"


def healthcheck(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="odradek healthcheck", description=__doc__.split("\n\n")[2])
    ap.add_argument("--bootstrap", metavar="HOST:PORT", help="this node's client listener (default: from the "
                    "environment, as container-run configures it; then only the node id is checked, not its address)")
    ap.add_argument("--mounted-config-dir", default=os.environ.get("ODRADEK_MOUNTED_CONFIG_DIR", MOUNTED_CONFIG_DIR))
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args(argv)
    try:
        _, config, _ = load(args.mounted_config_dir)
    except (ContainerConfigError, ConfigException, ValueError, OSError) as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    if args.bootstrap:
        host, _, port = args.bootstrap.rpartition(":")
        problem = check_broker(config, host or "127.0.0.1", int(port), args.timeout, check_address=False)
    elif "broker" in config.process_roles:
        lst = _client_listener(config)
        problem = check_broker(config, _host(lst), lst.port, args.timeout)
    else:
        problem = check_controller(config, args.timeout)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    print(f"healthy: node {config.node_id}")
    return 0


def main(argv: list[str]) -> int:
    cmd, rest = argv[0], argv[1:]
    if cmd == "healthcheck":
        return healthcheck(rest)
    if cmd == "random-uuid":
        from broker.quorum.log_dirs import new_cluster_id

        print(new_cluster_id())
        return 0
    raise SystemExit(f"unknown command {cmd}")
