"""Broker configuration: Kafka's property names and defaults, from a YAML file plus ``--override k=v``.

Every value of a known key is parsed by its Kafka type (broker/config/config_types.py), whatever its source; unknown
keys are kept and logged, as Kafka logs "unused" configs rather than failing. The package also holds what configs
need elsewhere: a container's environment as Kafka's image reads it (``container_config``), DescribeConfigs entries
(``config_describe``, with Kafka's documentation strings) and the AlterConfigs checks (``alter_configs``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import yaml

from broker.config.config_types import BROKER_CONFIG_TYPES, ConfigException, parse_config
from cluster.groups.group_config import GROUP_CONFIG_DEFAULTS
from cluster.authorizer import AUTHORIZER_CLASS

# Kafka 4.x defaults for the properties this broker reads (KafkaConfig / ServerLogConfigs / SocketServerConfigs).
DEFAULTS: dict[str, Any] = {
    "process.roles": "broker,controller",
    "node.id": 1,
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": None,
    "log.dirs": None,
    "log.dir": "/tmp/kafka-logs",
    "num.partitions": 1,
    "default.replication.factor": 1,
    "auto.create.topics.enable": True,
    "socket.request.max.bytes": 104857600,
    "connections.max.idle.ms": 600000,
    "log.segment.bytes": 1073741824,
    "log.roll.ms": None,
    "log.roll.hours": 168,
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": 168,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000,
    "log.index.interval.bytes": 4096,
    "log.index.size.max.bytes": 10485760,
    "log.flush.interval.messages": 9223372036854775807,
    "log.flush.interval.ms": None,
    "log.cleanup.policy": "delete",
    "message.max.bytes": 1048588,
    "max.request.partition.size.limit": 2000,
    "telemetry.max.bytes": 1048576,
    "offsets.topic.num.partitions": 50,
    "offsets.topic.replication.factor": 3,
    "cluster.id": None,
    "metadata.log.dir": None,
    "broker.rack": None,
    "min.insync.replicas": 1,
    "controller.quorum.voters": None,  # id@host:port,...: unset = a single node, its own quorum of one
    "controller.quorum.bootstrap.servers": None,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "controller.quorum.request.timeout.ms": 2000,
    "controller.quorum.retry.backoff.ms": 20,
    "metadata.log.max.record.bytes.between.snapshots": 20971520,
    "metadata.log.max.snapshot.interval.ms": 3600000,
    "metadata.log.segment.bytes": 1073741824,
    "metadata.max.retention.bytes": 104857600,
    "metadata.max.retention.ms": 604800000,
    "broker.session.timeout.ms": 9000,
    "initial.broker.registration.timeout.ms": 60000,
    "broker.heartbeat.interval.ms": 2000,
    "request.timeout.ms": 30000,
    "controller.listener.names": None,
    "inter.broker.listener.name": None,
    # replication (ReplicaFetcherThread, Partition): Kafka's defaults
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.response.max.bytes": 10485760,
    "replica.fetch.backoff.ms": 1000,
    "replica.socket.timeout.ms": 30000,
    "replica.selector.class": None,  # fetch from the closest replica (KIP-392, broker/replication/replica_selector.py)
    # incremental fetch sessions (KIP-227, broker/replication/fetch_session/): ServerConfigs' default
    "max.incremental.fetch.session.cache.slots": 1000,
    "fetch.max.bytes": 57671680,  # ServerConfigs.FETCH_MAX_BYTES_DEFAULT (55 MiB): the most one Fetch answers
    "listener.security.protocol.map": None,
    # listener security (BrokerSecurityConfigs, SaslConfigs, SocketServerConfigs): Kafka's defaults; what each
    # SASL listener serves is read in broker/security/sasl_config.py
    "security.inter.broker.protocol": "PLAINTEXT",
    "sasl.enabled.mechanisms": "GSSAPI",
    "sasl.mechanism.inter.broker.protocol": "GSSAPI",
    "sasl.mechanism.controller.protocol": "GSSAPI",
    "sasl.jaas.config": None,
    "sasl.server.max.receive.size": 524288,
    "connections.max.reauth.ms": 0,
    "connection.failed.authentication.delay.ms": 100,
    "authorizer.class.name": "",  # no authorizer: every request allowed; else Kafka's StandardAuthorizer
    "super.users": "",  # StandardAuthorizer: principals allowed everything, ;-separated
    "allow.everyone.if.no.acl.found": False,  # StandardAuthorizer: a resource no ACL names is denied
    # connection quotas (SocketServerConfigs; broker/network/connection_quotas.py): Kafka's defaults, no limits
    "max.connections": 2147483647,
    "max.connections.per.ip": 2147483647,
    "max.connections.per.ip.overrides": "",
    "max.connection.creation.rate": 2147483647,
    "quota.window.num": 11,  # QuotaConfig: samples, and seconds each, of a client quota's rate
    "quota.window.size.seconds": 1,
    # TLS (SslConfigs, BrokerSecurityConfigs): Kafka's defaults; read per listener in broker/security/tls.py
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": None,
    "ssl.keystore.password": None,
    "ssl.key.password": None,
    "ssl.keystore.key": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": None,
    "ssl.truststore.password": None,
    "ssl.truststore.certificates": None,
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.protocol": "TLSv1.3",
    "ssl.cipher.suites": None,
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.principal.mapping.rules": "DEFAULT",
    **GROUP_CONFIG_DEFAULTS,  # the group coordinator's own table (cluster/groups/group_config.py)
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "offsets.topic.segment.bytes": 104857600,
    # the transaction coordinator (TransactionLogConfig, TransactionStateManagerConfig): Kafka's defaults
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 50,
    "transaction.state.log.segment.bytes": 104857600,
    "transaction.partition.verification.enable": True,
    # the share coordinator (ShareCoordinatorConfig, KIP-932): Kafka's defaults
    "share.coordinator.state.topic.num.partitions": 50,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
    "share.coordinator.state.topic.segment.bytes": 104857600,
    "share.coordinator.snapshot.update.records.per.snapshot": 500,
    "share.coordinator.write.timeout.ms": 5000,
    "share.coordinator.state.topic.prune.interval.ms": 300000,
    "share.coordinator.cold.partition.snapshot.interval.ms": 300000,
    "add.partitions.to.txn.retry.backoff.max.ms": 100,
    "add.partitions.to.txn.retry.backoff.ms": 20,
    "transactional.id.expiration.ms": 604800000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
    "metrics.prometheus.listener": None,  # host:port of the Prometheus endpoint; unset = no endpoint
    "odradek.test.fault.injection.file": None,  # test-only fault hook (broker/network/fault_injection.py), loopback
    "event.loop": "uvloop",
    "logging.format": "text",  # text lines, or json: one object per line
}

FETCH_MAX_BYTES_DEFAULT = DEFAULTS["fetch.max.bytes"]

# properties read elsewhere (storage's LogConfig synonyms and LogManagerConfig) are known too
def _known_keys() -> set[str]:
    from storage.config import TOPIC_CONFIGS, LogManagerConfig

    keys = set(DEFAULTS)
    for d in TOPIC_CONFIGS:
        keys.update(name for name, _ in d.synonyms)
    keys.update(LogManagerConfig._NAMES)
    keys.update({"broker.id", "log.dir", "log.dirs"})
    return keys


_LISTENER_PREFIXED = re.compile(
    r"listener\.name\.[^.]*\.(?:(?:plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.)?(.*)")


def _listener_base(key: str) -> str:
    """``listener.name.<l>.[<mechanism>.]<key>`` -> ``<key>`` (Kafka's listener and mechanism prefixes)."""
    m = _LISTENER_PREFIXED.fullmatch(key)
    return m.group(1) if m else key


@dataclasses.dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(text: str) -> list[Listener]:
    """``PLAINTEXT://host:port,NAME://host:port`` as Kafka's ``listeners``; empty host = all interfaces."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, _, rest = item.partition("://")
        host, _, port = rest.rpartition(":")
        host = host.strip("[]")
        out.append(Listener(name, host, int(port)))
    return out


def parse_property(key: str, text: Any) -> Any:
    """A value read as text (a properties file, ``--override``, an environment variable): parsed by the key's
    Kafka type; a key odradek does not know (``logger.*``, a misspelling) is guessed at as before."""
    return parse_config(key, text) if key in BROKER_CONFIG_TYPES else _guess(text)


def _guess(value: Any) -> Any:
    """An unknown key's text: true/false, null/none/empty as None, an integer, else the string."""
    if not isinstance(value, str):
        return value
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", ""):
        return None
    try:
        return int(value)
    except ValueError:
        return value


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")  # Kafka's SecurityProtocol names
# SocketServerConfigs.LISTENER_SECURITY_PROTOCOL_MAP_DEFAULT: each protocol's name maps to itself
DEFAULT_SECURITY_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # SecurityProtocol.id
SERVED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_security_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map`` (``NAME:PROTOCOL,...``) as Kafka parses it: listener names upper-cased
    (ListenerName.normalised), protocols among Kafka's SecurityProtocol names."""
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in str(text).split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise ConfigException(f"Invalid value {text!r} for configuration listener.security.protocol.map: "
                                  f"{item!r} is not listener:protocol")
        protocol = protocol.strip()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigException(f"Invalid security protocol `{protocol}` defined in listener.security.protocol.map")
        out[name.strip().upper()] = protocol
    return out


class BrokerConfig:
    """Effective configuration: defaults < file < overrides."""

    def __init__(self, values: dict[str, Any] | None = None, base_dir: Path | None = None) -> None:
        """``values``: from any source; a known key's value is parsed by its Kafka type (ConfigException)."""
        self.values: dict[str, Any] = dict(DEFAULTS)
        self.explicit: set[str] = set()  # keys set by the file or overrides: DescribeConfigs' STATIC_BROKER_CONFIG
        for k, v in (values or {}).items():
            v = parse_config(k, v)
            self.values[k] = v
            if v is not None:
                self.explicit.add(k)
        self.base_dir = base_dir or Path.cwd()

    @classmethod
    def load(cls, path: str | os.PathLike | None, overrides: list[str] | tuple[str, ...] = ()) -> "BrokerConfig":
        """A YAML file of Kafka property names, or a Kafka ``server.properties`` file, then overrides."""
        values: dict[str, Any] = {}
        if path is not None:
            text = Path(path).read_text()
            if str(path).endswith(".properties"):
                from storage.checkpoints import decode_properties

                values.update({k: parse_property(k, v) for k, v in decode_properties(text).items()})
            else:
                loaded = yaml.safe_load(text) or {}
                if not isinstance(loaded, dict):
                    raise ConfigException(f"{path}: expected a mapping of Kafka property names")
                values.update(_flatten(loaded))
        for item in overrides:
            key, sep, val = item.partition("=")
            if not sep:
                raise ValueError(f"override {item!r} is not key=value")
            values[key.strip()] = parse_property(key.strip(), val)
        return cls(values)

    def validate(self) -> list[str]:
        """Raise ConfigException for an invalid value; return warnings for keys Kafka would not use."""
        from storage.config import ConfigError, LogConfig, LogManagerConfig

        for key, value in self.values.items():  # values set after construction are parsed too
            self.values[key] = parse_config(key, value)
        # ConfigDef's atLeast(n) of ServerConfigs
        for key, least in (("max.incremental.fetch.session.cache.slots", 0), ("fetch.max.bytes", 1024)):
            value = self.values.get(key)
            if value is not None and value < least:
                raise ConfigException(f"Invalid value {value} for configuration {key}: Value must be at least "
                                      f"{least}")
        from broker.replication.replica_selector import replica_selector

        try:
            replica_selector(self.values.get("replica.selector.class"))
        except ValueError as exc:
            raise ConfigException(str(exc)) from None
        try:
            self.listeners
            self.advertised_listeners
        except ValueError as exc:
            raise ConfigException(f"Invalid value for configuration listeners: {exc}") from None
        self._validate_roles()
        self._validate_listener_security()
        authorizer_class = self.values.get("authorizer.class.name")
        if authorizer_class and authorizer_class != AUTHORIZER_CLASS:
            raise ConfigException(f"authorizer.class.name={authorizer_class}: the only authorizer odradek has is "
                                  f"{AUTHORIZER_CLASS}")
        if self.values.get("odradek.test.fault.injection.file"):
            from broker.network.fault_injection import check_loopback_only

            try:
                check_loopback_only([lst.host for lst in self.listeners + self.advertised_listeners])
            except ValueError as exc:
                raise ConfigException(str(exc)) from None
        try:
            LogConfig.from_props({}, self.values)
            LogManagerConfig.from_props(self.values)
        except (ConfigError, ValueError) as exc:
            raise ConfigException(str(exc)) from None
        from cluster.groups.group_config import GroupConfig

        try:
            GroupConfig.from_props(self.values)  # GroupCoordinatorConfig's checks (group.share.* bounds)
        except ValueError as exc:
            raise ConfigException(str(exc)) from None
        known = _known_keys()
        return [f"The configuration '{k}' was supplied but isn't a known config." for k in self.values
                if k not in known and _listener_base(k) not in known and not k.startswith("logger.")]

    def _validate_roles(self) -> None:
        """``process.roles`` against the quorum and listener settings, with Kafka's messages (KafkaConfig's
        validateValues): a voter runs the controller role, a controller listens on a controller listener,
        a broker-only node does not, and a controller-only node advertises nothing to clients."""
        roles = self.process_roles
        if not roles or roles - {"broker", "controller"}:
            raise ConfigException(f"Invalid value {self.values['process.roles']!r} for configuration process.roles: "
                                  f"a non-empty list of broker and controller")
        voters_text = self.values.get("controller.quorum.voters")
        if not voters_text:
            if roles != {"broker", "controller"}:
                raise ConfigException("If using process.roles, either controller.quorum.bootstrap.servers must "
                                      "contain the set of bootstrap controllers or controller.quorum.voters must "
                                      "contain a parseable set of controllers.")
            return  # a single node, its own quorum of one
        from broker.quorum.raft_quorum import parse_voters

        try:
            voters = parse_voters(voters_text)
        except ValueError as exc:
            raise ConfigException(str(exc)) from None
        names = self.controller_listener_names
        listener_names = {lst.name for lst in self.listeners}
        if "controller" in roles:
            if self.node_id not in voters:
                raise ConfigException(f"If process.roles contains just the 'controller' role, the node id "
                                      f"{self.node_id} must be included in the set of voters "
                                      f"controller.quorum.voters={set(voters)}")
            if not names:
                raise ConfigException("controller.listener.names must contain at least one value when running "
                                      "KRaft with just the controller role")
            if not names & listener_names:
                raise ConfigException("controller.listener.names must contain at least one value appearing in "
                                      "the 'listeners' configuration when running the KRaft controller role")
        else:
            if self.node_id in voters:
                raise ConfigException(f"If process.roles contains just the 'broker' role, the node id "
                                      f"{self.node_id} must not be included in the set of voters "
                                      f"controller.quorum.voters={set(voters)}")
            if names & listener_names:
                raise ConfigException("controller.listener.names must not contain a value appearing in the "
                                      "'listeners' configuration when running KRaft with just the broker role")
        if roles == {"controller"}:
            if listener_names - names:
                raise ConfigException("The listeners config must only contain KRaft controller listeners from "
                                      "controller.listener.names when process.roles=controller")
            if self.values.get("advertised.listeners") and {a.name for a in self.advertised_listeners} - names:
                raise ConfigException("The advertised.listeners config must only contain KRaft controller listeners "
                                      "from controller.listener.names when process.roles=controller")
        elif not listener_names - names:
            raise ConfigException("a broker needs a listener that is not in controller.listener.names")

    def listener_security_protocols(self) -> dict[str, str]:
        """Kafka's effectiveListenerSecurityProtocolMap: the configured map, or the default one, to which (when the
        map is not set and no SSL or SASL listener is named) every controller listener is added as PLAINTEXT."""
        raw = self.values.get("listener.security.protocol.map")
        if raw is not None and "listener.security.protocol.map" in self.explicit:
            return parse_security_protocol_map(raw)
        protocols = dict(DEFAULT_SECURITY_PROTOCOL_MAP)
        names = {n.upper() for n in self.controller_listener_names} | {lst.name.upper() for lst in self.listeners}
        if not names & (set(SECURITY_PROTOCOLS) - {"PLAINTEXT"}):
            protocols.update({n.upper(): "PLAINTEXT" for n in self.controller_listener_names})
        return protocols

    def _validate_listener_security(self) -> None:
        """Every listener (and every controller listener a broker-only node connects to) has a security protocol,
        and this release serves it; a SASL listener's mechanisms and JAAS entries (broker/security/sasl_config.py)
        and a TLS listener's stores (broker/security/tls.py) are checked, and so is what this node authenticates
        with on its links to peers (broker/security/node_links.py). Map entries for listeners not in use are
        fine."""
        from broker.security.node_links import link_security
        from broker.security.sasl_config import listener_sasl
        from broker.security.tls import PrincipalMapper, server_context

        protocols = self.listener_security_protocols()
        for name in [lst.name for lst in self.listeners] + sorted(self.controller_listener_names):
            protocol = protocols.get(name.upper())
            if protocol is None:
                raise ConfigException(f"No security protocol defined for listener {name} (listener.security."
                                      f"protocol.map)")
            if protocol not in SERVED_SECURITY_PROTOCOLS:
                raise ConfigException(f"Listener {name} uses security protocol {protocol}: not served")
            if protocol.startswith("SASL_"):
                listener_sasl(self.values, name)
            if protocol in ("SSL", "SASL_SSL") and name in {lst.name for lst in self.listeners}:
                server_context(self.values, name, protocol)
        # this node's own links: to the inter-broker listener (a broker) and to the controllers' listener
        if "broker" in self.process_roles:
            link_security(self, self.inter_broker_listener)
        if self.controller_listener_names:
            link_security(self, self.controller_listener, controller=True)
        PrincipalMapper(self.values.get("ssl.principal.mapping.rules"))

    @property
    def inter_broker_listener(self) -> str:
        """``inter.broker.listener.name``, else the listener named after ``security.inter.broker.protocol``
        (PLAINTEXT), else the first broker listener: where followers fetch from leaders."""
        configured = self.values.get("inter.broker.listener.name")
        if configured:
            return configured
        names = [ln.name for ln in self.listeners if ln.name not in self.controller_listener_names]
        wanted = self.values.get("security.inter.broker.protocol") or "PLAINTEXT"
        return wanted if wanted in names else (names[0] if names else wanted)

    @property
    def controller_listener(self) -> str:
        """The controller listener this node connects to (Kafka's first of ``controller.listener.names``)."""
        raw = str(self.values.get("controller.listener.names") or "")
        names = [n.strip() for n in raw.split(",") if n.strip()]
        return names[0] if names else ""

    def security_protocol(self, listener: str) -> str:
        return self.listener_security_protocols().get(listener.upper(), "PLAINTEXT")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        v = self.values.get(key)
        return default if v is None else v

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def log_dirs(self) -> list[Path]:
        """``log.dirs`` (or ``log.dir``), comma separated; relative paths resolve against the cwd."""
        raw = self.values.get("log.dirs") or self.values.get("log.dir")
        items = raw if isinstance(raw, list) else str(raw).split(",")
        return [(self.base_dir / p.strip()).resolve() for p in items if str(p).strip()]

    @property
    def process_roles(self) -> frozenset[str]:
        return frozenset(r.strip() for r in str(self.values["process.roles"]).split(",") if r.strip())

    @property
    def controller_listener_names(self) -> frozenset[str]:
        raw = self.values.get("controller.listener.names")
        return frozenset(n.strip() for n in str(raw).split(",") if n.strip()) if raw else frozenset()

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(str(self.values["listeners"]))

    @property
    def advertised_listeners(self) -> list[Listener]:
        """Kafka: defaults to ``listeners``; an empty host advertises the machine's canonical host name."""
        raw = self.values.get("advertised.listeners")
        return parse_listeners(str(raw)) if raw else self.listeners


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """Allow nested YAML (``log: {dirs: ...}``) as well as dotted keys."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out
