"""Kafka's ``ConfigDef.Type`` of every broker property odradek knows, and ``ConfigDef.parseType``.

Every value a broker config is given (a YAML file, a ``server.properties`` file, ``--override key=value``, a
container's ``KAFKA_*`` variables, ``odradek dev-cluster --override``) is parsed by its key's type here, as
Kafka parses each property with the type its ``ConfigDef`` declares
(clients/src/main/java/org/apache/kafka/common/config/ConfigDef.java ``parseType``):

* a string is first trimmed as Java's ``String.trim`` does (characters up to and including ``' '``: ASCII
  whitespace and control characters, not Unicode spaces such as U+00A0);
* BOOLEAN: ``true``/``false`` in any case, or a real boolean;
* INT / SHORT / LONG: an optional sign and ASCII digits (``Integer.parseInt`` and friends), within 32, 16 or
  64 bits; an integer from YAML is taken as is when in range; a boolean or a float is not a number;
* DOUBLE: ``Double.parseDouble``'s decimal form (digits, optional point and exponent, optional ``d``/``f``
  suffix, ``NaN``, ``Infinity``); an integer or float from YAML;
* STRING / PASSWORD / CLASS: the trimmed string; a YAML scalar (``1``, ``true``, ``0.5``) becomes its string, so
  ``broker.rack: 1`` is ``"1"`` and ``broker.rack: none`` stays ``"none"``;
* LIST: a YAML list, or a string split on ``\\s*,\\s*`` as Kafka splits it; kept as the comma-joined string
  (``"broker,controller"``), the form the rest of odradek reads;
* null (YAML ``null`` or absent) stays None whatever the type.

A refusal is a :class:`ConfigException` worded as Kafka's: ``Invalid value <value> for configuration <key>:
<reason>``.
"""

from __future__ import annotations

import re
from typing import Any

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")


class ConfigException(ValueError):
    """An invalid configuration value: start-up fails with a message naming key and value."""


# The type Kafka's own ConfigDef gives each property (apache/kafka at 1eb76443, Kafka 4.0 development: the
# class naming the key, and where it is defined when elsewhere), plus the properties only odradek has.
BROKER_CONFIG_TYPES: dict[str, str] = {
    # ServerLogConfigs (defined in storage's LogConfig.SERVER_CONFIG_DEF)
    "auto.create.topics.enable": BOOLEAN, "log.cleanup.policy": LIST, "log.dir": STRING, "log.dirs": STRING,
    "log.flush.interval.messages": LONG, "log.flush.interval.ms": LONG,
    "log.flush.offset.checkpoint.interval.ms": INT, "log.flush.scheduler.interval.ms": LONG,
    "log.flush.start.offset.checkpoint.interval.ms": INT, "log.index.interval.bytes": INT,
    "log.index.size.max.bytes": INT, "log.initial.task.delay.ms": LONG, "log.message.timestamp.after.max.ms": LONG,
    "log.message.timestamp.before.max.ms": LONG, "log.message.timestamp.type": STRING, "log.preallocate": BOOLEAN,
    "log.retention.bytes": LONG, "log.retention.check.interval.ms": LONG, "log.retention.hours": INT,
    "log.retention.minutes": INT, "log.retention.ms": LONG, "log.roll.hours": INT, "log.roll.jitter.hours": INT,
    "log.roll.jitter.ms": LONG, "log.roll.ms": LONG, "log.segment.bytes": INT, "log.segment.delete.delay.ms": LONG,
    "min.insync.replicas": INT, "num.partitions": INT, "num.recovery.threads.per.data.dir": INT,
    # RemoteLogManagerConfig
    "log.local.retention.bytes": LONG, "log.local.retention.ms": LONG,
    # CleanerConfig
    "log.cleaner.backoff.ms": LONG, "log.cleaner.dedupe.buffer.size": LONG, "log.cleaner.delete.retention.ms": LONG,
    "log.cleaner.enable": BOOLEAN, "log.cleaner.io.buffer.load.factor": DOUBLE, "log.cleaner.io.buffer.size": INT,
    "log.cleaner.io.max.bytes.per.second": DOUBLE, "log.cleaner.max.compaction.lag.ms": LONG,
    "log.cleaner.min.cleanable.ratio": DOUBLE, "log.cleaner.min.compaction.lag.ms": LONG, "log.cleaner.threads": INT,
    # SocketServerConfigs
    "advertised.listeners": STRING, "connections.max.idle.ms": LONG, "listener.security.protocol.map": STRING,
    "listeners": STRING, "socket.request.max.bytes": INT,
    "max.connections": INT, "max.connections.per.ip": INT, "max.connections.per.ip.overrides": STRING,
    "max.connection.creation.rate": INT,
    "connections.max.reauth.ms": LONG, "connection.failed.authentication.delay.ms": INT,
    # BrokerSecurityConfigs, SaslConfigs
    "security.inter.broker.protocol": STRING, "sasl.enabled.mechanisms": LIST,
    "sasl.mechanism.inter.broker.protocol": STRING, "sasl.mechanism.controller.protocol": STRING,
    "sasl.jaas.config": PASSWORD, "sasl.server.max.receive.size": INT,
    # ServerConfigs
    "authorizer.class.name": STRING,
    # StandardAuthorizer
    "super.users": STRING, "allow.everyone.if.no.acl.found": BOOLEAN,
    # QuotaConfig
    "quota.window.num": INT, "quota.window.size.seconds": INT,
    # SslConfigs
    "ssl.keystore.type": STRING, "ssl.keystore.location": STRING, "ssl.keystore.password": PASSWORD,
    "ssl.key.password": PASSWORD, "ssl.keystore.key": PASSWORD, "ssl.keystore.certificate.chain": PASSWORD,
    "ssl.truststore.type": STRING, "ssl.truststore.location": STRING, "ssl.truststore.password": PASSWORD,
    "ssl.truststore.certificates": PASSWORD, "ssl.client.auth": STRING, "ssl.enabled.protocols": LIST,
    "ssl.protocol": STRING, "ssl.cipher.suites": LIST, "ssl.endpoint.identification.algorithm": STRING,
    "ssl.principal.mapping.rules": STRING,
    # ServerConfigs
    "broker.id": INT, "broker.rack": STRING, "compression.gzip.level": INT, "compression.lz4.level": INT,
    "compression.type": STRING, "compression.zstd.level": INT, "max.incremental.fetch.session.cache.slots": INT,
    "fetch.max.bytes": INT,
    "max.request.partition.size.limit": INT, "message.max.bytes": INT, "request.timeout.ms": INT,
    # KRaftConfigs
    "broker.heartbeat.interval.ms": INT, "broker.session.timeout.ms": INT, "controller.listener.names": STRING,
    "initial.broker.registration.timeout.ms": INT, "metadata.log.dir": STRING,
    "metadata.log.max.record.bytes.between.snapshots": LONG, "metadata.log.max.snapshot.interval.ms": LONG,
    "metadata.log.segment.bytes": INT, "metadata.max.retention.bytes": LONG, "metadata.max.retention.ms": LONG,
    "node.id": INT, "process.roles": LIST,
    # QuorumConfig
    "controller.quorum.bootstrap.servers": LIST, "controller.quorum.election.backoff.max.ms": INT,
    "controller.quorum.election.timeout.ms": INT, "controller.quorum.fetch.timeout.ms": INT,
    "controller.quorum.request.timeout.ms": INT, "controller.quorum.retry.backoff.ms": INT,
    "controller.quorum.voters": LIST,
    # ReplicationConfigs
    "default.replication.factor": INT, "inter.broker.listener.name": STRING, "replica.fetch.backoff.ms": INT,
    "replica.fetch.max.bytes": INT, "replica.fetch.min.bytes": INT, "replica.fetch.response.max.bytes": INT,
    "replica.fetch.wait.max.ms": INT, "replica.lag.time.max.ms": LONG, "replica.selector.class": STRING,
    "replica.socket.timeout.ms": INT, "unclean.leader.election.enable": BOOLEAN,
    # GroupCoordinatorConfig
    "group.consumer.assignors": LIST, "group.consumer.heartbeat.interval.ms": INT,
    "group.consumer.max.heartbeat.interval.ms": INT, "group.consumer.max.session.timeout.ms": INT,
    "group.consumer.max.size": INT, "group.consumer.migration.policy": STRING,
    "group.consumer.min.heartbeat.interval.ms": INT, "group.consumer.min.session.timeout.ms": INT,
    "group.consumer.session.timeout.ms": INT, "group.coordinator.rebalance.protocols": LIST,
    "group.initial.rebalance.delay.ms": INT, "group.max.session.timeout.ms": INT, "group.max.size": INT,
    "group.min.session.timeout.ms": INT, "offset.metadata.max.bytes": INT,
    "group.share.assignors": LIST, "group.share.heartbeat.interval.ms": INT,
    "group.share.initialize.retry.interval.ms": INT, "group.share.record.lock.duration.ms": INT,
    "group.share.min.record.lock.duration.ms": INT, "group.share.max.record.lock.duration.ms": INT,
    "group.share.max.heartbeat.interval.ms": INT, "group.share.max.session.timeout.ms": INT,
    "group.share.max.size": INT, "group.share.min.heartbeat.interval.ms": INT,
    "group.share.min.session.timeout.ms": INT, "group.share.session.timeout.ms": INT,
    "group.share.partition.max.record.locks": INT, "group.share.delivery.count.limit": INT,
    "group.share.max.share.sessions": INT,
    "offsets.retention.check.interval.ms": LONG, "offsets.retention.minutes": INT,
    "offsets.topic.num.partitions": INT, "offsets.topic.replication.factor": SHORT,
    "offsets.topic.segment.bytes": INT,
    # TransactionLogConfig, TransactionStateManagerConfig
    "producer.id.expiration.check.interval.ms": INT, "producer.id.expiration.ms": INT,
    "transaction.state.log.min.isr": INT, "transaction.state.log.replication.factor": SHORT,
    "share.coordinator.state.topic.num.partitions": INT, "share.coordinator.state.topic.replication.factor": SHORT,
    "share.coordinator.state.topic.min.isr": SHORT, "share.coordinator.state.topic.segment.bytes": INT,
    "share.coordinator.snapshot.update.records.per.snapshot": INT, "share.coordinator.write.timeout.ms": INT,
    "share.coordinator.state.topic.prune.interval.ms": INT,
    "share.coordinator.cold.partition.snapshot.interval.ms": INT,
    "transaction.max.timeout.ms": INT, "transaction.state.log.num.partitions": INT,
    "transaction.state.log.segment.bytes": INT, "transactional.id.expiration.ms": INT,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": INT,
    "transaction.remove.expired.transaction.cleanup.interval.ms": INT,
    "transaction.partition.verification.enable": BOOLEAN,
    "add.partitions.to.txn.retry.backoff.max.ms": INT,
    "add.partitions.to.txn.retry.backoff.ms": INT,
    # MetricConfigs
    "telemetry.max.bytes": INT,
    # meta.properties' cluster.id (MetaProperties): odradek also takes it as a property (odradek format)
    "cluster.id": STRING,
    # odradek's own
    "event.loop": STRING, "logging.format": STRING, "metrics.prometheus.listener": STRING,
    "odradek.test.fault.injection.file": STRING,
}

# STRING properties odradek also accepts as a YAML list (comma-joined): the log directories
_LIST_AS_STRING = frozenset({"log.dirs", "log.dir"})

_JAVA_TRIM = "".join(map(chr, range(0x21)))  # String.trim: every char <= ' '
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)  # Integer.parseInt / Short.parseShort / Long.parseLong
_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)", re.ASCII)
_LIST_SPLIT = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # ConfigDef.COMMA_WITH_WHITESPACE (Java's \s)
_BITS = {INT: 32, SHORT: 16, LONG: 64}
_WIDTH = {INT: "a 32-bit integer", SHORT: "a 16-bit integer (short)", LONG: "a 64-bit integer (long)"}


def _shown(value: Any) -> str:
    """The value as Kafka's message shows it (its toString); a string with invisible edges is quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and (not value or not value.isprintable() or value != value.strip()):
        return repr(value)
    return str(value)


def _refuse(key: str, value: Any, reason: str) -> ConfigException:
    return ConfigException(f"Invalid value {_shown(value)} for configuration {key}: {reason}")


def _scalar_string(value: Any) -> str | None:
    """A YAML scalar as the string a properties file would have held."""
    if isinstance(value, str):
        return value.strip(_JAVA_TRIM)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return None


def parse_value(key: str, value: Any, type_: str) -> Any:
    """``value`` for ``key`` parsed as ``ConfigDef.parseType`` parses a ``type_`` (see the module's docstring)."""
    if value is None:
        return None
    trimmed = value.strip(_JAVA_TRIM) if isinstance(value, str) else None
    if type_ == BOOLEAN:
        if isinstance(value, bool):
            return value
        if trimmed is not None and trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
        raise _refuse(key, value, "Expected value to be either true or false")
    if type_ in _BITS:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif trimmed is not None:
            if not _INTEGER.fullmatch(trimmed):
                raise _refuse(key, value, f"Not a number of type {type_}")
            number = int(trimmed)
        else:
            raise _refuse(key, value, f"Expected value to be {_WIDTH[type_]}, but it was a {type(value).__name__}")
        bound = 1 << (_BITS[type_] - 1)
        if not -bound <= number < bound:
            raise _refuse(key, value, f"Not a number of type {type_}")
        return number
    if type_ == DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if trimmed is not None and _DOUBLE.fullmatch(trimmed):
            return float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
        if trimmed is not None:
            raise _refuse(key, value, f"Not a number of type {type_}")
        raise _refuse(key, value, f"Expected value to be a double, but it was a {type(value).__name__}")
    if type_ == LIST:
        if isinstance(value, (list, tuple)):
            items = [_scalar_string(v) for v in value]
            if any(i is None for i in items):
                raise _refuse(key, value, "Expected a comma separated list.")
            return ",".join(items)  # type: ignore[arg-type]
        text = _scalar_string(value)
        if text is None:
            raise _refuse(key, value, "Expected a comma separated list.")
        return ",".join(_LIST_SPLIT.split(text)) if text else ""
    if type_ in (STRING, PASSWORD, CLASS):
        if isinstance(value, (list, tuple)) and key in _LIST_AS_STRING:
            return parse_value(key, value, LIST)
        text = _scalar_string(value) if type_ == STRING else trimmed
        if text is None:
            if type_ == CLASS:
                raise _refuse(key, value, "Expected a Class instance or class name.")
            raise _refuse(key, value, f"Expected value to be a string, but it was a {type(value).__name__}")
        return text
    raise ValueError(f"unknown config type {type_}")


def parse_config(key: str, value: Any) -> Any:
    """``value`` parsed by ``key``'s type; a key odradek does not know is returned as given."""
    type_ = BROKER_CONFIG_TYPES.get(key)
    return value if type_ is None else parse_value(key, value, type_)
