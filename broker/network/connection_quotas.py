"""This node's connection quotas (Kafka's ConnectionQuotas, its pure part in cluster/connection_quotas.py): their
settings (static, then the cluster-default and this broker's dynamic configs over them, as DynamicBrokerConfig
orders them), the IP ``connection_creation_rate`` client quotas from the metadata image, and their metrics.

The broker listeners and the controller listeners are counted apart, as Kafka's BrokerServer and ControllerServer
each have their own SocketServer. The network server's acceptors (broker/network/server.py) ask them per accepted
socket; a change of limits wakes the acceptors waiting for a slot and closes what is over a lowered
``max.connections``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any, Mapping

from prometheus_client.core import Metric

from broker.config.connection_quotas import check_settings, quota_settings, resolve_overrides
from cluster.connection_quotas import MAX_CONNECTIONS_PER_IP_OVERRIDES, ConnectionQuotas
from cluster.dynamic_broker_config import RESOURCE_BROKER, connection_quota_configs

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from cluster.metadata_image import MetadataImage

log = logging.getLogger("odradek.server")


class NodeConnectionQuotas:
    def __init__(self, config: "BrokerConfig", server: Any) -> None:
        """``server``: the NetworkServer (its metrics and clock; woken with notify_slots and
        close_excess_connections when the limits change)."""
        controller_names = config.controller_listener_names
        window_num, window_s = int(config["quota.window.num"]), int(config["quota.window.size.seconds"])
        inter_broker = config.inter_broker_listener if "broker" in config.process_roles else None
        self.server = server
        # the rates are recorded on the event loop and measured by the Prometheus endpoint's thread: one lock
        self.lock = threading.Lock()
        self.node_id = config.node_id
        self.static = quota_settings(config.values)
        self._listeners = {lst.name for lst in config.listeners}
        self._brokers = ConnectionQuotas(inter_broker, window_num, window_s)
        self._controllers = ConnectionQuotas(None, window_num, window_s)
        self._controllers.share_sensors(self._brokers)
        self._plane: dict[str, ConnectionQuotas] = {}
        for lst in config.listeners:
            quotas = self._controllers if lst.name in controller_names else self._brokers
            quotas.add_listener(lst.name, self.static)
            self._plane[lst.name] = quotas
        self.values: dict[str, Any] = {}
        try:
            self.static = check_settings(self.static, sorted(self._listeners))
            self._configure(self.static, resolve_overrides(self.static.get(MAX_CONNECTIONS_PER_IP_OVERRIDES)))
        except ValueError as exc:
            from broker.config.config_types import ConfigException

            raise ConfigException(str(exc)) from None
        self._dynamic_seen: tuple | None = None
        metrics = server.metrics
        metrics.registry.register(_QuotaCollector(self))
        self._blocked = metrics.acceptor_blocked

    def plane(self, listener: str) -> ConnectionQuotas | None:
        return self._plane.get(listener)

    def planes(self) -> list[tuple[ConnectionQuotas, set[str]]]:
        return [(q, {n for n, p in self._plane.items() if p is q}) for q in (self._brokers, self._controllers)]

    def acceptor_blocked(self, listener: str, seconds: float) -> None:
        """AcceptorBlockedPercent: the time an acceptor waited for the creation rates or a slot (nanoseconds)."""
        self._blocked.labels(listener).inc(seconds * 1e9)

    def _configure(self, values: Mapping[str, Any], overrides: Mapping[str, int]) -> None:
        with self.lock:
            for quotas in (self._brokers, self._controllers):
                quotas.configure(values, overrides)
        self.values = dict(values)

    def expire(self, now_ms: int) -> None:
        """IP sensors idle for an hour go (on the event loop: the idle sweeper calls it)."""
        with self.lock:
            for quotas in (self._brokers, self._controllers):
                quotas.expire(now_ms)

    async def on_new_metadata_image(self, image: "MetadataImage") -> None:
        """Publisher step: the IP quotas, then the dynamic configs (the cluster default's and this broker's)."""
        with self.lock:
            for quotas in (self._brokers, self._controllers):
                quotas.update_ip_quotas(image.client_quotas)
        default = image.configs.get((RESOURCE_BROKER, ""))
        own = image.configs.get((RESOURCE_BROKER, str(self.node_id)))
        if self._dynamic_seen is not None and self._dynamic_seen[0] is default and self._dynamic_seen[1] is own:
            return
        self._dynamic_seen = (default, own)
        values = {**self.static, **connection_quota_configs(default, own)}
        try:
            values = check_settings(values, sorted(self._listeners), self.values)
            overrides = await asyncio.get_running_loop().run_in_executor(
                None, resolve_overrides, values.get(MAX_CONNECTIONS_PER_IP_OVERRIDES))
        except ValueError as exc:  # Kafka logs it and keeps the configs in force
            log.error("dynamic connection quota configs not applied: %s", exc)
            return
        if values == self.values:
            return
        self._configure(values, overrides)
        log.info("connection quotas: %s", ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "no limits")
        self.server.notify_slots()
        self.server.close_excess_connections()


class _QuotaCollector:
    """Kafka's socket-server-metrics of the connection quotas, measured when scraped."""

    def __init__(self, quotas: NodeConnectionQuotas) -> None:
        self.quotas = quotas

    def describe(self):
        return []

    def collect(self):
        now_ms = self.quotas.server.clock.now_ms()
        prefix = "kafka_server_socketservermetrics_"
        rate = Metric(prefix + "connection_accept_rate", "Tracking rate of accepting new connections (per second)",
                      "gauge")
        broker = Metric(prefix + "broker_connection_accept_rate",
                        "Tracking rate of accepting new connections (per second)", "gauge")
        throttle = Metric(prefix + "connection_accept_throttle_time", "Tracking average throttle-time, out of "
                          "non-zero throttle times, per listener", "gauge")
        ip_throttle = Metric(prefix + "ip_connection_accept_throttle_time", "Tracking average throttle-time, out "
                             "of non-zero throttle times, per listener", "gauge")
        with self.quotas.lock:
            for quotas, _ in self.quotas.planes():
                self._measure(quotas, now_ms, rate, broker, throttle, ip_throttle)
        return [rate, broker, throttle, ip_throttle]

    @staticmethod
    def _measure(quotas: ConnectionQuotas, now_ms: int, rate: Metric, broker: Metric, throttle: Metric,
                 ip_throttle: Metric) -> None:
        if quotas.listeners:
            if not broker.samples:  # the broker listeners' (a controller-only node: its controller listeners')
                broker.add_sample(broker.name, {}, quotas.broker_accept_rate(now_ms))
            for listener, (r, t, ip_t) in sorted(quotas.listener_metrics(now_ms).items()):
                rate.add_sample(rate.name, {"listener": listener}, r)
                throttle.add_sample(throttle.name, {"listener": listener}, t)
                ip_throttle.add_sample(ip_throttle.name, {"listener": listener}, ip_t)
            if not any("ip" in sample.labels for sample in rate.samples):  # shared by both planes
                for ip, r in sorted(quotas.ip_accept_rates(now_ms).items()):
                    rate.add_sample(rate.name, {"ip": ip}, r)
