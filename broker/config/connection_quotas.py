"""The connection quota settings of a node's config (broker/network/connection_quotas.py enforces them): which
keys they are, parsed by their Kafka types (a listener-prefixed one by its base key's), checked as Kafka checks a
change (cluster/connection_quotas.validate), and ``max.connections.per.ip.overrides`` with its host names resolved."""

from __future__ import annotations

import socket
from typing import Any, Mapping

from cluster.connection_quotas import MAX_CONNECTIONS_PER_IP_OVERRIDES, normalise_ip, parse_overrides, validate
from cluster.dynamic_broker_config import is_connection_quota_key


def quota_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The connection quota settings among a node's configs (broker-wide keys and listener-prefixed ones)."""
    return {k: v for k, v in values.items() if v is not None and is_connection_quota_key(k)}


def parse_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as given (dynamic ones are strings) parsed by their Kafka types, a listener-prefixed one by its
    base key's (ConfigException, a ValueError, worded as Kafka's)."""
    from broker.config.config_types import BROKER_CONFIG_TYPES, parse_value

    return {k: parse_value(k, v, BROKER_CONFIG_TYPES[k.split(".", 3)[3] if k.startswith("listener.name.") else k])
            for k, v in values.items()}


def check_settings(values: Mapping[str, Any], listeners: list[str],
                   current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Parsed and checked (cluster/connection_quotas.validate; ``current``: a dynamic change from those);
    ValueError."""
    parsed = parse_settings(values)
    validate(parsed, listeners, None if current is None else parse_settings(current))
    return parsed


def resolve_overrides(text: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` with each host name resolved to its (first) address, as Kafka's
    ``InetAddress.getByName``. ValueError when malformed or a name does not resolve."""
    out = {}
    for host, count in parse_overrides(text).items():
        try:
            ip = normalise_ip(host)
        except ValueError:
            try:
                ip = normalise_ip(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])
            except OSError as exc:
                raise ValueError(f"{MAX_CONNECTIONS_PER_IP_OVERRIDES}: cannot resolve {host}: {exc}") from None
        out[ip] = count
    return out
