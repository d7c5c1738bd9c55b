"""KRaft metadata snapshots: the image written as records framed by SnapshotHeader/SnapshotFooter reads back as
the same image, a damaged snapshot is refused whole, and ``__cluster_metadata-0`` restarted from a snapshot plus
the log after it reaches the image that replaying everything reaches."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings, strategies as st

from broker.quorum.kraft_log import KRaftLog, snapshot_name
from broker.quorum.metadata_snapshot import (
    SnapshotError, image_from_snapshot, snapshot_records, validate_snapshot, write_snapshot,
)
from broker.quorum.raft_quorum import SnapshotPolicy, records_of
from cluster.metadata_image import MetadataImage
from cluster.metadata_serde import encode_record
from cluster.raft.log import Entry, Snapshot
from protocol.generated.metadata import (
    BrokerRegistrationChangeRecord, ConfigRecord, FeatureLevelRecord, FenceBrokerRecord, PartitionChangeRecord,
    PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, UnfenceBrokerRecord,
)
from protocol.generated.metadata.register_broker_record import BrokerEndpoint
from protocol.record_codec import ControlRecordType, Record, build_batch, decode_batch, parse_control_record_type
from protocol.records import iter_batch_positions

TOPIC_IDS = [bytes([i]) * 16 for i in range(1, 5)]
NAMES = ["orders", "payments", "a.b", "z"]

broker_ids = st.integers(0, 5)
topic_index = st.integers(0, 3)


def _register(node_id, fenced, rack, port, shutting):
    return RegisterBrokerRecord(broker_id=node_id, incarnation_id=bytes([node_id + 1]) * 16, broker_epoch=port,
                                end_points=[BrokerEndpoint(name="PLAINTEXT", host="h", port=port, security_protocol=0)],
                                rack=rack, fenced=fenced, in_controlled_shutdown=shutting)


def _partition(t, p, replicas, leader_epoch):
    return PartitionRecord(partition_id=p, topic_id=TOPIC_IDS[t], replicas=replicas, isr=replicas[:1],
                           removing_replicas=[], adding_replicas=[], leader=replicas[0], leader_recovery_state=0,
                           leader_epoch=leader_epoch, partition_epoch=leader_epoch)


records = st.one_of(
    st.builds(lambda t: TopicRecord(name=NAMES[t], topic_id=TOPIC_IDS[t]), topic_index),
    st.builds(_partition, topic_index, st.integers(0, 3), st.lists(broker_ids, min_size=1, max_size=3, unique=True),
              st.integers(0, 9)),
    st.builds(lambda t, p, leader, isr: PartitionChangeRecord(partition_id=p, topic_id=TOPIC_IDS[t], leader=leader,
                                                              isr=isr),
              topic_index, st.integers(0, 3), st.sampled_from([-2, -1, 0, 1, 2]),
              st.one_of(st.none(), st.lists(broker_ids, max_size=3, unique=True))),
    st.builds(lambda t: RemoveTopicRecord(topic_id=TOPIC_IDS[t]), topic_index),
    st.builds(lambda kind, t, k, v: ConfigRecord(resource_type=kind, resource_name=NAMES[t], name=k, value=v),
              st.sampled_from([2, 4, 16]), topic_index, st.sampled_from(["retention.ms", "cleanup.policy"]),
              st.one_of(st.none(), st.sampled_from(["1000", "compact", "delete"]))),
    st.builds(_register, broker_ids, st.booleans(), st.one_of(st.none(), st.sampled_from(["r1", "r2"])),
              st.integers(1, 65535), st.booleans()),
    st.builds(lambda b, e: FenceBrokerRecord(id=b, epoch=e), broker_ids, st.integers(0, 9)),
    st.builds(lambda b, e: UnfenceBrokerRecord(id=b, epoch=e), broker_ids, st.integers(0, 9)),
    st.builds(lambda b, f, s: BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=1, fenced=f,
                                                             in_controlled_shutdown=s),
              broker_ids, st.sampled_from([-1, 0, 1]), st.sampled_from([0, 1])),
    st.builds(lambda n, level: FeatureLevelRecord(name=n, feature_level=level),
              st.sampled_from(["metadata.version", "group.version", "transaction.version"]), st.integers(0, 30)),
    st.builds(lambda n: ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=n), st.integers(0, 10**6)),
)


def _image(recs, offset=41):
    return MetadataImage().apply(recs, offset)


@settings(max_examples=300, deadline=None)
@given(st.lists(records, max_size=60))
def test_a_snapshot_reads_back_as_the_image_it_was_written_from(recs):
    image = _image(recs)
    data = write_snapshot(image, epoch=3, last_contained_log_timestamp=123, now_ms=456)
    assert image_from_snapshot(data, image.offset + 1) == image


def test_the_snapshot_is_framed_as_kafka_frames_it():
    image = _image([FeatureLevelRecord(name="metadata.version", feature_level=25),
                    TopicRecord(name="orders", topic_id=TOPIC_IDS[0])]
                   + [_partition(0, p, [1], 0) for p in range(2500)])
    data = write_snapshot(image, epoch=7, last_contained_log_timestamp=99, now_ms=100)
    batches = [decode_batch(data, pos) for pos, _ in iter_batch_positions(data)]
    first, last = batches[0], batches[-1]
    assert first[0].is_control and parse_control_record_type(first[1][0].key) is ControlRecordType.SNAPSHOT_HEADER
    assert last[0].is_control and parse_control_record_type(last[1][0].key) is ControlRecordType.SNAPSHOT_FOOTER
    assert all(h.partition_leader_epoch == 7 for h, _ in batches)
    offsets = [r.offset for _, rs in batches for r in rs]
    assert offsets == list(range(len(offsets)))  # counted from 0 across batches, as RecordsSnapshotWriter does
    assert len(batches) == 2 + 3  # 2,502 records in batches of at most 1,000
    assert len(snapshot_records(data)) == 2502


@pytest.mark.parametrize("damage", ["no footer", "no header", "flipped byte", "trailing bytes"])
def test_a_damaged_snapshot_is_refused_whole(damage):
    image = _image([TopicRecord(name="orders", topic_id=TOPIC_IDS[0]), _partition(0, 0, [1], 0)])
    data = bytearray(write_snapshot(image, 1, 0, 0))
    positions = [pos for pos, _ in iter_batch_positions(data)]
    if damage == "no footer":
        data = data[:positions[-1]]
    elif damage == "no header":
        data = data[positions[1]:]
    elif damage == "flipped byte":
        data[positions[1] + 70] ^= 0xFF
    else:
        data += b"\x00" * 7
    with pytest.raises(SnapshotError):
        validate_snapshot(bytes(data))
    with pytest.raises(SnapshotError):
        image_from_snapshot(bytes(data), 10)


# ---- __cluster_metadata-0 on disk -----------------------------------------------------------------------------

def _batch(recs, ts=0) -> bytes:
    return build_batch([Record(value=encode_record(r), timestamp=ts) for r in recs])


def _history():
    """Batches of metadata records as a controller would commit them, one decision each."""
    out = [[FeatureLevelRecord(name="metadata.version", feature_level=25)],
           [_register(b, True, None, 9000 + b, False) for b in (1, 2, 3)]]
    for t in range(4):
        out.append([TopicRecord(name=NAMES[t], topic_id=TOPIC_IDS[t])] + [_partition(t, p, [1, 2, 3], 0)
                                                                          for p in range(3)])
        out.append([ConfigRecord(resource_type=2, resource_name=NAMES[t], name="retention.ms", value=str(t))])
        out.append([UnfenceBrokerRecord(id=t % 3 + 1, epoch=1)])
        out.append([PartitionChangeRecord(partition_id=1, topic_id=TOPIC_IDS[t], leader=2, isr=[2, 3])])
    out.append([RemoveTopicRecord(topic_id=TOPIC_IDS[1])])
    return out


def _fill(raft_log: KRaftLog, history) -> list[Entry]:
    offset, entries = 0, []
    for epoch, recs in zip(itertools.cycle([1, 1, 2, 2, 2, 5]), history):
        entries.append(Entry(offset, max(epoch, entries[-1].epoch if entries else 0), _batch(recs), count=len(recs)))
        offset += len(recs)
    raft_log.append(entries)
    raft_log.flush()
    return entries


def _replay(entries) -> MetadataImage:
    image = MetadataImage()
    for e in entries:
        image = image.apply(records_of(e.data), e.next_offset - 1)
    return image


def test_a_node_restarted_from_a_snapshot_and_the_log_after_it_reaches_the_image_of_a_full_replay(tmp_path):
    tmp_path = tmp_path / "__cluster_metadata-0"
    now = lambda: 1000  # noqa: E731
    raft_log = KRaftLog(tmp_path, frozenset({1}), now, segment_bytes=1024, retention_bytes=0)
    raft_log.open()
    entries = _fill(raft_log, _history())
    full = _replay(entries)
    first, cut = entries[5], entries[9]
    segments_before = len(list(tmp_path.glob("*.log")))
    raft_log.create_snapshot(Snapshot(first.next_offset, first.epoch,
                                      write_snapshot(_replay(entries[:6]), first.epoch, 0, 1000)))
    assert not raft_log.maybe_clean() and raft_log.start_offset == 0  # one snapshot: the log stays
    raft_log.create_snapshot(Snapshot(cut.next_offset, cut.epoch,
                                      write_snapshot(_replay(entries[:10]), cut.epoch, 0, 1000)))
    assert len(list(tmp_path.glob("*.log"))) == segments_before  # a snapshot alone deletes nothing
    assert raft_log.maybe_clean()  # over metadata.max.retention.bytes: the log before the newest one goes
    assert raft_log.start_offset == cut.next_offset and len(list(tmp_path.glob("*.log"))) < segments_before
    assert not (tmp_path / snapshot_name(first.next_offset, first.epoch)).exists()
    raft_log.close()

    reopened = KRaftLog(tmp_path, frozenset({1}), now, segment_bytes=1024)
    reopened.open()
    # the log start comes back as the first segment's base (whole segments are deleted), at or below the cut
    assert reopened.start_offset <= cut.next_offset and reopened.end_offset == entries[-1].next_offset
    assert [(sn.end_offset, sn.epoch) for sn in reopened.snapshots] == [(cut.next_offset, cut.epoch)]
    snap = reopened.latest_snapshot
    image = image_from_snapshot(snap.data, snap.end_offset)
    for e in reopened.read_until(snap.end_offset, reopened.end_offset):
        image = image.apply(records_of(e.data), e.next_offset - 1)
    assert image == full
    reopened.close()


def test_retention_by_time_keeps_snapshots_younger_than_metadata_max_retention_ms(tmp_path):
    """KafkaMetadataLogTest.testSnapshotDeletionWithRetentionMs shape: the oldest snapshot goes (and the log
    start moves to the next one) only once its last contained record is older than the retention."""
    clock = [10_000]
    raft_log = KRaftLog(tmp_path / "__cluster_metadata-0", frozenset({1}), lambda: clock[0],
                        retention_bytes=-1, retention_ms=5_000)
    raft_log.open()
    entries = _fill(raft_log, _history())
    for i, ts in ((3, 1_000), (7, 9_000), (11, 9_500)):
        e = entries[i]
        raft_log.create_snapshot(Snapshot(e.next_offset, e.epoch, write_snapshot(_replay(entries[:i + 1]),
                                                                                  e.epoch, ts, clock[0])))
    assert raft_log.maybe_clean()  # the first snapshot's records are 9 s old, the second's 1 s
    assert raft_log.start_offset == entries[7].next_offset and len(raft_log.snapshots) == 2
    clock[0] = 14_000
    assert not raft_log.maybe_clean()
    clock[0] = 14_001
    assert raft_log.maybe_clean() and raft_log.start_offset == entries[11].next_offset
    raft_log.close()


def test_a_damaged_snapshot_file_stops_the_node_naming_the_file(tmp_path):
    tmp_path = tmp_path / "__cluster_metadata-0"
    raft_log = KRaftLog(tmp_path, frozenset({1}), lambda: 0)
    raft_log.open()
    entries = _fill(raft_log, _history()[:4])
    image = _replay(entries)
    raft_log.create_snapshot(Snapshot(entries[-1].next_offset, entries[-1].epoch,
                                      write_snapshot(image, entries[-1].epoch, 0, 0)))
    raft_log.close()
    path = tmp_path / snapshot_name(entries[-1].next_offset, entries[-1].epoch)
    path.write_bytes(path.read_bytes()[:-20])  # a torn write that still got renamed
    with pytest.raises(SnapshotError, match=str(path)):
        KRaftLog(tmp_path, frozenset({1}), lambda: 0).open()


def test_the_snapshot_policy_follows_kafkas_two_settings():
    policy = SnapshotPolicy(max_bytes_between=1000, max_interval_ms=60_000)
    assert not policy.due(0, 10**9)  # nothing committed since the last snapshot: never
    assert policy.due(1000, 0) and not policy.due(999, 59_999)
    assert policy.due(1, 60_000)
    assert not SnapshotPolicy(1000, 0).due(999, 10**9)  # interval 0: by bytes only
    assert dataclasses.asdict(SnapshotPolicy()) == {"max_bytes_between": 20971520, "max_interval_ms": 3600000}
