"""Client telemetry (KIP-714) on the node: the subscription manager fed by the metadata image, and the pushed
OTLP metrics decoded and exported on the broker's Prometheus endpoint.

Kafka hands pushed metrics to a ClientTelemetryReceiver plugin; odradek's receiver is built in: every
metric a client pushes becomes a Prometheus series labelled with the client's instance id, client id and
software, so an operator sees each client's own metrics without touching the clients. Counters pushed as
deltas (the subscription asks for delta temporality, as Kafka does) are summed into running totals.
The Prometheus endpoint scrapes from its own thread, so the series sit behind a lock.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from typing import TYPE_CHECKING, Iterator

from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client.metrics_core import Metric

from cluster.client_metrics import (
    RESOURCE_CLIENT_METRICS, ClientInstance, ClientInstanceMetadata, ClientMetricsError, ClientMetricsManager,
    uuid_string,
)
from protocol.compression import DecompressedTooLargeError, decompress
from protocol.errors import CorruptRecordError, ErrorCode

if TYPE_CHECKING:
    from broker.clock import Clock
    from cluster.metadata_image import MetadataImage

log = logging.getLogger("odradek.telemetry")

MAX_SERIES_PER_INSTANCE = 5000  # a client pushing more is cut off here (one log line), not the broker's memory
INSTANCE_LABELS = ("client_instance_id", "client_id", "client_software_name", "client_software_version")
_DELTA = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
_BAD_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_BAD_LABEL = re.compile(r"[^a-zA-Z0-9_]")


class TelemetryDecodeError(Exception):
    """A pushed payload that is not OTLP MetricsData (Kafka's plugin failure: INVALID_RECORD)."""


def prometheus_name(name: str) -> str:
    out = _BAD_NAME.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def _label_name(name: str) -> str:
    out = _BAD_LABEL.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def _any_value(v) -> str:
    kind = v.WhichOneof("value")
    return "" if kind is None else str(getattr(v, kind))


def _number(point) -> float:
    return float(point.as_int) if point.WhichOneof("value") == "as_int" else point.as_double


def decode_points(payload: bytes) -> Iterator[tuple[str, str, str, tuple[tuple[str, str], ...], float, bool]]:
    """(family name, kind, sample suffix, attributes, value, is delta) for every data point of an OTLP
    MetricsData payload; kind is "gauge" or "counter". Histograms and summaries give their count and sum."""
    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(payload)
    except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
        raise TelemetryDecodeError(f"not an OTLP MetricsData payload: {exc}") from None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                name = prometheus_name(metric.name)
                if not name:
                    continue
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    for p in metric.gauge.data_points:
                        yield name, "gauge", "", _attrs(p), _number(p), False
                elif kind == "sum":
                    s = metric.sum
                    delta = s.aggregation_temporality == _DELTA
                    if s.is_monotonic:  # a counter: the family is named without Prometheus' _total suffix
                        family, kind_, suffix = name.removesuffix("_total"), "counter", "_total"
                    else:
                        family, kind_, suffix = name, "gauge", ""
                    for p in s.data_points:
                        yield family, kind_, suffix, _attrs(p), _number(p), delta
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    body = getattr(metric, kind)
                    delta = getattr(body, "aggregation_temporality", 0) == _DELTA
                    for p in body.data_points:
                        attrs = _attrs(p)
                        yield name, "counter", "_count", attrs, float(p.count), delta
                        yield name, "counter", "_sum", attrs, float(p.sum), delta


def _attrs(point) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((_label_name(kv.key), _any_value(kv.value)) for kv in point.attributes
                        if kv.key and _label_name(kv.key) not in INSTANCE_LABELS))


class PushedMetrics:
    """The latest value of every series each client instance pushed, read by the Prometheus collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # instance id -> (instance labels, {(family, suffix, attributes): (kind, value)})
        self._series: dict[bytes, tuple[dict[str, str], dict[tuple, tuple[str, float]]]] = {}

    def record(self, instance_id: bytes, labels: dict[str, str], payload: bytes) -> int:
        """Decode and store one push; raises TelemetryDecodeError (nothing stored) for a bad payload.
        Returns the number of data points taken."""
        points = list(decode_points(payload))
        with self._lock:
            _, series = self._series.get(instance_id, (labels, {}))
            series = dict(series)
            taken = 0
            for family, kind, suffix, attrs, value, delta in points:
                key = (family, suffix, attrs)
                old = series.get(key)
                if old is None and len(series) >= MAX_SERIES_PER_INSTANCE:
                    continue
                if delta and old is not None and old[0] == kind:
                    value += old[1]
                series[key] = (kind, value)
                taken += 1
            self._series[instance_id] = (labels, series)
        if taken < len(points):
            log.warning("client instance %s pushed more than %d series; the rest are not exported",
                        labels.get("client_instance_id"), MAX_SERIES_PER_INSTANCE)
        return taken

    def drop(self, instance_ids) -> None:
        with self._lock:
            for iid in instance_ids:
                self._series.pop(iid, None)

    def instances(self) -> int:
        with self._lock:
            return len(self._series)

    # prometheus_client collector protocol
    def describe(self):
        return []

    def collect(self):
        with self._lock:
            snapshot = list(self._series.values())
        families: dict[str, Metric] = {}
        for labels, series in snapshot:
            for (family, suffix, attrs), (kind, value) in series.items():
                metric = families.get(family)
                if metric is None:
                    metric = families[family] = Metric(family, "pushed by clients (KIP-714)", kind)
                elif metric.type != kind:
                    continue  # two clients disagree on a metric's type: the first one seen wins
                metric.add_sample(family + suffix, {**labels, **dict(attrs)}, value)
        yield from families.values()


class ClientTelemetry:
    """What GetTelemetrySubscriptions and PushTelemetry use: the manager, the exporter, the node's hooks."""

    def __init__(self, manager: ClientMetricsManager, pushed: PushedMetrics) -> None:
        self.manager = manager
        self.pushed = pushed

    async def on_new_metadata_image(self, image: "MetadataImage") -> None:
        configs = {name: props for (rtype, name), props in image.configs.items() if rtype == RESOURCE_CLIENT_METRICS}
        if self.manager.update_subscriptions(configs):
            log.info("client metrics subscriptions: %s", ", ".join(self.manager.list_resources()) or "none")

    def connection_closed(self, connection_id: str) -> None:
        gone = self.manager.connection_closed(connection_id)
        if gone is not None:
            self.pushed.drop([gone])

    async def expire_periodically(self, clock: "Clock", interval_s: float = 5.0) -> None:
        """Kafka's expiration timer tasks, as one sweep: instances silent for too long lose their series."""
        while True:
            await asyncio.sleep(interval_s)
            self.expire(clock.now_ms())

    def expire(self, now_ms: int) -> None:
        gone = self.manager.expire(now_ms) + self.manager.evicted()
        if gone:
            self.pushed.drop(gone)

    def push(self, instance_id: bytes, subscription_id: int, terminating: bool, compression_type: int,
             metrics: bytes, metadata, connection_id: str, now_ms: int) -> int:
        """PushTelemetry: Kafka's checks, then the payload decompressed (at most telemetry.max.bytes) and
        exported. Returns the error code to answer."""
        manager = self.manager
        self.expire(now_ms)
        try:
            instance = manager.push(instance_id, subscription_id, terminating, compression_type, len(metrics),
                                    metadata, connection_id, now_ms)
        except ClientMetricsError as exc:
            log.debug("push telemetry from %s: %s", uuid_string(instance_id), exc.message)
            return exc.code
        if metrics:
            try:
                payload = decompress(compression_type, metrics, max_size=manager.telemetry_max_bytes)
            except CorruptRecordError as exc:
                manager.export_failed(instance)
                log.warning("push telemetry from client %s: %s", uuid_string(instance_id), exc)
                too_large = isinstance(exc, DecompressedTooLargeError)
                return ErrorCode.TELEMETRY_TOO_LARGE if too_large else ErrorCode.INVALID_RECORD
            try:
                self.pushed.record(instance_id, _instance_labels(instance), payload)
            except TelemetryDecodeError as exc:
                manager.export_failed(instance)
                log.warning("push telemetry from client %s: %s", uuid_string(instance_id), exc)
                return ErrorCode.INVALID_RECORD
        if terminating:  # the client's last push: its series stay until its connection closes or it expires
            log.debug("client instance %s is terminating", uuid_string(instance_id))
        return ErrorCode.NONE


def _instance_labels(instance: ClientInstance) -> dict[str, str]:
    md: ClientInstanceMetadata = instance.metadata
    return {"client_instance_id": md.client_instance_id, "client_id": md.client_id or "",
            "client_software_name": md.client_software_name or "",
            "client_software_version": md.client_software_version or ""}
