"""Committed offsets in the pure coordinator: each test ports the Kafka test named in its docstring from
apache/kafka group-coordinator/src/test/java/org/apache/kafka/coordinator/group/OffsetMetadataManagerTest.java
(the transactional cases are in test_txn_offsets_state_machine.py)."""

from __future__ import annotations

from cluster.groups.group_classic import ClassicGroupMember
from cluster.groups.group_classic import ClassicGroupState as S
from cluster.groups.group_consumer import ClassicMeta, ConsumerGroupMember, MemberState
from cluster.groups.group_record_helpers import offset_tombstone
from protocol.errors import ErrorCode as E
from protocol.generated.messages import OffsetDeleteRequest
from protocol.generated.messages.offset_delete_request import OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from tests.groups.coordinator_ctx import Ctx
from tests.groups.test_consumer_state_machine import FOO, CCtx, build_group, image


def code(outcome) -> int:
    if outcome.error is not None:
        return outcome.error.code
    return outcome.response.topics[0].partitions[0].error_code


def stable_classic_group(ctx: Ctx, gid="foo", member="member", instance=None, generation=1):
    g = ctx.create_classic_group(gid)
    g.add(ClassicGroupMember(member, instance, "client", "host", 5000, 5000, "consumer", [("range", b"")]))
    g.transition_to(S.PREPARING_REBALANCE, 0)
    g.init_next_generation(0)
    g.transition_to(S.STABLE, 0)
    assert g.generation_id == generation
    return g


def fetch(ctx, gid, topics=None, member_id=None, member_epoch=-1):
    req = OffsetFetchRequestGroup(group_id=gid, member_id=member_id, member_epoch=member_epoch,
                                  topics=None if topics is None else [
                                      OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics])
    return ctx.shard.fetch_offsets(req, False, ctx.time)


def test_offset_commit_with_unknown_group():
    """testOffsetCommitWithUnknownGroup: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9"""
    ctx = Ctx()
    assert code(ctx.commit("foo", "member", 10, {("bar", 0): (100, "")}, version=8)) == E.ILLEGAL_GENERATION
    assert code(ctx.commit("foo", "member", 10, {("bar", 0): (100, "")}, version=9)) == E.GROUP_ID_NOT_FOUND


def test_classic_group_offset_commit_errors():
    """testGenericGroupOffsetCommitWithDeadGroup, ...WithUnknownMemberId, ...WithIllegalGeneration,
    ...WithUnknownInstanceId, ...WithFencedInstanceId, ...WhileInCompletingRebalanceState,
    ...WithoutMemberIdAndGeneration"""
    ctx = Ctx()
    g = stable_classic_group(ctx, instance="instance")
    assert code(ctx.commit("foo", "unknown", 1, {("bar", 0): (100, "")})) == E.UNKNOWN_MEMBER_ID
    assert code(ctx.commit("foo", "member", 10, {("bar", 0): (100, "")}, instance_id="instance")) == \
        E.ILLEGAL_GENERATION
    assert code(ctx.commit("foo", "member", 1, {("bar", 0): (100, "")}, instance_id="unknown")) == E.UNKNOWN_MEMBER_ID
    assert code(ctx.commit("foo", "other", 1, {("bar", 0): (100, "")}, instance_id="instance")) == \
        E.FENCED_INSTANCE_ID
    assert code(ctx.commit("foo", "", -1, {("bar", 0): (100, "")})) == E.UNKNOWN_MEMBER_ID  # not empty
    g.transition_to(S.PREPARING_REBALANCE, 0)
    g.init_next_generation(0)  # -> CompletingRebalance, generation 2
    assert code(ctx.commit("foo", "member", 2, {("bar", 0): (100, "")})) == E.REBALANCE_IN_PROGRESS
    g.transition_to(S.DEAD, 0)
    assert code(ctx.commit("foo", "member", 2, {("bar", 0): (100, "")})) == E.COORDINATOR_NOT_AVAILABLE


def test_classic_group_offset_commit_with_retention_time_and_maintains_session():
    """testGenericGroupOffsetCommitWithRetentionTime (OffsetCommitValue v1 with an expire timestamp),
    testGenericGroupOffsetCommitMaintainsSession"""
    ctx = Ctx()
    stable_classic_group(ctx)
    ctx.shard.reschedule_classic_heartbeat(ctx.group("foo"), "member")
    from cluster.groups.group_coordinator import ReqCtx
    from protocol.generated.messages import OffsetCommitRequest
    from protocol.generated.messages.offset_commit_request import (
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    )
    req = OffsetCommitRequest(group_id="foo", generation_id_or_member_epoch=1, member_id="member",
                              retention_time_ms=1234, topics=[OffsetCommitRequestTopic(
                                  name="bar", partitions=[OffsetCommitRequestPartition(partition_index=0,
                                                                                       committed_offset=100)])])
    ctx.time = 1000
    res = ctx.shard.commit_offsets(ReqCtx("c", "h", 4), req, ctx.time)
    assert res.response.topics[0].partitions[0].error_code == 0
    rec = res.records[0]
    assert rec.value_version == 1 and rec.value.expire_timestamp == 1000 + 1234 and rec.value.commit_timestamp == 1000
    assert ctx.shard.timer.deadline("heartbeat-foo-member") == 1000 + 5000  # the commit restarted the session


def test_simple_group_offset_commit():
    """testSimpleGroupOffsetCommit, testSimpleGroupOffsetCommitWithInstanceId, testFetchOffsetsWithUnknownGroup,
    testFetchAllOffsetsAtDifferentCommittedOffset (metadata and leader epoch come back as committed)"""
    ctx = Ctx()
    assert fetch(ctx, "foo", [("bar", [0])]).topics[0].partitions[0].committed_offset == -1
    assert code(ctx.commit("foo", "", -1, {("bar", 0): (100, "meta")})) == 0
    assert ctx.group("foo").is_simple_group()
    f = fetch(ctx, "foo", [("bar", [0, 1])])
    assert [(p.committed_offset, p.metadata, p.committed_leader_epoch) for p in f.topics[0].partitions] == [
        (100, "meta", -1), (-1, "", -1)]
    assert code(ctx.commit("foo", "", -1, {("bar", 0): (100, "")}, instance_id="instance")) == 0  # ignored
    all_ = fetch(ctx, "foo", None)
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in all_.topics] == [("bar", [100])]


def test_offset_metadata_too_large():
    """testConsumerGroupOffsetCommitWithOffsetMetadataTooLarge"""
    ctx = Ctx(offset_metadata_max_bytes=5)
    o = ctx.commit("foo", "", -1, {("bar", 0): (100, "toolarge"), ("bar", 1): (100, "small")})
    assert [p.error_code for p in o.response.topics[0].partitions] == [E.OFFSET_METADATA_TOO_LARGE, 0]
    assert [r.key.partition for r in o.records] == [1]


def _consumer_group(ctx: CCtx, classic=False):
    m = ConsumerGroupMember("member", member_epoch=10, previous_member_epoch=9, state=MemberState.STABLE,
                            subscribed_topic_names=("foo",), assigned={FOO: {0}},
                            classic=ClassicMeta(5000, [("range", b"")]) if classic else None)
    build_group(ctx, 10, [m], {"foo": (FOO, 2)})


def test_consumer_group_offset_commit_and_fetch():
    """testConsumerGroupOffsetCommitWithUnknownMemberId, ...WithStaleMemberEpoch,
    ...WithIllegalGenerationId (classic member), ...FromAdminClient, testConsumerGroupOffsetCommit (v8 from a
    consumer-protocol member: UNSUPPORTED_VERSION), testConsumerGroupOffsetFetchWithMemberIdAndEpoch,
    ...WithUnknownMemberId, ...WithStaleMemberEpoch, ...FromAdminClient"""
    ctx = CCtx(image((FOO, "foo", 2)))
    _consumer_group(ctx)
    assert code(ctx.commit("fooup", "unknown", 10, {("foo", 0): (1, "")}, version=9)) == E.UNKNOWN_MEMBER_ID
    assert code(ctx.commit("fooup", "member", 9, {("foo", 0): (1, "")}, version=9)) == E.STALE_MEMBER_EPOCH
    assert code(ctx.commit("fooup", "member", 10, {("foo", 0): (1, "")}, version=8)) == E.UNSUPPORTED_VERSION
    assert code(ctx.commit("fooup", "member", 10, {("foo", 0): (5, "m")}, version=9)) == 0
    assert code(ctx.commit("fooup", "", -1, {("foo", 0): (1, "")}, version=9)) == E.UNKNOWN_MEMBER_ID  # not empty
    assert fetch(ctx, "fooup", [("foo", [0])], "member", 10).topics[0].partitions[0].committed_offset == 5
    assert fetch(ctx, "fooup", [("foo", [0])], "member", 9).error_code == E.STALE_MEMBER_EPOCH
    assert fetch(ctx, "fooup", [("foo", [0])], "unknown", 10).error_code == E.UNKNOWN_MEMBER_ID
    assert fetch(ctx, "fooup", [("foo", [0])]).topics[0].partitions[0].committed_offset == 5  # admin client
    classic = CCtx(image((FOO, "foo", 2)))
    _consumer_group(classic, classic=True)
    assert code(classic.commit("fooup", "member", 9, {("foo", 0): (1, "")}, version=8)) == E.ILLEGAL_GENERATION
    assert code(classic.commit("fooup", "member", 10, {("foo", 0): (1, "")}, version=8)) == 0


def _delete(ctx, gid, topics):
    req = OffsetDeleteRequest(group_id=gid, topics=[OffsetDeleteRequestTopic(
        name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]) for t, ps in topics])
    return ctx.shard.delete_offsets(req, ctx.time)


def test_offset_delete():
    """testGenericGroupOffsetDelete, testGenericGroupOffsetDeleteWithErrors, testConsumerGroupOffsetDelete,
    testConsumerGroupOffsetDeleteWithErrors, testOffsetDeleteWith (unknown group)"""
    ctx = Ctx()
    assert _delete(ctx, "foo", [("bar", [0])]).error.code == E.GROUP_ID_NOT_FOUND
    ctx.commit("foo", "", -1, {("bar", 0): (100, ""), ("baz", 0): (1, "")})
    res = _delete(ctx, "foo", [("bar", [0, 1])])
    assert [p.error_code for p in res.response.topics[0].partitions] == [0, 0]
    assert res.records == [offset_tombstone("foo", "bar", 0)]  # only existing offsets get a tombstone
    # a classic group with members that does not use the consumer protocol
    g = stable_classic_group(ctx, gid="connect")
    g.protocol_type = "connect"
    assert _delete(ctx, "connect", [("bar", [0])]).error.code == E.NON_EMPTY_GROUP
    # a consumer group subscribed to the topic
    cctx = CCtx(image((FOO, "foo", 2)))
    _consumer_group(cctx)
    cctx.commit("fooup", "member", 10, {("foo", 0): (1, ""), ("other", 0): (1, "")}, version=9)
    res = _delete(cctx, "fooup", [("foo", [0]), ("other", [0])])
    assert [p.error_code for t in res.response.topics for p in t.partitions] == [E.GROUP_SUBSCRIBED_TO_TOPIC, 0]
    assert res.records == [offset_tombstone("fooup", "other", 0)]


def test_delete_group_all_offsets():
    """testDeleteGroupAllOffsets"""
    ctx = Ctx()
    ctx.commit("foo", "", -1, {("bar", 0): (1, ""), ("bar", 1): (2, ""), ("baz", 0): (3, "")})
    recs = ctx.shard.delete_all_offsets("foo")
    assert sorted((r.key.topic, r.key.partition) for r in recs) == [("bar", 0), ("bar", 1), ("baz", 0)]
    assert all(r.value is None for r in recs)


def test_cleanup_expired_offsets():
    """testCleanupExpiredOffsets (with a real group instead of mocks), testCleanupExpiredOffsetsGroupHasNoOffsets,
    GroupCoordinatorShardTest.testCleanupGroupMetadata: an empty group whose offsets all expired is deleted"""
    ctx = Ctx(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=1000)
    ctx.shard.on_loaded(0)
    ctx.commit("group-id", "", -1, {("firstTopic", 0): (100, ""), ("secondTopic", 0): (100, "")})
    ctx.time += 500
    ctx.commit("group-id", "", -1, {("secondTopic", 1): (100, "")})
    ctx.commit("subscribed", "", -1, {("firstTopic", 0): (100, "")})
    g = stable_classic_group(ctx, gid="subscribed")  # a stable consumer group subscribed to firstTopic
    g.subscribed_topics = {"firstTopic"}
    results = ctx.sleep(60_000 - 500)
    tombs = [(r.key.group, r.key.topic, r.key.partition) for res in results for r in res.records]
    assert ("group-id", "firstTopic", 0) in tombs and ("group-id", "secondTopic", 0) in tombs
    assert ("group-id", "secondTopic", 1) not in tombs and ("subscribed", "firstTopic", 0) not in tombs
    results = ctx.sleep(1000)
    recs = [r for res in results for r in res.records]
    assert [(type(r.key).__name__, r.value) for r in recs] == [("OffsetCommitKey", None), ("GroupMetadataKey", None)]
    assert ctx.group("group-id") is None and ctx.group("subscribed") is not None
