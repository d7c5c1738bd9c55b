"""DescribeTopicPartitions v0 (KIP-966): paging by cursor, bad input, and kafka-python's admin client."""

from __future__ import annotations

import logging
import uuid
import urllib.request
from types import MappingProxyType

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from prometheus_client.parser import text_string_to_metric_families

from broker import EmbeddedBroker
from broker.apis.k75_describe_topic_partitions import TOPIC_OPERATIONS, describe
from cluster.metadata_image import BrokerInfo, Endpoint, MetadataImage, PartitionInfo, TopicInfo
from protocol.generated.messages import DescribeTopicPartitionsRequest, MetadataRequest
from protocol.generated.messages.describe_topic_partitions_request import Cursor, TopicRequest
from protocol.message import ZERO_UUID
from tests.kafka_wire import KafkaWire

UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST = 3, 17, 42
NO_OPS = -2147483648

# sizes chosen so that pages end both inside a topic and exactly at a topic's end
TOPICS = {"dtp-a": 4, "dtp-b": 3, "dtp-c": 5}


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(n, num_partitions=p, replication_factor=1) for n, p in topics.items()])
    finally:
        admin.close()


def dtp_requests(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if (s.name == "kafka_network_requestmetrics_requests_total"
                    and s.labels.get("request") == "DescribeTopicPartitions" and s.labels.get("version") == "0"):
                total += s.value
    return total


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("dtp") / "d",
                        overrides={"metrics.prometheus.listener": "127.0.0.1:0"}) as b:
        create_topics(b.bootstrap, TOPICS)
        yield b


@pytest.fixture
def raw_client(cluster):
    c = KafkaWire(cluster.port)
    yield c
    c.close()


def dtp(client, topics=(), limit=2000, cursor=None, corr=1):
    req = DescribeTopicPartitionsRequest(topics=[TopicRequest(name=t) for t in topics], response_partition_limit=limit,
                                         cursor=Cursor(topic_name=cursor[0], partition_index=cursor[1])
                                         if cursor is not None else None)
    return client.call(75, 0, req, corr=corr)


def pages_of(resp):
    return [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics]


def cursor_of(resp):
    return None if resp.next_cursor is None else (resp.next_cursor.topic_name, resp.next_cursor.partition_index)


# ---- kafka-python's admin client, three pages ------------------------------------------------------------------------

def test_kafka_python_pages_through_every_partition_once(cluster):
    before = dtp_requests(cluster.broker.metrics.port)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    try:
        # kafka-python's describe_topic_partitions returns one page and its next_cursor: drive the cursor here
        pages, cursor = [], None
        while True:
            page = admin.describe_topic_partitions([], response_partition_limit=4, cursor=cursor)
            pages.append(page)
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert len(pages) < 10, "the cursor does not advance"
        named = admin.describe_topic_partitions(["dtp-c", "nope", "dtp-a"], response_partition_limit=100)
    finally:
        admin.close()

    assert [[(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]]
            for page in pages] == [
        [("dtp-a", [0, 1, 2, 3])],
        [("dtp-b", [0, 1, 2]), ("dtp-c", [0])],
        [("dtp-c", [1, 2, 3, 4])],
    ]
    assert [p["next_cursor"] for p in pages] == [
        {"topic_name": "dtp-b", "partition_index": 0}, {"topic_name": "dtp-c", "partition_index": 1}, None]

    seen = [(t["name"], p["partition_index"]) for page in pages for t in page["topics"] for p in t["partitions"]]
    expected = [(n, i) for n, count in sorted(TOPICS.items()) for i in range(count)]
    assert seen == expected and len(set(seen)) == len(seen)  # every partition exactly once, in order
    topic_names = [t["name"] for page in pages for t in page["topics"]]
    assert sorted(set(topic_names)) == sorted(TOPICS)  # every topic; a split topic continues on the next page
    ids = {t["name"]: t["topic_id"] for page in pages for t in page["topics"]}
    c = KafkaWire(cluster.port)
    try:
        meta = c.call(3, 12, MetadataRequest(topics=None))
    finally:
        c.close()
    assert ids == {t.name: uuid.UUID(bytes=t.topic_id) for t in meta.topics}  # the ids Metadata reports
    for page in pages:
        for t in page["topics"]:
            assert (t["error_code"], t["is_internal"], t["topic_authorized_operations"]) == (0, False, TOPIC_OPERATIONS)
            for p in t["partitions"]:
                assert (p["error_code"], p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["offline_replicas"]) \
                    == (0, 1, [1], [1], [])
                assert p["leader_epoch"] >= 0

    # named topics: sorted, the unknown one answered with its error and no partitions
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in named["topics"]] == [
        ("dtp-a", 0, 4), ("dtp-c", 0, 5), ("nope", UNKNOWN_TOPIC_OR_PARTITION, 0)]
    assert named["next_cursor"] is None

    # the broker served API key 75: once per page plus the named request
    assert dtp_requests(cluster.broker.metrics.port) - before == len(pages) + 1 == 4


# ---- paging and cursors on the wire -----------------------------------------------------------------------------

def test_named_topics_paging_and_errors(raw_client):
    c = raw_client
    r = dtp(c, ["dtp-b", "dtp-a", "bad/name", "dtp-a", "missing", "dtp-c"], limit=5)
    # sorted, de-duplicated; errors use none of the limit; the page is cut inside dtp-b
    assert pages_of(r) == [("bad/name", []), ("dtp-a", [0, 1, 2, 3]), ("dtp-b", [0])]
    assert [t.error_code for t in r.topics] == [INVALID_TOPIC_EXCEPTION, 0, 0]
    assert r.topics[0].topic_id == ZERO_UUID and r.topics[0].topic_authorized_operations == TOPIC_OPERATIONS
    assert cursor_of(r) == ("dtp-b", 1)
    r = dtp(c, ["dtp-b", "dtp-a", "bad/name", "missing", "dtp-c"], limit=5, cursor=cursor_of(r), corr=2)
    assert pages_of(r) == [("dtp-b", [1, 2]), ("dtp-c", [0, 1, 2])]
    assert cursor_of(r) == ("dtp-c", 3)
    r = dtp(c, ["dtp-b", "dtp-a", "bad/name", "missing", "dtp-c"], limit=5, cursor=cursor_of(r), corr=3)
    assert pages_of(r) == [("dtp-c", [3, 4]), ("missing", [])]
    assert r.topics[1].error_code == UNKNOWN_TOPIC_OR_PARTITION and cursor_of(r) is None
    # an internal name that does not exist is flagged internal by its name
    r = dtp(c, ["__transaction_state"], corr=4)
    assert [(t.name, t.error_code, t.is_internal) for t in r.topics] == [
        ("__transaction_state", UNKNOWN_TOPIC_OR_PARTITION, True)]


def test_page_filled_exactly_points_at_next_topic_even_unknown(raw_client):
    r = dtp(raw_client, ["dtp-a", "dtp-aa-missing"], limit=4)
    assert pages_of(r) == [("dtp-a", [0, 1, 2, 3])]
    assert cursor_of(r) == ("dtp-aa-missing", 0)  # Kafka points at the next name, existing or not
    r = dtp(raw_client, ["dtp-a", "dtp-aa-missing"], limit=4, cursor=cursor_of(r), corr=2)
    assert [(t.name, t.error_code) for t in r.topics] == [("dtp-aa-missing", UNKNOWN_TOPIC_OR_PARTITION)]
    assert cursor_of(r) is None
    # the last topic filling the page exactly: no cursor
    r = dtp(raw_client, ["dtp-a"], limit=4, corr=3)
    assert pages_of(r) == [("dtp-a", [0, 1, 2, 3])] and cursor_of(r) is None


def test_limit_is_at_least_one_and_capped_by_the_broker_config(raw_client, tmp_path):
    r = dtp(raw_client, ["dtp-c"], limit=0)
    assert pages_of(r) == [("dtp-c", [0])] and cursor_of(r) == ("dtp-c", 1)
    r = dtp(raw_client, ["dtp-c"], limit=-7, corr=2)
    assert pages_of(r) == [("dtp-c", [0])] and cursor_of(r) == ("dtp-c", 1)
    # a cursor past the topic's last partition: the topic with no partitions, no cursor
    r = dtp(raw_client, ["dtp-c"], limit=10, cursor=("dtp-c", 9), corr=3)
    assert pages_of(r) == [("dtp-c", [])] and r.topics[0].error_code == 0 and cursor_of(r) is None

    with EmbeddedBroker(data_dir=tmp_path / "d", overrides={"max.request.partition.size.limit": 3}) as b:
        create_topics(b.bootstrap, {"capped": 5})
        c = KafkaWire(b.port)
        try:
            r = dtp(c, [], limit=2000)
            assert pages_of(r) == [("capped", [0, 1, 2])] and cursor_of(r) == ("capped", 3)
        finally:
            c.close()


def test_all_topics_cursor_on_a_topic_that_does_not_exist_is_valid(raw_client):
    # "dtp-b0" sorts between dtp-b and dtp-c: the listing starts at the next name, at partition 0
    r = dtp(raw_client, [], limit=100, cursor=("dtp-b0", 2))
    assert pages_of(r) == [("dtp-c", [0, 1, 2, 3, 4])]
    assert r.topics[0].error_code == 0 and cursor_of(r) is None
    # a cursor on an existing topic applies its partition index to that topic only
    r = dtp(raw_client, [], limit=100, cursor=("dtp-b", 2), corr=2)
    assert pages_of(r) == [("dtp-b", [2]), ("dtp-c", [0, 1, 2, 3, 4])]
    # a named cursor topic that does not exist (but is in the list): answered unknown, not an error
    r = dtp(raw_client, ["ghost", "dtp-c"], limit=100, cursor=("ghost", 0), corr=3)
    assert [(t.name, t.error_code) for t in r.topics] == [("ghost", UNKNOWN_TOPIC_OR_PARTITION)]


# ---- bad input: INVALID_REQUEST for the whole request, nothing else changes ---------------------------------------

def test_negative_cursor_partition_is_invalid_request(cluster, raw_client, caplog):
    c = raw_client
    with caplog.at_level(logging.INFO, logger="odradek.describe_topic_partitions"):
        r = dtp(c, ["dtp-b", "dtp-a", "dtp-b"], limit=10, cursor=("dtp-a", -1))
    # Kafka's getErrorResponse: every requested topic, as sent, at INVALID_REQUEST, and no cursor
    assert [(t.name, t.error_code, t.topic_id, t.is_internal, t.partitions, t.topic_authorized_operations)
            for t in r.topics] == [(n, INVALID_REQUEST, ZERO_UUID, False, [], NO_OPS)
                                   for n in ("dtp-b", "dtp-a", "dtp-b")]
    assert r.next_cursor is None
    assert any("cursor partition must be valid" in m for m in caplog.messages)
    # an all-topics request has no topic to carry the error: the answer is empty
    r = dtp(c, [], limit=10, cursor=("dtp-a", -5), corr=2)
    assert r.topics == [] and r.next_cursor is None
    assert_still_serving(cluster, c)


def test_cursor_topic_missing_from_the_request_list_is_invalid_request(cluster, raw_client, caplog):
    c = raw_client
    with caplog.at_level(logging.INFO, logger="odradek.describe_topic_partitions"):
        r = dtp(c, ["dtp-a", "dtp-c"], limit=10, cursor=("dtp-b", 0))
    assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [
        ("dtp-a", INVALID_REQUEST, []), ("dtp-c", INVALID_REQUEST, [])]
    assert r.next_cursor is None
    assert any("should contain the cursor topic: dtp-b" in m for m in caplog.messages)
    # a cursor naming a topic that sorts before every listed one is just as invalid
    r = dtp(c, ["dtp-c"], limit=10, cursor=("dtp-a", 0), corr=2)
    assert [(t.name, t.error_code) for t in r.topics] == [("dtp-c", INVALID_REQUEST)]
    assert_still_serving(cluster, c)


def assert_still_serving(cluster, c):
    """The same connection, and other clients, are answered as before: bad input changed nothing."""
    r = dtp(c, [], limit=100, corr=50)
    assert pages_of(r) == [(n, list(range(p))) for n, p in sorted(TOPICS.items())]
    m = c.call(3, 12, MetadataRequest(topics=None), corr=51)
    assert sorted((t.name, len(t.partitions)) for t in m.topics) == sorted(TOPICS.items())
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    try:
        assert sorted(admin.list_topics()) == sorted(TOPICS)
        page = admin.describe_topic_partitions(["dtp-b"])
        assert [(t["name"], len(t["partitions"])) for t in page["topics"]] == [("dtp-b", 3)]
    finally:
        admin.close()


# ---- partition fields against an image with unhealthy brokers ------------------------------------------------------

def _image() -> MetadataImage:
    ep = (Endpoint("PLAINTEXT", "h", 1, 0),)
    brokers = {
        1: BrokerInfo(1, b"i" * 16, 1, ep, None, False),
        2: BrokerInfo(2, b"j" * 16, 1, ep, None, True),  # fenced
        3: BrokerInfo(3, b"k" * 16, 1, (Endpoint("OTHER", "h", 2, 0),), None, False),  # no PLAINTEXT listener
    }
    parts = {
        0: PartitionInfo(0, (1, 2, 3), (1,), 1, 5, 7),
        1: PartitionInfo(1, (2, 1), (2, 1), 2, 3, 3),  # fenced leader: Kafka still names it
        2: PartitionInfo(2, (4, 1), (4,), 4, 9, 9),  # leader not registered
        3: PartitionInfo(3, (3,), (3,), 3, 1, 1),  # leader without the listener
    }
    t = TopicInfo("t", b"\x01" * 16, MappingProxyType(parts))
    internal = TopicInfo("__consumer_offsets", b"\x02" * 16,
                         MappingProxyType({0: PartitionInfo(0, (1,), (1,), 1, 0, 0)}))
    return MetadataImage(topics_by_name=MappingProxyType({"t": t, "__consumer_offsets": internal}),
                         topics_by_id=MappingProxyType({t.topic_id: t, internal.topic_id: internal}),
                         brokers=MappingProxyType(brokers))


def test_partition_fields_follow_kraft_metadata_cache():
    image = _image()
    r = describe(image, sorted(image.topics_by_name), "PLAINTEXT", lambda _n: 0, 100, True, node_id=1)
    assert [(t.name, t.is_internal) for t in r.topics] == [("__consumer_offsets", True), ("t", False)]
    got = [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes,
            p.offline_replicas, p.eligible_leader_replicas, p.last_known_elr) for p in r.topics[1].partitions]
    assert got == [
        (0, 0, 1, 5, [1, 2, 3], [1], [2, 3], [], []),
        (1, 0, 2, 3, [2, 1], [2, 1], [2], [], []),
        (2, 0, -1, 9, [4, 1], [4], [4], [], []),
        (3, 0, -1, 1, [3], [3], [3], [], []),
    ]
    # while this node's logs load it leads nothing and counts as offline, as a fenced starting broker
    r = describe(image, ["t"], "PLAINTEXT", lambda _n: 0, 1, True, node_id=1, loading=True)
    assert [(p.leader_id, p.offline_replicas) for p in r.topics[0].partitions] == [(-1, [1, 2, 3])]
    assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("t", 1)
