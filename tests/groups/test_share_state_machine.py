"""The share-group (KIP-932) state machine of the group coordinator, driven directly.

Tests whose docstring names a Kafka test port it from apache/kafka (4.2)
group-coordinator/src/test/java/org/apache/kafka/coordinator/group/GroupMetadataManagerTest.java (share cases) or
modern/share/ShareGroupTest.java; Kafka's MockPartitionAssignor is replaced by the real ``simple`` assignor where
the test only needs an assignment, the expected records are built with the same helpers Kafka's tests use
(GroupCoordinatorRecordHelpers' counterparts in cluster/groups/group_share.py).
"""

from __future__ import annotations

import uuid

import pytest

from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import ReqCtx
from cluster.groups.group_records import CoordinatorRecord, decode_record
from cluster.groups.group_share import (
    DeleteShareState, InitializeShareState, ShareGroup, ShareGroupMember, ShareGroupState, current_assignment_record,
    epoch_record, member_subscription_record, remove_member_records, state_partition_metadata_record,
    target_assignment_epoch_record, target_assignment_record,
)
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode as E
from protocol.generated.coordinator import ShareGroupMetadataKey, ShareGroupStatePartitionMetadataKey
from protocol.generated.messages import ConsumerGroupHeartbeatRequest, ShareGroupHeartbeatRequest
from tests.groups.coordinator_ctx import Ctx, join_request

FOO, BAR = uuid.UUID(int=0xF00).bytes, uuid.UUID(int=0xBA4).bytes
GID = "share-group"
M1, M2, M3 = (str(uuid.UUID(int=i)) for i in (1, 2, 3))


def image(*topics, offset=1) -> MetadataImage:
    by_name = {name: TopicInfo(name, tid, {p: PartitionInfo(p, (1,), (1,), 1, 0, 0) for p in range(n)})
               for tid, name, n in topics}
    return MetadataImage(offset=offset, topics_by_name=by_name,
                         topics_by_id={t.topic_id: t for t in by_name.values()})


class SCtx(Ctx):
    def __init__(self, img=None, **config) -> None:
        super().__init__(**config)
        self.image = img if img is not None else image((FOO, "foo", 6), (BAR, "bar", 3))
        self.log: list[CoordinatorRecord] = []  # every record written, in order: the partition's log
        run = self.shard._run

        def logged(now_ms, fn, *args):
            res = run(now_ms, fn, *args)
            self.log.extend(res.records)
            return res
        self.shard._run = logged

    def hb(self, **fields):
        res = self.shard.share_group_heartbeat(ReqCtx("client", "/127.0.0.1", 1), ShareGroupHeartbeatRequest(**fields),
                                               self.time)
        if res.error is not None:
            raise res.error
        return res

    def join(self, mid, topics, gid=GID):
        return self.hb(group_id=gid, member_id=mid, member_epoch=0, subscribed_topic_names=list(topics))

    def initialize_all(self, res, gid=GID):
        """The share coordinator answers every InitializeShareState of ``res`` with success."""
        out = []
        for req in res.share_state:
            assert isinstance(req, InitializeShareState)
            out.append(self.shard.share_group_initialized(gid, req.partitions(), self.time))
        return out

    def share_group(self, gid=GID) -> ShareGroup:
        g = self.group(gid)
        assert g is not None and g.type == "share"
        return g

    def reload(self) -> "SCtx":
        """A new coordinator replaying this one's records: the move to another broker."""
        other = SCtx(self.image, **{k: getattr(self.config, k) for k in ("share_max_size",
                                                                         "share_session_timeout_ms")})
        other.time = self.time
        for i, rec in enumerate(self.log):
            k, v = rec.encode()
            other.shard.replay(decode_record(k, v), i)
        other.shard.on_loaded(self.time)
        return other


@pytest.fixture
def ctx():
    return SCtx()


def code_of(fn) -> int:
    with pytest.raises(GroupError) as info:
        fn()
    return info.value.code


# ---- request validation -----------------------------------------------------------------------------------------

def test_share_group_heartbeat_request_validation(ctx):
    """testShareGroupHeartbeatRequestValidation, plus the member id's length (at most a UUID's 36 characters)."""
    def bad(**fields):
        base = dict(group_id=GID, member_id=M1, member_epoch=0, subscribed_topic_names=["foo"])
        base.update(fields)
        with pytest.raises(GroupError) as info:
            ctx.hb(**base)
        assert info.value.code == E.INVALID_REQUEST
        return info.value.message
    assert bad(member_id="") == "MemberId can't be empty."
    assert bad(member_id="   ") == "MemberId can't be empty."
    assert bad(member_id="x" * 37) == "MemberId can't be longer than 36 characters."
    assert bad(group_id="") == "GroupId can't be empty."
    assert bad(rack_id="") == "RackId can't be empty."
    assert bad(subscribed_topic_names=None) == "SubscribedTopicNames must be set in first request."
    assert bad(subscribed_topic_names=[]) == "SubscribedTopicNames must be set in first request."
    assert bad(member_epoch=-2) == "MemberEpoch is invalid."
    assert ctx.shard.groups == {} and ctx.log == []  # no state change


def test_share_group_unknown_group_id(ctx):
    """testShareGroupUnknownGroupId: a heartbeat (or a leave) for a group this coordinator does not have, e.g.
    after a coordinator move without its records, is GROUP_ID_NOT_FOUND (fatal to the client)."""
    assert code_of(lambda: ctx.hb(group_id=GID, member_id=M1, member_epoch=1)) == E.GROUP_ID_NOT_FOUND
    assert code_of(lambda: ctx.hb(group_id=GID, member_id=M1, member_epoch=-1)) == E.GROUP_ID_NOT_FOUND


def test_share_group_unknown_member_id(ctx):
    """testShareGroupUnknownMemberIdJoins: a known group, an unknown member past epoch 0 or leaving."""
    ctx.join(M1, ["foo"])
    assert code_of(lambda: ctx.hb(group_id=GID, member_id=M2, member_epoch=1)) == E.UNKNOWN_MEMBER_ID
    assert code_of(lambda: ctx.hb(group_id=GID, member_id=M2, member_epoch=-1)) == E.UNKNOWN_MEMBER_ID


def test_share_group_of_another_type(ctx):
    """A consumer or classic group's id is GROUP_ID_NOT_FOUND to ShareGroupHeartbeat; the share group's id is
    GROUP_ID_NOT_FOUND to ConsumerGroupHeartbeat and INCONSISTENT_GROUP_PROTOCOL to JoinGroup."""
    ctx.shard.consumer_group_heartbeat(ReqCtx("c", "/h", 1), ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id=M1, member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
        topic_partitions=[]), 0)
    assert code_of(lambda: ctx.join(M1, ["foo"], gid="cg")) == E.GROUP_ID_NOT_FOUND
    ctx.join(M1, ["foo"])
    res = ctx.shard.consumer_group_heartbeat(ReqCtx("c", "/h", 1), ConsumerGroupHeartbeatRequest(
        group_id=GID, member_id=M2, member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
        topic_partitions=[]), 0)
    assert res.error.code == E.GROUP_ID_NOT_FOUND and res.records == []
    tok = object()
    res = ctx.shard.join_group(ReqCtx("c", "/h", 5), join_request(group_id=GID), tok, 0)
    assert res.completions[0][1].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.share_group().members.keys() == {M1}


# ---- join, assignment, share-state initialization ------------------------------------------------------------------

def test_share_group_member_joins_and_partitions_are_initialized(ctx):
    """testShareGroupMemberJoinsEmptyGroupWithAssignments with the 4.2 initialization flow
    (testShareGroupHeartbeatInitializeOnPartitionUpdate): the first heartbeat creates the group at epoch 1 with
    nothing assignable, records the subscribed partitions as initializing and asks for their state (start offset
    -1, state epoch 1); once initialized, the next heartbeat bumps the epoch and assigns them."""
    res = ctx.join(M1, ["foo"])
    r = res.response
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (M1, 1, 5000)
    assert r.assignment is not None and r.assignment.topic_partitions == []
    member = ShareGroupMember(M1, client_id="client", client_host="/127.0.0.1", subscribed_topic_names=("foo",))
    h = ctx.shard.share.metadata_hash(["foo"])
    assert res.records[:5] == [
        member_subscription_record(GID, member),
        epoch_record(GID, 1, h),
        target_assignment_record(GID, M1, {}),
        target_assignment_epoch_record(GID, 1),
        current_assignment_record(GID, member.copy(member_epoch=1, previous_member_epoch=0)),
    ]
    assert res.records[5].key == ShareGroupStatePartitionMetadataKey(group_id=GID)
    assert [sorted(t.partitions) for t in res.records[5].value.initializing_topics] == [list(range(6))]
    assert res.share_state == [InitializeShareState(GID, 1, ((FOO, tuple(range(6))),))]
    first = res
    req = res.share_state[0].to_request()
    assert req.group_id == GID and [(p.partition, p.state_epoch, p.start_offset) for p in req.topics[0].partitions] \
        == [(p, 1, -1) for p in range(6)]
    assert str(ctx.share_group().state) == "Stable"

    # a heartbeat before the state is initialized asks nothing again (initializing for less than the retry interval)
    res = ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    assert res.share_state == [] and res.records == [] and res.response.assignment is None

    done = ctx.initialize_all(first)
    meta = done[0].records[0].value
    assert [sorted(t.partitions) for t in meta.initialized_topics] == [list(range(6))]
    assert meta.initializing_topics == []
    res = ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    assert res.response.member_epoch == 2
    assert [(t.topic_id, t.partitions) for t in res.response.assignment.topic_partitions] == [(FOO, list(range(6)))]
    assert ctx.share_group().members[M1].assigned == {FOO: set(range(6))}


def test_three_members_on_six_partitions_get_two_each(ctx):
    """The issue's case: 3 share consumers on 6 partitions get 2 each; 3 on one partition all share it."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.join(M2, ["foo"])
    ctx.join(M3, ["foo"])
    for _ in range(2):  # every member heartbeats until the group settles
        for m in (M1, M2, M3):
            ctx.hb(group_id=GID, member_id=m, member_epoch=ctx.share_group().members[m].member_epoch)
    g = ctx.share_group()
    assert sorted(len(m.assigned[FOO]) for m in g.members.values()) == [2, 2, 2]
    assert set().union(*(m.assigned[FOO] for m in g.members.values())) == set(range(6))
    assert len({m.member_epoch for m in g.members.values()}) == 1 and g.assignment_epoch == g.group_epoch

    c2 = SCtx(image((FOO, "foo", 1)))
    c2.initialize_all(c2.join(M1, ["foo"]))
    c2.join(M2, ["foo"])
    c2.join(M3, ["foo"])
    for m in (M1, M2, M3):
        c2.hb(group_id=GID, member_id=m, member_epoch=c2.share_group().members[m].member_epoch)
    assert all(m.assigned == {FOO: {0}} for m in c2.share_group().members.values())


def test_initialize_retry_after_interval_and_uninitialize(ctx):
    """testSubscribedTopicsChangeMap and the uninitialize path: partitions initializing for longer than
    group.share.initialize.retry.interval.ms are asked again; a failed initialization takes them out of
    initializing so the next heartbeat asks again."""
    first = ctx.join(M1, ["foo"])
    assert first.share_state
    ctx.time += ctx.config.share_initialize_retry_interval_ms - 1
    assert ctx.hb(group_id=GID, member_id=M1, member_epoch=1).share_state == []
    ctx.time += 1
    again = ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    assert again.share_state == [InitializeShareState(GID, 1, ((FOO, tuple(range(6))),))]
    ctx.shard.share_group_uninitialized(GID, {FOO: {0, 1, 2}}, ctx.time)
    assert ctx.shard.share.state_metadata[GID].initializing[FOO].partitions == {3, 4, 5}
    retry = ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    assert retry.share_state == [InitializeShareState(GID, 1, ((FOO, (0, 1, 2)),))]


def test_new_partitions_of_a_subscribed_topic_are_initialized(ctx):
    """A subscribed topic that gains partitions (a new metadata image): the new ones are initialized, then assigned."""
    ctx.initialize_all(ctx.join(M1, ["bar"]))
    ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    assert ctx.share_group().members[M1].assigned == {BAR: {0, 1, 2}}
    ctx.image = image((FOO, "foo", 6), (BAR, "bar", 5), offset=2)
    res = ctx.hb(group_id=GID, member_id=M1, member_epoch=2)
    assert res.share_state == [InitializeShareState(GID, 3, ((BAR, (3, 4)),))]
    ctx.initialize_all(res)
    res = ctx.hb(group_id=GID, member_id=M1, member_epoch=res.response.member_epoch)
    assert ctx.share_group().members[M1].assigned == {BAR: set(range(5))}


# ---- epochs, leaving, fencing -----------------------------------------------------------------------------------

def test_share_group_member_epoch_validation(ctx):
    """testShareGroupMemberEpochValidation: a greater epoch is fenced, a smaller one too unless it is the
    previous epoch (whose answer may have been lost)."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.hb(group_id=GID, member_id=M1, member_epoch=1)  # -> epoch 2, previous 1
    assert code_of(lambda: ctx.hb(group_id=GID, member_id=M1, member_epoch=3)) == E.FENCED_MEMBER_EPOCH
    assert code_of(lambda: ctx.join(M1, ["foo"])) == E.FENCED_MEMBER_EPOCH  # epoch 0: neither current nor previous
    res = ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    assert res.response.member_epoch == 2


def test_share_group_leaving_member_bumps_group_epoch(ctx):
    """testShareGroupLeavingMemberBumpsGroupEpoch: -1 writes the member's tombstones and bumps the epoch; the
    answer keeps epoch -1."""
    ctx.join(M1, ["foo"])
    ctx.join(M2, ["foo", "bar"])
    epoch = ctx.share_group().group_epoch
    res = ctx.hb(group_id=GID, member_id=M2, member_epoch=-1)
    assert (res.response.member_id, res.response.member_epoch) == (M2, -1)
    assert res.records == remove_member_records(GID, M2) + [
        epoch_record(GID, epoch + 1, ctx.shard.share.metadata_hash(["foo"]))]
    assert ctx.share_group().members.keys() == {M1}
    assert not ctx.shard.timer.is_scheduled(f"share-session-timeout-{GID}-{M2}")


def test_share_group_session_timeout_expiration(ctx):
    """testShareGroupSessionTimeoutExpiration: a silent member is fenced after group.share.session.timeout.ms;
    a heartbeat restarts the session."""
    ctx.join(M1, ["foo"])
    ctx.join(M2, ["foo"])
    assert ctx.sleep(ctx.config.share_session_timeout_ms - 1) == []
    ctx.hb(group_id=GID, member_id=M1, member_epoch=ctx.share_group().members[M1].member_epoch)
    (fenced,) = ctx.sleep(1)  # M2's session ends
    epoch = ctx.share_group().group_epoch
    assert fenced.records[:3] == remove_member_records(GID, M2) and fenced.records[3].value.epoch == epoch
    assert ctx.share_group().members.keys() == {M1}
    assert ctx.sleep(ctx.config.share_session_timeout_ms - 2) == []  # M1's heartbeat restarted its session
    results = ctx.sleep(ctx.config.share_session_timeout_ms)
    assert len(results) == 1 and results[0].records[:3] == remove_member_records(GID, M1)
    g = ctx.share_group()
    assert g.members == {} and g.state is ShareGroupState.EMPTY


def test_share_group_new_member_is_rejected_when_maximum_members_is_reached():
    """testShareGroupNewMemberIsRejectedWithMaximumMembersIsReached (group.share.max.size)."""
    c = SCtx(share_max_size=2)
    c.join(M1, ["foo"])
    c.join(M2, ["foo"])
    assert code_of(lambda: c.join(M3, ["foo"])) == E.GROUP_MAX_SIZE_REACHED
    # members already in keep heartbeating
    assert c.hb(group_id=GID, member_id=M1, member_epoch=c.share_group().members[M1].member_epoch).response


def test_share_group_heartbeat_full_response(ctx):
    """testShareGroupHeartbeatFullResponse: the assignment is sent when joining, on a full request (topics set)
    and when it changed, not otherwise."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    r = ctx.hb(group_id=GID, member_id=M1, member_epoch=1).response
    assert r.assignment is not None  # changed
    r = ctx.hb(group_id=GID, member_id=M1, member_epoch=2).response
    assert r.assignment is None
    r = ctx.hb(group_id=GID, member_id=M1, member_epoch=2, subscribed_topic_names=["foo"]).response
    assert r.assignment is not None and r.member_epoch == 2


def test_share_group_subscription_change_bumps_epoch(ctx):
    """A member's new subscription bumps the group epoch and reassigns."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    res = ctx.hb(group_id=GID, member_id=M1, member_epoch=2, subscribed_topic_names=["bar"])
    assert res.response.member_epoch == 3 and res.response.assignment.topic_partitions == []
    assert res.share_state == [InitializeShareState(GID, 3, ((BAR, (0, 1, 2)),))]
    # foo keeps its initialized state (the group may subscribe again)
    assert ctx.shard.share.state_metadata[GID].initialized[FOO].partitions == set(range(6))


# ---- states, describe, list, delete ----------------------------------------------------------------------------

def test_share_group_states(ctx):
    """ShareGroupTest.testGroupState / GroupMetadataManagerTest.testShareGroupStates: Empty, then Stable with
    members, Empty again when they leave."""
    ctx.join(M1, ["foo"])
    assert ctx.share_group().state_string() == "Stable"
    ctx.hb(group_id=GID, member_id=M1, member_epoch=-1)
    assert ctx.share_group().state_string() == "Empty"


def test_share_group_describe(ctx):
    """testShareGroupDescribeNoErrors / testShareGroupDescribeWithErrors."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.hb(group_id=GID, member_id=M1, member_epoch=1, rack_id="r1")
    ctx.shard.consumer_group_heartbeat(ReqCtx("c", "/h", 1), ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id=M2, member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
        topic_partitions=[]), 0)
    d, missing, other = ctx.shard.share_group_describe([GID, "nope", "cg"])
    assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == \
        (0, "Stable", 2, 2, "simple")
    (m,) = d.members
    assert (m.member_id, m.member_epoch, m.rack_id, m.client_id, m.subscribed_topic_names) == \
        (M1, 2, "r1", "client", ["foo"])
    assert [(t.topic_id, t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == \
        [(FOO, "foo", list(range(6)))]
    assert missing.error_code == E.GROUP_ID_NOT_FOUND and missing.error_message == "Group nope not found."
    assert other.error_code == E.GROUP_ID_NOT_FOUND and other.error_message == "Group cg is not a share group."


def test_list_groups_and_describe_groups(ctx):
    """testListGroups with type share (protocol type "share"); DescribeGroups treats a share group as non-classic
    (Dead, no members)."""
    ctx.join(M1, ["foo"])
    (lg,) = ctx.shard.list_groups(set(), {"share"})
    assert (lg.group_id, lg.group_type, lg.protocol_type, lg.group_state) == (GID, "share", "share", "Stable")
    assert ctx.shard.list_groups(set(), {"consumer"}) == []
    assert ctx.shard.list_groups({"empty"}, set()) == []
    (dg,) = ctx.shard.describe_groups([GID])
    assert dg.group_state == "Dead" and dg.members == []


def test_delete_share_group_deletes_its_share_state(ctx):
    """testShareGroupDeleteRequest (sharePartitionDeleteRequests, shareGroupBuildPartitionDeleteRequest): a
    non-empty share group is NON_EMPTY_GROUP; an empty one's initialized and initializing topics move to deleting
    and are to be deleted from the share coordinator; then DeleteGroups writes the group's tombstones."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.hb(group_id=GID, member_id=M1, member_epoch=1, subscribed_topic_names=["foo", "bar"])  # bar: initializing
    res = ctx.shard.share_group_delete_requests([GID, "nope"], ctx.time)
    assert res.response == {GID: (None, E.NON_EMPTY_GROUP)} and res.records == []
    assert ctx.shard.delete_groups([GID], ctx.time).response == [(GID, E.NON_EMPTY_GROUP)]

    ctx.hb(group_id=GID, member_id=M1, member_epoch=-1)
    res = ctx.shard.share_group_delete_requests([GID], ctx.time)
    req, err = res.response[GID]
    assert err == 0 and req == DeleteShareState(GID, tuple(sorted([(FOO, tuple(range(6))), (BAR, (0, 1, 2))])))
    assert res.records[0].value.initialized_topics == [] and res.records[0].value.initializing_topics == []
    assert {t.topic_name for t in res.records[0].value.deleting_topics} == {"foo", "bar"}
    assert [t.topic_id for t in req.to_request().topics] == sorted([FOO, BAR])

    out = ctx.shard.delete_groups([GID], ctx.time)
    assert out.response == [(GID, 0)]
    keys = [type(r.key).__name__ for r in out.records]
    assert keys[-2:] == ["ShareGroupStatePartitionMetadataKey", "ShareGroupMetadataKey"]
    assert all(r.value is None for r in out.records)
    assert GID not in ctx.shard.groups and GID not in ctx.shard.share.state_metadata


def test_empty_share_group_does_not_expire(ctx):
    """The offsets cleanup never deletes an empty share group (its share state must go first, by DeleteGroups)."""
    ctx.join(M1, ["foo"])
    ctx.hb(group_id=GID, member_id=M1, member_epoch=-1)
    res = ctx.shard.cleanup_group_metadata(ctx.time)
    assert res.records == [] and GID in ctx.shard.groups


def test_offsets_apis_on_a_share_group(ctx):
    """ShareGroup.validateOffsetCommit/Delete: a share group holds no committed offsets (GROUP_ID_NOT_FOUND)."""
    ctx.join(M1, ["foo"])
    out = ctx.commit(GID, M1, 1, {("foo", 0): (5, "")}, version=9)
    assert out.error is not None and out.error.code == E.GROUP_ID_NOT_FOUND and out.records == []


# ---- replay and coordinator moves -----------------------------------------------------------------------------

def test_share_group_survives_a_coordinator_move(ctx):
    """Records are replayed on load: the group, its epochs, target and current assignments and share-state
    metadata survive; members keep heartbeating with their epochs and sessions restart on load."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.join(M2, ["foo", "bar"])
    for m in (M1, M2):
        ctx.hb(group_id=GID, member_id=m, member_epoch=ctx.share_group().members[m].member_epoch)
    before = ctx.share_group()
    moved = ctx.reload()
    g = moved.share_group()
    assert (g.group_epoch, g.assignment_epoch, g.metadata_hash) == \
        (before.group_epoch, before.assignment_epoch, before.metadata_hash)
    assert g.members == before.members and g.target_assignment == before.target_assignment
    assert moved.shard.share.state_metadata == ctx.shard.share.state_metadata
    epoch = g.members[M1].member_epoch
    res = moved.hb(group_id=GID, member_id=M1, member_epoch=epoch)
    assert res.response.member_epoch >= epoch
    # sessions were restarted by the load: a silent member is fenced a session later
    moved.sleep(moved.config.share_session_timeout_ms)
    assert moved.share_group().members == {}


def test_replay_share_group_records():
    """testReplayShareGroupMetadata, testReplayShareGroupMemberMetadata(Tombstone),
    testReplayShareGroupTargetAssignmentMember/Metadata, testReplayShareGroupCurrentMemberAssignment(Tombstone),
    testReplayShareGroupStatePartitionMetadata."""
    c = SCtx()
    m = ShareGroupMember(M1, member_epoch=10, previous_member_epoch=9, rack_id="r", client_id="cl",
                         client_host="h", subscribed_topic_names=("foo",), assigned={FOO: {1, 2}})
    for r in [epoch_record(GID, 10, 77), member_subscription_record(GID, m), target_assignment_record(GID, M1,
              {FOO: {1, 2}}), target_assignment_epoch_record(GID, 10), current_assignment_record(GID, m)]:
        c.shard.replay(r, 0)
    g = c.share_group()
    assert (g.group_epoch, g.metadata_hash, g.assignment_epoch) == (10, 77, 10)
    assert g.members[M1] == m and g.target_assignment == {M1: {FOO: {1, 2}}}
    from cluster.groups.group_share import InitTopic, SharePartitionMetadata
    meta = SharePartitionMetadata(initializing={BAR: InitTopic("bar", {0}, 5)},
                                  initialized={FOO: InitTopic("foo", {0, 1}, 3)}, deleting={})
    c.shard.replay(state_partition_metadata_record(GID, meta), 1)
    assert c.shard.share.state_metadata[GID] == meta
    # the current-assignment tombstone leaves the member at epoch -1 with nothing; the subscription tombstone
    # removes it
    c.shard.replay(remove_member_records(GID, M1)[0], 2)
    assert (g.members[M1].member_epoch, g.members[M1].assigned) == (-1, {})
    for r in remove_member_records(GID, M1)[1:]:
        c.shard.replay(r, 3)
    assert g.members == {} and g.target_assignment == {}
    c.shard.replay(CoordinatorRecord(ShareGroupStatePartitionMetadataKey(group_id=GID), None), 4)
    c.shard.replay(CoordinatorRecord(ShareGroupMetadataKey(group_id=GID), None), 5)
    assert GID not in c.shard.groups and GID not in c.shard.share.state_metadata


def test_share_group_records_round_trip_through_the_log(ctx):
    """Every record the share machine writes decodes back to itself (types 10-15, Kafka's format)."""
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    ctx.hb(group_id=GID, member_id=M1, member_epoch=-1)
    ctx.shard.share_group_delete_requests([GID], ctx.time)
    ctx.shard.delete_groups([GID], ctx.time)
    assert {r.key_version for r in ctx.log} == set(range(10, 16))
    for r in ctx.log:
        k, v = r.encode()
        back = decode_record(k, v)
        assert back.key == r.key and back.value == r.value


# ---- configuration ---------------------------------------------------------------------------------------------

def test_share_group_configs_kafka_defaults_and_bounds():
    """GroupCoordinatorConfig's share settings: Kafka's defaults, and its checks refuse the broker config
    (ConfigException at startup) with Kafka's messages."""
    from broker.config import BrokerConfig
    from broker.config.config_types import ConfigException
    from cluster.groups.group_config import GroupConfig

    c = GroupConfig.from_props({})
    assert (c.share_heartbeat_interval_ms, c.share_min_heartbeat_interval_ms, c.share_max_heartbeat_interval_ms,
            c.share_session_timeout_ms, c.share_min_session_timeout_ms, c.share_max_session_timeout_ms,
            c.share_max_size, c.share_initialize_retry_interval_ms, c.share_assignors) == \
        (5000, 5000, 15000, 45000, 45000, 60000, 200, 30000, ("simple",))
    assert GroupConfig.from_props({"group.share.assignors":
                                   "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"}).share_assignors \
        == ("simple",)
    bad = {
        "group.share.heartbeat.interval.ms": (20000, "group.share.heartbeat.interval.ms must be less than or equal "
                                                     "to group.share.max.heartbeat.interval.ms"),
        "group.share.session.timeout.ms": (40000, "group.share.session.timeout.ms must be greater than or equal to "
                                                  "group.share.min.session.timeout.ms"),
        "group.share.max.size": (1001, "Invalid value 1001 for configuration group.share.max.size: Value must be no "
                                       "more than 1000"),
        "group.share.assignors": ("simple,simple", "group.share.assignors must contain exactly one assignor, but "
                                                   "found 2"),
    }
    for key, (value, message) in bad.items():
        with pytest.raises(ValueError) as info:
            GroupConfig.from_props({key: value})
        assert str(info.value) == message
    props = {"node.id": 1, "process.roles": "broker,controller", "controller.quorum.voters": "1@localhost:9093",
             "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"}
    BrokerConfig(props).validate()
    with pytest.raises(ConfigException) as info:
        BrokerConfig({**props, "group.share.max.size": 0}).validate()
    assert "group.share.max.size" in str(info.value)


def test_share_partition_configs_kafka_defaults_and_ranges():
    """ShareGroupConfig's share-partition settings: Kafka 4.2's defaults (2000 in-flight record locks, delivery count
    limit 5, 2000 share sessions, a 30 s lock within 15-60 s) and ConfigDef ranges (between(2, 10),
    between(100, 10000), atLeast(1)): a broker config outside them is refused at startup with Kafka's message."""
    from broker.config import BrokerConfig
    from broker.config.config_types import ConfigException
    from cluster.groups.group_config import GROUP_CONFIG_DEFAULTS

    assert {k: GROUP_CONFIG_DEFAULTS[k] for k in (
        "group.share.partition.max.record.locks", "group.share.delivery.count.limit", "group.share.max.share.sessions",
        "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms")} == {
        "group.share.partition.max.record.locks": 2000, "group.share.delivery.count.limit": 5,
        "group.share.max.share.sessions": 2000, "group.share.record.lock.duration.ms": 30000,
        "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000}
    props = {"node.id": 1, "process.roles": "broker,controller", "controller.quorum.voters": "1@localhost:9093",
             "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"}
    for key, ok, bad in (("group.share.delivery.count.limit", (2, 10), {1: "at least 2", 11: "no more than 10"}),
                         ("group.share.partition.max.record.locks", (100, 10000),
                          {99: "at least 100", 10001: "no more than 10000"}),
                         ("group.share.max.share.sessions", (1, 100000), {0: "at least 1"})):
        for value in ok:
            BrokerConfig({**props, key: value}).validate()
        for value, why in bad.items():
            with pytest.raises(ConfigException) as info:
                BrokerConfig({**props, key: value}).validate()
            assert str(info.value) == f"Invalid value {value} for configuration {key}: Value must be {why}"


def test_deleted_topic_leaves_share_state_metadata(ctx):
    """maybeCleanupShareGroupState: a deleted topic leaves the group's share-state partition metadata; the next
    heartbeat's new metadata hash bumps the epoch and the member loses the topic's partitions."""
    ctx.initialize_all(ctx.join(M1, ["foo", "bar"]))
    ctx.hb(group_id=GID, member_id=M1, member_epoch=1)
    assert ctx.share_group().members[M1].assigned.keys() == {FOO, BAR}
    ctx.image = image((FOO, "foo", 6), offset=2)
    res = ctx.shard.share_group_topics_deleted({BAR}, ctx.time)
    (rec,) = res.records
    assert [t.topic_id for t in rec.value.initialized_topics] == [FOO]
    assert ctx.shard.share_group_topics_deleted({BAR}, ctx.time).records == []  # nothing left to clean
    r = ctx.hb(group_id=GID, member_id=M1, member_epoch=2).response
    assert r.member_epoch == 3 and ctx.share_group().members[M1].assigned == {FOO: set(range(6))}
