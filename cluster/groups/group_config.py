"""The group coordinator's settings: Kafka's names and defaults (GroupCoordinatorConfig) in one table, read
by ``GroupConfig`` and merged into the broker's config defaults (broker/config/__init__.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

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

    @classmethod
    def from_props(cls, props: dict) -> "GroupConfig":
        def get(key: str) -> Any:
            v = props.get(key)
            return _D[key] if v is None else v

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
        return self
