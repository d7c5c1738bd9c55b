"""Checkpoint and metadata files, line for line against the formats in Kafka's sources:

* ``CheckpointFile.java``: "version: int / entries-count: int / entry-as-string-on-each-line";
* ``OffsetCheckpointFile.java``: "tp1  par1  1     <- the format is: TOPIC  PARTITION  OFFSET", version 0;
* ``LeaderEpochCheckpointFile.java``: "0  1     <- the format is: leader_epoch(int32) start_offset(int64)";
* ``PartitionMetadata.encode``: "version: " + version + "\\ntopic_id: " + topicId;
* ``CleanShutdownFileHandler``: Jackson-encoded ``{"version":0,"brokerEpoch":N}``;
* ``MetaProperties.toProperties`` stored with ``Properties.store`` (comment lines, key=value).

Expected file contents below are written by hand from those comments, not produced by storage code.
"""

from __future__ import annotations

import datetime
import os

import pytest

from storage.checkpoints import (
    CheckpointError,
    CleanShutdownFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    decode_properties,
    encode_properties,
    java_properties_order,
    uuid_from_string,
    uuid_to_string,
)
from storage.epoch import LeaderEpochFileCache


def test_offset_checkpoint_exact_bytes(tmp_path):
    p = str(tmp_path / "recovery-point-offset-checkpoint")
    cp = OffsetCheckpointFile(p)
    assert os.path.exists(p) and os.path.getsize(p) == 0  # Kafka creates the file up front
    assert cp.read() == {}
    cp.write({("tp1", 1): 2, ("tp1", 0): 1, ("other-topic.x", 12): 9_000_000_000})
    assert open(p, "rb").read() == b"0\n3\nother-topic.x 12 9000000000\ntp1 0 1\ntp1 1 2\n"
    assert not os.path.exists(p + ".tmp")


def test_offset_checkpoint_reads_kafka_file(tmp_path):
    p = tmp_path / "replication-offset-checkpoint"
    # as a Kafka broker writes it (entries in HashMap order, '\n' line ends)
    p.write_bytes(b"0\n2\n__consumer_offsets 7 120\nmy-topic 0 55\n")
    assert OffsetCheckpointFile(str(p)).read() == {("__consumer_offsets", 7): 120, ("my-topic", 0): 55}
    p.write_bytes(b"0\n1\nmy-topic   3\t77\n")  # any whitespace separates (Pattern "\\s+")
    assert OffsetCheckpointFile(str(p)).read() == {("my-topic", 3): 77}


@pytest.mark.parametrize("content", [
    b"1\n0\n",                       # wrong version
    b"0\n2\nt 0 1\n",                # count mismatch
    b"0\n1\nt 0\n",                  # malformed line
    b"0\n1\nt x 1\n",                # partition not a number
    b"zero\n",                        # version not a number
])
def test_offset_checkpoint_malformed(tmp_path, content):
    p = tmp_path / "cp"
    p.write_bytes(content)
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(str(p)).read()


def test_leader_epoch_checkpoint(tmp_path):
    p = str(tmp_path / "leader-epoch-checkpoint")
    cp = LeaderEpochCheckpointFile(p)
    cp.write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert open(p, "rb").read() == b"0\n2\n0 0\n3 120\n"
    (tmp_path / "kafka").write_bytes(b"0\n3\n1 0\n2 5\n7 900\n")
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(str(tmp_path / "kafka")))
    assert cache.epoch_entries() == [EpochEntry(1, 0), EpochEntry(2, 5), EpochEntry(7, 900)]
    assert cache.end_offset_for(2, 1000) == (2, 900)
    assert cache.end_offset_for(7, 1000) == (7, 1000)
    assert cache.end_offset_for(5, 1000) == (2, 900)
    assert cache.end_offset_for(0, 1000) == (0, 0)
    assert cache.end_offset_for(8, 1000) == (-1, -1)
    cache.truncate_from_end(5)
    assert open(tmp_path / "kafka", "rb").read() == b"0\n1\n1 0\n"
    cache.assign(4, 10)
    cache.truncate_from_start(12)
    assert cache.epoch_entries() == [EpochEntry(4, 12)]


def test_partition_metadata_exact_bytes(tmp_path):
    p = str(tmp_path / "partition.metadata")
    raw = bytes(range(1, 17))
    pm = PartitionMetadataFile(p)
    pm.record(raw)
    pm.maybe_flush()
    # Uuid.toString is URL-safe base64 without padding; no newline after the id
    assert open(p, "rb").read() == b"version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA"
    assert pm.read() == (0, raw)
    (tmp_path / "k").write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(CheckpointError):
        PartitionMetadataFile(str(tmp_path / "k")).read()  # the zero uuid is invalid


def test_uuid_string():
    raw = bytes.fromhex("f3e6a1b2c4d5e6f708192a3b4c5d6e7f")
    s = uuid_to_string(raw)
    assert len(s) == 22 and "=" not in s
    assert uuid_from_string(s) == raw


def test_clean_shutdown_file(tmp_path):
    f = CleanShutdownFile(str(tmp_path))
    assert not f.exists() and f.read() is None
    f.write(42)
    assert open(tmp_path / ".kafka_cleanshutdown", "rb").read() == b'{"version":0,"brokerEpoch":42}'
    assert f.read() == 42
    f.delete()
    assert not f.exists()


def test_meta_properties_layout(tmp_path):
    mp = MetaProperties(1, "J8qX1iT4Q3yE2tFzOa9bCg", 3, bytes(range(16)))
    now = datetime.datetime(2024, 9, 10, 12, 0, 0, tzinfo=datetime.timezone.utc)
    mp.write(str(tmp_path / "meta.properties"), now)
    # Properties.store: "#" + comments (empty), "#" + Date.toString(), then entries in the
    # ConcurrentHashMap order of these keys
    assert open(tmp_path / "meta.properties", "rb").read() == (
        b"#\n#Tue Sep 10 12:00:00 UTC 2024\nnode.id=3\ndirectory.id=AAECAwQFBgcICQoLDA0ODw\nversion=1\n"
        b"cluster.id=J8qX1iT4Q3yE2tFzOa9bCg\n")
    assert MetaProperties.read(str(tmp_path / "meta.properties")) == mp


def test_meta_properties_reads_v0_and_java_escapes():
    props = decode_properties("#comment\n! another\nversion = 0\nbroker.id:7\ncluster.id=a\\=b\\u0041\n")
    assert props == {"version": "0", "broker.id": "7", "cluster.id": "a=bA"}
    mp = MetaProperties.from_properties(props)
    assert mp.version == 0 and mp.node_id == 7
    assert decode_properties(encode_properties({"k:x": "v=1 #"}).decode()) == {"k:x": "v=1 #"}


def test_java_properties_order():
    assert java_properties_order(["version", "cluster.id", "node.id", "directory.id"]) == \
        ["node.id", "directory.id", "version", "cluster.id"]
