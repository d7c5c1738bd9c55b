"""The share coordinator's pure shard (cluster/share/share_coordinator.py): ports of Kafka 4.2's
ShareCoordinatorShardTest, PersisterStateBatchCombinerTest and ShareCoordinatorOffsetsManagerTest (each test
names the Kafka method it ports), plus a model check of the batch combiner and of replay."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.groups.group_records import CoordinatorRecord
from cluster.groups.share_state_records import decode_share_state_record
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from cluster.share.share_coordinator import (
    NEGATIVE_PARTITION_ID, READ_UNINITIALIZED_SHARE_PARTITION, WRITE_UNINITIALIZED_SHARE_PARTITION, OffsetsManager,
    ShareCoordinatorConfig, ShareCoordinatorShard, StateBatch, combine_state_batches, parse_coordinator_key,
    share_coordinator_partition_for, share_partition_key_string,
)
from protocol.errors import ErrorCode
from protocol.generated.coordinator import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey
from protocol.generated.coordinator import share_snapshot_value as snap_v
from protocol.generated.messages import (
    DeleteShareGroupStateRequest, InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest,
)
from protocol.generated.messages import delete_share_group_state_request as dsq
from protocol.generated.messages import initialize_share_group_state_request as isq
from protocol.generated.messages import read_share_group_state_request as rsq
from protocol.generated.messages import read_share_group_state_summary_request as rssq
from protocol.generated.messages import write_share_group_state_request as wsq

GROUP_ID = "group1"
TOPIC_ID = bytes(range(1, 17))
PARTITION = 0
KEY = (GROUP_ID, TOPIC_ID, PARTITION)


def image(partitions: int = 1) -> MetadataImage:
    t = TopicInfo("t", TOPIC_ID, {p: PartitionInfo(p, (1,), (1,), 1, 0, 0) for p in range(partitions)})
    return MetadataImage(offset=1, topics_by_name={"t": t}, topics_by_id={TOPIC_ID: t})


class Shard:
    """A shard whose records are replayed at consecutive offsets, as the runtime does once they are appended;
    each record also goes through its bytes (encode, decode) as a load would read it."""

    def __init__(self, per_snapshot: int = 500, cold_ms: int = 300_000) -> None:
        self.shard = ShareCoordinatorShard(ShareCoordinatorConfig(per_snapshot, cold_ms))
        self.shard.on_new_metadata_image(image())
        self.next_offset = 0

    def apply(self, res):
        for r in res.records:
            k, v = r.encode()
            self.shard.replay(decode_share_state_record(k, v), self.next_offset)
            self.next_offset += 1
        return res


def init_req(state_epoch=0, start_offset=-1, partition=PARTITION, topic_id=TOPIC_ID):
    return InitializeShareGroupStateRequest(group_id=GROUP_ID, topics=[isq.InitializeStateData(
        topic_id=topic_id, partitions=[isq.PartitionData(partition=partition, state_epoch=state_epoch,
                                                         start_offset=start_offset)])])


def write_req(leader_epoch=0, state_epoch=0, start_offset=0, batches=((0, 10, 0, 1),), partition=PARTITION,
              delivery_complete_count=11):
    return WriteShareGroupStateRequest(group_id=GROUP_ID, topics=[wsq.WriteStateData(topic_id=TOPIC_ID, partitions=[
        wsq.PartitionData(partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                          start_offset=start_offset, delivery_complete_count=delivery_complete_count,
                          state_batches=[wsq.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                                        delivery_count=c) for f, last, s, c in batches])])])


def read_req(leader_epoch=0, partition=PARTITION):
    return ReadShareGroupStateRequest(group_id=GROUP_ID, topics=[rsq.ReadStateData(topic_id=TOPIC_ID, partitions=[
        rsq.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def summary_req(partition=PARTITION):
    return ReadShareGroupStateSummaryRequest(group_id=GROUP_ID, topics=[rssq.ReadStateSummaryData(
        topic_id=TOPIC_ID, partitions=[rssq.PartitionData(partition=partition, leader_epoch=0)])])


def delete_req(partition=PARTITION):
    return DeleteShareGroupStateRequest(group_id=GROUP_ID, topics=[dsq.DeleteStateData(
        topic_id=TOPIC_ID, partitions=[dsq.PartitionData(partition=partition)])])


def part_error(res) -> tuple[int, str | None]:
    p = res.response.results[0].partitions[0]
    return p.error_code, p.error_message


def B(first, last, state, count) -> StateBatch:  # noqa: N802 - PersisterStateBatch's argument order
    return StateBatch(first, last, count, state)


# ---- ShareCoordinatorShardTest -----------------------------------------------------------------------------------

def test_replay_with_share_snapshot():
    """testReplayWithShareSnapshot: a later snapshot replaces the state and raises the leader epoch."""
    s = Shard()
    for epoch, le, batch in ((0, 1, (0, 10)), (1, 2, (11, 12))):
        value = ShareSnapshotValue(snapshot_epoch=epoch, state_epoch=epoch, start_offset=0,
                                   delivery_complete_count=11, leader_epoch=le,
                                   state_batches=[snap_v.StateBatch(batch[0], batch[1], 0, 1)])
        s.shard.replay(CoordinatorRecord(ShareSnapshotKey(group_id=GROUP_ID, topic_id=TOPIC_ID, partition=0), value),
                       epoch)
        cur = s.shard.state[KEY]
        assert (cur.snapshot_epoch, cur.state_batches) == (epoch, (B(batch[0], batch[1], 0, 1),))
        assert s.shard.leader_epochs[KEY] == le


def test_write_fails_on_uninitialized_partition():
    """testWriteFailsOnUninitializedPartition."""
    s = Shard()
    res = s.shard.write_state(write_req(), 0)
    assert part_error(res) == (ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED_SHARE_PARTITION)
    assert res.records == [] and KEY not in s.shard.state


def test_write_state_success():
    """testWriteStateSuccess: after initialization a write is a ShareUpdate in the snapshot's epoch."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 5))
    res = s.apply(s.shard.write_state(write_req(), 6))
    assert part_error(res) == (0, None)
    assert len(res.records) == 1 and isinstance(res.records[0].key, ShareUpdateKey)
    v = res.records[0].value
    assert (v.snapshot_epoch, v.leader_epoch, v.start_offset, v.delivery_complete_count) == (0, 0, 0, 11)
    cur = s.shard.state[KEY]
    assert (cur.start_offset, cur.state_batches, cur.delivery_complete_count) == (0, (B(0, 10, 0, 1),), 11)
    assert s.shard.leader_epochs[KEY] == 0


def test_subsequent_write_state_snapshot_epoch_updates_successfully():
    """testSubsequentWriteStateSnapshotEpochUpdatesSuccessfully: same-state batches combine to one."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.apply(s.shard.write_state(write_req(), 0))
    res = s.apply(s.shard.write_state(write_req(batches=((11, 20, 0, 1),), delivery_complete_count=21), 0))
    assert res.records[0].value.snapshot_epoch == 0
    cur = s.shard.state[KEY]
    assert cur.state_batches == (B(0, 20, 0, 1),)
    assert cur.delivery_complete_count == 21


def test_write_state_invalid_request_data():
    """testWriteStateInvalidRequestData: a negative partition."""
    s = Shard()
    res = s.shard.write_state(write_req(partition=-1), 0)
    assert part_error(res) == (ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
    assert res.records == []


def test_write_null_metadata_image():
    """testWriteNullMetadataImage: no image, UNKNOWN_TOPIC_OR_PARTITION; initialization left leader epoch -1."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.shard.on_new_metadata_image(None)
    res = s.shard.write_state(write_req(), 0)
    assert part_error(res)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and res.records == []
    assert s.shard.leader_epochs[KEY] == -1


def test_write_state_fenced_leader_epoch_error():
    """testWriteStateFencedLeaderEpochError."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.apply(s.shard.write_state(write_req(leader_epoch=1), 0))
    res = s.shard.write_state(write_req(leader_epoch=0), 0)
    assert part_error(res)[0] == ErrorCode.FENCED_LEADER_EPOCH and res.records == []
    assert s.shard.leader_epochs[KEY] == 1


def test_write_state_fenced_state_epoch_error():
    """testWriteStateFencedStateEpochError."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(state_epoch=1), 0))
    res = s.shard.write_state(write_req(state_epoch=0), 0)
    assert part_error(res)[0] == ErrorCode.FENCED_STATE_EPOCH and res.records == []


def test_write_unknown_partition():
    """The partition must exist in the image (maybeGetWriteStateError's topic check)."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.shard.state[(GROUP_ID, TOPIC_ID, 3)] = s.shard.state[KEY]
    res = s.shard.write_state(write_req(partition=3), 0)
    assert part_error(res)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_read_state_success():
    """testReadStateSuccess: the state as written; the same leader epoch writes nothing."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.apply(s.shard.write_state(write_req(), 0))
    res = s.shard.read_state(read_req(leader_epoch=0), 0)
    p = res.response.results[0].partitions[0]
    assert (p.error_code, p.state_epoch, p.start_offset) == (0, 0, 0)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches] == \
        [(0, 10, 0, 1)]
    assert res.records == []


def test_read_state_leader_epoch_update_success():
    """testReadStateLeaderEpochUpdateSuccess: a newer leader epoch is recorded by an update with no batches."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.apply(s.shard.write_state(write_req(), 0))
    res = s.apply(s.shard.read_state(read_req(leader_epoch=2), 0))
    assert part_error(res) == (0, None)
    assert len(res.records) == 1 and res.records[0].value.leader_epoch == 2
    assert res.records[0].value.state_batches == []
    assert s.shard.leader_epochs[KEY] == 2
    assert s.shard.state[KEY].state_batches == (B(0, 10, 0, 1),)
    assert s.shard.read_state(read_req(leader_epoch=-1), 0).records == []  # -1: no update


def test_read_state_invalid_request_data():
    """testReadStateInvalidRequestData: a negative partition."""
    s = Shard()
    res = s.shard.read_state(read_req(partition=-1), 0)
    assert part_error(res) == (ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)


def test_read_state_fenced_leader_epoch_error():
    """testReadStateFencedLeaderEpochError."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.apply(s.shard.write_state(write_req(leader_epoch=2), 0))
    res = s.shard.read_state(read_req(leader_epoch=1), 0)
    assert part_error(res)[0] == ErrorCode.FENCED_LEADER_EPOCH and res.records == []


def test_read_fails_on_uninitialized_partition():
    """testReadFailsOnUninitializedPartition."""
    s = Shard()
    res = s.shard.read_state(read_req(), 0)
    assert part_error(res) == (ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED_SHARE_PARTITION)


def test_read_null_metadata_image():
    """testReadNullMetadataImage."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.shard.on_new_metadata_image(None)
    assert part_error(s.shard.read_state(read_req(), 0))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_read_state_summary_success():
    """testReadStateSummarySuccess (with KIP-1226's delivery-complete count) and the uninitialized answer."""
    s = Shard()
    p = s.shard.read_state_summary(summary_req()).response.results[0].partitions[0]
    assert (p.error_code, p.start_offset, p.state_epoch, p.leader_epoch, p.delivery_complete_count) == \
        (0, -1, 0, 0, -1)
    s.apply(s.shard.initialize_state(init_req(state_epoch=3), 0))
    s.apply(s.shard.write_state(write_req(leader_epoch=4, state_epoch=3, start_offset=5), 0))
    res = s.shard.read_state_summary(summary_req())
    p = res.response.results[0].partitions[0]
    assert (p.error_code, p.start_offset, p.state_epoch, p.leader_epoch, p.delivery_complete_count) == \
        (0, 5, 3, 4, 11)
    assert res.records == []


def test_read_state_summary_invalid_and_unknown():
    """testReadStateSummaryInvalidRequestData, testReadStateSummaryNullMetadataImage."""
    s = Shard()
    assert part_error(s.shard.read_state_summary(summary_req(partition=-1))) == \
        (ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
    assert part_error(s.shard.read_state_summary(summary_req(partition=7)))[0] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_non_sequential_batch_updates():
    """testNonSequentialBatchUpdates: overlapping writes combine, the higher (count, state) winning per offset."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.apply(s.shard.write_state(write_req(batches=((100, 109, 0, 1), (110, 119, 1, 2), (120, 129, 2, 1))), 0))
    s.apply(s.shard.write_state(write_req(batches=((105, 114, 0, 2),)), 0))
    assert s.shard.state[KEY].state_batches == (
        B(100, 104, 0, 1), B(105, 109, 0, 2), B(110, 119, 1, 2), B(120, 129, 2, 1))


def test_snapshot_every_n_updates():
    """testLastRedundantOffset-style: after ``records.per.snapshot`` updates the next write is a snapshot
    (snapshot epoch +1, the whole state), which makes the older records redundant."""
    s = Shard(per_snapshot=3)
    s.apply(s.shard.initialize_state(init_req(), 0))  # offset 0: snapshot
    kinds = []
    for i in range(6):
        res = s.apply(s.shard.write_state(write_req(start_offset=i, batches=((i, i, 2, 1),)), 10 + i))
        kinds.append(type(res.records[0].key).__name__)
    # the update count goes 0,1,2,3 over four updates (Kafka's counting), then a snapshot resets it
    assert kinds == ["ShareUpdateKey"] * 4 + ["ShareSnapshotKey", "ShareUpdateKey"]
    cur = s.shard.state[KEY]
    assert cur.snapshot_epoch == 1 and cur.start_offset == 5
    assert s.shard.last_redundant_offset() == 5  # the second snapshot was written at offset 5


def test_initialize_state_success():
    """testInitializeStateSuccess: a snapshot at the request's state epoch, start offset and snapshot epoch 0."""
    s = Shard()
    res = s.apply(s.shard.initialize_state(init_req(state_epoch=2, start_offset=10), 99))
    assert part_error(res) == (0, None)
    v = res.records[0].value
    assert isinstance(v, ShareSnapshotValue)
    assert (v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset, v.create_timestamp,
            v.write_timestamp, v.state_batches) == (0, 2, -1, 10, 99, 99, [])
    res = s.apply(s.shard.initialize_state(init_req(state_epoch=3), 100))
    assert res.records[0].value.snapshot_epoch == 1 and s.shard.state_epochs[KEY] == 3


def test_initialize_state_invalid_request_data():
    """testInitializeStateInvalidRequestData: negative partition; null topic id."""
    s = Shard()
    assert part_error(s.shard.initialize_state(init_req(partition=-1), 0)) == \
        (ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)


def test_initialize_state_fenced_state_epoch():
    """testInitializeStateFencedStateEpoch: an older state epoch."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(state_epoch=2), 0))
    res = s.shard.initialize_state(init_req(state_epoch=1), 0)
    assert part_error(res)[0] == ErrorCode.FENCED_STATE_EPOCH and res.records == []


def test_initialize_null_metadata_image():
    """testInitializeNullMetadataImage."""
    s = Shard()
    s.shard.on_new_metadata_image(None)
    assert part_error(s.shard.initialize_state(init_req(), 0))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_state_success():
    """testDeleteStateSuccess: a tombstone; the state, epochs and counts are gone; idempotent."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    s.apply(s.shard.write_state(write_req(), 0))
    res = s.apply(s.shard.delete_state(delete_req()))
    assert part_error(res) == (0, None)
    assert len(res.records) == 1 and res.records[0].value is None
    assert isinstance(res.records[0].key, ShareSnapshotKey)
    assert KEY not in s.shard.state and KEY not in s.shard.leader_epochs and KEY not in s.shard.state_epochs
    again = s.shard.delete_state(delete_req())
    assert part_error(again) == (0, None) and again.records == []


def test_delete_state_invalid_request_data():
    """testDeleteStateInvalidRequestData, testDeleteNullMetadataImage: a negative partition; a partition the image
    does not hold."""
    s = Shard()
    assert part_error(s.shard.delete_state(delete_req(partition=-1))) == \
        (ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
    assert part_error(s.shard.delete_state(delete_req(partition=5)))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    s.shard.on_new_metadata_image(None)
    assert part_error(s.shard.delete_state(delete_req()))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_cleanup_share_state_on_topics_deleted():
    """testOnTopicsDeletedTopicIds (maybeCleanupShareState): the deleted topic's keys get tombstones."""
    s = Shard()
    s.apply(s.shard.initialize_state(init_req(), 0))
    assert s.shard.topics_deleted({b"\x09" * 16}).records == []
    res = s.apply(s.shard.topics_deleted({TOPIC_ID}))
    assert [(r.key.group_id, r.key.partition, r.value) for r in res.records] == [(GROUP_ID, 0, None)]
    assert s.shard.state == {}


def test_snapshot_cold_partitions():
    """testSnapshotColdPartitionsNoEligiblePartitions / testSnapshotColdPartitionsSnapshotUpdateNotConsidered:
    a partition not written within the interval gets a new snapshot (epoch +1, write timestamp now), once."""
    s = Shard(cold_ms=100)
    s.apply(s.shard.initialize_state(init_req(), 0))
    assert s.shard.snapshot_cold_partitions(50).records == []
    res = s.apply(s.shard.snapshot_cold_partitions(200))
    assert len(res.records) == 1 and res.records[0].value.snapshot_epoch == 1
    assert res.records[0].value.write_timestamp == 200 and res.records[0].value.create_timestamp == 0
    assert s.shard.snapshot_cold_partitions(1000).records == []  # every partition is a re-snapshot already
    assert s.shard.last_redundant_offset() == 1


# ---- ShareCoordinatorOffsetsManagerTest ------------------------------------------------------------------------

def test_offsets_manager_state_update():
    """testUpdateStateAddsToInternalState / testRedundantOffsetsEdgeCases' shapes: the minimum latest offset."""
    m = OffsetsManager()
    assert m.last_redundant_offset() is None
    m.update_state(("g", TOPIC_ID, 0), 0, False)
    assert m.last_redundant_offset() is None  # 0: nothing below it
    m.update_state(("g", TOPIC_ID, 1), 1, False)
    m.update_state(("g", TOPIC_ID, 0), 2, False)
    assert m.last_redundant_offset() == 1
    m.update_state(("g", TOPIC_ID, 1), 3, True)  # deleted: no longer holds anything back
    assert m.offsets == {("g", TOPIC_ID, 0): 2}
    m.update_state(("g", TOPIC_ID, 0), 4, False)
    assert m.last_redundant_offset() == 4


# ---- PersisterStateBatchCombinerTest ---------------------------------------------------------------------------

COMBINER_CASES = [
    # (name, so far, new, start offset, expected) from PersisterStateBatchCombinerTest.generatorCornerCases etc.
    ("Merge with empty", [], [B(100, 109, 0, 1)], -1, [B(100, 109, 0, 1)]),
    ("Same state contiguous merge", [B(100, 109, 0, 1)], [B(110, 119, 0, 1)], -1, [B(100, 119, 0, 1)]),
    ("Different state contiguous stays", [B(100, 109, 0, 1)], [B(110, 119, 0, 2)], -1,
     [B(100, 109, 0, 1), B(110, 119, 0, 2)]),
    ("Same offsets, higher count wins", [B(100, 110, 0, 1)], [B(100, 110, 0, 2)], -1, [B(100, 110, 0, 2)]),
    ("Same offsets, same count, higher state wins", [B(100, 110, 0, 1)], [B(100, 110, 2, 1)], -1,
     [B(100, 110, 2, 1)]),
    ("Swallowed by lower priority", [B(100, 110, 0, 2)], [B(105, 108, 0, 1)], -1, [B(100, 110, 0, 2)]),
    ("Splits a lower priority batch", [B(100, 110, 0, 1)], [B(105, 108, 2, 1)], -1,
     [B(100, 104, 0, 1), B(105, 108, 2, 1), B(109, 110, 0, 1)]),
    ("Last offsets aligned", [B(100, 110, 0, 1)], [B(105, 110, 0, 2)], -1, [B(100, 104, 0, 1), B(105, 110, 0, 2)]),
    ("Candidate larger, higher priority", [B(100, 110, 0, 1)], [B(105, 115, 0, 2)], -1,
     [B(100, 104, 0, 1), B(105, 115, 0, 2)]),
    ("Candidate larger, lower priority", [B(100, 110, 0, 2)], [B(105, 115, 0, 1)], -1,
     [B(100, 110, 0, 2), B(111, 115, 0, 1)]),
    ("First offsets aligned, candidate longer and lower", [B(100, 105, 0, 2)], [B(100, 110, 0, 1)], -1,
     [B(100, 105, 0, 2), B(106, 110, 0, 1)]),
    ("Start offset prunes and cuts", [B(100, 104, 0, 1), B(105, 110, 0, 1)], [B(111, 115, 2, 1)], 107,
     [B(107, 110, 0, 1), B(111, 115, 2, 1)]),
    ("Start offset past everything", [B(100, 110, 0, 1)], [], 200, []),
]


def test_combine_state_batches_cases():
    """PersisterStateBatchCombinerTest.testStateBatchCombine over its corner cases' shapes."""
    for name, so_far, new, start, expected in COMBINER_CASES:
        assert combine_state_batches(so_far, new, start) == expected, name


batch_st = st.builds(lambda f, n, s, c: B(f, f + n, s, c), st.integers(0, 40), st.integers(0, 8),
                     st.sampled_from([0, 2, 4]), st.integers(1, 3))


@settings(max_examples=300, deadline=None)
@given(st.lists(batch_st, max_size=6), st.lists(batch_st, max_size=6), st.sampled_from([-1, 0, 5, 20]))
def test_combine_state_batches_model(so_far, new, start):
    """Against a per-offset model: every offset of any input (at or above the start offset) is covered exactly
    once, by the highest (count, state) among the batches covering it; the output is sorted and non-overlapping.
    (Contiguous neighbours may share delivery info: Kafka's combiner finalizes a batch before a later split can
    make its neighbour equal, e.g. 12-20 c2, 13-21 c1, 21-21 c2.)"""
    out = combine_state_batches(so_far, new, start)
    model: dict[int, tuple[int, int]] = {}
    for b in so_far + new:
        for o in range(max(b.first_offset, start), b.last_offset + 1):
            model[o] = max(model.get(o, (-1, -1)), (b.delivery_count, b.delivery_state))
    got: dict[int, tuple[int, int]] = {}
    for b in out:
        assert b.first_offset <= b.last_offset
        for o in range(b.first_offset, b.last_offset + 1):
            assert o not in got
            got[o] = (b.delivery_count, b.delivery_state)
    assert got == model
    for a, b in zip(out, out[1:]):
        assert a.last_offset < b.first_offset


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["write", "read", "init", "delete", "cold"]), st.integers(0, 3),
                          st.integers(0, 30)), max_size=40))
def test_replay_from_log_rebuilds_the_state(ops):
    """A shard rebuilt by replaying every record written so far (a load) holds what the live shard holds; and
    replaying only the records from ``last_redundant_offset`` on does too (what pruning keeps)."""
    s = Shard(per_snapshot=2, cold_ms=5)
    log: list[tuple[bytes, bytes | None]] = []
    now = 0
    for op, epoch, n in ops:
        now += 3
        if op == "write":
            res = s.shard.write_state(write_req(leader_epoch=epoch, state_epoch=0, start_offset=n,
                                                batches=((n, n + 3, 2, 1),)), now)
        elif op == "read":
            res = s.shard.read_state(read_req(leader_epoch=epoch), now)
        elif op == "init":
            res = s.shard.initialize_state(init_req(state_epoch=epoch), now)
        elif op == "delete":
            res = s.shard.delete_state(delete_req())
        else:
            res = s.shard.snapshot_cold_partitions(now)
        log += [r.encode() for r in res.records]
        s.apply(res)
    fresh = ShareCoordinatorShard(ShareCoordinatorConfig(2, 5))
    for offset, (k, v) in enumerate(log):
        fresh.replay(decode_share_state_record(k, v), offset)
    assert fresh.state == s.shard.state
    assert fresh.leader_epochs == s.shard.leader_epochs and fresh.state_epochs == s.shard.state_epochs
    start = s.shard.last_redundant_offset() or 0
    pruned = ShareCoordinatorShard(ShareCoordinatorConfig(2, 5))
    for offset, (k, v) in enumerate(log[start:], start):
        pruned.replay(decode_share_state_record(k, v), offset)
    assert pruned.state == s.shard.state


# ---- ShareCoordinatorServiceTest: the coordinator key -------------------------------------------------------

def test_partition_for_and_coordinator_key():
    """ShareCoordinatorService.partitionFor over SharePartitionKey.asCoordinatorKey; the key parses back."""
    key = share_partition_key_string("g1", TOPIC_ID, 3)
    assert key == "g1:AQIDBAUGBwgJCgsMDQ4PEA:3"
    assert parse_coordinator_key(key) == ("g1", TOPIC_ID, 3)
    # Java: Utils.abs("g1:AQIDBAUGBwgJCgsMDQ4PEA:3".hashCode()) % 50
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    assert share_coordinator_partition_for(key, 50) == abs(h) % 50
    for bad in ("", "g", "g:x:1", f"g:{key.split(':')[1]}:-1", f"g:{key.split(':')[1]}:a", f":{key.split(':')[1]}:1"):
        assert parse_coordinator_key(bad) is None, bad
