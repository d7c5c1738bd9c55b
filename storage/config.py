"""Log configuration: Kafka's topic-level config names, their broker-level synonyms and Kafka's defaults.

Sources (apache/kafka trunk 1eb7644):

* topic names and defaults: ``storage/.../log/LogConfig.java`` and ``clients/.../config/TopicConfig.java``;
* broker synonyms (``log.segment.bytes`` for ``segment.bytes``, ``log.retention.hours`` for ``retention.ms``, ...):
  ``server-common/.../config/ServerTopicConfigSynonyms.java`` — the first synonym present wins;
* broker-only log settings: ``ServerLogConfigs.java``, ``CleanerConfig.java``, ``ProducerStateManagerConfig``.

:class:`LogConfig` is one partition's effective configuration.  Build it with
``LogConfig.from_props(topic_overrides, broker_props)``: a topic override wins over the broker
synonym, which wins over Kafka's default.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from protocol.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

__all__ = ["LogConfig", "LogManagerConfig", "ConfigError", "TOPIC_CONFIGS", "LONG_MAX"]


class ConfigError(KafkaError):
    """A config value has the wrong type or is out of range (INVALID_CONFIG)."""

    code = ErrorCode.INVALID_CONFIG


def _hours(v: int) -> int:
    return v * 60 * 60 * 1000


def _minutes(v: int) -> int:
    return v * 60 * 1000


def _parse_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true",):
        return True
    if s in ("false",):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def _parse_list(v: Any) -> tuple[str, ...]:
    if isinstance(v, (list, tuple)):
        return tuple(str(x).strip() for x in v)
    return tuple(x.strip() for x in str(v).split(",") if x.strip())


def _parse_int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError("expected a number")
    return int(str(v).strip()) if not isinstance(v, int) else v


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "int": _parse_int,
    "long": _parse_int,
    "double": lambda v: float(v),
    "boolean": _parse_bool,
    "list": _parse_list,
    "string": lambda v: str(v).strip(),
}


@dataclass(frozen=True)
class _TopicConfigDef:
    name: str  # topic-level name, e.g. "segment.bytes"
    attr: str  # LogConfig attribute
    type: str
    default: Any
    synonyms: tuple[tuple[str, Callable[[int], int] | None], ...]  # broker names in priority order
    validator: Callable[[Any], bool] | None = None
    valid_desc: str = ""


def _at_least(n: float) -> Callable[[Any], bool]:
    return lambda v: v >= n


def _between(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: lo <= v <= hi


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

TOPIC_CONFIGS: tuple[_TopicConfigDef, ...] = (
    _TopicConfigDef("segment.bytes", "segment_bytes", "int", 1024 * 1024 * 1024,
                    (("log.segment.bytes", None),), _at_least(14), "at least 14"),
    _TopicConfigDef("segment.ms", "segment_ms", "long", 7 * 24 * 60 * 60 * 1000,
                    (("log.roll.ms", None), ("log.roll.hours", _hours)), _at_least(1), "at least 1"),
    _TopicConfigDef("segment.jitter.ms", "segment_jitter_ms", "long", 0,
                    (("log.roll.jitter.ms", None), ("log.roll.jitter.hours", _hours)), _at_least(0), "at least 0"),
    _TopicConfigDef("segment.index.bytes", "max_index_size", "int", 10 * 1024 * 1024,
                    (("log.index.size.max.bytes", None),), _at_least(4), "at least 4"),
    _TopicConfigDef("flush.messages", "flush_messages", "long", LONG_MAX,
                    (("log.flush.interval.messages", None),), _at_least(1), "at least 1"),
    _TopicConfigDef("flush.ms", "flush_ms", "long", LONG_MAX,
                    (("log.flush.interval.ms", None), ("log.flush.scheduler.interval.ms", None)),
                    _at_least(0), "at least 0"),
    _TopicConfigDef("retention.bytes", "retention_bytes", "long", -1, (("log.retention.bytes", None),)),
    _TopicConfigDef("retention.ms", "retention_ms", "long", 7 * 24 * 60 * 60 * 1000,
                    (("log.retention.ms", None), ("log.retention.minutes", _minutes),
                     ("log.retention.hours", _hours)), _at_least(-1), "at least -1"),
    _TopicConfigDef("max.message.bytes", "max_message_bytes", "int", 1024 * 1024 + 12,
                    (("message.max.bytes", None),), _at_least(0), "at least 0"),
    _TopicConfigDef("index.interval.bytes", "index_interval_bytes", "int", 4096,
                    (("log.index.interval.bytes", None),), _at_least(0), "at least 0"),
    _TopicConfigDef("delete.retention.ms", "delete_retention_ms", "long", 24 * 60 * 60 * 1000,
                    (("log.cleaner.delete.retention.ms", None),), _at_least(0), "at least 0"),
    _TopicConfigDef("min.compaction.lag.ms", "min_compaction_lag_ms", "long", 0,
                    (("log.cleaner.min.compaction.lag.ms", None),), _at_least(0), "at least 0"),
    _TopicConfigDef("max.compaction.lag.ms", "max_compaction_lag_ms", "long", LONG_MAX,
                    (("log.cleaner.max.compaction.lag.ms", None),), _at_least(1), "at least 1"),
    _TopicConfigDef("file.delete.delay.ms", "file_delete_delay_ms", "long", 60000,
                    (("log.segment.delete.delay.ms", None),), _at_least(0), "at least 0"),
    _TopicConfigDef("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "double", 0.5,
                    (("log.cleaner.min.cleanable.ratio", None),), _between(0, 1), "between 0 and 1"),
    _TopicConfigDef("cleanup.policy", "cleanup_policy", "list", ("delete",),
                    (("log.cleanup.policy", None),),
                    lambda v: all(p in ("delete", "compact") for p in v), "[compact, delete]"),
    _TopicConfigDef("unclean.leader.election.enable", "unclean_leader_election_enable", "boolean", False,
                    (("unclean.leader.election.enable", None),)),
    _TopicConfigDef("min.insync.replicas", "min_insync_replicas", "int", 1,
                    (("min.insync.replicas", None),), _at_least(1), "at least 1"),
    _TopicConfigDef("compression.type", "compression_type", "string", "producer",
                    (("compression.type", None),), lambda v: v in _COMPRESSION_TYPES, str(list(_COMPRESSION_TYPES))),
    _TopicConfigDef("preallocate", "preallocate", "boolean", False, (("log.preallocate", None),)),
    # Kafka 4.x topic configs odradek accepts and reports (TopicConfig / LogConfig) though it has no
    # tiered storage or replication throttles: the values are validated and stored, and described.
    _TopicConfigDef("compression.gzip.level", "compression_gzip_level", "int", -1,
                    (("compression.gzip.level", None),), lambda v: v == -1 or 1 <= v <= 9, "[1,...,9] or -1"),
    _TopicConfigDef("compression.lz4.level", "compression_lz4_level", "int", 9,
                    (("compression.lz4.level", None),), _between(1, 17), "[1,...,17]"),
    _TopicConfigDef("compression.zstd.level", "compression_zstd_level", "int", 3,
                    (("compression.zstd.level", None),), _between(-131072, 22), "[-131072,...,22]"),
    _TopicConfigDef("remote.storage.enable", "remote_storage_enable", "boolean", False, ()),
    _TopicConfigDef("local.retention.ms", "local_retention_ms", "long", -2, (("log.local.retention.ms", None),),
                    _at_least(-2), "at least -2"),
    _TopicConfigDef("local.retention.bytes", "local_retention_bytes", "long", -2,
                    (("log.local.retention.bytes", None),), _at_least(-2), "at least -2"),
    _TopicConfigDef("remote.log.copy.disable", "remote_log_copy_disable", "boolean", False, ()),
    _TopicConfigDef("remote.log.delete.on.disable", "remote_log_delete_on_disable", "boolean", False, ()),
    _TopicConfigDef("leader.replication.throttled.replicas", "leader_replication_throttled_replicas", "list", (),
                    ()),
    _TopicConfigDef("follower.replication.throttled.replicas", "follower_replication_throttled_replicas", "list",
                    (), ()),
    _TopicConfigDef("message.timestamp.type", "message_timestamp_type", "string", "CreateTime",
                    (("log.message.timestamp.type", None),), lambda v: v in ("CreateTime", "LogAppendTime"),
                    "[CreateTime, LogAppendTime]"),
    _TopicConfigDef("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", "long", LONG_MAX,
                    (("log.message.timestamp.before.max.ms", None),), _at_least(0), "at least 0"),
    _TopicConfigDef("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", "long", 3_600_000,
                    (("log.message.timestamp.after.max.ms", None),), _at_least(0), "at least 0"),
)

_BY_NAME = {d.name: d for d in TOPIC_CONFIGS}


def _parse(d: _TopicConfigDef, raw: Any, source: str) -> Any:
    try:
        value = _PARSERS[d.type](raw)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"Invalid value {raw!r} for configuration {source}: {e}") from None
    return value


def _check(d: _TopicConfigDef, value: Any, source: str) -> Any:
    if d.validator is not None and not d.validator(value):
        raise ConfigError(f"Invalid value {value!r} for configuration {source}: Value must be {d.valid_desc}")
    return value


@dataclass(frozen=True)
class LogConfig:
    """One log's effective configuration (Kafka's ``LogConfig``), with Kafka's defaults."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    max_index_size: int = 10 * 1024 * 1024
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    max_message_bytes: int = 1024 * 1024 + 12
    index_interval_bytes: int = 4096
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    min_cleanable_dirty_ratio: float = 0.5
    cleanup_policy: tuple[str, ...] = ("delete",)
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    preallocate: bool = False
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000  # one hour since Kafka 4.0 (KIP-1030); Long.MAX before
    #: topic-level names explicitly set for this topic (DescribeConfigs reports their source)
    overridden: frozenset[str] = field(default=frozenset(), compare=False)

    # ---- derived -------------------------------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def init_file_size(self) -> int:
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """Kafka's ``randomSegmentJitter``: uniform in ``[0, min(segment.jitter.ms, segment.ms))``."""
        if self.segment_jitter_ms == 0:
            return 0
        r = (rng or random).randrange(0, 2**31 - 1)
        return r % min(self.segment_jitter_ms, self.segment_ms)

    # ---- construction --------------------------------------------------------------------------
    @classmethod
    def from_props(cls, topic_overrides: Mapping[str, Any] | None = None,
                   broker_props: Mapping[str, Any] | None = None) -> "LogConfig":
        """Topic override > broker synonym (first present in Kafka's priority order) > Kafka default.

        Unknown topic-level names raise :class:`ConfigError`; unknown broker properties are ignored
        (the broker has many settings that are not log settings).
        """
        topic_overrides = dict(topic_overrides or {})
        broker_props = broker_props or {}
        values: dict[str, Any] = {}
        for d in TOPIC_CONFIGS:
            value = d.default
            for syn, conv in d.synonyms:
                if syn in broker_props and broker_props[syn] is not None:
                    value = _parse(d, broker_props[syn], syn)
                    if conv is not None:
                        value = conv(value)
                    _check(d, value, syn)
                    break
            values[d.attr] = value
        for name, raw in topic_overrides.items():
            d = _BY_NAME.get(name)
            if d is None:
                raise ConfigError(f"Unknown topic config name: {name}")
            values[d.attr] = _check(d, _parse(d, raw, name), name)
        return cls(**values, overridden=frozenset(topic_overrides))

    def with_overrides(self, topic_overrides: Mapping[str, Any]) -> "LogConfig":
        """A copy with some topic-level settings replaced (IncrementalAlterConfigs)."""
        changes: dict[str, Any] = {}
        for name, raw in topic_overrides.items():
            d = _BY_NAME.get(name)
            if d is None:
                raise ConfigError(f"Unknown topic config name: {name}")
            changes[d.attr] = _check(d, _parse(d, raw, name), name)
        return dataclasses.replace(self, **changes, overridden=self.overridden | frozenset(topic_overrides))

    def get(self, name: str) -> Any:
        """The value of a topic-level name, e.g. ``cfg.get("retention.ms")``."""
        return getattr(self, _BY_NAME[name].attr)

    def to_topic_props(self) -> dict[str, str]:
        """All topic-level settings as Kafka renders them in DescribeConfigs (strings)."""
        out = {}
        for d in TOPIC_CONFIGS:
            v = getattr(self, d.attr)
            if d.type == "list":
                out[d.name] = ",".join(v)
            elif d.type == "boolean":
                out[d.name] = "true" if v else "false"
            else:
                out[d.name] = str(v)
        return out


@dataclass(frozen=True)
class LogManagerConfig:
    """Broker-level log settings that are not per-topic (``ServerLogConfigs``, ``CleanerConfig``)."""

    log_dirs: tuple[str, ...] = ("/tmp/kafka-logs",)
    num_recovery_threads_per_data_dir: int = 1
    log_retention_check_interval_ms: int = 5 * 60 * 1000
    log_flush_offset_checkpoint_interval_ms: int = 60000
    log_flush_start_offset_checkpoint_interval_ms: int = 60000
    log_flush_scheduler_interval_ms: int = LONG_MAX
    log_initial_task_delay_ms: int = 30000
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024
    log_cleaner_io_buffer_size: int = 512 * 1024
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_io_max_bytes_per_second: float = float("inf")
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    transaction_max_timeout_ms: int = 900000
    # KIP-890 on the leader: off for storage on its own (no coordinator to ask); the broker's default is true
    transaction_partition_verification_enable: bool = False
    node_id: int = 1
    cluster_id: str | None = None

    _NAMES = {
        "num.recovery.threads.per.data.dir": ("num_recovery_threads_per_data_dir", "int"),
        "log.retention.check.interval.ms": ("log_retention_check_interval_ms", "long"),
        "log.flush.offset.checkpoint.interval.ms": ("log_flush_offset_checkpoint_interval_ms", "int"),
        "log.flush.start.offset.checkpoint.interval.ms": ("log_flush_start_offset_checkpoint_interval_ms", "int"),
        "log.flush.scheduler.interval.ms": ("log_flush_scheduler_interval_ms", "long"),
        "log.initial.task.delay.ms": ("log_initial_task_delay_ms", "long"),
        "log.cleaner.enable": ("log_cleaner_enable", "boolean"),
        "log.cleaner.threads": ("log_cleaner_threads", "int"),
        "log.cleaner.dedupe.buffer.size": ("log_cleaner_dedupe_buffer_size", "long"),
        "log.cleaner.io.buffer.size": ("log_cleaner_io_buffer_size", "int"),
        "log.cleaner.io.buffer.load.factor": ("log_cleaner_io_buffer_load_factor", "double"),
        "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", "long"),
        "log.cleaner.io.max.bytes.per.second": ("log_cleaner_io_max_bytes_per_second", "double"),
        "producer.id.expiration.ms": ("producer_id_expiration_ms", "int"),
        "producer.id.expiration.check.interval.ms": ("producer_id_expiration_check_interval_ms", "int"),
        "transaction.max.timeout.ms": ("transaction_max_timeout_ms", "int"),
        "transaction.partition.verification.enable": ("transaction_partition_verification_enable", "boolean"),
        "node.id": ("node_id", "int"),
        "cluster.id": ("cluster_id", "string"),
    }

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> "LogManagerConfig":
        values: dict[str, Any] = {}
        dirs = props.get("log.dirs") or props.get("log.dir")
        if dirs:
            values["log_dirs"] = _parse_list(dirs)
        if "node.id" not in props and "broker.id" in props:
            props = {**props, "node.id": props["broker.id"]}
        for name, (attr, typ) in cls._NAMES.items():
            if name in props and props[name] is not None:
                try:
                    values[attr] = _PARSERS[typ](props[name])
                except (TypeError, ValueError) as e:
                    raise ConfigError(f"Invalid value {props[name]!r} for configuration {name}: {e}") from None
        return cls(**values)
