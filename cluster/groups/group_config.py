"""The group coordinator's settings: Kafka's names and defaults (GroupCoordinatorConfig, ShareGroupConfig) in one
table, read by ``GroupConfig`` and merged into the broker's config defaults (broker/config/__init__.py); and the
dynamic configs of one group (Kafka's GroupConfig: GROUP config resources, ConfigRecords of resource type 32),
validated against the broker's bounds by ``validate_group_configs`` and read, over the broker's values, as
``DynamicGroupConfig``."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

CLASSIC_NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS

GROUP_CONFIG_DEFAULTS: dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2147483647,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.max.size": 2147483647,
    "group.consumer.assignors": "uniform,range",
    "group.consumer.migration.policy": "bidirectional",
    # share groups (KIP-932; GroupCoordinatorConfig's SHARE_GROUP_* settings)
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.min.heartbeat.interval.ms": 5000,
    "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.session.timeout.ms": 45000,
    "group.share.min.session.timeout.ms": 45000,
    "group.share.max.session.timeout.ms": 60000,
    "group.share.max.size": 200,
    "group.share.assignors": "simple",
    "group.share.initialize.retry.interval.ms": 30000,
    # ShareGroupConfig's record lock duration and the bounds of a group's share.record.lock.duration.ms
    "group.share.record.lock.duration.ms": 30000,
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
    # ShareGroupConfig's share-partition settings, read by the share partitions' leader (broker/share/)
    "group.share.partition.max.record.locks": 2000,
    "group.share.delivery.count.limit": 5,
    "group.share.max.share.sessions": 2000,
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600000,
    "offset.metadata.max.bytes": 4096,
}
_D = GROUP_CONFIG_DEFAULTS


def _assignor_names(value: Any) -> tuple[str, ...]:
    """``group.consumer.assignors``: short names, or Kafka's class names (``...UniformAssignor`` -> uniform)."""
    names = [a.strip() for a in value.split(",") if a.strip()] if isinstance(value, str) else list(value)
    return tuple(a.rsplit(".", 1)[-1].replace("Assignor", "").lower() if "." in a else a for a in names)


@dataclasses.dataclass
class GroupConfig:
    """The group.* / offsets.* broker settings the coordinator reads (Kafka names in ``from_props``)."""

    initial_rebalance_delay_ms: int = _D["group.initial.rebalance.delay.ms"]
    min_session_timeout_ms: int = _D["group.min.session.timeout.ms"]
    max_session_timeout_ms: int = _D["group.max.session.timeout.ms"]
    max_size: int = _D["group.max.size"]
    new_member_join_timeout_ms: int = CLASSIC_NEW_MEMBER_JOIN_TIMEOUT_MS
    offsets_retention_ms: int = _D["offsets.retention.minutes"] * 60 * 1000
    offsets_retention_check_interval_ms: int = _D["offsets.retention.check.interval.ms"]
    offset_metadata_max_bytes: int = _D["offset.metadata.max.bytes"]
    consumer_heartbeat_interval_ms: int = _D["group.consumer.heartbeat.interval.ms"]
    consumer_session_timeout_ms: int = _D["group.consumer.session.timeout.ms"]
    consumer_min_session_timeout_ms: int = _D["group.consumer.min.session.timeout.ms"]
    consumer_max_session_timeout_ms: int = _D["group.consumer.max.session.timeout.ms"]
    consumer_min_heartbeat_interval_ms: int = _D["group.consumer.min.heartbeat.interval.ms"]
    consumer_max_heartbeat_interval_ms: int = _D["group.consumer.max.heartbeat.interval.ms"]
    consumer_max_size: int = _D["group.consumer.max.size"]
    consumer_assignors: tuple[str, ...] = _assignor_names(_D["group.consumer.assignors"])
    migration_policy: str = _D["group.consumer.migration.policy"]  # disabled / downgrade / upgrade / bidirectional
    share_heartbeat_interval_ms: int = _D["group.share.heartbeat.interval.ms"]
    share_session_timeout_ms: int = _D["group.share.session.timeout.ms"]
    share_min_heartbeat_interval_ms: int = _D["group.share.min.heartbeat.interval.ms"]
    share_max_heartbeat_interval_ms: int = _D["group.share.max.heartbeat.interval.ms"]
    share_min_session_timeout_ms: int = _D["group.share.min.session.timeout.ms"]
    share_max_session_timeout_ms: int = _D["group.share.max.session.timeout.ms"]
    share_max_size: int = _D["group.share.max.size"]
    share_initialize_retry_interval_ms: int = _D["group.share.initialize.retry.interval.ms"]
    share_assignors: tuple[str, ...] = _assignor_names(_D["group.share.assignors"])
    share_record_lock_duration_ms: int = _D["group.share.record.lock.duration.ms"]
    share_min_record_lock_duration_ms: int = _D["group.share.min.record.lock.duration.ms"]
    share_max_record_lock_duration_ms: int = _D["group.share.max.record.lock.duration.ms"]

    @classmethod
    def from_props(cls, props: dict) -> "GroupConfig":
        def get(key: str) -> Any:
            v = props.get(key)
            return _D[key] if v is None else v

        # ShareGroupConfig's ConfigDef ranges of the share-partition settings (read by broker/share/, not kept here)
        for key, lo, hi in (("group.share.delivery.count.limit", 2, 10),
                            ("group.share.partition.max.record.locks", 100, 10000),
                            ("group.share.max.share.sessions", 1, None)):
            value = int(get(key))
            if value < lo:
                raise ValueError(f"Invalid value {value} for configuration {key}: Value must be at least {lo}")
            if hi is not None and value > hi:
                raise ValueError(f"Invalid value {value} for configuration {key}: Value must be no more than {hi}")
        return cls(
            initial_rebalance_delay_ms=int(get("group.initial.rebalance.delay.ms")),
            min_session_timeout_ms=int(get("group.min.session.timeout.ms")),
            max_session_timeout_ms=int(get("group.max.session.timeout.ms")),
            max_size=int(get("group.max.size")),
            offsets_retention_ms=int(get("offsets.retention.minutes")) * 60 * 1000,
            offsets_retention_check_interval_ms=int(get("offsets.retention.check.interval.ms")),
            offset_metadata_max_bytes=int(get("offset.metadata.max.bytes")),
            consumer_heartbeat_interval_ms=int(get("group.consumer.heartbeat.interval.ms")),
            consumer_session_timeout_ms=int(get("group.consumer.session.timeout.ms")),
            consumer_min_session_timeout_ms=int(get("group.consumer.min.session.timeout.ms")),
            consumer_max_session_timeout_ms=int(get("group.consumer.max.session.timeout.ms")),
            consumer_min_heartbeat_interval_ms=int(get("group.consumer.min.heartbeat.interval.ms")),
            consumer_max_heartbeat_interval_ms=int(get("group.consumer.max.heartbeat.interval.ms")),
            consumer_max_size=int(get("group.consumer.max.size")),
            consumer_assignors=_assignor_names(get("group.consumer.assignors")) or cls.consumer_assignors,
            migration_policy=str(get("group.consumer.migration.policy")).lower(),
            share_heartbeat_interval_ms=int(get("group.share.heartbeat.interval.ms")),
            share_session_timeout_ms=int(get("group.share.session.timeout.ms")),
            share_min_heartbeat_interval_ms=int(get("group.share.min.heartbeat.interval.ms")),
            share_max_heartbeat_interval_ms=int(get("group.share.max.heartbeat.interval.ms")),
            share_min_session_timeout_ms=int(get("group.share.min.session.timeout.ms")),
            share_max_session_timeout_ms=int(get("group.share.max.session.timeout.ms")),
            share_max_size=int(get("group.share.max.size")),
            share_initialize_retry_interval_ms=int(get("group.share.initialize.retry.interval.ms")),
            share_assignors=_assignor_names(get("group.share.assignors")),
            share_record_lock_duration_ms=int(get("group.share.record.lock.duration.ms")),
            share_min_record_lock_duration_ms=int(get("group.share.min.record.lock.duration.ms")),
            share_max_record_lock_duration_ms=int(get("group.share.max.record.lock.duration.ms")),
        ).validated()

    def validated(self) -> "GroupConfig":
        """GroupCoordinatorConfig's share-group checks (its ``require``s and ConfigDef ranges, Kafka's messages)."""
        def require(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(msg)
        hb, mn_hb, mx_hb = "group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", \
            "group.share.max.heartbeat.interval.ms"
        st, mn_st, mx_st = "group.share.session.timeout.ms", "group.share.min.session.timeout.ms", \
            "group.share.max.session.timeout.ms"
        for key, value in ((hb, self.share_heartbeat_interval_ms), (mn_hb, self.share_min_heartbeat_interval_ms),
                           (mx_hb, self.share_max_heartbeat_interval_ms), (st, self.share_session_timeout_ms),
                           (mn_st, self.share_min_session_timeout_ms), (mx_st, self.share_max_session_timeout_ms),
                           ("group.share.initialize.retry.interval.ms", self.share_initialize_retry_interval_ms)):
            require(value >= 1, f"Invalid value {value} for configuration {key}: Value must be at least 1")
        require(1 <= self.share_max_size <= 1000, f"Invalid value {self.share_max_size} for configuration "
                                                  "group.share.max.size: Value must be no more than 1000")
        require(self.share_max_heartbeat_interval_ms >= self.share_min_heartbeat_interval_ms,
                f"{mx_hb} must be greater than or equal to {mn_hb}")
        require(self.share_heartbeat_interval_ms >= self.share_min_heartbeat_interval_ms,
                f"{hb} must be greater than or equal to {mn_hb}")
        require(self.share_heartbeat_interval_ms <= self.share_max_heartbeat_interval_ms,
                f"{hb} must be less than or equal to {mx_hb}")
        require(self.share_max_session_timeout_ms >= self.share_min_session_timeout_ms,
                f"{mx_st} must be greater than or equal to {mn_st}")
        require(self.share_session_timeout_ms >= self.share_min_session_timeout_ms,
                f"{st} must be greater than or equal to {mn_st}")
        require(self.share_session_timeout_ms <= self.share_max_session_timeout_ms,
                f"{st} must be less than or equal to {mx_st}")
        require(self.share_heartbeat_interval_ms < self.share_session_timeout_ms, f"{hb} must be less than {st}")
        require(len(self.share_assignors) == 1, "group.share.assignors must contain exactly one assignor, but found "
                                                f"{len(self.share_assignors)}")
        require(self.share_assignors[0] == "simple", f"Class {self.share_assignors[0]} cannot be found")
        # ShareGroupConfig: the ConfigDef ranges, then the lock duration within its bounds
        lk, mn_lk, mx_lk = "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", \
            "group.share.max.record.lock.duration.ms"
        for key, value, lo, hi in ((lk, self.share_record_lock_duration_ms, 1000, 3600000),
                                   (mn_lk, self.share_min_record_lock_duration_ms, 1000, 30000),
                                   (mx_lk, self.share_max_record_lock_duration_ms, 30000, 3600000)):
            require(lo <= value, f"Invalid value {value} for configuration {key}: Value must be at least {lo}")
            require(value <= hi, f"Invalid value {value} for configuration {key}: Value must be no more than {hi}")
        require(self.share_record_lock_duration_ms >= self.share_min_record_lock_duration_ms,
                f"{lk} must be greater than or equal to {mn_lk}")
        require(self.share_record_lock_duration_ms <= self.share_max_record_lock_duration_ms,
                f"{lk} must be less than or equal to {mx_lk}")
        return self


# ==== one group's dynamic configs (Kafka's GroupConfig) ===========================================================
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
CONSUMER_SESSION_TIMEOUT, CONSUMER_HEARTBEAT_INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT, SHARE_HEARTBEAT_INTERVAL = "share.session.timeout.ms", "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL = "share.auto.offset.reset", "share.isolation.level"
BY_DURATION = "by_duration:"


@dataclasses.dataclass(frozen=True)
class GroupConfigKey:
    """One key of Kafka's GroupConfig ConfigDef: its type ("int" / "string"), the ConfigDef default a group's
    validation parses missing keys with, the broker setting a described or running group falls back to, and its
    documentation."""

    name: str
    type: str
    default: Any
    broker_key: str | None
    doc: str


GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {k.name: k for k in (
    GroupConfigKey(CONSUMER_SESSION_TIMEOUT, "int", 45000, "group.consumer.session.timeout.ms",
                   "The timeout to detect client failures when using the consumer group protocol."),
    GroupConfigKey(CONSUMER_HEARTBEAT_INTERVAL, "int", 5000, "group.consumer.heartbeat.interval.ms",
                   "The heartbeat interval given to the members of a consumer group."),
    GroupConfigKey(SHARE_SESSION_TIMEOUT, "int", 45000, "group.share.session.timeout.ms",
                   "The timeout to detect client failures when using the share group protocol."),
    GroupConfigKey(SHARE_HEARTBEAT_INTERVAL, "int", 5000, "group.share.heartbeat.interval.ms",
                   "The heartbeat interval given to the members of a share group."),
    GroupConfigKey(SHARE_RECORD_LOCK_DURATION, "int", 30000, "group.share.record.lock.duration.ms",
                   "The record acquisition lock duration in milliseconds for share groups."),
    GroupConfigKey(SHARE_AUTO_OFFSET_RESET, "string", "latest", None,
                   "The strategy to initialize the share-partition start offset: latest, earliest or "
                   "by_duration:<ISO-8601 duration>."),
    GroupConfigKey(SHARE_ISOLATION_LEVEL, "string", "read_uncommitted", None,
                   "Controls how to read records written transactionally: read_committed or read_uncommitted."),
)}

# java.time.Duration.parse: [-+]P[nD][T[nH][nM][n[.n]S]], at least one part, case-insensitive
_ISO_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                           r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


class GroupConfigError(ValueError):
    """An invalid group config (Kafka's InvalidConfigurationException / ConfigException: INVALID_CONFIG)."""


def parse_iso_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as java.time.Duration.parse reads it; ValueError when malformed."""
    m = _ISO_DURATION.fullmatch(text)
    if m is None or text.upper().endswith("T") or not any(m.group(i) for i in (2, 3, 4, 5)):
        raise ValueError(text)
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in (2, 3, 4, 5))
    frac = (m.group(6) or "").ljust(3, "0")[:3]
    millis = int(frac) * (-1 if (m.group(5) or "").startswith("-") else 1)
    return sign * (((days * 24 + hours) * 60 + minutes) * 60_000 + secs * 1000 + millis)


def _check_reset(name: str, value: str) -> None:
    """ShareGroupAutoOffsetResetStrategy's validator."""
    v = value.strip().lower()
    if v.startswith(BY_DURATION):
        try:
            ms = parse_iso_duration_ms(value.strip()[len(BY_DURATION):])
        except ValueError:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Unable to parse duration "
                                   "string for by_duration strategy.") from None
        if ms < 0:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Negative duration is not "
                                   "supported in by_duration strategy.")
    elif v not in ("latest", "earliest"):
        raise GroupConfigError(f"Invalid value {value} for configuration {name}: Invalid value `{v}` for "
                               "configuration. The value must be either 'earliest', 'latest' or of the format "
                               "'by_duration:<PnDTnHnMn.nS.>'.")


def _parse(props: Mapping[str, str]) -> dict[str, Any]:
    """ConfigDef.parse: every key typed and range-checked, missing ones at the ConfigDef default."""
    out: dict[str, Any] = {}
    for key in GROUP_CONFIG_KEYS.values():
        raw = props.get(key.name)
        if raw is None:
            out[key.name] = key.default
            continue
        if key.type == "int":
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise GroupConfigError(f"Invalid value {raw} for configuration {key.name}: Not a number of type "
                                       "INT") from None
            if not -2**31 <= value < 2**31:
                raise GroupConfigError(f"Invalid value {raw} for configuration {key.name}: Not a number of type "
                                       "INT")
            lo = 1000 if key.name == SHARE_RECORD_LOCK_DURATION else 1
            if value < lo:
                raise GroupConfigError(f"Invalid value {value} for configuration {key.name}: Value must be at "
                                       f"least {lo}")
            out[key.name] = value
        elif key.name == SHARE_AUTO_OFFSET_RESET:
            _check_reset(key.name, str(raw))
            out[key.name] = str(raw).strip()
        else:  # share.isolation.level: CaseInsensitiveValidString
            if str(raw).strip().lower() not in ("read_committed", "read_uncommitted"):
                raise GroupConfigError(f"Invalid value {raw} for configuration {key.name}: String must be one of "
                                       "(case insensitive): READ_COMMITTED, READ_UNCOMMITTED")
            out[key.name] = str(raw).strip()
    return out


def validate_group_configs(props: Mapping[str, str], broker: GroupConfig) -> None:
    """GroupConfig.validate: known names only, each value parsed, then the broker's bounds (Kafka's order and
    messages); raises GroupConfigError."""
    for name in props:
        if name not in GROUP_CONFIG_KEYS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    v = _parse(props)
    b = broker

    def within(key: str, value: int, lo: int, hi: int, lo_key: str, hi_key: str) -> None:
        if value < lo:
            raise GroupConfigError(f"{key} must be greater than or equal to {lo_key}")
        if value > hi:
            raise GroupConfigError(f"{key} must be less than or equal to {hi_key}")
    within(CONSUMER_HEARTBEAT_INTERVAL, v[CONSUMER_HEARTBEAT_INTERVAL], b.consumer_min_heartbeat_interval_ms,
           b.consumer_max_heartbeat_interval_ms, "group.consumer.min.heartbeat.interval.ms",
           "group.consumer.max.heartbeat.interval.ms")
    within(CONSUMER_SESSION_TIMEOUT, v[CONSUMER_SESSION_TIMEOUT], b.consumer_min_session_timeout_ms,
           b.consumer_max_session_timeout_ms, "group.consumer.min.session.timeout.ms",
           "group.consumer.max.session.timeout.ms")
    within(SHARE_HEARTBEAT_INTERVAL, v[SHARE_HEARTBEAT_INTERVAL], b.share_min_heartbeat_interval_ms,
           b.share_max_heartbeat_interval_ms, "group.share.min.heartbeat.interval.ms",
           "group.share.max.heartbeat.interval.ms")
    within(SHARE_SESSION_TIMEOUT, v[SHARE_SESSION_TIMEOUT], b.share_min_session_timeout_ms,
           b.share_max_session_timeout_ms, "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")
    within(SHARE_RECORD_LOCK_DURATION, v[SHARE_RECORD_LOCK_DURATION], b.share_min_record_lock_duration_ms,
           b.share_max_record_lock_duration_ms, "group.share.min.record.lock.duration.ms",
           "group.share.max.record.lock.duration.ms")
    if v[CONSUMER_SESSION_TIMEOUT] <= v[CONSUMER_HEARTBEAT_INTERVAL]:
        raise GroupConfigError(f"{CONSUMER_SESSION_TIMEOUT} must be greater than {CONSUMER_HEARTBEAT_INTERVAL}")
    if v[SHARE_SESSION_TIMEOUT] <= v[SHARE_HEARTBEAT_INTERVAL]:
        raise GroupConfigError(f"{SHARE_SESSION_TIMEOUT} must be greater than {SHARE_HEARTBEAT_INTERVAL}")


@dataclasses.dataclass(frozen=True)
class DynamicGroupConfig:
    """One group's effective settings: its GROUP config overrides over the broker's values
    (GroupConfig.fromProps(extractGroupConfigMap, overrides)), as the coordinator reads them per group."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_auto_offset_reset: str
    share_isolation_level: str

    @classmethod
    def of(cls, broker: GroupConfig, overrides: Mapping[str, str] | None) -> "DynamicGroupConfig":
        values = effective_values(broker, overrides or {})
        return cls(consumer_session_timeout_ms=int(values[CONSUMER_SESSION_TIMEOUT]),
                   consumer_heartbeat_interval_ms=int(values[CONSUMER_HEARTBEAT_INTERVAL]),
                   share_session_timeout_ms=int(values[SHARE_SESSION_TIMEOUT]),
                   share_heartbeat_interval_ms=int(values[SHARE_HEARTBEAT_INTERVAL]),
                   share_record_lock_duration_ms=int(values[SHARE_RECORD_LOCK_DURATION]),
                   share_auto_offset_reset=str(values[SHARE_AUTO_OFFSET_RESET]).lower(),
                   share_isolation_level=str(values[SHARE_ISOLATION_LEVEL]).lower())


def auto_offset_reset(value: str) -> tuple[str, int]:
    """``share.auto.offset.reset`` as (strategy, duration ms): ("latest", 0), ("earliest", 0) or ("by_duration", ms):
    where a share partition's start offset goes when its state is initialized (ShareGroupAutoOffsetResetStrategy)."""
    v = value.strip()
    if v.lower().startswith(BY_DURATION):
        return "by_duration", parse_iso_duration_ms(v[len(BY_DURATION):])
    return v.lower(), 0


def broker_group_defaults(broker: GroupConfig) -> dict[str, Any]:
    """GroupCoordinatorConfig.extractGroupConfigMap: each group key at the broker's value."""
    return {CONSUMER_SESSION_TIMEOUT: broker.consumer_session_timeout_ms,
            CONSUMER_HEARTBEAT_INTERVAL: broker.consumer_heartbeat_interval_ms,
            SHARE_SESSION_TIMEOUT: broker.share_session_timeout_ms,
            SHARE_HEARTBEAT_INTERVAL: broker.share_heartbeat_interval_ms,
            SHARE_RECORD_LOCK_DURATION: broker.share_record_lock_duration_ms,
            SHARE_AUTO_OFFSET_RESET: GROUP_CONFIG_KEYS[SHARE_AUTO_OFFSET_RESET].default,
            SHARE_ISOLATION_LEVEL: GROUP_CONFIG_KEYS[SHARE_ISOLATION_LEVEL].default}


def effective_values(broker: GroupConfig, overrides: Mapping[str, str]) -> dict[str, Any]:
    """Every group key at the group's override, else the broker's value; an override that no longer parses (the
    broker's bounds changed since) is left out, as unknown names are."""
    values = broker_group_defaults(broker)
    for name, raw in overrides.items():
        key = GROUP_CONFIG_KEYS.get(name)
        if key is None or raw is None:
            continue
        if key.type == "int":
            try:
                values[name] = int(raw)
            except ValueError:
                continue
        else:
            values[name] = raw
    return values


def group_settings(broker: GroupConfig, image, group_id: str) -> DynamicGroupConfig:
    """The settings the coordinator applies to ``group_id``: its GROUP configs in the metadata image (absent while
    no image has been published) over the broker's (GroupConfigManager.groupConfig, else the broker's value)."""
    configs = getattr(image, "configs", None) or {}
    return DynamicGroupConfig.of(broker, configs.get((GROUP_RESOURCE, group_id)))
