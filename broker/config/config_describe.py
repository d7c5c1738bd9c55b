"""DescribeConfigs entries built the way Kafka's ConfigHelper builds them.

A topic config's synonyms are: the topic override (TOPIC_CONFIG), then for its broker synonyms
(``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours`` for ``retention.ms``) the ones
set in the broker's own config (STATIC_BROKER_CONFIG), then the ones with a Kafka default
(DEFAULT_CONFIG), with entries before the first one named like the primary broker synonym dropped
(``configSynonyms(...).dropWhile``). The source is the first synonym's, or DEFAULT_CONFIG.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.config.broker_config_docs import BROKER_CONFIG_DOCS
from broker.config.config_types import BROKER_CONFIG_TYPES
from broker.config.topic_config_docs import TOPIC_CONFIG_DOCS
from broker.security.secrets import base_name, is_sensitive
from cluster.groups.group_config import GROUP_CONFIG_KEYS, effective_values
from protocol.generated.messages.describe_configs_response import DescribeConfigsResourceResult, DescribeConfigsSynonym
from storage.config import TOPIC_CONFIGS, LogConfig

# DescribeConfigsResponse.ConfigSource
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG = 4, 5, 6
# DescribeConfigsResponse.ConfigType (UNKNOWN is 0)
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                "password": 9}

LONG_MAX = 9223372036854775807
# Kafka's defaults for the broker-level synonyms of topic configs (ServerLogConfigs, CleanerConfig,
# ReplicationConfigs); a synonym with no default (log.retention.ms, log.roll.ms, ...) is absent.
BROKER_SYNONYM_DEFAULTS: dict[str, str] = {
    "log.segment.bytes": "1073741824", "log.roll.hours": "168", "log.roll.jitter.hours": "0",
    "log.index.size.max.bytes": "10485760", "log.flush.interval.messages": str(LONG_MAX),
    "log.flush.scheduler.interval.ms": str(LONG_MAX), "log.retention.bytes": "-1", "log.retention.hours": "168",
    "message.max.bytes": "1048588", "log.index.interval.bytes": "4096",
    "log.cleaner.delete.retention.ms": "86400000", "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": str(LONG_MAX), "log.segment.delete.delay.ms": "60000",
    "log.cleaner.min.cleanable.ratio": "0.5", "log.cleanup.policy": "delete",
    "unclean.leader.election.enable": "false", "min.insync.replicas": "1", "compression.type": "producer",
    "log.preallocate": "false", "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": str(LONG_MAX), "log.message.timestamp.after.max.ms": "3600000",
    "compression.gzip.level": "-1", "compression.lz4.level": "9", "compression.zstd.level": "3",
    "log.local.retention.ms": "-2", "log.local.retention.bytes": "-2",
}

_DEFS = {d.name: d for d in TOPIC_CONFIGS}


def config_string(value: Any) -> str:
    """ConfigDef.convertToString: lists comma-joined, booleans lower-case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _broker_synonyms(primary: str, names: list[str], broker_values: dict, explicit: set[str]):
    out = []
    for n in names:
        if n in explicit and broker_values.get(n) is not None:
            out.append(DescribeConfigsSynonym(name=n, value=config_string(broker_values[n]),
                                              source=STATIC_BROKER_CONFIG))
    for n in names:
        if n in BROKER_SYNONYM_DEFAULTS:
            out.append(DescribeConfigsSynonym(name=n, value=BROKER_SYNONYM_DEFAULTS[n], source=DEFAULT_CONFIG))
    while out and out[0].name != primary:
        out.pop(0)
    return out


def topic_entries(log_config: LogConfig, overrides: dict[str, str], broker_values: dict, explicit: set[str],
                  keys: list[str] | None, include_synonyms: bool, include_documentation: bool
                  ) -> list[DescribeConfigsResourceResult]:
    out = []
    for d in TOPIC_CONFIGS:
        if keys and d.name not in keys:
            continue
        value = config_string(log_config.get(d.name))
        names = [n for n, _ in d.synonyms]
        synonyms = _broker_synonyms(names[0], names, broker_values, explicit) if names else []
        if d.name in overrides:
            synonyms.insert(0, DescribeConfigsSynonym(name=d.name, value=value, source=TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else DEFAULT_CONFIG
        out.append(DescribeConfigsResourceResult(
            name=d.name, value=value, read_only=False, config_source=source, is_default=source == DEFAULT_CONFIG,
            is_sensitive=False, synonyms=synonyms if include_synonyms else [],
            config_type=CONFIG_TYPES.get(d.type, 0),
            documentation=TOPIC_CONFIG_DOCS.get(d.name) if include_documentation else None))
    return out


def broker_entries(broker_values: dict, explicit: set[str], keys: list[str] | None, include_synonyms: bool,
                   dynamic: set[str], include_documentation: bool = False,
                   dynamic_values: dict[str, str] | None = None) -> list[DescribeConfigsResourceResult]:
    """The broker's configs; ``dynamic_values`` (this broker's dynamic configs) come first, as
    DYNAMIC_BROKER_CONFIG, and count as not read-only (so do the keys in ``dynamic``)."""
    dynamic_values = dynamic_values or {}
    values = {**broker_values, **dynamic_values}
    out = []
    for name in sorted(values):
        if keys and name not in keys:
            continue
        value = values[name]
        sensitive = is_sensitive(name)  # Kafka's PASSWORD type: never sent, nor in a synonym
        synonyms = [] if sensitive else _broker_synonyms(name, [name], broker_values, explicit)
        source = (STATIC_BROKER_CONFIG if name in explicit and value is not None else DEFAULT_CONFIG) if sensitive \
            else synonyms[0].source if synonyms else DEFAULT_CONFIG
        if name in dynamic_values:
            source = DYNAMIC_BROKER_CONFIG
            synonyms.insert(0, DescribeConfigsSynonym(name=name, value=None if sensitive else value,
                                                      source=DYNAMIC_BROKER_CONFIG))
        out.append(DescribeConfigsResourceResult(
            name=name, value=None if value is None or sensitive else config_string(value),
            read_only=name not in dynamic and name not in dynamic_values, config_source=source,
            is_default=source == DEFAULT_CONFIG,
            is_sensitive=sensitive, synonyms=synonyms if include_synonyms else [], config_type=_broker_type(name),
            documentation=BROKER_CONFIG_DOCS.get(name) if include_documentation else None))
    return out


def _broker_type(name: str) -> int:
    """The property's Kafka type (broker/config/config_types.py), known even while its value is None; UNKNOWN (0)
    for a key odradek does not know."""
    type_ = BROKER_CONFIG_TYPES.get(name) or BROKER_CONFIG_TYPES.get(base_name(name))
    return CONFIG_TYPES[type_.lower()] if type_ else 0


def logger_entries(keys: list[str] | None) -> list[DescribeConfigsResourceResult]:
    """BROKER_LOGGER: every odradek logger with its effective level (Kafka's Log4jController)."""
    names = ["root"] + sorted(n for n in logging.root.manager.loggerDict
                              if n.startswith(("odradek", "storage", "broker", "cluster")))
    out = []
    for n in names:
        if keys and n not in keys:
            continue
        lg = logging.getLogger() if n == "root" else logging.getLogger(n)
        out.append(DescribeConfigsResourceResult(
            name=n, value=logging.getLevelName(lg.getEffectiveLevel()), read_only=False,
            config_source=DYNAMIC_BROKER_LOGGER_CONFIG, is_sensitive=False, synonyms=[], config_type=0))
    return out


GROUP_CONFIG = 8  # DescribeConfigsResponse.ConfigSource.GROUP_CONFIG


def group_entries(broker_group_config, overrides: dict[str, str], keys: list[str] | None, include_synonyms: bool,
                  include_documentation: bool) -> list[DescribeConfigsResourceResult]:
    """A GROUP resource's configs (ConfigHelper.createGroupConfigEntry): every group key at the group's override
    (GROUP_CONFIG) or the broker's value (DEFAULT_CONFIG), its only synonym itself; the group need not exist."""
    values = effective_values(broker_group_config, overrides)
    out = []
    for name in sorted(GROUP_CONFIG_KEYS):
        if keys and name not in keys:
            continue
        key = GROUP_CONFIG_KEYS[name]
        value = str(values[name])
        source = GROUP_CONFIG if name in overrides else DEFAULT_CONFIG
        out.append(DescribeConfigsResourceResult(
            name=name, value=value, read_only=False, config_source=source, is_default=source == DEFAULT_CONFIG,
            is_sensitive=False,
            synonyms=[DescribeConfigsSynonym(name=name, value=value, source=source)] if include_synonyms else [],
            config_type=CONFIG_TYPES[key.type], documentation=key.doc if include_documentation else None))
    return out
