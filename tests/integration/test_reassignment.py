"""Partition reassignment (KIP-455) across processes: three combined nodes and one broker-only node. kafka-python's
admin moves a partition from [1, 2, 3] onto broker 4 and off its leader 1 while a librdkafka idempotent acks=all
producer keeps writing. While broker 4 cannot reach the leader (the harness's fault hook) the move stays in
flight: ListPartitionReassignments, Metadata and DescribeTopicPartitions show replicas [2, 3, 4, 1] (adding 4,
removing 1). Reconnected, broker 4 catches up, joins the ISR, and that completes the move: 2 leads, broker 1
stops and deletes its log. Every acknowledged record is readable afterwards and the three replicas hold the same
batches, byte for byte, below the high watermark. Bad requests change nothing."""

from __future__ import annotations

import threading
import time

import pytest

from protocol.generated.messages import DescribeTopicPartitionsRequest, FetchRequest
from protocol.generated.messages.describe_topic_partitions_request import TopicRequest
from tests.harness import ClusterProcesses
from tests.jepsen.cluster_checks import FAST, batches_below, until
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError  # noqa: E402
from kafka.errors import UnknownTopicOrPartitionError  # noqa: E402

TOPIC = "moving"
TP = TopicPartition(TOPIC, 0)
FETCH = FetchRequest.API_KEY


def metadata(c: ClusterProcesses, without: int | None = None):
    servers = ",".join(c.client_address(i) for i in c.broker_ids if i != without)
    p = AdminClient({"bootstrap.servers": servers}).list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
    return p.leader, list(p.replicas), sorted(p.isrs)


class Writer(threading.Thread):
    """An idempotent acks=all producer writing until stopped; every record must be acknowledged."""

    def __init__(self, servers: str) -> None:
        super().__init__(daemon=True)
        self.servers = servers
        self.acked: list[bytes] = []
        self.errors: list = []
        self.stop = threading.Event()

    def _report(self, err, msg):
        (self.errors if err is not None else self.acked).append(err if err is not None else msg.value())

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.servers, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000})
        i = 0
        while not self.stop.is_set():
            p.produce(TOPIC, value=b"r%07d" % i, partition=0, on_delivery=self._report)
            i += 1
            p.poll(0.002)
        self.unflushed = p.flush(60)


def test_move_a_partition_off_its_leader_onto_a_new_broker_under_writes(tmp_path):
    # a fetch cut off by the fault hook times out (and is sent again) after replica.socket.timeout.ms
    c = ClusterProcesses(tmp_path, combined=3, brokers=1, overrides={**FAST, "replica.socket.timeout.ms": 2000},
                         fault_hook=True)
    writer = None
    try:
        c.start()
        for i in c.broker_ids:
            until(lambda i=i: c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, f"node {i} unfenced")
        admin = AdminClient({"bootstrap.servers": c.bootstrap})

        def created():
            for f in admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]],
                                                   config={"min.insync.replicas": "2"})], request_timeout=10).values():
                f.result()
            return True

        until(created, what="the topic")
        until(lambda: metadata(c) == (1, [1, 2, 3], [1, 2, 3]), what="leader 1 with a full ISR")
        kadmin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=10000)

        # bad requests: answered per partition, nothing changes
        bad = kadmin.alter_partition_reassignments({TP: [1, 9], TopicPartition(TOPIC, 7): [1, 2, 3]})
        assert bad == {TP: InvalidReplicationAssignmentError, TopicPartition(TOPIC, 7): UnknownTopicOrPartitionError}
        assert kadmin.alter_partition_reassignments({TP: None}) == {TP: NoReassignmentInProgressError}
        assert kadmin.list_partition_reassignments() == {}

        writer = Writer(c.bootstrap)
        writer.start()
        until(lambda: len(writer.acked) >= 300, 30, "the first acknowledged writes")

        # the new replica's fetches to the leader are lost: the move stays in flight. Only fetches: the admin's
        # "controller" may be broker 4, which forwards the reassignment to the active controller, maybe node 1
        c.drop_requests(4, [1], api_keys=[FETCH])
        try:
            assert kadmin.alter_partition_reassignments({TP: [2, 3, 4]}) == {TP: None}
            moving = {TP: {"replicas": [2, 3, 4, 1], "adding_replicas": [4], "removing_replicas": [1]}}
            assert kadmin.list_partition_reassignments() == moving
            assert kadmin.list_partition_reassignments([TP, TopicPartition(TOPIC, 3)]) == moving
            # Metadata names every replica of an ongoing move, the target ones first; the old leader still leads
            until(lambda: metadata(c, without=4) == (1, [2, 3, 4, 1], [1, 2, 3]), 10, "the move in Metadata")

            def described():  # DescribeTopicPartitions too, from broker 2 (broker 4 may not fetch from the quorum
                # leader now: its fetches to node 1 are dropped, so its metadata can lag)
                with KafkaWire(c.broker_ports[2]) as w:
                    answer = w.call(75, 0, DescribeTopicPartitionsRequest(topics=[TopicRequest(name=TOPIC)]))
                [part] = answer.topics[0].partitions
                return (part.leader_id, part.replica_nodes) == (1, [2, 3, 4, 1])

            until(described, 10, "the move in DescribeTopicPartitions")
        finally:
            c.heal()

        until(lambda: kadmin.list_partition_reassignments() == {}, 60, "the move to complete")
        leader, replicas, isr = until(lambda: (lambda m: m if m[1] == [2, 3, 4] and m[2] == [2, 3, 4] else None)(
            metadata(c)), 30, "replicas [2, 3, 4] in sync")
        assert leader == 2
        until(lambda: not (c.nodes[1].data_dir / f"{TOPIC}-0").exists(), 30, "broker 1's log of the partition gone")
        assert c.nodes[4].log_lines(r"deleted partition") == 0

        acked_at_move = len(writer.acked)
        until(lambda: len(writer.acked) >= acked_at_move + 200, 30, "writes acknowledged by the new leader")
        writer.stop.set()
        writer.join(90)
        assert not writer.is_alive() and writer.unflushed == 0 and not writer.errors, writer.errors[:3]

        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "check", "enable.auto.commit": False})
        got: list[bytes] = []
        try:
            consumer.assign([CTopicPartition(TOPIC, 0, 0)])

            def read_all():
                got.extend(m.value() for m in consumer.consume(5000, 0.5) if m.error() is None)
                return len(got) >= len(writer.acked)

            until(read_all, 60, f"{len(writer.acked)} records")
            high_watermark = consumer.get_watermark_offsets(CTopicPartition(TOPIC, 0), timeout=10)[1]
        finally:
            consumer.close()
        assert set(writer.acked) <= set(got), f"lost: {sorted(set(writer.acked) - set(got))[:5]}"
        assert len(got) == len(set(got)), "a record was read twice"

        time.sleep(1.0)  # followers learn the last high watermark on their next fetch
        for n in c.nodes.values():
            n.kill()
        reference = batches_below(c.nodes[leader].data_dir, 0, high_watermark, topic=TOPIC)
        assert reference
        for i in (3, 4):
            assert batches_below(c.nodes[i].data_dir, 0, high_watermark, topic=TOPIC) == reference, (
                f"replica {i}'s batches below the high watermark differ from the leader's")
    finally:
        if writer is not None:
            writer.stop.set()
        c.close()
