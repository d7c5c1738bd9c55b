"""Client quotas as Kafka's ClientQuotaManager enforces them (KIP-13, KIP-55, KIP-124), pure: time comes in as an
argument (milliseconds), quotas come from the metadata image's ClientQuotaRecords.

* **Which quota** (DefaultQuotaCallback.quotaLimit): the eight levels, most specific first: user + client-id,
  user + default client-id, user, default user + client-id, default user + default client-id, default user,
  client-id, default client-id. **Which sensor** (quotaMetricTags) is shared follows the same levels, so clients
  under one user quota share one rate.
* **The rate** (org.apache.kafka.common.metrics.stats.Rate over SampledStat): ``quota.window.num`` samples of
  ``quota.window.size.seconds``; the elapsed time is at least ``num - 1`` full windows, so a client's first second
  is not measured as a burst.
* **The throttle** (QuotaUtils.throttleTime): ``(rate - bound) / bound * window``: how long the client must stay
  quiet for its rate to come back to the bound. Request quotas (``request_percentage``) bound it by one window.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from cluster.metadata_image import QuotaEntity

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
USER, CLIENT_ID, IP = "user", "client-id", "ip"

INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000  # ClientQuotaManager.InactiveSensorExpirationTimeSeconds


@dataclasses.dataclass
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


class Rate:
    """Kafka's Rate of a SampledTotal: ``samples`` windows of ``window_ms``; ``samples + 1`` kept (one overlaps)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples_n, self.window_ms = samples, window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size(now_ms) / 1000.0)

    def window_size(self, now_ms: int) -> int:
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full = elapsed // self.window_ms
        if full < self.samples_n - 1:
            elapsed += (self.samples_n - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def idle_since(self) -> int:
        return max((s.last_event_ms for s in self._samples), default=0)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples_n + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _purge(self, now_ms: int) -> None:
        expire = self.samples_n * self.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire:
                s.reset(now_ms)


def _entity(user: str | None | bool, client_id: str | None | bool) -> QuotaEntity:
    """An entity key as the image keeps it; ``False`` leaves a part out, ``None`` is that part's default."""
    parts = []
    if client_id is not False:
        parts.append((CLIENT_ID, client_id))
    if user is not False:
        parts.append((USER, user))
    return tuple(parts)


def _levels(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """(entity, metric tags) for the eight levels, most specific first (quotaLimit and quotaMetricTags)."""
    return [
        (_entity(user, client_id), (user, client_id)),
        (_entity(user, None), (user, client_id)),
        (_entity(user, False), (user, "")),
        (_entity(None, client_id), (user, client_id)),
        (_entity(None, None), (user, client_id)),
        (_entity(None, False), (user, "")),
        (_entity(False, client_id), ("", client_id)),
        (_entity(False, None), ("", client_id)),
    ]


def quota_for(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str,
              client_id: str) -> tuple[float | None, tuple[str, str]]:
    """(the bound, the sensor's (user, client-id) tags) for a client; no quota: (None, ("", client_id))."""
    for entity, tags in _levels(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], tags
    return None, ("", client_id)


@dataclasses.dataclass
class _Sensor:
    rate: Rate
    bound: float | None


class ClientQuotaManager:
    """One quota type (``producer_byte_rate``, ``consumer_byte_rate`` or ``request_percentage``) on one broker."""

    def __init__(self, key: str, window_num: int = 11, window_size_s: int = 1) -> None:
        self.key = key
        self.window_num, self.window_ms = window_num, window_size_s * 1000
        self._quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self._enabled = False
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self.max_throttle_ms = self.window_ms if key == REQUEST_PERCENTAGE else None

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The image's quotas; sensors take their new bounds (updateQuotaMetricConfigs)."""
        if quotas is self._quotas:
            return
        self._quotas = quotas
        self._enabled = any(self.key in values for values in quotas.values())
        for tags, sensor in self._sensors.items():
            sensor.bound = self._bound_for_tags(tags)

    @property
    def enabled(self) -> bool:
        return self._enabled

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, or request-time percent) and return the throttle time in ms (0: within)."""
        if not self._enabled:
            return 0
        sensor = self._sensor(user, client_id, now_ms)
        sensor.rate.record(value, now_ms)
        if sensor.bound is None:
            return 0
        measured = sensor.rate.measure(now_ms)
        if measured <= sensor.bound:
            return 0
        # QuotaUtils.throttleTime: Java's Math.round, halves up
        throttle = math.floor((measured - sensor.bound) / sensor.bound * sensor.rate.window_size(now_ms) + 0.5)
        return min(throttle, self.max_throttle_ms) if self.max_throttle_ms is not None else throttle

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch answered empty: unrecordQuotaSensor)."""
        if self._enabled:
            self._sensor(user, client_id, now_ms).rate.record(-value, now_ms)

    def rate(self, user: str, client_id: str, now_ms: int) -> float | None:
        """The client's measured rate (Kafka's ``byte-rate``/``request-time`` metric of its sensor); None: no
        sensor (nothing recorded, or no quota)."""
        sensor = self._sensors.get(quota_for(self._quotas, self.key, user, client_id)[1]) if self._enabled else None
        return None if sensor is None else sensor.rate.measure(now_ms)

    def bound(self, user: str, client_id: str) -> float | None:
        return quota_for(self._quotas, self.key, user, client_id)[0]

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """getMaxValueInQuotaWindow: the most one fetch may return without breaking the quota on its own."""
        bound = self.bound(user, client_id) if self._enabled else None
        return float("inf") if bound is None else bound * (self.window_num - 1) * self.window_ms / 1000.0

    def expire(self, now_ms: int) -> int:
        """Drop sensors idle for an hour; returns how many went."""
        idle = [t for t, s in self._sensors.items() if now_ms - s.rate.idle_since() >= INACTIVE_SENSOR_EXPIRATION_MS]
        for tags in idle:
            del self._sensors[tags]
        return len(idle)

    def _sensor(self, user: str, client_id: str, now_ms: int) -> _Sensor:
        bound, tags = quota_for(self._quotas, self.key, user, client_id)
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(Rate(self.window_num, self.window_ms), bound)
        return sensor

    def _bound_for_tags(self, tags: tuple[str, str]) -> float | None:
        """DefaultQuotaCallback.quotaLimit: only the levels of the tags' shape."""
        user, client_id = tags
        levels = _levels(user, client_id)
        shape = [0, 1, 3, 4] if user and client_id else [2, 5] if user else [6, 7] if client_id else []
        for i in shape:
            values = self._quotas.get(levels[i][0])
            if values is not None and self.key in values:
                return values[self.key]
        return None


# ---- controller mutations (KIP-599): a token bucket per user/client-id on the active controller ---------------

class ThrottlingQuotaExceeded(Exception):
    """ThrottlingQuotaExceededException: a strict controller mutation quota is exhausted (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__("The throttling quota has been exceeded.")
        self.throttle_ms = throttle_ms


class TokenBucket:
    """Kafka's TokenBucket stat: ``quota`` tokens a second refill a bucket of ``samples × window`` seconds' worth;
    a mutation takes its partitions' worth and may drive the bucket below zero once."""

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_update_ms = 0

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self._refill(quota, burst, now_ms)
        return self.tokens

    def record(self, quota: float, burst: float, value: float, now_ms: int) -> None:
        self._refill(quota, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)

    def _refill(self, quota: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_update_ms) / 1000.0)
        self.last_update_ms = now_ms


class ControllerMutationQuota:
    """One request's quota (Strict/Permissive/UnboundedControllerMutationQuota): ``record(permits, now_ms)`` as
    ReplicationControlManager's applyPartitionChangeQuota calls it per topic, then ``throttle_time(now_ms)`` for
    the answer. ``bucket`` None: no quota applies (unbounded)."""

    def __init__(self, bucket: TokenBucket | None = None, quota: float = 0.0, burst: float = 0.0,
                 strict: bool = True) -> None:
        self.bucket, self.quota, self.burst, self.strict = bucket, quota, burst, strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    @property
    def is_exceeded(self) -> bool:
        return self.strict and self._throttle_ms > 0

    def record(self, permits: float, now_ms: int) -> None:
        """Strict: refused (ThrottlingQuotaExceeded) while the bucket is below zero, else taken even below it.
        Permissive (requests older than the strict version): always taken; the throttle time is noted."""
        if self.bucket is None:
            return
        if self.strict:
            tokens = self.bucket.measure(self.quota, self.burst, now_ms)
            if tokens < 0:
                self._violated(tokens, now_ms)
                raise ThrottlingQuotaExceeded(self._throttle_ms)
            self.bucket.record(self.quota, self.burst, permits, now_ms)
        else:
            self.bucket.record(self.quota, self.burst, permits, now_ms)
            tokens = self.bucket.measure(self.quota, self.burst, now_ms)
            if tokens < 0:
                self._violated(tokens, now_ms)

    def _violated(self, tokens: float, now_ms: int) -> None:
        # ControllerMutationQuotaManager.throttleTimeMs: the time for the bucket to refill to zero
        self._throttle_ms = round(-tokens / self.quota * 1000)
        self._recorded_ms = now_ms

    def throttle_time(self, now_ms: int) -> int:
        """The throttle noted, less the time since it was noted (the request may have waited meanwhile)."""
        return max(0, self._throttle_ms - (now_ms - self._recorded_ms))


UNBOUNDED_MUTATION_QUOTA = ControllerMutationQuota()  # UnboundedControllerMutationQuota: no quota applies


class ControllerMutationQuotaManager:
    """``controller_mutation_rate`` (partitions created or deleted per second) of each user/client-id, enforced on
    the active controller for CreateTopics (strict from v6), CreatePartitions (v3) and DeleteTopics (v5), as
    Kafka's ControllerApis does. The buckets are shared per quota level, as ClientQuotaManager's sensors."""

    STRICT_SINCE = {19: 6, 20: 5, 37: 3}  # API key -> first strict version

    def __init__(self, window_num: int = 11, window_size_s: int = 1) -> None:
        self.window_num, self.window_size_s = window_num, window_size_s
        self._quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self._quotas = quotas

    def quota_for(self, api_key: int, version: int, user: str, client_id: str) -> ControllerMutationQuota:
        bound, tags = quota_for(self._quotas, CONTROLLER_MUTATION_RATE, user, client_id)
        if bound is None:
            return ControllerMutationQuota()
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket()
        burst = self.window_num * self.window_size_s * bound
        return ControllerMutationQuota(bucket, bound, burst, version >= self.STRICT_SINCE.get(api_key, 0))
