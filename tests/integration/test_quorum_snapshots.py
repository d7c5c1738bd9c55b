"""Metadata snapshots between processes: nodes write snapshots of their image and delete the log below them; a
node restarted from its snapshot plus the log after it holds the image that a node replaying its whole log
holds; a node whose data was wiped catches up from the leader through FetchSnapshot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from broker.quorum.kraft_log import CHECKPOINT_SUFFIX, KRaftLog
from broker.quorum.metadata_snapshot import image_from_snapshot
from broker.quorum.raft_quorum import records_of
from cluster.metadata_image import MetadataImage
from tests.harness import ClusterProcesses
from tests.integration.test_quorum_cluster import (
    FAST, admin, quorum_leader, topics_seen, until, wait_unfenced,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import NewTopic  # noqa: E402

SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": 4096, "metadata.log.segment.bytes": 8192}
NEVER = {"metadata.log.max.record.bytes.between.snapshots": 1 << 40, "metadata.log.max.snapshot.interval.ms": 0}


def image_on_disk(node_dir: Path, up_to: int | None = None) -> tuple[MetadataImage, int, int]:
    """(image, log start, log end) of a stopped node's ``__cluster_metadata-0``: its snapshot, then its log."""
    raft_log = KRaftLog(node_dir / "__cluster_metadata-0", frozenset(), lambda: 0)
    raft_log.open()
    try:
        snap = raft_log.snapshot
        image = image_from_snapshot(snap.data, snap.end_offset) if snap is not None else MetadataImage()
        end = raft_log.end_offset if up_to is None else up_to
        for e in raft_log.read_until(raft_log.start_offset, end):
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


def test_snapshots_restart_and_a_wiped_node_catches_up_through_fetch_snapshot(tmp_path):
    c = ClusterProcesses(tmp_path, combined=3, overrides={**FAST, **SNAPSHOTS})
    c.nodes[1].overrides.update(NEVER)  # node 1 keeps its whole log: the image of a full replay
    try:
        c.start()
        wait_unfenced(c)
        # the leader must be a node that snapshots (node 1 never deletes its log): moved before the first
        # snapshot, so node 1 still replays its whole log from offset 0 after its restart
        for _ in range(5):
            _, leader = until(lambda: quorum_leader(c) if quorum_leader(c)[1] > 0 else None, what="a leader")
            if leader != 1:
                break
            assert c.nodes[1].terminate(timeout=30) == 0
            c.start(1)
        assert leader != 1, "node 1 kept being elected"
        names = [f"t{i:02d}" for i in range(30)]
        create(c, names)
        for i in (2, 3):
            until(lambda i=i: c.nodes[i].log_lines("wrote the metadata snapshot") >= 1, 30, f"node {i} snapshots")
        assert quorum_leader(c)[1] == leader
        wiped = 5 - leader  # the other snapshotting node
        assert c.nodes[wiped].terminate(timeout=30) == 0
        shutil.rmtree(c.nodes[wiped].data_dir)
        c.nodes[wiped].data_dir.mkdir()
        more = [f"u{i:02d}" for i in range(4)]
        create(c, more, exclude=wiped)
        c.start(wiped)
        until(lambda: set(names + more) <= topics_seen(c, wiped), 60, f"wiped node {wiped} has every topic")
        assert c.nodes[wiped].log_lines(r"fetched snapshot") >= 1, "the wiped node did not use FetchSnapshot"
        assert c.nodes[wiped].log_lines(r"loaded the metadata snapshot") >= 1

        assert c.nodes[leader].terminate(timeout=30) == 0  # restarted from its own snapshot plus the log after
        c.start(leader)
        assert c.nodes[leader].log_lines(r"opened .*snapshot \d+-\d+") == 1
        create(c, ["last"])
        for i in c.nodes:
            until(lambda i=i: set(names + more + ["last"]) <= topics_seen(c, i), 60, f"node {i} has every topic")
        for n in c.nodes.values():  # stopped at once: a controlled shutdown would commit records past "last"
            n.kill()
    finally:
        c.close()

    ends = {i: image_on_disk(n.data_dir)[2] for i, n in c.nodes.items()}
    common = min(ends.values())
    full, start, _ = image_on_disk(c.nodes[1].data_dir, common)
    assert start == 0 and not list((c.nodes[1].data_dir / "__cluster_metadata-0").glob("*" + CHECKPOINT_SUFFIX))
    assert "last" in full.topics_by_name
    for i in (2, 3):
        image, start, _ = image_on_disk(c.nodes[i].data_dir, common)
        assert start > 0, f"node {i} kept its whole log: no snapshot deleted it"
        assert image == full, f"node {i}'s image from its snapshot and log differs from a full replay"
