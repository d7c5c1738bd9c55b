"""``odradek``: ``serve --config FILE [--override key=value ...]`` and ``format`` (as kafka-storage.sh format)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys

from broker.config.alter_configs import LEVELS
from broker.config import BrokerConfig, ConfigException
from broker.quorum.bootstrap_metadata import BootstrapError, check_features, parse_add_scram, write_bootstrap
from broker.errors import QuorumFailed, StartupError
from broker.quorum.log_dirs import format_log_dirs, metadata_log_dir, new_cluster_id
from broker.quorum.kraft_log import MetadataLogCorruption
from broker.quorum.metadata_snapshot import SnapshotError
from broker.quorum.state_store import QuorumStateError
from cluster.controller import BOOTSTRAP_FEATURES
import broker.gc_tuning as gc_tuning
from broker.malloc_tuning import keep_large_blocks_in_heap
from broker.node import Broker, new_event_loop
from broker.timeouts import wait_for


def _config(args) -> BrokerConfig:
    return BrokerConfig.load(args.config, args.override or ())


class JsonFormatter(logging.Formatter):
    """One JSON object per line (``logging.format: json``): time, level, logger, message, exception."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out)


def apply_log_levels(values: dict) -> list[str]:
    """``logger.<name>: LEVEL`` entries (``logger.root`` for the root logger) set log levels; returns
    what changed. Read at start and again on SIGHUP (the admin-call equivalent is BROKER_LOGGER)."""
    changed = []
    for key, value in values.items():
        if not key.startswith("logger.") or value is None:
            continue
        name = key[len("logger."):]
        level = str(value).upper()
        if level not in LEVELS:
            logging.getLogger("odradek").warning("ignoring %s=%s: not a log level", key, value)
            continue
        (logging.getLogger() if name == "root" else logging.getLogger(name)).setLevel(LEVELS[level])
        changed.append(f"{name}={level}")
    return changed


def _reload_log_levels(path: str | None) -> None:
    if path is None:
        return
    try:
        changed = apply_log_levels(BrokerConfig.load(path).values)
    except Exception as exc:  # noqa: BLE001 - a bad file must not take the broker down
        logging.getLogger("odradek").error("SIGHUP: could not reload %s: %s", path, exc)
        return
    logging.getLogger("odradek").info("SIGHUP: log levels reloaded from %s: %s", path, ", ".join(changed) or "none")


def _on_sighup(config_path: str | None, started: list) -> None:
    """SIGHUP: log levels from the config file again, and TLS listeners' keystores and truststores read again
    (new connections get the new certificates; a CA dropped from the truststore is refused from then on)."""
    _reload_log_levels(config_path)
    if started and started[0].server.authentication is not None and started[0].server.authentication.tls:
        asyncio.ensure_future(_reload_tls(started[0]))


async def _reload_tls(broker) -> None:
    log = logging.getLogger("odradek")
    try:
        contexts = broker.server.authentication.tls_contexts()
        broker.server.authentication.tls = contexts
        reloaded = await broker.server.reload_tls(contexts)
    except Exception as exc:  # noqa: BLE001 - a bad store must not take the broker down: the old one serves on
        log.error("SIGHUP: TLS stores not reloaded, the listeners keep their certificates: %s", exc)
        return
    log.info("SIGHUP: TLS stores reloaded for %s", ", ".join(reloaded) or "no listener")


async def _serve(config: BrokerConfig, config_path: str | None = None) -> None:
    apply_log_levels(config.values)
    keep_large_blocks_in_heap()
    # signal handlers first: a SIGHUP or SIGTERM arriving while the broker starts must not kill it
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    started: list[Broker] = []
    loop.add_signal_handler(signal.SIGHUP, _on_sighup, config_path, started)
    gc_tuning.enable_for_this_process()
    broker = Broker(config)
    started.append(broker)
    await broker.start()
    for name in broker.bound_listeners:
        ep = broker.advertised_endpoint(name)
        print(f"odradek node {broker.node_id}: listening on {name}://{ep.host}:{broker.bound_port(name)}", flush=True)
    print(f"odradek node {broker.node_id}: data in {', '.join(map(str, broker.log_dirs))}", flush=True)
    if broker.metrics.port is not None:
        host = str(config.get("metrics.prometheus.listener")).rpartition(":")[0] or "0.0.0.0"
        print(f"odradek node {broker.node_id}: metrics on http://{host}:{broker.metrics.port}/metrics", flush=True)
    failed = broker.raft.driver.failed
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(failed.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()
    if failed.is_set():
        logging.getLogger("odradek").error("shutting down: the metadata quorum failed")
        try:  # partition logs flushed and closed; bounded, since the controller cannot be reached through it
            await wait_for(broker.stop(grace_s=5.0), 30)
        except Exception:
            logging.getLogger("odradek").exception("stopping after the quorum failure")
        raise QuorumFailed(f"the metadata quorum failed: {broker.raft.driver.failure!r}")
    logging.getLogger("odradek").info("shutting down")
    await broker.stop()


def format_storage(config: BrokerConfig, cluster_id: str, features: dict[str, int] | None = None,
                   ignore_formatted: bool = False, scram: list | None = None) -> list:
    """``kafka-storage.sh format``: meta.properties in every log dir and, on a node with the controller role,
    bootstrap.checkpoint with the new cluster's feature levels in the metadata log dir. Returns the log dirs
    formatted now (BootstrapError, StartupError)."""
    features = dict(BOOTSTRAP_FEATURES) if features is None else features
    check_features(features)
    done = format_log_dirs(config.log_dirs, config.node_id, cluster_id, ignore_formatted)
    if "controller" in config.process_roles and done:
        path = write_bootstrap(metadata_log_dir(config.log_dirs, config.get("metadata.log.dir")), features, scram)
        print(f"Bootstrap metadata: {path} ({', '.join(f'{k}={v}' for k, v in sorted(features.items()))})")
    for d in done:
        print(f"Formatting {d} with cluster.id {cluster_id} and node.id {config.node_id}", flush=True)
    return done


def _format(config: BrokerConfig, args) -> int:
    """``odradek format``: as ``kafka-storage.sh format``."""
    features = dict(BOOTSTRAP_FEATURES)
    try:
        for item in args.feature:
            name, sep, level = item.partition("=")
            if not sep or not level.strip().isdigit():
                raise BootstrapError(f"--feature {item!r} is not name=level")
            features[name.strip()] = int(level)
        scram = [parse_add_scram(item) for item in args.add_scram]
        cluster_id = args.cluster_id or config.get("cluster.id") or new_cluster_id()
        done = format_storage(config, cluster_id, features, args.ignore_formatted, scram)
    except (BootstrapError, StartupError) as exc:
        print(f"odradek format: {exc}", file=sys.stderr)
        return 1
    if not done:
        print("All of the log directories are already formatted.")
    return 0


def setup_logging(config: BrokerConfig, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if str(config.get("logging.format")).lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def run_serve(config: BrokerConfig, config_path: str | None = None) -> int:
    """Serve until SIGTERM/SIGINT (``odradek serve``); 1 when the node cannot start."""
    loop = new_event_loop(str(config.get("event.loop")))
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(config, config_path))
    except (StartupError, BootstrapError, QuorumStateError, SnapshotError, MetadataLogCorruption,
            QuorumFailed) as exc:
        logging.getLogger("odradek").error("cannot start: %s", exc)
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    finally:
        loop.close()
    return 0


def container_run(argv: list[str]) -> int:
    """``odradek container-run [NAME=value ...]``: the image's entry point (broker/container.py's docstring)."""
    import os

    from broker.container import MOUNTED_CONFIG_DIR, formatted_ids, load, preflight
    from broker.config.container_config import ContainerConfigError

    ap = argparse.ArgumentParser(prog="odradek container-run", description="configure from the environment as "
                                 "Apache Kafka's image does, format the log dirs with CLUSTER_ID, serve")
    ap.add_argument("assignments", nargs="*", metavar="NAME=value",
                    help="environment variables set before configuring, as Kafka's image takes them")
    ap.add_argument("--mounted-config-dir", default=os.environ.get("ODRADEK_MOUNTED_CONFIG_DIR", MOUNTED_CONFIG_DIR),
                    help="a server.properties here is read first; KAFKA_* variables override it "
                         f"(default {MOUNTED_CONFIG_DIR})")
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    try:
        cfg, config, warnings = load(args.mounted_config_dir, args.assignments)
    except (ContainerConfigError, ConfigException, ValueError, OSError) as exc:
        print(f"odradek container-run: {exc}", file=sys.stderr)
        return 1
    setup_logging(config, args.log_level)
    for w in warnings:
        logging.getLogger("odradek.container").warning("%s", w)
    problem = preflight(cfg, config)
    if problem:
        logging.getLogger("odradek").error("cannot start: %s", problem)
        print(f"odradek container-run: {problem}", file=sys.stderr)
        return 1
    ids, _ = formatted_ids(config)
    if not cfg.cluster_id_defaulted:
        config.values["cluster.id"] = cfg.cluster_id  # a volume of another cluster stops the start, naming both
        config.explicit.add("cluster.id")
    try:  # launch: kafka-storage.sh format --cluster-id $CLUSTER_ID, "already formatted" is fine
        format_storage(config, ids.pop() if ids else cfg.cluster_id, ignore_formatted=True)
    except (BootstrapError, StartupError) as exc:
        print(f"odradek container-run: {exc}", file=sys.stderr)
        return 1
    return run_serve(config)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["verify-log"]:  # CRC and index check of log directories (storage/verify.py)
        from storage.verify import main as verify_main

        return verify_main(argv[1:])
    if argv[:1] == ["cluster"]:  # look at a running cluster (broker/cluster_status.py)
        from broker.cluster_status import main as cluster_main

        return cluster_main(argv[1:])
    if argv[:1] == ["container-run"]:  # the image's entry point
        return container_run(argv[1:])
    if argv[:1] in (["healthcheck"], ["random-uuid"]):  # the image's health check (broker/container.py)
        from broker.container import main as container_main

        return container_main(argv)
    if argv[:1] == ["dev-cluster"] and any(a == "--compose" or a.startswith("--compose=") for a in argv[1:]):
        from broker.testing.compose_cluster import main as compose_main  # a compose file's nodes as processes

        return compose_main(argv[1:])
    if argv[:1] == ["dev-cluster"]:  # a local cluster of processes (broker/testing/dev_cluster.py)
        from broker.testing.dev_cluster import main as dev_cluster_main

        return dev_cluster_main(argv[1:])
    ap = argparse.ArgumentParser(prog="odradek", description="A Kafka-compatible broker")
    sub = ap.add_subparsers(dest="cmd", required=True)
    # listed for --help; its own arguments are parsed by storage.verify (handled above)
    sub.add_parser("verify-log", help="check the CRCs and indexes of log directories (odradek verify-log --help)")
    sub.add_parser("dev-cluster", help="run a local KRaft cluster of processes (odradek dev-cluster --help)")
    sub.add_parser("cluster", help="look at a running cluster: odradek cluster status --bootstrap-server HOST:PORT")
    sub.add_parser("container-run", help="a container's entry point: configure from KAFKA_* variables as Kafka's "
                   "image does, format, serve (odradek container-run --help)")
    sub.add_parser("healthcheck", help="exit 0 when this node serves: registered and unfenced, or its quorum has a "
                   "leader (odradek healthcheck --help)")
    sub.add_parser("random-uuid", help="print a new cluster id (kafka-storage.sh random-uuid)")
    for name, help_ in (("serve", "run a broker"), ("format", "write meta.properties into the log dirs")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--config", "-c", help="YAML file of Kafka properties")
        p.add_argument("--override", action="append", metavar="key=value", help="override a property")
        p.add_argument("--log-level", default="INFO")
    fmt = sub.choices["format"]
    fmt.add_argument("--cluster-id", "-t", help="cluster id to write (default: cluster.id, else a new random one)")
    fmt.add_argument("--feature", "-f", action="append", default=[], metavar="name=level",
                     help="a finalized feature level for a new cluster (e.g. group.version=1)")
    fmt.add_argument("--add-scram", "-S", action="append", default=[], metavar="MECHANISM=[name=..,password=..]",
                     help="a SCRAM credential the new cluster starts with (KIP-900), e.g. for inter-broker SCRAM")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true",
                     help="skip log dirs that are already formatted instead of failing")
    args = ap.parse_args(argv)
    try:
        config = _config(args)
        config.validate()
    except (ConfigException, OSError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    setup_logging(config, args.log_level)
    if args.cmd == "format":
        return _format(config, args)
    return run_serve(config, args.config)


if __name__ == "__main__":
    sys.exit(main())
