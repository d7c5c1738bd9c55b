"""Three brokers' log dirs analysed at once: every replicated partition is read from one copy only (the longest,
ties to the lowest node.id), its checkpoints come from that copy's log dir, and the report names the copy read."""

from __future__ import annotations

import os

import pytest

from protocol.record_codec import Record, build_batch
from spark_jobs.configs import read_checkpoints
from spark_jobs.planning import ScanBounds, list_partition_dirs, log_end_offset, replica_choices
from spark_jobs.synth import PartitionWriter
from storage.checkpoints import OffsetCheckpointFile

from .builders import T0

# (topic, partition) -> {node id: records in that broker's copy}; node 3's copy of orders-0 is as long as the
# leader's (node 1) but holds other values, so reading it by mistake shows
COPIES = {("orders", 0): {1: 30, 2: 20, 3: 30}, ("orders", 1): {2: 12, 3: 25}, ("audit", 0): {2: 7}}


def _value(node: int, topic: str, partition: int, offset: int) -> bytes:
    diverged = node == 3 and (topic, partition) == ("orders", 0)
    return f"{topic}-{partition}@{offset}".encode() + (b"-diverged" if diverged else b"")


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    root = tmp_path_factory.mktemp("brokers")
    dirs = {}
    for node in (1, 2, 3):
        d = root / f"broker-{node}" / "data"
        d.mkdir(parents=True)
        (d / "meta.properties").write_text(f"version=1\ncluster.id=c1\nnode.id={node}\ndirectory.id=x{node}\n")
        dirs[node] = str(d)
    for (topic, partition), copies in COPIES.items():
        for node, n in copies.items():
            with PartitionWriter(dirs[node], topic, partition, segment_bytes=600) as w:
                for off in range(0, n, 3):
                    recs = [Record(f"k{o % 4}".encode(), _value(node, topic, partition, o), timestamp=T0 + o)
                            for o in range(off, min(off + 3, n))]
                    w.append(build_batch(recs))
    # each broker checkpoints its own copy: the jobs must take the leader's (node 1) for orders-0
    OffsetCheckpointFile(os.path.join(dirs[1], "cleaner-offset-checkpoint")).write({("orders", 0): 15})
    OffsetCheckpointFile(os.path.join(dirs[2], "cleaner-offset-checkpoint")).write({("orders", 0): 6})
    return dirs


def test_one_copy_per_partition_the_longest_then_the_lowest_node_id(brokers):
    chosen = {(p.topic, p.partition): p.path for p in list_partition_dirs(list(brokers.values()))}
    assert chosen == {("audit", 0): os.path.join(brokers[2], "audit-0"),
                      ("orders", 0): os.path.join(brokers[1], "orders-0"),      # 30 = 30: node 1 < node 3
                      ("orders", 1): os.path.join(brokers[3], "orders-1")}      # 25 > 12
    # the order the log dirs are named in changes nothing
    assert {(p.topic, p.partition): p.path for p in list_partition_dirs([brokers[3], brokers[2], brokers[1]])} \
        == chosen
    choices = {(c.chosen.topic, c.chosen.partition): c for c in replica_choices(",".join(brokers.values()))}
    assert set(choices) == {("orders", 0), ("orders", 1)}                        # audit-0 has one copy
    assert [(r.node_id, r.log_end_offset) for r in choices[("orders", 0)].replicas] == [(1, 30), (3, 30), (2, 20)]
    assert [(r.node_id, r.log_end_offset) for r in choices[("orders", 1)].replicas] == [(3, 25), (2, 12)]
    # checkpoints are those of the log dir holding the copy read
    assert read_checkpoints(",".join(brokers.values())).cleaner == {("orders", 0): 15}
    assert list_partition_dirs(brokers[2], ScanBounds(topics=frozenset({"orders"}))) == [
        p for p in list_partition_dirs(brokers[2]) if p.topic == "orders"]


@pytest.mark.spark
def test_jobs_count_each_replicated_partition_once(spark, brokers, tmp_path):
    from spark_jobs import topic_profile

    all_dirs = ",".join(brokers.values())
    got = spark.read.format("kafka-log").load(all_dirs).select("topic", "partition", "offset", "value").collect()
    expected = {(t, p, o, _value(node, t, p, o))
                for (t, p), node in ((("orders", 0), 1), (("orders", 1), 3), (("audit", 0), 2))
                for o in range(COPIES[(t, p)][node])}
    assert len(got) == len(expected) == 30 + 25 + 7
    assert {(r.topic, r.partition, r.offset, bytes(r.value)) for r in got} == expected

    res = topic_profile.main(["--log-dirs", all_dirs, "--out", str(tmp_path / "out"), "--now-ms", str(T0)],
                             spark=spark)
    assert {s.topic: s.records for s in res["rows"]["sizes"]} == {"audit": 7, "orders": 30 + 25}
    assert {s.topic: s.distinct_keys for s in res["rows"]["sizes"]} == {"audit": 4, "orders": 4}
    report = (tmp_path / "out" / "report.md").read_text()
    section = report.split("## Replicas", 1)[1]
    assert f"| orders-0 | 1 | `{brokers[1]}` | 30 | read |" in section
    assert f"| orders-0 | 3 | `{brokers[3]}` | 30 | not read |" in section
    assert f"| orders-1 | 3 | `{brokers[3]}` | 25 | read |" in section
    assert "audit-0" not in section


def test_log_end_offset_is_the_end_of_the_last_complete_batch(tmp_path):
    """From the last offset-index entry when it points at a batch, else from the segment's start; a torn tail or
    garbage ends the log where the last good batch ends."""
    d = str(tmp_path / "b")
    with PartitionWriter(d, "t", 0, segment_bytes=1 << 20, index_interval_bytes=100) as w:
        for off in range(0, 100, 2):
            w.append(build_batch([Record(b"k", b"v" * 30, timestamp=T0 + off) for _ in range(2)]))
    pdir = list_partition_dirs(d)[0]
    seg = os.path.join(pdir.path, f"{0:020d}.log")
    index = os.path.join(pdir.path, f"{0:020d}.index")
    assert os.path.getsize(index) > 8 and log_end_offset(pdir) == 100
    batch = build_batch([Record(b"k", b"torn", timestamp=T0)])
    with open(seg, "ab") as f:
        f.write(batch[: len(batch) // 2])
    assert log_end_offset(pdir) == 100
    with open(index, "r+b") as f:                   # the last entry now points into the middle of a batch
        f.seek(os.path.getsize(index) - 4)
        f.write((os.path.getsize(seg) - 40).to_bytes(4, "big"))
    assert log_end_offset(pdir) == 100
