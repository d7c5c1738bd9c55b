"""Connection quotas as Kafka's ConnectionQuotas (core/.../network/SocketServer.scala; KIP-402, KIP-612), pure:
time comes in as an argument (milliseconds), the IP quotas from the metadata image's ClientQuotaRecords.

What an acceptor asks, per accepted socket, in Kafka's order:

1. ``record_connection``: the connection counts against the broker-wide and the listener's
   ``max.connection.creation.rate`` (the inter-broker listener only against its listener's); a rate over its bound
   gives a delay (QuotaUtils.throttleTime, at most one ``quota.window.size.seconds``) during which the acceptor
   holds the socket and accepts nothing more on that listener (waitForConnectionSlot).
2. ``slot_available``: the acceptor also waits while the listener has its ``max.connections``, or, on any but the
   inter-broker listener (when there is more than one listener), while the broker has ``max.connections``.
3. ``inc``: the IP's ``connection_creation_rate`` (client quota on the ``ip`` entity, or its default): over it,
   the connection is taken back from every rate and :class:`ConnectionThrottled` says for how long the acceptor
   keeps the socket before closing it unanswered; then the IP's count against ``max.connections.per.ip`` (or its
   entry in ``max.connections.per.ip.overrides``): at the limit :class:`TooManyConnections` and the socket closes.

``max_connections_exceeded``: once inter-broker connections (or a lowered ``max.connections``) take the broker
over its limit, the other listeners close their least recently used connections.

A listener's limits are its ``listener.name.<l>.``-prefixed settings, else the broker-wide ones (Kafka configures
a ListenerConnectionQuota from ``valuesWithPrefixOverride``). Rates are Kafka's Rate over ``quota.window.num``
samples of ``quota.window.size.seconds`` (cluster/quotas.py's). The metrics are Kafka's socket-server-metrics:
``connection-accept-rate`` per listener and per IP, ``broker-connection-accept-rate``,
``connection-accept-throttle-time`` and ``ip-connection-accept-throttle-time`` per listener (Avg of the non-zero
throttle times over two 30 s samples, MetricConfig's default).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
from typing import Any, Mapping

from cluster.metadata_image import QuotaEntity
from cluster.quotas import INACTIVE_SENSOR_EXPIRATION_MS, IP, Rate

INT_MAX = 2**31 - 1  # Integer.MAX_VALUE: each limit's default, "no limit"
MAX_CONNECTIONS = "max.connections"
MAX_CONNECTIONS_PER_IP = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides"
MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"  # the IP client quota (QuotaConfig.IP_CONNECTION_RATE_OVERRIDE)
BROKER_KEYS = (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, MAX_CONNECTIONS_PER_IP_OVERRIDES, MAX_CONNECTION_CREATION_RATE)
LISTENER_KEYS = (MAX_CONNECTIONS, MAX_CONNECTION_CREATION_RATE)  # SocketServer.ListenerReconfigurableConfigs
_AVG_SAMPLES, _AVG_WINDOW_MS = 2, 30_000  # MetricConfig's defaults, for the throttle-time averages


class TooManyConnections(Exception):
    """TooManyConnectionsException: the IP has its ``max.connections.per.ip``; the socket is closed at once."""

    def __init__(self, ip: str, count: int) -> None:
        super().__init__(f"Too many connections from {ip} (maximum = {count})")
        self.ip, self.count = ip, count


class ConnectionThrottled(Exception):
    """ConnectionThrottledException: the IP is over its ``connection_creation_rate``; the socket is kept open,
    unread, for ``throttle_ms`` from ``start_ms`` and then closed."""

    def __init__(self, ip: str, start_ms: int, throttle_ms: int) -> None:
        super().__init__(f"{ip} throttled for {throttle_ms} ms")
        self.ip, self.start_ms, self.throttle_ms = ip, start_ms, throttle_ms


def normalise_ip(text: str) -> str:
    """An address as Java's InetAddress compares it: IPv6 compressed, IPv4-mapped IPv6 as the IPv4 address, a zone
    dropped. Not an address: ValueError."""
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def parse_overrides(text: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` as KafkaConfig parses it (CoreUtils.parseCsvMap: entries split on
    commas, each at its last colon, so IPv6 addresses work): host or IP -> count. ValueError when malformed."""
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in str(text or "").split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ValueError(f"Invalid value {text!r} for configuration {MAX_CONNECTIONS_PER_IP_OVERRIDES}: "
                             f"{item!r} is not host:count")
        try:
            out[host.strip()] = int(count.strip())
        except ValueError:
            raise ValueError(f"Invalid value {text!r} for configuration {MAX_CONNECTIONS_PER_IP_OVERRIDES}: "
                             f"{count.strip()!r} is not an integer") from None
    return out


class InvalidReconfiguration(ValueError):
    """ListenerConnectionQuota.validateReconfiguration refused the listener's limits (Kafka then answers a dynamic
    change "Invalid dynamic configuration"; a bad value itself is a plain ValueError with its own message)."""


def _int(values: Mapping[str, Any], key: str) -> int:
    value = values.get(key)
    return INT_MAX if value is None else int(value)


def listener_limits(values: Mapping[str, Any], listener: str) -> tuple[int, int]:
    """(``max.connections``, ``max.connection.creation.rate``) of a listener: ``listener.name.<l>.``-prefixed,
    else the broker-wide value (valuesWithPrefixOverride), else no limit. The prefix is the listener's name in
    lower case (ListenerName.configPrefix)."""
    prefix = f"listener.name.{listener.lower()}."
    return tuple(_int(values, prefix + k) if values.get(prefix + k) is not None else _int(values, k)
                 for k in LISTENER_KEYS)  # type: ignore[return-value]


def validate(values: Mapping[str, Any], listeners: list[str], current: Mapping[str, Any] | None = None) -> None:
    """The checks these configs pass (ConfigDef's atLeast(0), KafkaConfig's ``max.connections.per.ip`` 0 only
    with overrides) and, for a dynamic change from ``current``, ListenerConnectionQuota.validateReconfiguration's
    positive limits of each listener whose limits change (a static 0 is allowed, as Kafka's start allows it).
    ValueError with Kafka's wording."""
    for key in (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, MAX_CONNECTION_CREATION_RATE):
        value = _int(values, key)
        if value < 0:
            raise ValueError(f"Invalid value {value} for configuration {key}: Value must be at least 0")
    overrides = parse_overrides(values.get(MAX_CONNECTIONS_PER_IP_OVERRIDES))
    if _int(values, MAX_CONNECTIONS_PER_IP) == 0 and not overrides:
        raise ValueError(f"requirement failed: {MAX_CONNECTIONS_PER_IP} can be set to zero only if "
                         f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} property is set.")
    for listener in listeners if current is not None else ():
        if listener_limits(values, listener) == listener_limits(current, listener):
            continue  # DynamicBrokerConfig reconfigures (and validates) only the listeners whose configs changed
        max_connections, rate = listener_limits(values, listener)
        if max_connections <= 0:
            raise InvalidReconfiguration(f"Invalid {MAX_CONNECTIONS} {max_connections}")
        if rate <= 0:
            raise InvalidReconfiguration(f"Invalid {MAX_CONNECTION_CREATION_RATE} {rate}")


class Avg:
    """Kafka's Avg (a SampledStat): the mean of the values recorded in the last ``samples`` windows; NaN if none."""

    def __init__(self, samples: int = _AVG_SAMPLES, window_ms: int = _AVG_WINDOW_MS) -> None:
        self.samples_n, self.window_ms = samples, window_ms
        self._samples: list[list[float]] = []  # [start_ms, total, count]

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples or now_ms - self._samples[-1][0] >= self.window_ms:
            self._samples.append([now_ms, 0.0, 0])
            del self._samples[:-self.samples_n]
        self._samples[-1][1] += value
        self._samples[-1][2] += 1

    def measure(self, now_ms: int) -> float:
        live = [s for s in self._samples if now_ms - s[0] < self.samples_n * self.window_ms]
        count = sum(s[2] for s in live)
        return sum(s[1] for s in live) / count if count else float("nan")


@dataclasses.dataclass
class _Listener:
    max_connections: int
    rate_bound: int
    rate: Rate
    count: int = 0
    throttle: Avg = dataclasses.field(default_factory=Avg)  # connection-accept-throttle-time
    ip_throttle: Avg = dataclasses.field(default_factory=Avg)  # ip-connection-accept-throttle-time


class ConnectionQuotas:
    """One SocketServer's connection quotas (a node's broker listeners, or its controller listeners: Kafka's
    BrokerServer and ControllerServer each have their own SocketServer, so their counts are apart)."""

    def __init__(self, inter_broker_listener: str | None, window_num: int = 11, window_size_s: int = 1) -> None:
        self.inter_broker_listener = inter_broker_listener
        self.window_num, self.window_ms = window_num, window_size_s * 1000
        self.max_throttle_ms = self.window_ms  # maxThrottleTimeMs: one quota window
        self.max_connections = INT_MAX
        self.max_connections_per_ip = INT_MAX
        self.overrides: dict[str, int] = {}  # IP -> max connections
        self.broker_rate_bound = INT_MAX
        self.broker_rate = Rate(window_num, self.window_ms)
        self.listeners: dict[str, _Listener] = {}
        self.counts: dict[str, int] = {}
        self.total = 0
        self.ip_rates: dict[str, int] = {}  # IP -> connection_creation_rate
        self.default_ip_rate = INT_MAX
        self._ip_sensors: dict[str, Rate] = {}
        self._quotas_seen: Mapping | None = None

    # ---- configuration ---------------------------------------------------------------------------------------

    def share_sensors(self, other: "ConnectionQuotas") -> None:
        """Record into ``other``'s broker-wide and IP rates: a combined node's broker and controller socket
        servers share Kafka's Metrics, where those sensors are found by name (the counts stay apart)."""
        self.broker_rate = other.broker_rate
        self._ip_sensors = other._ip_sensors

    def configure(self, values: Mapping[str, Any], resolved_overrides: Mapping[str, int]) -> None:
        """The broker-wide settings and every listener's (SocketServer.reconfigure and each
        ListenerConnectionQuota.reconfigure); ``resolved_overrides`` is ``max.connections.per.ip.overrides`` with
        host names resolved to IPs (the caller's I/O)."""
        self.max_connections = _int(values, MAX_CONNECTIONS)
        self.max_connections_per_ip = _int(values, MAX_CONNECTIONS_PER_IP)
        self.overrides = {normalise_ip(ip): n for ip, n in resolved_overrides.items()}
        self.broker_rate_bound = _int(values, MAX_CONNECTION_CREATION_RATE)
        for name, lq in self.listeners.items():
            lq.max_connections, lq.rate_bound = listener_limits(values, name)

    def add_listener(self, name: str, values: Mapping[str, Any]) -> None:
        if name not in self.listeners:
            max_connections, rate_bound = listener_limits(values, name)
            self.listeners[name] = _Listener(max_connections, rate_bound, Rate(self.window_num, self.window_ms))

    def remove_listener(self, name: str) -> None:
        self.listeners.pop(name, None)

    def update_ip_quotas(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The ``ip`` entities' ``connection_creation_rate`` from the image (ClientQuotaMetadataManager ->
        updateIpConnectionRateQuota); the sensors read their bound at each record, so changes apply at once."""
        if quotas is self._quotas_seen:
            return
        self._quotas_seen = quotas
        rates, default = {}, INT_MAX
        for entity, values in quotas.items():
            if len(entity) != 1 or entity[0][0] != IP or CONNECTION_CREATION_RATE not in values:
                continue
            rate = int(values[CONNECTION_CREATION_RATE])
            if entity[0][1] is None:
                default = rate
            else:
                rates[normalise_ip(entity[0][1])] = rate
        self.ip_rates, self.default_ip_rate = rates, default

    def connection_rate_for_ip(self, ip: str) -> int:
        return self.ip_rates.get(ip, self.default_ip_rate)

    # ---- the acceptor's questions ----------------------------------------------------------------------------

    def protected(self, listener: str) -> bool:
        """The inter-broker listener, when it is not the only one, is exempt from the broker-wide limits."""
        return listener == self.inter_broker_listener and len(self.listeners) > 1

    def record_connection(self, listener: str, now_ms: int) -> int:
        """recordConnectionAndGetThrottleTimeMs: the delay (ms) before this connection may be taken, for the
        broker-wide and the listener's creation rate, whichever is longer; noted in the listener's
        ``connection-accept-throttle-time``."""
        broker_ms = 0 if self.protected(listener) else self._record(self.broker_rate, self.broker_rate_bound, now_ms)
        lq = self.listeners.get(listener)
        if lq is None:
            return 0
        throttle_ms = max(broker_ms, self._record(lq.rate, lq.rate_bound, now_ms))
        if throttle_ms > 0:
            lq.throttle.record(throttle_ms, now_ms)
        return throttle_ms

    def slot_available(self, listener: str) -> bool:
        lq = self.listeners.get(listener)
        if lq is not None and lq.count >= lq.max_connections:
            return False
        return self.protected(listener) or self.total < self.max_connections

    def inc(self, listener: str, ip: str, now_ms: int) -> None:
        """Count a connection from ``ip`` (normalised). Raises ConnectionThrottled (nothing counted, the connection
        taken back from the rates) or TooManyConnections (nothing counted: Kafka counts it, then its closeChannel
        takes it back)."""
        bound = self.connection_rate_for_ip(ip)
        if bound != INT_MAX:  # the IP quota is enabled
            sensor = self._ip_sensors.get(ip)
            if sensor is None:
                sensor = self._ip_sensors[ip] = Rate(self.window_num, self.window_ms)
            throttle_ms = self._record(sensor, bound, now_ms)
            if throttle_ms > 0:
                sensor.record(-1.0, now_ms)
                if not self.protected(listener):
                    self.broker_rate.record(-1.0, now_ms)
                lq = self.listeners.get(listener)
                if lq is not None:
                    lq.ip_throttle.record(throttle_ms, now_ms)
                    lq.rate.record(-1.0, now_ms)
                raise ConnectionThrottled(ip, now_ms, throttle_ms)
        count = self.counts.get(ip, 0)
        limit = self.overrides.get(ip, self.max_connections_per_ip)
        if count >= limit:
            raise TooManyConnections(ip, limit)
        self.counts[ip] = count + 1
        self.total += 1
        lq = self.listeners.get(listener)
        if lq is not None:
            lq.count += 1

    def dec(self, listener: str, ip: str) -> None:
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total = max(0, self.total - 1)
        lq = self.listeners.get(listener)
        if lq is not None and lq.count > 0:
            lq.count -= 1

    def get(self, ip: str) -> int:
        return self.counts.get(ip, 0)

    def max_connections_exceeded(self, listener: str) -> bool:
        """Checked by each listener's processors: over the broker-wide limit, close a least recently used one."""
        return self.total > self.max_connections and not self.protected(listener)

    # ---- metrics --------------------------------------------------------------------------------------------

    def broker_accept_rate(self, now_ms: int) -> float:
        return self.broker_rate.measure(now_ms)

    def listener_metrics(self, now_ms: int) -> dict[str, tuple[float, float, float]]:
        """listener -> (connection-accept-rate, connection-accept-throttle-time, ip-connection-accept-throttle-time)."""
        return {name: (lq.rate.measure(now_ms), lq.throttle.measure(now_ms), lq.ip_throttle.measure(now_ms))
                for name, lq in self.listeners.items()}

    def ip_accept_rates(self, now_ms: int) -> dict[str, float]:
        return {ip: rate.measure(now_ms) for ip, rate in self._ip_sensors.items()}

    def expire(self, now_ms: int) -> int:
        """IP sensors idle for an hour go (ConnectionQuotaEntity.ipQuotaEntity's expiration)."""
        idle = [ip for ip, r in self._ip_sensors.items() if now_ms - r.idle_since() >= INACTIVE_SENSOR_EXPIRATION_MS]
        for ip in idle:
            del self._ip_sensors[ip]
        return len(idle)

    # ---- internals -------------------------------------------------------------------------------------------

    def _record(self, rate: Rate, bound: int, now_ms: int) -> int:
        """recordAndGetThrottleTimeMs: record one connection; over the bound, the delay that brings the rate back
        (QuotaUtils.boundedThrottleTime: at most one quota window)."""
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        if bound <= 0:  # a rate of 0 (atLeast(0) allows it): Java's round of an infinite delay, then the cap
            return self.max_throttle_ms
        return min(math.floor((measured - bound) / bound * rate.window_size(now_ms) + 0.5), self.max_throttle_ms)
