"""Fetch from the closest replica (KIP-392) between ``odradek serve`` processes: three combined nodes in racks
r1, r2 and r3 with ``replica.selector.class`` set and an RF 3 topic.

* on the wire: the leader answers a v11+ consumer fetch from a follower's rack with that follower as
  ``preferred_read_replica`` and no records, and one from its own rack with records; the follower serves a v11+
  consumer fetch from its own log (up to its high watermark, OFFSET_OUT_OF_RANGE past its log end) and refuses a
  v10 fetch and ListOffsets with NOT_LEADER_OR_FOLLOWER;
* librdkafka with ``client.rack`` set to the follower's rack is sent there (its statistics name the follower as
  the partition's fetch broker while the leader stays the leader), reads every record in order, and the
  follower's own BytesOut for the topic shows it served them.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from broker.testing.embedded_cluster import FAST_FAILOVER
from protocol.errors import ErrorCode
from protocol.generated.messages import FetchRequest, ListOffsetsRequest, MetadataRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic
from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from tests.harness import ClusterProcesses, wait_until
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FAST = {**FAST_FAILOVER, "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
TOPIC = "nearby"
RECORDS = 3000  # produced up front; one more while a fetch waits on the follower


def until(predicate, timeout: float = 30.0, what: str = "condition"):
    return wait_until(predicate, timeout, 0.1, what, retry=(Exception,))


def fetch(version: int, topic_id: bytes, epoch: int, offset: int = 0, rack: str = "", max_wait_ms: int = 0
          ) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, rack_id=rack, topics=[FetchTopic(
                            topic=TOPIC, topic_id=topic_id, partitions=[FetchPartition(
                                partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                                partition_max_bytes=1 << 20)])])


def answer(w: KafkaWire, version: int, request: FetchRequest):
    response = w.call(1, version, request)
    assert response.error_code == 0
    return response.responses[0].partitions[0]


def bytes_out(node) -> float:
    """The node's BytesOut for the topic, from its Prometheus endpoint (port 0: the port is in its log)."""
    port = re.findall(r"metrics on http://[^:]+:(\d+)/metrics", node.log_path.read_text(errors="replace"))[-1]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(r'^kafka_server_brokertopicmetrics_bytesout_total\{topic="%s"\} (\S+)$' % TOPIC, text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.fixture
def cluster(tmp_path):
    c = ClusterProcesses(tmp_path, overrides=FAST)
    for i, node in c.nodes.items():  # each node its own rack, and a Prometheus endpoint on an ephemeral port
        node.overrides.update({"broker.rack": f"r{i}", "metrics.prometheus.listener": "127.0.0.1:0"})
    try:
        c.start()
        for i in c.broker_ports:  # every broker registered and unfenced: replicas go to all of them
            until(lambda i=i: c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, f"node {i} unfenced")
        yield c
    finally:
        c.close()


def test_a_consumer_in_a_followers_rack_reads_everything_from_that_follower(cluster):
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def created():
        for f in admin.create_topics([NewTopic(TOPIC, 1, 3)], request_timeout=10).values():
            f.result()
        return True

    until(created, what="the topic")

    def leader_and_full_isr():
        p = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
        return p.leader if p.leader >= 0 and len(p.isrs) == 3 else None

    leader = until(leader_and_full_isr, what="a leader and a full ISR")
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        p.produce(TOPIC, value=b"v%06d" % i, partition=0)
    assert p.flush(30) == 0
    follower = min(i for i in c.broker_ports if i != leader)

    with KafkaWire(c.broker_ports[leader]) as w:
        t = until(lambda: (lambda t: t if t.partitions and t.partitions[0].leader_id == leader else None)(
            w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])).topics[0]),
            what="the leader's metadata")
        topic_id, epoch = t.topic_id, t.partitions[0].leader_epoch
        # the follower's rack: sent there at once, with the leader's offsets and no records
        pd = answer(w, 11, fetch(11, topic_id, epoch, rack=f"r{follower}"))
        assert (pd.error_code, pd.preferred_read_replica, pd.high_watermark, len(pd.records or b"")) == (
            0, follower, RECORDS, 0)
        # the leader's own rack, or none: the leader reads
        for version, rack in ((17, f"r{leader}"), (17, ""), (11, "elsewhere")):
            pd = answer(w, version, fetch(version, topic_id, epoch, rack=rack))
            assert pd.error_code == 0 and pd.preferred_read_replica == -1 and len(pd.records) > 0

    with KafkaWire(c.broker_ports[follower]) as w:
        # the follower serves v11+ consumers from its own log, up to its high watermark
        pd = until(lambda: (lambda pd: pd if pd.high_watermark == RECORDS else None)(
            answer(w, 17, fetch(17, topic_id, epoch))), what="the follower's high watermark")
        assert pd.error_code == 0 and pd.preferred_read_replica == -1 and len(pd.records) > 0
        pd = answer(w, 11, fetch(11, topic_id, epoch, offset=RECORDS))  # at its high watermark: nothing yet
        assert (pd.error_code, len(pd.records or b"")) == (0, 0)
        pd = answer(w, 11, fetch(11, topic_id, epoch, offset=RECORDS + 100))  # past its log end
        assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        # a long poll at its high watermark is answered once the follower's high watermark passes a new record
        w.send(1, 17, fetch(17, topic_id, epoch, offset=RECORDS, max_wait_ms=20000))
        started = time.monotonic()
        p.produce(TOPIC, value=b"v%06d" % RECORDS, partition=0)
        assert p.flush(10) == 0
        pd = w.recv().responses[0].partitions[0]
        assert pd.error_code == 0 and len(pd.records) > 0 and pd.high_watermark == RECORDS + 1
        assert time.monotonic() - started < 10, "the parked fetch waited out its max_wait_ms"
        pd = answer(w, 11, fetch(11, topic_id, epoch + 1))  # an epoch the follower has not seen
        assert pd.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        # older consumers and ListOffsets still need the leader
        pd = answer(w, 10, fetch(10, topic_id, epoch))
        assert pd.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        lo = w.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch, timestamp=-1)])]))
        assert lo.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    served_before = bytes_out(c.nodes[follower])
    stats: list[str] = []
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "nearby", "enable.auto.commit": False,
                         "client.rack": f"r{follower}", "statistics.interval.ms": 100, "stats_cb": stats.append})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    try:
        def read_all():
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            return len(got) >= RECORDS + 1

        until(read_all, what=f"{RECORDS + 1} records")
        consumer.poll(0.3)  # one more statistics interval
    finally:
        consumer.close()
    assert got == [b"v%06d" % i for i in range(RECORDS + 1)]
    partitions = [json.loads(s)["topics"].get(TOPIC, {}).get("partitions", {}).get("0") for s in stats]
    fetched_from = {(p["leader"], p["broker"]) for p in partitions if p}
    assert (leader, follower) in fetched_from, fetched_from  # the leader stays the leader; the follower serves
    assert bytes_out(c.nodes[follower]) - served_before >= RECORDS * 7  # every value went out of the follower
