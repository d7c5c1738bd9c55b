"""The first answers on the wire: ApiVersions and Metadata, to real clients and to raw sockets."""

from __future__ import annotations

import shutil
import struct
import subprocess


from broker.apis import HANDLERS
from protocol.generated.api_keys import APIS
from protocol.generated.messages import (
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, RequestHeader,
)
from protocol.generated.messages.metadata_request import MetadataRequestTopic


def test_api_versions_advertises_exactly_the_handler_table(raw):
    c = raw()
    for v in range(0, 5):
        resp = c.call(18, v, ApiVersionsRequest(client_software_name="odradek-test", client_software_version="1.0"),
                      corr=v)
        assert resp.error_code == 0
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [
            (h.api_key, *h.advertised) for h in HANDLERS.values()]


def test_api_versions_reports_features(raw):
    resp = raw().call(18, 4, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    assert finalized["metadata.version"] == (25, 25) and finalized["group.version"] == (1, 1)
    assert supported["metadata.version"] == (7, 25)
    assert resp.finalized_features_epoch >= 0


def test_api_versions_unknown_version_gets_v0_body_with_error_35(raw):
    c = raw()
    # v7 does not exist; the client sends header v2 (flexible) and Kafka answers a v0 body, header v0
    c.send_frame(RequestHeader(18, 7, 99, "future-client").encode(2) + b"\x00")
    frame = c.recv_frame()
    assert struct.unpack_from(">i", frame)[0] == 99
    resp = ApiVersionsResponse.decode(frame[4:], 0)
    assert resp.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]


def test_api_versions_v3_validates_client_software(raw):
    resp = raw().call(18, 3, ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"))
    assert resp.error_code == 42  # INVALID_REQUEST


def test_metadata_lists_this_broker_at_every_version(broker, raw):
    c = raw()
    for v in range(0, 14):
        topics = [] if v == 0 else None
        resp = c.call(3, v, MetadataRequest(topics=topics), corr=100 + v)
        assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.1", broker.port)]
        assert resp.topics == []  # a fresh broker has no topics
        if v >= 2:
            assert resp.cluster_id == broker.broker.cluster_id
        if v >= 1:
            assert resp.controller_id == 1


def test_metadata_unknown_topic_and_auto_creation(raw):
    c = raw()
    resp = c.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="nope")], allow_auto_topic_creation=False))
    assert [(t.name, t.error_code) for t in resp.topics] == [("nope", 3)]  # UNKNOWN_TOPIC_OR_PARTITION
    resp = c.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="auto")]), corr=2)
    assert [(t.name, t.error_code) for t in resp.topics] == [("auto", 5)]  # LEADER_NOT_AVAILABLE while created
    resp = c.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="auto")]), corr=3)
    (t,) = resp.topics
    assert t.error_code == 0 and [p.leader_id for p in t.partitions] == [1] and t.topic_id != bytes(16)
    resp = c.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="bad/name")]), corr=4)
    assert [(t.name, t.error_code) for t in resp.topics] == [("bad/name", 17)]  # INVALID_TOPIC_EXCEPTION


def test_unknown_api_key_closes_only_that_connection(raw):
    bad, good = raw(), raw()
    bad.send_frame(struct.pack(">hhih", 999, 0, 1, -1))
    assert bad.recv_frame() is None
    resp = good.call(18, 2, ApiVersionsRequest())
    assert resp.error_code == 0


def test_unserved_api_closes_connection(raw):
    c = raw()
    c.send_frame(RequestHeader(11, 6, 1, "x").encode(2) + b"\x00" * 20)  # JoinGroup: not served yet
    assert c.recv_frame() is None


def test_malformed_body_and_oversized_frame_close_the_connection(raw):
    c = raw()
    c.send_frame(RequestHeader(3, 12, 1, "x").encode(2) + b"\xff\xff\xff")
    assert c.recv_frame() is None
    c = raw()
    c.sock.sendall(struct.pack(">i", 104857600 + 1))
    assert c.recv_frame() is None
    c = raw()
    c.sock.sendall(struct.pack(">i", -1))
    assert c.recv_frame() is None
    assert raw().call(18, 0, ApiVersionsRequest()).error_code == 0


def test_disconnect_mid_request_leaves_broker_serving(raw):
    c = raw()
    c.sock.sendall(struct.pack(">i", 100) + b"\x00\x03")
    c.close()
    assert raw().call(18, 1, ApiVersionsRequest()).error_code == 0


def test_kcat_lists_the_broker(broker):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is installed by `make test`"
    out = subprocess.run([kcat, "-L", "-b", broker.bootstrap, "-m", "10"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert f"broker 1 at 127.0.0.1:{broker.port}" in out.stdout
    assert "0 topics" in out.stdout


def test_confluent_kafka_admin_lists_cluster(broker):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    assert list(md.brokers) == [1]
    assert md.brokers[1].port == broker.port
    assert md.cluster_id == broker.broker.cluster_id
    assert md.controller_id == 1


def test_kafka_python_admin_reads_metadata(broker):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        assert admin.list_topics() == []
        cluster = admin.describe_cluster()
        assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, broker.port)]
        assert cluster["cluster_id"] == broker.broker.cluster_id
    finally:
        admin.close()


def test_frames_larger_than_the_receive_step_are_read_whole(raw):
    """A frame over 1 MiB is received in place in a buffer that grows as its bytes arrive (the event
    loop's receive-into path); trailing bytes of a body are ignored as Kafka's readers do."""
    c = raw()
    body = ApiVersionsRequest(client_software_name="odradek-test", client_software_version="1.0").encode(3)
    for size in (40_000, 1_500_000, 3_300_000):
        spec = APIS[18]
        c.send_frame(RequestHeader(18, 3, size, "test").encode(spec.request_header_version(3)) + body
                     + b"\x00" * size)
        frame = c.recv_frame()
        assert frame is not None and struct.unpack_from(">i", frame)[0] == size
    resp = c.call(3, 12, MetadataRequest(topics=[]), corr=7)
    assert resp.brokers
