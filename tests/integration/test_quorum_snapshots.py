"""Metadata snapshots between processes: nodes write snapshots of their image; a node restarted from its snapshot
plus the log after it holds the image that a node replaying its whole log holds; with retention on, the leader
deletes its log before a snapshot and a node whose data was wiped catches up through FetchSnapshot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from broker.quorum.kraft_log import CHECKPOINT_SUFFIX, KRaftLog
from broker.quorum.metadata_snapshot import image_from_snapshot
from broker.quorum.raft_quorum import records_of
from cluster.metadata_image import MetadataImage
from protocol.generated.messages import DescribeQuorumRequest
from protocol.generated.messages.describe_quorum_request import PartitionData, TopicData
from tests.harness import ClusterProcesses
from tests.integration.test_quorum_cluster import (
    FAST, admin, quorum_leader, topics_seen, until, wait_unfenced,
)
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import NewTopic  # noqa: E402

SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": 4096, "metadata.log.segment.bytes": 8192}
RETAIN_ALL = {"metadata.max.retention.bytes": -1, "metadata.max.retention.ms": -1}
CLEAN_AT_ONCE = {"metadata.max.retention.bytes": 0}  # every new snapshot deletes the log before it
NEVER = {"metadata.log.max.record.bytes.between.snapshots": 1 << 40, "metadata.log.max.snapshot.interval.ms": 0}


def image_on_disk(node_dir: Path) -> tuple[MetadataImage, int, int]:
    """(image, log start, log end) of a stopped node's ``__cluster_metadata-0``: its latest snapshot, then its
    log after it."""
    raft_log = KRaftLog(node_dir / "__cluster_metadata-0", frozenset(), lambda: 0)
    raft_log.open()
    try:
        snap = raft_log.latest_snapshot
        image = image_from_snapshot(snap.data, snap.end_offset) if snap is not None else MetadataImage()
        for e in raft_log.read_until(snap.end_offset if snap is not None else 0, raft_log.end_offset):
            image = image.apply(records_of(e.data), e.next_offset - 1)
        return image, raft_log.start_offset, raft_log.end_offset
    finally:
        raft_log.close()


def create(c: ClusterProcesses, names, exclude: int | None = None) -> None:
    a = admin(c, exclude=exclude)
    for name in names:
        def made(name=name):
            try:
                a.create_topics([NewTopic(name, 2, 1)], operation_timeout=10)[name].result(15)
            except confluent_kafka.KafkaException as exc:
                if exc.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
            return True
        until(made, 60, f"CreateTopics {name}")


def stop_all_at_once(c: ClusterProcesses) -> int:
    """Once every voter's log ends at the leader's high watermark (DescribeQuorum), kill all: their logs then
    end at the same committed offset, returned (a controlled shutdown would commit more)."""
    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                      partitions=[PartitionData(partition_index=0)])])

    def quiet():
        _, leader = quorum_leader(c)
        with KafkaWire(c.controller_ports[leader]) as w:
            p = w.call(55, 2, request).topics[0].partitions[0]
        ends = {v.log_end_offset for v in p.current_voters}
        return p.high_watermark if p.error_code == 0 and ends == {p.high_watermark} else None

    end = until(quiet, 30, "every voter's log at the leader's high watermark")
    for n in c.nodes.values():
        n.kill()
    return end


def snapshot_restart_and_full_replay(c: ClusterProcesses, names: list[str]) -> None:
    """Retention off: snapshots are written, no log is deleted (so no node can fall behind a log start), and a
    node restarted from its snapshot plus its log reaches the image of node 1's full replay."""
    create(c, names)
    for i in (2, 3):
        until(lambda i=i: c.nodes[i].log_lines("wrote the metadata snapshot") >= 1, 30, f"node {i} snapshots")
    assert c.nodes[2].terminate(timeout=30) == 0
    c.start(2)
    assert c.nodes[2].log_lines(r"opened .*snapshot \d+-\d+") == 1
    create(c, ["mid"])
    for i in c.nodes:
        until(lambda i=i: set(names + ["mid"]) <= topics_seen(c, i), 60, f"node {i} has every topic")
    common = stop_all_at_once(c)
    full, start, end = image_on_disk(c.nodes[1].data_dir)
    assert end == common
    assert start == 0 and not list((c.nodes[1].data_dir / "__cluster_metadata-0").glob("*" + CHECKPOINT_SUFFIX))
    assert "mid" in full.topics_by_name
    for i in (2, 3):
        assert list((c.nodes[i].data_dir / "__cluster_metadata-0").glob("*" + CHECKPOINT_SUFFIX))
        image, start, end = image_on_disk(c.nodes[i].data_dir)
        assert start == 0 and end == common, f"node {i} deleted its log with retention off, or ends elsewhere"
        assert image == full, f"node {i}'s image from its snapshot and log differs from a full replay"


def test_snapshots_restart_and_a_wiped_node_catches_up_through_fetch_snapshot(tmp_path):
    c = ClusterProcesses(tmp_path, combined=3, overrides={**FAST, **SNAPSHOTS, **RETAIN_ALL})
    c.nodes[1].overrides.update(NEVER)  # node 1 keeps its whole log: the image of a full replay
    try:
        c.start()
        wait_unfenced(c)
        names = [f"t{i:02d}" for i in range(30)]
        snapshot_restart_and_full_replay(c, names)

        # retention on, every node snapshotting: the leader's next snapshot deletes the log before it
        for n in c.nodes.values():
            n.overrides.update(CLEAN_AT_ONCE)
        c.nodes[1].overrides.update(SNAPSHOTS, **{"metadata.log.max.snapshot.interval.ms": 3600000})
        c.start()
        wait_unfenced(c)
        _, leader = until(lambda: quorum_leader(c) if quorum_leader(c)[1] > 0 else None, what="a leader")
        more = [f"u{i:02d}" for i in range(20)]
        create(c, more)
        until(lambda: c.nodes[leader].log_lines("metadata log retention: log start now") >= 1, 30,
              f"leader {leader} deletes its log before a snapshot")
        assert quorum_leader(c)[1] == leader
        wiped = min(set(c.nodes) - {leader})
        assert c.nodes[wiped].terminate(timeout=30) == 0
        shutil.rmtree(c.nodes[wiped].data_dir)
        c.nodes[wiped].data_dir.mkdir()
        create(c, ["v00", "v01"], exclude=wiped)
        c.start(wiped)
        every = set(names + ["mid"] + more + ["v00", "v01"])
        until(lambda: every <= topics_seen(c, wiped), 60, f"wiped node {wiped} has every topic")
        assert c.nodes[wiped].log_lines(r"fetched snapshot") >= 1, "the wiped node did not use FetchSnapshot"
        assert c.nodes[wiped].log_lines(r"loaded the metadata snapshot") >= 1
        create(c, ["last"])
        for i in c.nodes:
            until(lambda i=i: every | {"last"} <= topics_seen(c, i), 60, f"node {i} has every topic")
        common = stop_all_at_once(c)
    finally:
        c.close()

    images = {i: image_on_disk(n.data_dir) for i, n in c.nodes.items()}
    assert images[leader][1] > 0, "the leader kept its whole log with metadata.max.retention.bytes=0"
    assert "last" in images[leader][0].topics_by_name
    for i, (image, _, end) in images.items():
        assert end == common and image == images[leader][0], f"node {i}'s image differs from the leader's"
