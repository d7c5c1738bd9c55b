"""A single node's data directory written by c78cad6 (before a single node ran as a quorum of one voter; see
tests/data/make_c78cad6_single_node.py) starts on this code: its topics, their configs, a group's committed
offsets, the records and the idempotent producer's state are all there, with one warning (the quorum-state
epoch below the log's, Kafka's QuorumState.initialize rule). With its last metadata batch torn, it starts too."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from protocol.generated.messages import DescribeProducersRequest
from protocol.generated.messages.describe_producers_request import TopicRequest
from storage.producer_state import read_snapshot, write_snapshot
from tests.harness import BrokerProcess
from tests.kafka_wire import KafkaWire

WRITTEN = Path(__file__).resolve().parents[1] / "data" / "c78cad6-single-node"
EXPECTED = json.loads((WRITTEN / "expected.json").read_text())
CONFIG = {"node.id": 1, "cluster.id": "b2RyYWRlay11cGdyYWRlMQ", "offsets.topic.num.partitions": 1}


def _start(tmp_path) -> BrokerProcess:
    data = tmp_path / "log-dir"
    shutil.copytree(WRITTEN / "log-dir", data)
    _producers_seen_now(data)
    return BrokerProcess(data, CONFIG)


def _producers_seen_now(data: Path) -> None:
    """Moves the copy's producer snapshots' last timestamps to now: a leader drops producers idle longer than
    ``producer.id.expiration.ms`` (a day) when it loads them, as Kafka's ProducerStateManager does, and the
    directory was written on 2026-11-27; the snapshots keep their format and everything else."""
    now_ms = int(time.time() * 1000)
    for path in data.glob("*/*.snapshot"):
        entries = read_snapshot(str(path))
        for entry in entries:
            entry.last_timestamp = now_ms
        write_snapshot(str(path), entries)


def test_a_c78cad6_directory_starts_with_everything_and_one_warning(tmp_path):
    node = _start(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        topics = admin.list_topics(timeout=10).topics
        for name, want in EXPECTED["topics"].items():
            assert len(topics[name].partitions) == want["partitions"]
            res = ConfigResource(ConfigResource.Type.TOPIC, name)
            described = admin.describe_configs([res])[res].result(10)
            assert {k: described[k].value for k in want["configs"]} == want["configs"]
        for group, by_topic in EXPECTED["offsets"].items():
            c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group})
            try:
                committed = c.committed([TopicPartition(t, int(p)) for t, ps in by_topic.items() for p in ps],
                                        timeout=10)
                assert {(tp.topic, str(tp.partition)): tp.offset for tp in committed} == {
                    (t, p): o for t, ps in by_topic.items() for p, o in ps.items()}
                for topic, parts in EXPECTED["records"].items():
                    for p, count in parts.items():
                        assert c.get_watermark_offsets(TopicPartition(topic, int(p)), timeout=10) == (0, count)
            finally:
                c.close()
        with KafkaWire(node.port) as w:  # the idempotent producers' state came through the restart
            described = w.call(61, 0, DescribeProducersRequest(topics=[TopicRequest(name="orders",
                                                                                    partition_indexes=[0, 1])]))
        for p in described.topics[0].partitions:
            assert p.error_code == 0 and p.active_producers and all(s.producer_id >= 0 for s in p.active_producers)
    finally:
        node.close()
    log = node.log_path.read_text()
    warnings = [line for line in log.splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", line)]
    assert len(warnings) == 1 and "is below the last epoch in the metadata log" in warnings[0], warnings


def test_a_c78cad6_directory_with_a_torn_last_metadata_batch_starts(tmp_path):
    node = _start(tmp_path)
    segment = node.data_dir / "__cluster_metadata-0" / ("0" * 20 + ".log")
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 7)  # as after a crash in the middle of the last write
    node.start()
    try:
        topics = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10).topics
        assert "orders" in topics and "events" in topics  # created batches before the torn one
    finally:
        node.close()
