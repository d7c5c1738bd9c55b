"""Client telemetry subscriptions and client instances (KIP-714), as Kafka's ClientMetricsManager.

A pure state machine: subscriptions come from the CLIENT_METRICS config resources of the metadata image,
time arrives as ``now_ms`` and new client instance ids from an injected source. It decides what a
GetTelemetrySubscriptions or PushTelemetry request gets; exporting the pushed metrics is the broker's job.

Kafka's rules kept here: a client instance's subscription is the union of the matching subscriptions'
metric prefixes with the smallest push interval; the subscription id is a CRC32C of that set and interval
XORed with the instance id's hash; requests earlier than the push interval are throttled; instances are
dropped after max(cache expiry, 3 x push interval) without a request, when their connection closes, or
least-recently-used first once ``cache_max_size`` are held.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections import OrderedDict
from typing import Callable, Iterable, Mapping

import crc32c

from protocol.errors import ErrorCode

RESOURCE_CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS

SUBSCRIPTION_METRICS = "metrics"
PUSH_INTERVAL_MS = "interval.ms"
CLIENT_MATCH_PATTERN = "match"
CONFIG_NAMES = (SUBSCRIPTION_METRICS, PUSH_INTERVAL_MS, CLIENT_MATCH_PATTERN)
LIST_CONFIGS = frozenset((SUBSCRIPTION_METRICS, CLIENT_MATCH_PATTERN))
ALL_SUBSCRIBED_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3600000
MATCH_PARAMS = frozenset(("client_instance_id", "client_id", "client_software_name", "client_software_version",
                          "client_source_address", "client_source_port"))

CACHE_MAX_SIZE = 16384  # ClientMetricsManager.CACHE_MAX_SIZE: 16k active client instances per broker
DEFAULT_CACHE_EXPIRY_MS = 60 * 1000
# CompressionType ids the broker accepts for pushes, in Kafka's order of preference
SUPPORTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
KNOWN_COMPRESSION_TYPES = frozenset((0, 1, 2, 3, 4))

ZERO_UUID = bytes(16)
METADATA_TOPIC_UUID = b"\x00" * 15 + b"\x01"  # Uuid.METADATA_TOPIC_ID, reserved
RESERVED_UUIDS = frozenset((ZERO_UUID, METADATA_TOPIC_UUID))


class ClientMetricsError(Exception):
    """A request or config Kafka rejects; ``code`` is the error it answers."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---- CLIENT_METRICS configs (ClientMetricsConfigs) ------------------------------------------------------------

def parse_list(value: str | None) -> list[str]:
    """Kafka's LIST type: comma separated, entries trimmed, empty string = empty list."""
    if not value or not value.strip():
        return []
    return [v.strip() for v in value.split(",")]


def parse_match_patterns(patterns: Iterable[str]) -> dict[str, re.Pattern]:
    """``client_id=abc.*`` entries -> {param: compiled pattern} (ClientMetricsConfigs.parseMatchingPatterns)."""
    out: dict[str, re.Pattern] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS:
            raise ClientMetricsError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}") from None
    return out


def _parse_interval(value: str) -> int:
    try:
        interval = int(value.strip())
    except ValueError:
        raise ClientMetricsError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                 f"{PUSH_INTERVAL_MS}: Not a number of type INT") from None
    if not -2**31 <= interval < 2**31:
        raise ClientMetricsError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                 f"{PUSH_INTERVAL_MS}: Not a number of type INT")
    return interval


def validate_configs(name: str, props: Mapping[str, str]) -> None:
    """ClientMetricsConfigs.validate: raises ClientMetricsError with Kafka's code and message."""
    if not name:
        raise ClientMetricsError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in props:
        if key not in CONFIG_NAMES:
            raise ClientMetricsError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    if PUSH_INTERVAL_MS in props:
        interval = _parse_interval(props[PUSH_INTERVAL_MS])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsError(ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {PUSH_INTERVAL_MS}, "
                                     "interval must be between 100 and 3600000 (1 hour)")
    if CLIENT_MATCH_PATTERN in props:
        parse_match_patterns(parse_list(props[CLIENT_MATCH_PATTERN]))


@dataclasses.dataclass(frozen=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: Mapping[str, re.Pattern]

    @classmethod
    def from_props(cls, name: str, props: Mapping[str, str]) -> "Subscription":
        interval = props.get(PUSH_INTERVAL_MS)
        return cls(name, frozenset(parse_list(props.get(SUBSCRIPTION_METRICS))),
                   _parse_interval(interval) if interval is not None else DEFAULT_INTERVAL_MS,
                   parse_match_patterns(parse_list(props.get(CLIENT_MATCH_PATTERN))))


# ---- client instances ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ClientInstanceMetadata:
    """What a subscription's ``match`` patterns test (ClientMetricsInstanceMetadata)."""

    client_instance_id: str
    client_id: str | None
    client_software_name: str | None
    client_software_version: str | None
    client_source_address: str | None
    client_source_port: str | None

    def matches(self, patterns: Mapping[str, re.Pattern]) -> bool:
        for param, pattern in patterns.items():
            value = getattr(self, param)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


@dataclasses.dataclass
class ClientInstance:
    instance_id: bytes
    metadata: ClientInstanceMetadata
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    connection_id: str
    expires_at_ms: int = 0
    last_get_ms: int | None = None  # None: never (Kafka's 0 on an epoch clock, always long enough ago)
    last_push_ms: int | None = None
    terminating: bool = False
    last_error: int = 0

    def may_get(self, now_ms: int) -> bool:
        """ClientMetricsInstance.maybeUpdateGetRequestTimestamp."""
        last = max((t for t in (self.last_get_ms, self.last_push_ms) if t is not None), default=None)
        if last is None or now_ms - last >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int) -> bool:
        """ClientMetricsInstance.maybeUpdatePushRequestTimestamp: the first push after a get is always
        accepted (clients jitter the interval), later ones one interval apart."""
        get, last = self.last_get_ms, self.last_push_ms
        ok = (last is None or (get is not None and get > last) or now_ms - last >= self.push_interval_ms)
        if ok:
            self.last_push_ms = now_ms
        return ok


def uuid_hash(uuid: bytes) -> int:
    """Java's Uuid.hashCode(): the two 64-bit halves XORed, then the two 32-bit halves XORed (signed)."""
    h = int.from_bytes(uuid[:8], "big") ^ int.from_bytes(uuid[8:], "big")
    x = ((h >> 32) ^ h) & 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def subscription_id(metrics: Iterable[str], push_interval_ms: int, instance_id: bytes) -> int:
    """CRC32C of the subscribed metrics and interval, XORed with the instance id's hash (computeSubscriptionId)."""
    crc = crc32c.crc32c(f"[{', '.join(sorted(metrics))}]{push_interval_ms}".encode())
    x = (crc ^ uuid_hash(instance_id)) & 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


@dataclasses.dataclass(frozen=True)
class SubscriptionAnswer:
    """What GetTelemetrySubscriptions answers when there is no error."""

    instance_id: bytes
    subscription_id: int
    push_interval_ms: int
    metrics: tuple[str, ...]


class ClientMetricsManager:
    """Kafka's ClientMetricsManager without the I/O: callers pass ``now_ms`` and, per request, the client's
    connection id and metadata; ``new_uuid()`` makes client instance ids."""

    def __init__(self, new_uuid: Callable[[], bytes], telemetry_max_bytes: int = 1048576,
                 cache_max_size: int = CACHE_MAX_SIZE, cache_expiry_ms: int = DEFAULT_CACHE_EXPIRY_MS) -> None:
        self.new_uuid = new_uuid
        self.telemetry_max_bytes = telemetry_max_bytes
        self.cache_max_size = cache_max_size
        self.cache_expiry_ms = cache_expiry_ms
        self.subscriptions: dict[str, Subscription] = {}
        self.subscription_version = 0
        self.instances: OrderedDict[bytes, ClientInstance] = OrderedDict()  # least recently used first
        self.by_connection: dict[str, bytes] = {}
        self.unknown_subscription_requests = 0
        self.throttled_requests = 0

    # ---- subscriptions ----------------------------------------------------------------------------------

    def update_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> bool:
        """The CLIENT_METRICS resources of a new metadata image (name -> configs); True if anything changed.
        A change makes every instance re-evaluate its subscription on its next request."""
        new = {name: Subscription.from_props(name, props) for name, props in configs.items() if props}
        if new == self.subscriptions:
            return False
        self.subscriptions = new
        self.subscription_version += 1
        return True

    def list_resources(self) -> list[str]:
        return sorted(self.subscriptions)

    # ---- requests ---------------------------------------------------------------------------------------

    def get_subscriptions(self, instance_id: bytes, metadata: Callable[[bytes], ClientInstanceMetadata],
                          connection_id: str, now_ms: int) -> SubscriptionAnswer:
        """GetTelemetrySubscriptions: a zero ``instance_id`` gets a new one. Raises ClientMetricsError
        (THROTTLING_QUOTA_EXCEEDED) when asked again before the push interval."""
        if instance_id == ZERO_UUID:
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, metadata, connection_id, now_ms)
        # Kafka's condition reads `!= UNKNOWN_SUBSCRIPTION_ID || != UNSUPPORTED_COMPRESSION_TYPE`, always true:
        # a get before the interval is throttled whatever the last error was
        if not instance.may_get(now_ms):
            self.throttled_requests += 1
            raise ClientMetricsError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                     f"Request from the client [{uuid_string(instance_id)}] arrived before the next "
                                     "push interval time")
        instance.last_error = 0
        return SubscriptionAnswer(instance_id, instance.subscription_id, instance.push_interval_ms, instance.metrics)

    def push(self, instance_id: bytes, subscription_id: int, terminating: bool, compression_type: int,
             payload_size: int, metadata: Callable[[bytes], ClientInstanceMetadata], connection_id: str,
             now_ms: int) -> ClientInstance:
        """PushTelemetry's checks, in Kafka's order; returns the instance whose payload may be exported.
        Raises ClientMetricsError with the error to answer."""
        if instance_id in RESERVED_UUIDS:
            raise ClientMetricsError(ErrorCode.INVALID_REQUEST, f"Invalid request from the client "
                                     f"[{uuid_string(instance_id)}], invalid client instance id")
        instance = self._instance(instance_id, metadata, connection_id, now_ms)
        try:
            self._validate_push(instance, subscription_id, terminating, compression_type, payload_size, now_ms)
        except ClientMetricsError as exc:
            instance.last_error = exc.code
            raise
        finally:
            instance.terminating = terminating
        instance.last_error = 0
        return instance

    def export_failed(self, instance: ClientInstance) -> None:
        """The pushed payload could not be decoded or exported: Kafka answers INVALID_RECORD."""
        instance.last_error = ErrorCode.INVALID_RECORD

    def _validate_push(self, instance: ClientInstance, subscription_id: int, terminating: bool,
                       compression_type: int, payload_size: int, now_ms: int) -> None:
        sid = uuid_string(instance.instance_id)
        if instance.terminating:
            raise ClientMetricsError(ErrorCode.INVALID_REQUEST, f"Client [{sid}] sent the previous request with state "
                                     "terminating to TRUE, can not accept any requests after that")
        if not instance.may_push(now_ms) and not terminating:
            self.throttled_requests += 1
            raise ClientMetricsError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                     f"Request from the client [{sid}] arrived before the next push interval time")
        if subscription_id != instance.subscription_id:
            self.unknown_subscription_requests += 1
            raise ClientMetricsError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                     f"Unknown client subscription id for the client [{sid}]")
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            raise ClientMetricsError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"Unknown compression type "
                                     f"[{compression_type}] is received in telemetry request from [{sid}]")
        if payload_size > self.telemetry_max_bytes:
            raise ClientMetricsError(ErrorCode.TELEMETRY_TOO_LARGE, f"Telemetry request from [{sid}] is larger than "
                                     f"the maximum allowed size [{self.telemetry_max_bytes}]")

    # ---- instance cache ---------------------------------------------------------------------------------

    def connection_closed(self, connection_id: str) -> bytes | None:
        """The client's connection went away: its instance is dropped (ClientConnectionDisconnectListener)."""
        instance_id = self.by_connection.pop(connection_id, None)
        if instance_id is not None:
            self.instances.pop(instance_id, None)
        return instance_id

    def expire(self, now_ms: int) -> list[bytes]:
        """Drop instances that sent nothing for max(cache expiry, 3 x push interval); returns their ids."""
        gone = [iid for iid, inst in self.instances.items() if inst.expires_at_ms <= now_ms]
        for iid in gone:
            inst = self.instances.pop(iid)
            if self.by_connection.get(inst.connection_id) == iid:
                del self.by_connection[inst.connection_id]
        return gone

    def evicted(self) -> list[bytes]:
        """Least recently used instances beyond ``cache_max_size`` (the LRU cache's bound), dropped."""
        gone = []
        while len(self.instances) > self.cache_max_size:
            iid, inst = self.instances.popitem(last=False)
            if self.by_connection.get(inst.connection_id) == iid:
                del self.by_connection[inst.connection_id]
            gone.append(iid)
        return gone

    def _new_instance_id(self) -> bytes:
        while True:
            iid = self.new_uuid()
            if iid not in self.instances and iid not in RESERVED_UUIDS:
                return iid

    def _instance(self, instance_id: bytes, metadata: Callable[[bytes], ClientInstanceMetadata],
                  connection_id: str, now_ms: int) -> ClientInstance:
        instance = self.instances.get(instance_id)
        if instance is None:
            instance = self._create(instance_id, metadata(instance_id), connection_id)
        elif instance.subscription_version < self.subscription_version:
            # subscriptions changed since: re-evaluate (a new instance object, as Kafka; timestamps reset)
            instance = self._create(instance_id, instance.metadata, connection_id)
        self.instances[instance_id] = instance
        self.instances.move_to_end(instance_id)
        self.by_connection[connection_id] = instance_id
        instance.expires_at_ms = now_ms + max(self.cache_expiry_ms, 3 * instance.push_interval_ms)
        return instance

    def _create(self, instance_id: bytes, metadata: ClientInstanceMetadata, connection_id: str) -> ClientInstance:
        """ClientMetricsManager.createClientInstance: the union of matching subscriptions."""
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        for sub in self.subscriptions.values():
            if metadata.matches(sub.match):
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        if ALL_SUBSCRIBED_METRICS in metrics:
            metrics = {ALL_SUBSCRIBED_METRICS}
        return ClientInstance(instance_id, metadata, subscription_id(metrics, interval, instance_id),
                              self.subscription_version, tuple(sorted(metrics)), interval, connection_id)


def uuid_string(uuid: bytes) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid).decode().rstrip("=")
