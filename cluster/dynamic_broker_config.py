"""Dynamic BROKER configs (Kafka's DynamicBrokerConfig in KRaft): which keys IncrementalAlterConfigs and AlterConfigs
may set on a BROKER resource, at which level, and the ConfigRecords that do it.

Built: the SSL store settings Kafka reconfigures without a restart (SslConfigs.RECONFIGURABLE_CONFIGS), each under
a listener prefix (``listener.name.<l>.ssl.keystore.location`` ...), per broker only (Kafka refuses per-listener
configs at the cluster-default level). A bare ``ssl.*`` store key is refused as Kafka does (only per listener).
The connection quotas (SocketServer.ReconfigurableConfigs: ``max.connections``, ``max.connections.per.ip``,
``max.connections.per.ip.overrides``, ``max.connection.creation.rate``, the first and last also per listener) at
both levels, a broker's own over the cluster default's. Every other key (Kafka's dynamic thread pools, log cleaner,
... and the non-dynamic ones) is refused with INVALID_CONFIG. Passwords are stored as given, as Kafka's KRaft
brokers do (PasswordEncoder.NOOP: no ``password.encoder.secret`` in KRaft); DescribeConfigs never shows them.
Records are written for every key named even when its value is unchanged (KAFKA-14136): the broker then reads its
store files again."""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from protocol.errors import ErrorCode
from protocol.generated.metadata import ConfigRecord

RESOURCE_BROKER = 4

# SslConfigs.RECONFIGURABLE_CONFIGS
SSL_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
# DynamicBrokerConfig.ClusterLevelListenerConfigs: listener configs that may be cluster defaults
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate",
                                            "num.network.threads"})
_LISTENER_CONFIG = re.compile(r"listener\.name\.([^.]*)\.(.*)")
# SocketServer.ReconfigurableConfigs and, per listener, ListenerReconfigurableConfigs: the connection quotas
CONNECTION_QUOTA_CONFIGS = frozenset({"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
                                      "max.connection.creation.rate"})
LISTENER_CONNECTION_QUOTA_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate"})


class DynamicConfigError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def listener_ssl_key(name: str) -> tuple[str, str] | None:
    """``listener.name.ssl.ssl.keystore.location`` -> (``ssl``, ``ssl.keystore.location``); None for any other."""
    m = _LISTENER_CONFIG.fullmatch(name)
    if m is None or m.group(2) not in SSL_RECONFIGURABLE:
        return None
    return m.group(1), m.group(2)


def is_connection_quota_key(name: str) -> bool:
    """A connection quota setting, broker-wide or ``listener.name.<l>.``-prefixed (both levels may set them)."""
    if name in CONNECTION_QUOTA_CONFIGS:
        return True
    m = _LISTENER_CONFIG.fullmatch(name)
    return m is not None and m.group(2) in LISTENER_CONNECTION_QUOTA_CONFIGS


def connection_quota_configs(cluster_default: Mapping[str, str] | None,
                             per_broker: Mapping[str, str] | None) -> dict[str, str]:
    """The dynamic connection quota settings in force on a broker: its own over the cluster default's
    (DynamicBrokerConfig's order; the static ones are under both)."""
    return {k: v for configs in (cluster_default, per_broker) for k, v in (configs or {}).items()
            if v is not None and is_connection_quota_key(k)}


def _scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def check_keys(names: Iterable[str], per_broker: bool, refuse_unsupported: bool = True) -> None:
    """DynamicBrokerConfig.validateConfigs for the keys odradek can apply; raises DynamicConfigError. The broker
    that receives the request checks what Kafka's broker checks (``refuse_unsupported`` False); keys odradek cannot
    apply are refused by the controller, after its authorization, as INVALID_CONFIG."""
    names = set(names)
    bare = names & SSL_RECONFIGURABLE
    if bare:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only "
                                 f"per-listener using the listener prefix: {_scala_set(bare)}")
    listener = {n for n in names if _LISTENER_CONFIG.fullmatch(n) and _LISTENER_CONFIG.fullmatch(n).group(2)
                not in CLUSTER_LEVEL_LISTENER_CONFIGS}
    if listener and not per_broker:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                 f"broker id must be specified: {_scala_set(listener)}")
    other = {n for n in names if listener_ssl_key(n) is None and not is_connection_quota_key(n)}
    if other and refuse_unsupported:
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG,
                                 f"Cannot update these configs dynamically: {_scala_set(other)}")


def check_broker_name(name: str) -> None:
    """ControllerConfigurationValidator.validateBrokerName: empty (cluster default) or a broker id."""
    if name == "":
        return
    try:
        broker_id = int(name, 10)
    except ValueError:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.") \
            from None
    if broker_id < 0:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")


def applicable(configs: Mapping[str, str] | None, per_broker: bool) -> dict[str, str]:
    """A BROKER resource's stored configs that this node applies (DynamicBrokerConfig.fromPersistentProps drops,
    with an error log in Kafka, what cannot be dynamic there)."""
    return {k: v for k, v in (configs or {}).items() if per_broker and listener_ssl_key(k) is not None}


def broker_config_records(name: str, old: Mapping[str, str], new: Mapping[str, str],
                          named: Iterable[str]) -> list[ConfigRecord]:
    """ConfigRecords turning a BROKER resource's configs from ``old`` into ``new``; a key ``named`` in the request
    gets its record even when unchanged (ConfigurationControlManager, KAFKA-14136)."""
    named = set(named)
    records = []
    for k in sorted(set(old) | set(new)):
        if k not in new:
            records.append(ConfigRecord(resource_type=RESOURCE_BROKER, resource_name=name, name=k, value=None))
        elif old.get(k) != new[k] or k in named:
            records.append(ConfigRecord(resource_type=RESOURCE_BROKER, resource_name=name, name=k, value=new[k]))
    return records
