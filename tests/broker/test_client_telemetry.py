"""Client telemetry (KIP-714) end to end: a CLIENT_METRICS subscription set through kafka-python, a confluent-kafka
producer pushing its metrics, the metrics on the Prometheus endpoint; bad pushes get Kafka's errors."""

from __future__ import annotations

import time
import urllib.request

import confluent_kafka
import pytest
import zstandard
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client.parser import text_string_to_metric_families

from broker import EmbeddedBroker
from broker.observability.telemetry import PushedMetrics, TelemetryDecodeError, decode_points
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    ApiVersionsRequest, DescribeConfigsRequest, GetTelemetrySubscriptionsRequest, IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest, MetadataRequest, PushTelemetryRequest,
)
from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
from protocol.generated.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
from protocol.message import ZERO_UUID
from tests.kafka_wire import KafkaWire

CLIENT_METRICS, TOPIC, BROKER = 16, 2, 4
MAX_BYTES = 4096


def otlp(metrics: list[metrics_pb2.Metric]) -> bytes:
    return metrics_pb2.MetricsData(resource_metrics=[metrics_pb2.ResourceMetrics(
        scope_metrics=[metrics_pb2.ScopeMetrics(metrics=metrics)])]).SerializeToString()


def gauge(name: str, value: float, **attrs) -> metrics_pb2.Metric:
    kv = [KeyValue(key=k.replace("_", "."), value=AnyValue(string_value=str(v))) for k, v in attrs.items()]
    return metrics_pb2.Metric(name=name, gauge=metrics_pb2.Gauge(
        data_points=[metrics_pb2.NumberDataPoint(as_double=value, attributes=kv)]))


def delta_sum(name: str, value: int) -> metrics_pb2.Metric:
    return metrics_pb2.Metric(name=name, sum=metrics_pb2.Sum(
        is_monotonic=True, aggregation_temporality=metrics_pb2.AGGREGATION_TEMPORALITY_DELTA,
        data_points=[metrics_pb2.NumberDataPoint(as_int=value)]))


def scrape(port: int) -> list:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


# ---- decoding, without a broker -------------------------------------------------------------------------------------

def test_decode_points_gauges_counters_and_attributes():
    payload = otlp([gauge("org.apache.kafka.producer.node.request.latency.avg", 1.5, node_id=1),
                    delta_sum("org.apache.kafka.producer.connection.creation.total", 2)])
    points = sorted(decode_points(payload))
    assert points == [
        ("org_apache_kafka_producer_connection_creation", "counter", "_total", (), 2.0, True),
        ("org_apache_kafka_producer_node_request_latency_avg", "gauge", "", (("node_id", "1"),), 1.5, False),
    ]


def test_delta_counters_accumulate_and_series_drop():
    pushed = PushedMetrics()
    labels = {"client_instance_id": "i1", "client_id": "c", "client_software_name": "s",
              "client_software_version": "1"}
    pushed.record(b"i1", labels, otlp([delta_sum("requests.total", 3)]))
    pushed.record(b"i1", labels, otlp([delta_sum("requests.total", 4)]))
    samples = [s for fam in pushed.collect() for s in fam.samples]
    assert [(s.name, s.value, s.labels["client_id"]) for s in samples] == [("requests_total", 7.0, "c")]
    pushed.drop([b"i1"])
    assert list(pushed.collect()) == []


@pytest.mark.parametrize("garbage", [b"\xff\xff\xff\xff", b"\x0a\x05abc", b"\x08" + b"\xff" * 11])
def test_garbage_is_not_metrics(garbage):
    with pytest.raises(TelemetryDecodeError):
        list(decode_points(garbage))


# ---- a broker with real clients -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("telemetry") / "d",
                        overrides={"metrics.prometheus.listener": "127.0.0.1:0",
                                   "telemetry.max.bytes": MAX_BYTES}) as b:
        yield b


@pytest.fixture(scope="module")
def subscription(broker):
    """Set through kafka-python's admin client (ConfigResourceType.CLIENT_METRICS), as an operator would."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        result = admin.alter_configs([ConfigResource(
            ConfigResourceType.CLIENT_METRICS, "producers",
            configs={"metrics": "org.apache.kafka.producer.", "interval.ms": "500", "match": "client_id=tel-.*"})],
            raise_on_unknown=False)
        assert result == {"client_metrics": {"producers": "OK"}}
        described = admin.describe_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers")])
    finally:
        admin.close()
    return described


def test_subscription_is_described_and_listed(broker, subscription):
    text = repr(subscription)
    assert "org.apache.kafka.producer." in text and "client_id=tel-.*" in text
    c = KafkaWire(broker.port)
    try:
        v0 = c.call(74, 0, ListConfigResourcesRequest())
        assert v0.error_code == 0 and [r.resource_name for r in v0.config_resources] == ["producers"]
        v1 = c.call(74, 1, ListConfigResourcesRequest(resource_types=[CLIENT_METRICS, BROKER]), corr=2)
        assert {(r.resource_type, r.resource_name) for r in v1.config_resources} == {
            (CLIENT_METRICS, "producers"), (BROKER, str(broker.broker.node_id))}
        assert c.call(74, 0, ListConfigResourcesRequest(), corr=3).config_resources[0].resource_type == 16
        bad = c.call(74, 1, ListConfigResourcesRequest(resource_types=[99]), corr=4)
        assert bad.error_code == ErrorCode.UNSUPPORTED_VERSION
        desc = c.call(32, 4, DescribeConfigsRequest(resources=[
            DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name="producers", configuration_keys=None),
            DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name="", configuration_keys=None)]), corr=5)
        assert {e.name: (e.value, e.config_source) for e in desc.results[0].configs} == {
            "metrics": ("org.apache.kafka.producer.", 7), "interval.ms": ("500", 7), "match": ("client_id=tel-.*", 7)}
        assert desc.results[1].error_code == ErrorCode.INVALID_REQUEST
    finally:
        c.close()


def test_confluent_kafka_producer_metrics_reach_prometheus(broker, subscription):
    """librdkafka asks for its subscription, pushes its metrics (zstd-compressed OTLP) every 500 ms, and they
    appear on the broker's Prometheus endpoint labelled by client id and instance id."""
    port = broker.broker.metrics.port
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "tel-producer"})
    other = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "untracked"})
    try:
        for p in (producer, other):
            for _ in range(50):
                p.produce("telemetry-topic", b"x" * 100)
            assert p.flush(15) == 0
        mine: list = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not mine:
            producer.poll(0.2)
            other.poll(0.2)
            mine = [s for s in scrape(port) if s.labels.get("client_id") == "tel-producer"]
        names = {s.name for s in mine}
        assert "org_apache_kafka_producer_node_request_latency_avg" in names, names
        assert all(s.name.startswith("org_apache_kafka_producer_") for s in mine)
        assert all(s.labels["client_software_name"] == "confluent-kafka-python" for s in mine)
        assert len({s.labels["client_instance_id"] for s in mine}) == 1
        # the other producer matches no subscription (client_id=tel-.*): it gets no metrics to push
        assert not [s for s in scrape(port) if s.labels.get("client_id") == "untracked"]
    finally:
        producer.flush(5)
        other.flush(5)
        del producer, other


def get_subscription(c: KafkaWire, corr: int = 1, instance_id: bytes = ZERO_UUID):
    return c.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=instance_id), corr=corr,
                  client_id="tel-raw")


def push(c: KafkaWire, iid: bytes, sid: int, metrics: bytes, corr: int, compression: int = 0, terminating=False):
    return c.call(72, 0, PushTelemetryRequest(client_instance_id=iid, subscription_id=sid, terminating=terminating,
                                                 compression_type=compression, metrics=metrics),
                  corr=corr, client_id="tel-raw").error_code


def test_bad_pushes_get_kafkas_errors_and_hurt_nobody(broker, subscription):
    c = KafkaWire(broker.port)
    try:
        sub = get_subscription(c)
        assert sub.error_code == 0 and sub.requested_metrics == ["org.apache.kafka.producer."]
        assert sub.push_interval_ms == 500 and sub.telemetry_max_bytes == MAX_BYTES and sub.delta_temporality
        assert sub.accepted_compression_types == [4, 3, 1, 2]
        iid, sid = sub.client_instance_id, sub.subscription_id
        assert get_subscription(c, 2, iid).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        good = otlp([gauge("org.apache.kafka.producer.x", 1.0)])
        # the push right after the subscription is accepted, the next one inside the interval is throttled
        assert push(c, iid, sid, good, 3) == 0
        assert push(c, iid, sid, good, 4) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        time.sleep(0.55)
        assert push(c, iid, sid + 1, good, 5) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        time.sleep(0.55)
        assert push(c, iid, sid, b"\x00" * (MAX_BYTES + 1), 6) == ErrorCode.TELEMETRY_TOO_LARGE
        time.sleep(0.55)
        assert push(c, iid, sid, good, 7, compression=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        time.sleep(0.55)
        assert push(c, iid, sid, b"\xff\xff\xff\xff garbage", 8) == ErrorCode.INVALID_RECORD
        time.sleep(0.55)
        bomb = zstandard.ZstdCompressor().compress(b"\x00" * (50 * MAX_BYTES))  # small, decompresses to 200 KiB
        assert len(bomb) < MAX_BYTES
        assert push(c, iid, sid, bomb, 9, compression=4) == ErrorCode.TELEMETRY_TOO_LARGE
        time.sleep(0.55)
        assert push(c, iid, sid, zstandard.ZstdCompressor().compress(good), 10, compression=4) == 0
        assert push(c, ZERO_UUID, sid, good, 11) == ErrorCode.INVALID_REQUEST
        assert push(c, iid, sid, good, 12, terminating=True) == 0
        assert push(c, iid, sid, good, 13) == ErrorCode.INVALID_REQUEST  # nothing after a terminating push
        # the same connection and a new one still work
        assert c.call(3, 12, MetadataRequest(topics=None), corr=14).brokers
    finally:
        c.close()
    c2 = KafkaWire(broker.port)
    try:
        versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        assert c2.call(18, 3, versions).error_code == 0
    finally:
        c2.close()


def test_invalid_subscriptions_are_refused_with_kafkas_errors(broker):
    c = KafkaWire(broker.port)
    try:
        resources = [
            AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name="bad-interval",
                                 configs=[AlterableConfig(name="interval.ms", config_operation=0, value="50")]),
            AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name="bad-match",
                                 configs=[AlterableConfig(name="match", config_operation=0, value="client_id")]),
            AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name="bad-key",
                                 configs=[AlterableConfig(name="nope", config_operation=0, value="1")]),
            AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name="appended",
                                 configs=[AlterableConfig(name="metrics", config_operation=2, value="a.,b.")]),
        ]
        resp = c.call(44, 1, IncrementalAlterConfigsRequest(resources=resources, validate_only=False))
        assert [r.error_code for r in resp.responses] == [
            ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST, 0]
        names = [r.resource_name for r in c.call(74, 0, ListConfigResourcesRequest(), corr=2).config_resources]
        assert "appended" in names and not {"bad-interval", "bad-match", "bad-key"} & set(names)
        # deleting every config removes the subscription
        resp = c.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=CLIENT_METRICS, resource_name="appended",
            configs=[AlterableConfig(name="metrics", config_operation=1, value=None)])], validate_only=False), corr=3)
        assert resp.responses[0].error_code == 0
        names = [r.resource_name for r in c.call(74, 0, ListConfigResourcesRequest(), corr=4).config_resources]
        assert "appended" not in names
    finally:
        c.close()


def test_expired_and_disconnected_instances_lose_their_series():
    """Series live as long as the instance: max(cache expiry, 3 x push interval) without a request, or until
    the client's connection closes (ClientMetricsManager's expiration task and disconnect listener)."""
    import asyncio
    import itertools

    from broker.observability.telemetry import ClientTelemetry
    from cluster.client_metrics import ClientInstanceMetadata, ClientMetricsManager, uuid_string
    from cluster.metadata_image import MetadataImage

    ids = itertools.count(1)
    telemetry = ClientTelemetry(ClientMetricsManager(lambda: next(ids).to_bytes(16, "big"), cache_expiry_ms=1000),
                                PushedMetrics())
    image = MetadataImage(configs={(CLIENT_METRICS, "s"): {"metrics": "*", "interval.ms": "100"}})
    asyncio.run(telemetry.on_new_metadata_image(image))

    def md(iid):
        return ClientInstanceMetadata(uuid_string(iid), "c", "s", "1", "127.0.0.1", "1")

    payload = otlp([gauge("m", 1.0)])
    for conn in ("conn-a", "conn-b"):
        sub = telemetry.manager.get_subscriptions(ZERO_UUID, md, conn, 0)
        assert sub.metrics == ("*",)
        assert telemetry.push(sub.instance_id,
                              sub.subscription_id, False, 0, payload, md, conn, 1) == 0
    assert telemetry.pushed.instances() == 2
    telemetry.connection_closed("conn-a")
    assert telemetry.pushed.instances() == 1
    telemetry.expire(1000)
    assert telemetry.pushed.instances() == 1
    telemetry.expire(1001)
    assert telemetry.pushed.instances() == 0
