"""Share groups' admin operations in the group coordinator's shard: AlterShareGroupOffsets and the two steps of
DeleteShareGroupOffsets (KIP-932, Kafka 4.2), driven directly.

Tests whose docstring names a Kafka test port it from apache/kafka group-coordinator's GroupMetadataManagerTest or
GroupCoordinatorShardTest (the share-offsets cases); the others follow Kafka 4.2's behaviour where no test of Kafka
covers it: an alteration creating its group (KAFKA-19662) and bumping the group epoch to be the new state epoch
(KIP-932's Administration section, KAFKA-20910).
"""

from __future__ import annotations

from cluster.groups.group_coordinator import ReqCtx
from cluster.groups.group_share import DeleteShareState, InitializeShareState, SharePartitionMetadata
from protocol.errors import ErrorCode as E
from protocol.generated.coordinator import ShareGroupMetadataKey, ShareGroupStatePartitionMetadataKey
from protocol.generated.messages import ConsumerGroupHeartbeatRequest
from protocol.generated.messages import alter_share_group_offsets_request as asgo
import pytest

from tests.groups.test_share_state_machine import BAR, FOO, GID, M1, SCtx


@pytest.fixture
def ctx():
    return SCtx()



def alter_topics(*topics):
    return [asgo.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=[
        asgo.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps])
        for t, ps in topics]


def initialized_group(ctx, topics=("foo", "bar")):
    """A share group whose member subscribed to ``topics``, had their state initialized, then left: Empty."""
    res = ctx.join(M1, topics)
    ctx.initialize_all(res)
    ctx.hb(group_id=GID, member_id=M1, member_epoch=-1)
    assert ctx.share_group().is_empty()
    return ctx.shard.share.state_metadata[GID]


def run(res):
    if res.error is not None:
        raise res.error
    return res.response


def test_alter_share_group_offsets_bumps_the_epoch_and_initializes(ctx):
    """An empty group's alteration: a ShareGroupMetadata record with the epoch + 1 (the new state epoch), the
    partitions initializing again, and an InitializeShareState at the given start offsets; unknown topics and
    partitions beyond a topic's count UNKNOWN_TOPIC_OR_PARTITION, per partition."""
    initialized_group(ctx)
    epoch = ctx.share_group().group_epoch
    before = len(ctx.log)
    resp, init = run(ctx.shard.share_group_alter_offsets(
        GID, alter_topics(("foo", [(0, 10), (1, 20), (6, 1)]), ("zoo", [(0, 1)])), ctx.time))
    assert [(t.topic_name, t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in resp.responses] == [("foo", FOO, [(0, 0), (1, 0), (6, E.UNKNOWN_TOPIC_OR_PARTITION)]),
                                         ("zoo", bytes(16), [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    written = ctx.log[before:]
    assert [type(r.key) for r in written] == [ShareGroupMetadataKey, ShareGroupStatePartitionMetadataKey]
    assert written[0].value.epoch == epoch + 1 and ctx.share_group().group_epoch == epoch + 1
    meta = ctx.shard.share.state_metadata[GID]
    assert meta.initializing[FOO].partitions == {0, 1}
    assert isinstance(init, InitializeShareState) and init.state_epoch == epoch + 1
    req = init.to_request()
    assert [(p.partition, p.state_epoch, p.start_offset) for t in req.topics for p in t.partitions] == [
        (0, epoch + 1, 10), (1, epoch + 1, 20)]
    # the share coordinator's success moves them to initialized
    run(ctx.shard.share_group_initialized(GID, init.partitions(), ctx.time))
    assert ctx.shard.share.initialized_partitions(GID)[FOO] == set(range(6))


def test_alter_share_group_offsets_of_a_non_empty_group(ctx):
    """ShareGroup.validateOffsetsAlterable: NON_EMPTY_GROUP while the group has members, nothing written."""
    ctx.join(M1, ["foo"])
    before = len(ctx.log)
    res = ctx.shard.share_group_alter_offsets(GID, alter_topics(("foo", [(0, 1)])), ctx.time)
    assert res.error.code == E.NON_EMPTY_GROUP and res.records == [] and len(ctx.log) == before


def test_alter_share_group_offsets_creates_the_group(ctx):
    """KAFKA-19662: offsets set before the group's first use create it, Empty at epoch 1."""
    resp, init = run(ctx.shard.share_group_alter_offsets("new-group", alter_topics(("bar", [(2, 7)])), ctx.time))
    g = ctx.shard.groups["new-group"]
    assert (g.type, g.group_epoch, g.is_empty()) == ("share", 1, True)
    assert init.partitions() == {BAR: {2}} and dict(init.start_offsets) == {(BAR, 2): 7}


def test_alter_share_group_offsets_of_unknown_topics_only(ctx):
    """Nothing to initialize: no records, no request, every partition answered with its error."""
    initialized_group(ctx)
    before = len(ctx.log)
    resp, init = run(ctx.shard.share_group_alter_offsets(GID, alter_topics(("zoo", [(0, 1)])), ctx.time))
    assert init is None and len(ctx.log) == before
    assert resp.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_share_group_offsets_of_another_group_type(ctx):
    """A consumer group's id is GROUP_ID_NOT_FOUND to the alteration and the deletion (getOrMaybeCreatePersisted
    ShareGroup / shareGroup), nothing written."""
    ctx.shard.consumer_group_heartbeat(ReqCtx("c", "/h", 1), ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id=M1, member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
        topic_partitions=[]), 0)
    before = len(ctx.log)
    res = ctx.shard.share_group_alter_offsets("cg", alter_topics(("foo", [(0, 1)])), ctx.time)
    assert res.error.code == E.GROUP_ID_NOT_FOUND and res.records == []
    res = ctx.shard.share_group_delete_offsets_initiate("cg", ["foo"], ctx.time)
    assert res.error.code == E.GROUP_ID_NOT_FOUND and res.records == [] and len(ctx.log) == before


def test_initiate_delete_share_group_offsets_group_not_found(ctx):
    """testInitiateDeleteShareGroupOffsetsGroupNotFound."""
    res = ctx.shard.share_group_delete_offsets_initiate("missing", ["foo"], ctx.time)
    assert res.error.code == E.GROUP_ID_NOT_FOUND and res.records == []


def test_initiate_delete_share_group_offsets_non_empty_share_group(ctx):
    """testInitiateDeleteShareGroupOffsetsNonEmptyShareGroup."""
    ctx.join(M1, ["foo"])
    res = ctx.shard.share_group_delete_offsets_initiate(GID, ["foo"], ctx.time)
    assert res.error.code == E.NON_EMPTY_GROUP and res.records == []


def test_shares_partitions_eligible_for_offset_deletion_success(ctx):
    """testSharePartitionsEligibleForOffsetDeletionSuccess / testInitiateDeleteShareGroupOffsetsSuccess: an
    initialized topic moves to deleting and all its initialized partitions are to be deleted."""
    initialized_group(ctx)
    errors, req = run(ctx.shard.share_group_delete_offsets_initiate(GID, ["foo"], ctx.time))
    assert errors == [] and isinstance(req, DeleteShareState)
    assert req.topics == ((FOO, tuple(range(6))),)
    meta = ctx.shard.share.state_metadata[GID]
    assert FOO not in meta.initialized and meta.deleting == {FOO: "foo"} and BAR in meta.initialized


def test_share_partitions_eligible_for_offset_deletion_contains_deleting_topics(ctx):
    """testSharePartitionsEligibleForOffsetDeletionContainsDeletingTopics: a topic already deleting is deleted
    again, with every partition the image has."""
    initialized_group(ctx)
    run(ctx.shard.share_group_delete_offsets_initiate(GID, ["foo"], ctx.time))
    errors, req = run(ctx.shard.share_group_delete_offsets_initiate(GID, ["foo", "bar"], ctx.time))
    assert errors == [] and dict(req.topics) == {FOO: tuple(range(6)), BAR: (0, 1, 2)}


def test_share_partitions_eligible_for_offset_deletion_error_and_uninitialized_topics(ctx):
    """testSharePartitionsEligibleForOffsetDeletionErrorTopics / UninitializedTopics /
    UninitializedAndErrorTopics: an unknown topic and a topic without state are answered
    UNKNOWN_TOPIC_OR_PARTITION (the latter "There is no offset information to delete."), no request for them."""
    initialized_group(ctx, topics=("foo",))
    errors, req = run(ctx.shard.share_group_delete_offsets_initiate(GID, ["zoo", "bar"], ctx.time))
    assert [(t.topic_name, t.error_code, t.error_message) for t in errors] == [
        ("zoo", E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        ("bar", E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]
    assert req is None


def test_initiate_delete_share_group_offsets_empty_result(ctx):
    """testInitiateDeleteShareGroupOffsetsEmptyResult: a group without share-state metadata: nothing to do."""
    ctx.join(M1, ["zoo"])  # subscribes to a topic the image lacks: nothing initialized
    ctx.hb(group_id=GID, member_id=M1, member_epoch=-1)
    errors, req = run(ctx.shard.share_group_delete_offsets_initiate(GID, ["foo"], ctx.time))
    assert (errors, req) == ([], None)


def test_complete_delete_share_group_offsets(ctx):
    """testCompleteDeleteShareGroupOffsets / testCompleteDeleteShareGroupOffsetsSuccess: the deleted topics leave
    deleting; the answer names them."""
    initialized_group(ctx)
    run(ctx.shard.share_group_delete_offsets_initiate(GID, ["foo", "bar"], ctx.time))
    topics = run(ctx.shard.share_group_delete_offsets_complete(GID, {FOO: "foo"}, ctx.time))
    assert [(t.topic_name, t.topic_id, t.error_code) for t in topics] == [("foo", FOO, 0)]
    assert ctx.shard.share.state_metadata[GID] == SharePartitionMetadata(deleting={BAR: "bar"})


def test_complete_delete_share_group_offsets_empty_result(ctx):
    """testCompleteDeleteShareGroupOffsetsEmptyResult: no share-state metadata, nothing answered or written."""
    before = len(ctx.log)
    assert run(ctx.shard.share_group_delete_offsets_complete("missing", {FOO: "foo"}, ctx.time)) == []
    assert len(ctx.log) == before


def test_offsets_survive_a_coordinator_move(ctx):
    """Every admin change is a record: a coordinator replaying the log has the same epoch and share-state
    metadata."""
    initialized_group(ctx)
    run(ctx.shard.share_group_alter_offsets(GID, alter_topics(("foo", [(0, 3)])), ctx.time))
    run(ctx.shard.share_group_delete_offsets_initiate(GID, ["bar"], ctx.time))
    other = ctx.reload()
    assert other.share_group().group_epoch == ctx.share_group().group_epoch
    assert other.shard.share.state_metadata[GID] == ctx.shard.share.state_metadata[GID]
