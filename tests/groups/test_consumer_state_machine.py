"""The consumer-protocol (KIP-848) group state machine, driven directly.

Each test ports the Kafka test named in its docstring from apache/kafka
group-coordinator/src/test/java/org/apache/kafka/coordinator/group/GroupMetadataManagerTest.java,
with its MockPartitionAssignor (an assignor answering a prepared assignment), or from
assignor/RangeAssignorTest.java and assignor/OptimizedUniformAssignmentBuilderTest.java.
"""

from __future__ import annotations

import uuid

import pytest

from cluster.groups.assignors import GroupSpec, MemberSpec, RangeAssignor, UniformAssignor
from cluster.groups.group_classic import ClassicGroupState, GroupError
from cluster.groups.group_consumer import (
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupMember, ConsumerGroupState, MemberState,
    current_assignment_record, epoch_record, member_subscription_record, remove_member_records,
    subscription_metadata_record, target_assignment_epoch_record, target_assignment_record,
)
from cluster.groups.group_coordinator import ReqCtx
from cluster.groups.group_records import Subscription, parse_assignment, serialize_assignment, serialize_subscription
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode as E
from protocol.generated.messages import ConsumerGroupHeartbeatRequest
from protocol.generated.messages.consumer_group_heartbeat_request import TopicPartitions
from protocol.generated.messages.join_group_request import JoinGroupRequestProtocol
from tests.groups.coordinator_ctx import Ctx, join_request, sync_request

FOO, BAR, ZAR = uuid.uuid4().bytes, uuid.uuid4().bytes, uuid.uuid4().bytes
GID = "fooup"


def image(*topics) -> MetadataImage:
    by_name = {name: TopicInfo(name, tid, {p: PartitionInfo(p, (1,), (1,), 1, 0, 0) for p in range(n)})
               for tid, name, n in topics}
    return MetadataImage(offset=1, topics_by_name=by_name, topics_by_id={t.topic_id: t for t in by_name.values()})


class MockAssignor:
    """MockPartitionAssignor: answers the prepared assignment."""

    name = "range"

    def __init__(self) -> None:
        self.prepared: dict = {}

    def assign(self, spec, partitions):
        return {mid: {t: set(ps) for t, ps in a.items()} for mid, a in self.prepared.items() if mid in spec.members}


class CCtx(Ctx):
    def __init__(self, img=None, **config) -> None:
        super().__init__(consumer_assignors=("range",), **config)
        self.image = img if img is not None else image()
        self.assignor = MockAssignor()
        self.shard.consumer.assignors = {"range": self.assignor}

    def hb(self, version=1, **fields):
        req = ConsumerGroupHeartbeatRequest(**fields)
        res = self.shard.consumer_group_heartbeat(ReqCtx("client", "/127.0.0.1", version), req, self.time)
        self._resolve(res)
        if res.error is not None:
            raise res.error
        return res

    def replay_all(self, records):
        for r in records:
            self.shard.replay(r, -1)

    def member_state(self, mid):
        return self.group(GID).members[mid].state

    def group_state(self):
        return self.group(GID).state


def member(mid, epoch, prev, topics, assigned, **kw) -> ConsumerGroupMember:
    return ConsumerGroupMember(mid, member_epoch=epoch, previous_member_epoch=prev, state=MemberState.STABLE,
                               client_id="client", client_host="/127.0.0.1", rebalance_timeout_ms=5000,
                               subscribed_topic_names=tuple(sorted(topics)), server_assignor="range",
                               assigned=assigned, **kw)


def build_group(ctx: CCtx, epoch: int, members: list[ConsumerGroupMember], meta=None) -> None:
    """ConsumerGroupBuilder: the records of a group with members, their target assignment and epochs."""
    recs = [member_subscription_record(GID, m) for m in members]
    recs.append(epoch_record(GID, epoch))
    if meta is not None:
        recs.append(subscription_metadata_record(GID, meta))
    recs += [target_assignment_record(GID, m.member_id, m.assigned) for m in members]
    recs.append(target_assignment_epoch_record(GID, epoch))
    recs += [current_assignment_record(GID, m) for m in members]
    ctx.replay_all(recs)


def tp(tid, *ps):
    return TopicPartitions(topic_id=tid, partitions=list(ps))


def test_consumer_heartbeat_request_validation():
    """testConsumerHeartbeatRequestValidation (and KIP-1082: v1 needs a member id when joining)"""
    ctx = CCtx()
    cases = [
        (dict(), E.INVALID_REQUEST),
        (dict(group_id="   "), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="m", member_epoch=0), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="m", member_epoch=0, rebalance_timeout_ms=5000), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="m", member_epoch=0, rebalance_timeout_ms=5000, topic_partitions=[]),
         E.INVALID_REQUEST),
        (dict(group_id="foo", member_epoch=1), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="m", member_epoch=1, instance_id=""), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="m", member_epoch=1, rack_id=""), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="m", member_epoch=1, server_assignor="bar"), E.UNSUPPORTED_ASSIGNOR),
        (dict(group_id="foo", member_id="m", member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, rebalance_timeout_ms=5000,
              subscribed_topic_names=["foo"], topic_partitions=[]), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="m", member_epoch=-3), E.INVALID_REQUEST),
        (dict(group_id="foo", member_id="", member_epoch=0, rebalance_timeout_ms=5000, topic_partitions=[],
              subscribed_topic_names=["foo"]), E.INVALID_REQUEST),  # v1: the client generates its id
        (dict(group_id="foo", member_id="m", member_epoch=0, rebalance_timeout_ms=5000, topic_partitions=[],
              subscribed_topic_regex="(unclosed"), E.INVALID_REGULAR_EXPRESSION),
    ]
    for fields, code in cases:
        with pytest.raises(GroupError) as e:
            ctx.hb(**fields)
        assert e.value.code == code, fields
    with pytest.raises(GroupError) as e:
        ctx.hb(group_id="foo", member_id="m", member_epoch=1, server_assignor="bar")
    assert e.value.message == "ServerAssignor bar is not supported. Supported assignors: range."


def test_member_id_generation():
    """testMemberIdGeneration (v0: the coordinator generates the member id)"""
    ctx = CCtx()
    res = ctx.hb(version=0, group_id="group-foo", member_epoch=0, server_assignor="range", rebalance_timeout_ms=5000,
                 subscribed_topic_names=["foo", "bar"], topic_partitions=[])
    r = res.response
    assert r.member_id and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    assert r.assignment is not None and r.assignment.topic_partitions == []


def test_unknown_group_id_and_unknown_member_id_joins_consumer_group():
    """testUnknownGroupId, testUnknownMemberIdJoinsConsumerGroup"""
    ctx = CCtx()
    with pytest.raises(GroupError) as e:
        ctx.hb(group_id=GID, member_id="m", member_epoch=100, rebalance_timeout_ms=5000,
               subscribed_topic_names=["foo"], topic_partitions=[])
    assert e.value.code == E.GROUP_ID_NOT_FOUND
    ctx.hb(group_id=GID, member_id="m1", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
           topic_partitions=[])
    with pytest.raises(GroupError) as e:
        ctx.hb(group_id=GID, member_id="m2", member_epoch=1, rebalance_timeout_ms=5000,
               subscribed_topic_names=["foo"], topic_partitions=[])
    assert e.value.code == E.UNKNOWN_MEMBER_ID


def test_consumer_group_member_epoch_validation():
    """testConsumerGroupMemberEpochValidation"""
    ctx = CCtx(image((FOO, "foo", 6)))
    m = member("m", 100, 99, ["foo", "bar"], {FOO: {1, 2, 3}})
    build_group(ctx, 100, [m])
    for epoch, owned in ((200, None), (50, None), (99, None)):
        with pytest.raises(GroupError) as e:
            ctx.hb(group_id=GID, member_id="m", member_epoch=epoch, rebalance_timeout_ms=5000,
                   subscribed_topic_names=["foo", "bar"], topic_partitions=owned)
        assert e.value.code == E.FENCED_MEMBER_EPOCH
    res = ctx.hb(group_id=GID, member_id="m", member_epoch=99, rebalance_timeout_ms=5000,
                 subscribed_topic_names=["foo", "bar"], topic_partitions=[tp(FOO, 1, 2)])
    assert res.response.member_epoch == 100


def test_member_joins_empty_consumer_group():
    """testMemberJoinsEmptyConsumerGroup: the exact records of a first join"""
    ctx = CCtx(image((FOO, "foo", 6), (BAR, "bar", 3)))
    ctx.assignor.prepared = {"m": {FOO: {0, 1, 2, 3, 4, 5}, BAR: {0, 1, 2}}}
    res = ctx.hb(group_id=GID, member_id="m", member_epoch=0, server_assignor="range", rebalance_timeout_ms=5000,
                 subscribed_topic_names=["foo", "bar"], topic_partitions=[])
    r = res.response
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms) == ("m", 1, 5000)
    assert {t.topic_id: t.partitions for t in r.assignment.topic_partitions} == {FOO: [0, 1, 2, 3, 4, 5],
                                                                                 BAR: [0, 1, 2]}
    expected = member("m", 1, 0, ["foo", "bar"], {FOO: {0, 1, 2, 3, 4, 5}, BAR: {0, 1, 2}})
    subscribed = expected.copy(member_epoch=0, previous_member_epoch=0, assigned={})
    assert res.records == [
        member_subscription_record(GID, subscribed),
        subscription_metadata_record(GID, {"foo": (FOO, 6), "bar": (BAR, 3)}),
        epoch_record(GID, 1),
        target_assignment_record(GID, "m", {FOO: {0, 1, 2, 3, 4, 5}, BAR: {0, 1, 2}}),
        target_assignment_epoch_record(GID, 1),
        current_assignment_record(GID, expected),
    ]
    assert ctx.group_state() is ConsumerGroupState.STABLE


def test_updating_subscription_triggers_new_target_assignment():
    """testUpdatingSubscriptionTriggersNewTargetAssignment"""
    ctx = CCtx(image((FOO, "foo", 6), (BAR, "bar", 3)))
    build_group(ctx, 10, [member("m", 10, 9, ["foo"], {FOO: {0, 1, 2, 3, 4, 5}})], {"foo": (FOO, 6)})
    ctx.assignor.prepared = {"m": {FOO: {0, 1, 2, 3, 4, 5}, BAR: {0, 1, 2}}}
    res = ctx.hb(group_id=GID, member_id="m", member_epoch=10, subscribed_topic_names=["foo", "bar"])
    assert res.response.member_epoch == 11
    assert {t.topic_id: t.partitions for t in res.response.assignment.topic_partitions} == {
        FOO: [0, 1, 2, 3, 4, 5], BAR: [0, 1, 2]}
    kinds = [type(r.key).__name__ for r in res.records]
    assert kinds == ["ConsumerGroupMemberMetadataKey", "ConsumerGroupPartitionMetadataKey", "ConsumerGroupMetadataKey",
                     "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMetadataKey",
                     "ConsumerGroupCurrentMemberAssignmentKey"]


def test_leaving_member_bumps_group_epoch():
    """testLeavingMemberBumpsGroupEpoch"""
    ctx = CCtx(image((FOO, "foo", 6), (BAR, "bar", 3), (ZAR, "zar", 1)))
    m1 = member("m1", 10, 9, ["foo", "bar"], {FOO: {0, 1, 2}, BAR: {0, 1}})
    m2 = member("m2", 10, 9, ["foo", "bar", "zar"], {FOO: {3, 4, 5}, BAR: {2}})
    build_group(ctx, 10, [m1, m2], {"foo": (FOO, 6), "bar": (BAR, 3), "zar": (ZAR, 1)})
    res = ctx.hb(group_id=GID, member_id="m2", member_epoch=LEAVE_GROUP_MEMBER_EPOCH, rebalance_timeout_ms=5000,
                 subscribed_topic_names=["foo", "bar"], topic_partitions=[])
    assert (res.response.member_id, res.response.member_epoch) == ("m2", LEAVE_GROUP_MEMBER_EPOCH)
    assert res.records == remove_member_records(GID, "m2") + [
        subscription_metadata_record(GID, {"foo": (FOO, 6), "bar": (BAR, 3)}), epoch_record(GID, 11)]


def test_reconciliation_process():
    """testReconciliationProcess: revocation before assignment, unreleased partitions, epochs"""
    ctx = CCtx(image((FOO, "foo", 6), (BAR, "bar", 3)))
    m1 = member("m1", 10, 9, ["foo", "bar"], {FOO: {0, 1, 2}, BAR: {0, 1}})
    m2 = member("m2", 10, 9, ["foo", "bar"], {FOO: {3, 4, 5}, BAR: {2}})
    build_group(ctx, 10, [m1, m2], {"foo": (FOO, 6), "bar": (BAR, 3)})
    ctx.assignor.prepared = {"m1": {FOO: {0, 1}, BAR: {0}}, "m2": {FOO: {2, 3}, BAR: {2}},
                             "m3": {FOO: {4, 5}, BAR: {1}}}
    assert ctx.group_state() is ConsumerGroupState.STABLE

    def assigned(res):
        a = res.response.assignment
        return None if a is None else {t.topic_id: sorted(t.partitions) for t in a.topic_partitions}

    r = ctx.hb(group_id=GID, member_id="m3", member_epoch=0, rebalance_timeout_ms=5000,
               subscribed_topic_names=["foo", "bar"], server_assignor="range", topic_partitions=[])
    assert r.response.member_epoch == 11 and assigned(r) == {}
    assert r.records[-1] == current_assignment_record(GID, ctx.group(GID).members["m3"])
    assert ctx.member_state("m3") is MemberState.UNRELEASED_PARTITIONS
    assert ctx.group_state() is ConsumerGroupState.RECONCILING

    r = ctx.hb(group_id=GID, member_id="m1", member_epoch=10)
    assert r.response.member_epoch == 10 and assigned(r) == {FOO: [0, 1], BAR: [0]}
    m = ctx.group(GID).members["m1"]
    assert (m.state, m.member_epoch, m.previous_member_epoch, m.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 10, 10, {FOO: {2}, BAR: {1}})

    r = ctx.hb(group_id=GID, member_id="m2", member_epoch=10)
    assert assigned(r) == {FOO: [3], BAR: [2]} and ctx.member_state("m2") is MemberState.UNREVOKED_PARTITIONS

    r = ctx.hb(group_id=GID, member_id="m3", member_epoch=11)
    assert assigned(r) is None and len(r.records) == 1  # previous epoch 0 -> 11, still waiting

    r = ctx.hb(group_id=GID, member_id="m1", member_epoch=10, topic_partitions=[tp(FOO, 0, 1), tp(BAR, 0)])
    assert r.response.member_epoch == 11 and assigned(r) is None
    assert ctx.member_state("m1") is MemberState.STABLE

    r = ctx.hb(group_id=GID, member_id="m2", member_epoch=10)
    assert r.records == [] and ctx.member_state("m2") is MemberState.UNREVOKED_PARTITIONS

    r = ctx.hb(group_id=GID, member_id="m3", member_epoch=11)
    assert assigned(r) == {BAR: [1]} and ctx.member_state("m3") is MemberState.UNRELEASED_PARTITIONS

    r = ctx.hb(group_id=GID, member_id="m3", member_epoch=11)
    assert r.records == [] and assigned(r) is None

    r = ctx.hb(group_id=GID, member_id="m2", member_epoch=10, topic_partitions=[tp(FOO, 3), tp(BAR, 2)])
    assert r.response.member_epoch == 11 and assigned(r) == {FOO: [2, 3], BAR: [2]}
    assert ctx.member_state("m2") is MemberState.STABLE

    r = ctx.hb(group_id=GID, member_id="m3", member_epoch=11, topic_partitions=[tp(BAR, 1)])
    assert assigned(r) == {FOO: [4, 5], BAR: [1]} and ctx.member_state("m3") is MemberState.STABLE
    assert ctx.group_state() is ConsumerGroupState.STABLE


def test_session_timeout_expiration():
    """testSessionTimeoutLifecycle, testSessionTimeoutExpiration"""
    ctx = CCtx(image((FOO, "foo", 6)), consumer_session_timeout_ms=45000)
    ctx.assignor.prepared = {"m": {FOO: {0, 1, 2, 3, 4, 5}}}
    ctx.hb(group_id=GID, member_id="m", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
           topic_partitions=[])
    assert ctx.shard.timer.deadline(f"session-timeout-{GID}-m") == 45000
    ctx.sleep(20000)
    ctx.hb(group_id=GID, member_id="m", member_epoch=1)
    assert ctx.shard.timer.deadline(f"session-timeout-{GID}-m") == 65000
    results = ctx.sleep(45000)
    assert [r for res in results for r in res.records] == remove_member_records(GID, "m") + [
        subscription_metadata_record(GID, {}), epoch_record(GID, 2)]
    assert ctx.group_state() is ConsumerGroupState.EMPTY


def test_rebalance_timeout_expiration():
    """testRebalanceTimeoutLifecycle, testRebalanceTimeoutExpiration: a member that does not revoke in
    time is fenced"""
    ctx = CCtx(image((FOO, "foo", 3)), consumer_session_timeout_ms=45000)
    ctx.assignor.prepared = {"m1": {FOO: {0, 1, 2}}}
    ctx.hb(group_id=GID, member_id="m1", member_epoch=0, rebalance_timeout_ms=12000, subscribed_topic_names=["foo"],
           topic_partitions=[])
    ctx.assignor.prepared = {"m1": {FOO: {0, 1}}, "m2": {FOO: {2}}}
    ctx.hb(group_id=GID, member_id="m2", member_epoch=0, rebalance_timeout_ms=90000, subscribed_topic_names=["foo"],
           topic_partitions=[])
    r = ctx.hb(group_id=GID, member_id="m1", member_epoch=1)
    assert ctx.member_state("m1") is MemberState.UNREVOKED_PARTITIONS
    assert ctx.shard.timer.deadline(f"rebalance-timeout-{GID}-m1") == ctx.time + 12000
    ctx.sleep(10000)
    ctx.hb(group_id=GID, member_id="m2", member_epoch=2)
    ctx.hb(group_id=GID, member_id="m1", member_epoch=1)  # heartbeats, but never revokes
    ctx.sleep(2000)
    assert "m1" not in ctx.group(GID).members  # fenced
    assert r is not None


def test_static_member_temporary_leave_and_rejoin():
    """testNoGroupEpochBumpWhenStaticMemberTemporarilyLeaves, testStaticMemberGetsBackAssignmentUponRejoin,
    testShouldThrownUnreleasedInstanceIdExceptionWhenNewMemberJoinsWithInUseInstanceId"""
    ctx = CCtx(image((FOO, "foo", 6)))
    ctx.assignor.prepared = {"m1": {FOO: {0, 1, 2, 3, 4, 5}}}
    ctx.hb(group_id=GID, member_id="m1", member_epoch=0, instance_id="i1", rebalance_timeout_ms=5000,
           subscribed_topic_names=["foo"], topic_partitions=[])
    with pytest.raises(GroupError) as e:
        ctx.hb(group_id=GID, member_id="m2", member_epoch=0, instance_id="i1", rebalance_timeout_ms=5000,
               subscribed_topic_names=["foo"], topic_partitions=[])
    assert e.value.code == E.UNRELEASED_INSTANCE_ID
    r = ctx.hb(group_id=GID, member_id="m1", member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, instance_id="i1")
    assert r.response.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
    assert [type(x.key).__name__ for x in r.records] == ["ConsumerGroupCurrentMemberAssignmentKey"]
    assert ctx.group(GID).group_epoch == 1
    ctx.assignor.prepared = {"m2": {FOO: {0, 1, 2, 3, 4, 5}}}
    r = ctx.hb(group_id=GID, member_id="m2", member_epoch=0, instance_id="i1", rebalance_timeout_ms=5000,
               subscribed_topic_names=["foo"], topic_partitions=[])
    assert r.response.member_epoch == 1  # no epoch bump: same subscription, same assignment
    assert {t.topic_id: t.partitions for t in r.response.assignment.topic_partitions} == {FOO: [0, 1, 2, 3, 4, 5]}
    assert set(ctx.group(GID).members) == {"m2"}


def test_new_member_is_rejected_with_maximum_members_is_reached():
    """testNewMemberIsRejectedWithMaximumMembersIsReached"""
    ctx = CCtx(image((FOO, "foo", 6)), consumer_max_size=1)
    ctx.hb(group_id=GID, member_id="m1", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
           topic_partitions=[])
    with pytest.raises(GroupError) as e:
        ctx.hb(group_id=GID, member_id="m2", member_epoch=0, rebalance_timeout_ms=5000,
               subscribed_topic_names=["foo"], topic_partitions=[])
    assert e.value.code == E.GROUP_MAX_SIZE_REACHED


def test_consumer_group_states_and_replay_round_trip():
    """testConsumerGroupStates, testReplayConsumerGroup* (state rebuilt from the records alone)"""
    ctx = CCtx(image((FOO, "foo", 6)))
    assert ctx.group(GID) is None
    ctx.assignor.prepared = {"m1": {FOO: {0, 1, 2, 3, 4, 5}}}
    r1 = ctx.hb(group_id=GID, member_id="m1", member_epoch=0, rebalance_timeout_ms=5000,
                subscribed_topic_names=["foo"], topic_partitions=[])
    assert ctx.group_state() is ConsumerGroupState.STABLE
    ctx.assignor.prepared = {"m1": {FOO: {0, 1, 2}}, "m2": {FOO: {3, 4, 5}}}
    r2 = ctx.hb(group_id=GID, member_id="m2", member_epoch=0, rebalance_timeout_ms=5000,
                subscribed_topic_names=["foo"], topic_partitions=[])
    assert ctx.group_state() is ConsumerGroupState.RECONCILING
    fresh = CCtx(image((FOO, "foo", 6)))
    for rec in r1.records + r2.records:
        fresh.shard.replay(rec, 0)
    a, b = ctx.group(GID), fresh.group(GID)
    assert (a.group_epoch, a.assignment_epoch, a.members, a.target_assignment, a.subscription_metadata) == (
        b.group_epoch, b.assignment_epoch, b.members, b.target_assignment, b.subscription_metadata)
    assert fresh.group_state() is ConsumerGroupState.RECONCILING


def test_share_group_records_beside_a_consumer_group():
    """A __consumer_offsets partition Kafka 4.2 wrote with share groups in it (types 10-15) loads: the share
    records rebuild the share group, a share record naming the consumer group is ignored, and the consumer group
    beside them is rebuilt whole."""
    from cluster.groups.group_records import CoordinatorRecord, decode_record
    from protocol.generated import coordinator as C

    ctx = CCtx(image((FOO, "foo", 6)))
    ctx.assignor.prepared = {"m1": {FOO: {0, 1, 2, 3, 4, 5}}}
    r1 = ctx.hb(group_id=GID, member_id="m1", member_epoch=0, rebalance_timeout_ms=5000,
                subscribed_topic_names=["foo"], topic_partitions=[])
    share = [
        CoordinatorRecord(C.ShareGroupMetadataKey(group_id="sg"), C.ShareGroupMetadataValue(epoch=1, metadata_hash=5)),
        CoordinatorRecord(C.ShareGroupMemberMetadataKey(group_id="sg", member_id="s1"),
                          C.ShareGroupMemberMetadataValue(rack_id=None, client_id="c", client_host="/h",
                                                          subscribed_topic_names=["foo"])),
        CoordinatorRecord(C.ShareGroupTargetAssignmentMetadataKey(group_id=GID),
                          C.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=99)),
        CoordinatorRecord(C.ShareGroupStatePartitionMetadataKey(group_id="sg"), None),
    ]
    fresh = CCtx(image((FOO, "foo", 6)))
    for offset, rec in enumerate(share[:2] + r1.records + share[2:]):
        loaded = decode_record(*rec.encode())
        assert loaded.is_share_group == (rec in share)
        fresh.shard.replay(loaded, offset)
    sg = fresh.shard.groups["sg"]
    assert sg.type == "share" and sg.group_epoch == 1 and list(sg.members) == ["s1"]
    a, b = ctx.group(GID), fresh.group(GID)
    assert (a.group_epoch, a.assignment_epoch, a.members, a.target_assignment) == (
        b.group_epoch, b.assignment_epoch, b.members, b.target_assignment)


def test_consumer_group_heartbeat_with_empty_and_stable_classic_group():
    """testConsumerGroupHeartbeatWithEmptyClassicGroup, testConsumerGroupHeartbeatWithStableClassicGroup,
    testConsumerGroupHeartbeatWithNonEmptyClassicGroup (the upgrade needs the consumer embedded protocol)"""
    ctx = CCtx(image((FOO, "foo", 2)))
    # a classic group of a consumer-protocol member, stable at generation 1 with foo-0 and foo-1
    sub = serialize_subscription(Subscription(1, ["foo"]))
    ctx.shard.now_ms = 0
    j = ctx.join(join_request(group_id=GID, protocols=[JoinGroupRequestProtocol(name="range", metadata=sub)],
                              session_timeout_ms=5000, rebalance_timeout_ms=5000))
    ctx.sleep(3000)
    classic_id = j.future.get().member_id
    ctx.sync(sync_request(group_id=GID, member_id=classic_id, generation_id=1,
                          assignments=[(classic_id, serialize_assignment([("foo", [0, 1])], 1))]))
    assert ctx.group(GID).state is ClassicGroupState.STABLE
    # another classic group whose id starts with this one's: its member's session must outlive the upgrade
    ctx.join(join_request(group_id=f"{GID}-x", protocols=[JoinGroupRequestProtocol(name="range", metadata=sub)],
                          session_timeout_ms=5000, rebalance_timeout_ms=5000))
    other = ctx.group(f"{GID}-x")
    other_keys = [f"heartbeat-{GID}-x-{m}" for m in [*other.members, *other.pending_join_members]]
    assert other_keys and all(ctx.shard.timer.is_scheduled(k) for k in other_keys)
    ctx.assignor.prepared = {classic_id: {FOO: {0}}, "m2": {FOO: {1}}}
    r = ctx.hb(group_id=GID, member_id="m2", member_epoch=0, rebalance_timeout_ms=5000,
               subscribed_topic_names=["foo"], topic_partitions=[])
    assert all(ctx.shard.timer.is_scheduled(k) for k in other_keys)
    g = ctx.group(GID)
    assert g.type == "consumer" and set(g.members) == {classic_id, "m2"}
    assert g.members[classic_id].use_classic_protocol and g.members[classic_id].assigned == {FOO: {0, 1}}
    assert r.records[0].key.__class__.__name__ == "GroupMetadataKey" and r.records[0].value is None
    assert r.response.member_epoch == 2 and r.response.assignment.topic_partitions == []  # foo-1 still owned
    # the classic timers are gone; the converted member's session is the consumer group's now
    assert not ctx.shard.timer.is_scheduled(f"heartbeat-{GID}-{classic_id}")
    assert ctx.shard.timer.deadline(f"session-timeout-{GID}-{classic_id}") == ctx.time + 5000
    # the classic member must rejoin: its heartbeat says REBALANCE_IN_PROGRESS
    assert ctx.heartbeat_code(GID, classic_id, 1) == E.REBALANCE_IN_PROGRESS

    # a classic group that is empty is simply replaced
    ctx2 = CCtx(image((FOO, "foo", 2)))
    ctx2.commit(GID, "", -1, {("foo", 0): (1, "")})
    ctx2.assignor.prepared = {"m": {FOO: {0, 1}}}
    ctx2.hb(group_id=GID, member_id="m", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
            topic_partitions=[])
    assert ctx2.group(GID).type == "consumer" and ctx2.shard.offsets.get(GID, "foo", 0).committed_offset == 1


def test_last_consumer_protocol_member_leaving_consumer_group():
    """testLastConsumerProtocolMemberLeavingConsumerGroup: the group downgrades to a classic group and
    rebalances; testJoiningConsumerGroupWithNewDynamicMember: a classic member joins a consumer group"""
    ctx = CCtx(image((FOO, "foo", 2)))
    ctx.assignor.prepared = {"m1": {FOO: {0, 1}}}
    ctx.hb(group_id=GID, member_id="m1", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"],
           topic_partitions=[])
    sub = serialize_subscription(Subscription(1, ["foo"]))
    ctx.assignor.prepared = {"m1": {FOO: {0}}}
    first = ctx.join(join_request(group_id=GID, protocols=[JoinGroupRequestProtocol(name="range", metadata=sub)],
                                  session_timeout_ms=5000, rebalance_timeout_ms=5000), version=9)
    assert first.future.get().error_code == E.MEMBER_ID_REQUIRED
    classic_id = first.future.get().member_id
    ctx.assignor.prepared = {"m1": {FOO: {0}}, classic_id: {FOO: {1}}}
    j = ctx.join(join_request(group_id=GID, member_id=classic_id, session_timeout_ms=5000, rebalance_timeout_ms=5000,
                              protocols=[JoinGroupRequestProtocol(name="range", metadata=sub)]), version=9)
    jr = j.future.get()
    assert jr.error_code == 0 and jr.protocol_name == "range" and jr.generation_id == 2
    s = ctx.sync(sync_request(group_id=GID, member_id=classic_id, generation_id=2, protocol_type="consumer",
                              protocol_name="range"))
    assert parse_assignment(s.future.get().assignment).partitions == []  # foo-1 not released yet by m1
    ctx.hb(group_id=GID, member_id="m1", member_epoch=1, topic_partitions=[tp(FOO, 0)])  # m1 revokes foo-1
    assert ctx.heartbeat_code(GID, classic_id, 2) == E.REBALANCE_IN_PROGRESS  # now free: rejoin to get it
    # the only consumer-protocol member leaves: downgrade
    r = ctx.hb(group_id=GID, member_id="m1", member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
    g = ctx.group(GID)
    assert g.type == "classic" and g.state is ClassicGroupState.PREPARING_REBALANCE
    assert list(g.members) == [classic_id] and g.generation_id == 2
    assert r.records[-1].key.__class__.__name__ == "GroupMetadataKey"


# ---- assignors ---------------------------------------------------------------------------------------------

def test_range_assignor_co_partitioned_and_heterogeneous():
    """RangeAssignorTest.testOneMemberSubscribedToNonexistentTopic / testFirstAssignmentTwoMembersTwoTopics-
    SameSubscriptions / testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions (static first)"""
    a, b = b"A" * 16, b"B" * 16
    spec = GroupSpec({"m1": MemberSpec({a, b}, {}), "m2": MemberSpec({a, b}, {})}, True)
    out = RangeAssignor().assign(spec, {a: 3, b: 3})
    assert out == {"m1": {a: {0, 1}, b: {0, 1}}, "m2": {a: {2}, b: {2}}}
    c = b"C" * 16
    spec = GroupSpec({"m1": MemberSpec({a, b}, {}), "m2": MemberSpec({c}, {}),
                      "m3": MemberSpec({b, c}, {}, instance_id="i3")}, False)
    out = RangeAssignor().assign(spec, {a: 3, b: 3, c: 2})
    assert out == {"m3": {b: {0, 1}, c: {0}}, "m1": {a: {0, 1, 2}, b: {2}}, "m2": {c: {1}}}


def test_uniform_assignor_balanced_and_sticky():
    """OptimizedUniformAssignmentBuilderTest.testReassignmentWhenOneMemberAddedAfterInitialAssignment /
    testReassignmentWhenOneMemberRemovedAfterInitialAssignment: balance, and nothing moves that need not"""
    t = b"T" * 16
    first = UniformAssignor().assign(GroupSpec({"m1": MemberSpec({t}, {}), "m2": MemberSpec({t}, {})}, True), {t: 6})
    assert sorted(len(x[t]) for x in first.values()) == [3, 3]
    spec = GroupSpec({"m1": MemberSpec({t}, first["m1"]), "m2": MemberSpec({t}, first["m2"]),
                      "m3": MemberSpec({t}, {})}, True)
    second = UniformAssignor().assign(spec, {t: 6})
    assert sorted(len(x.get(t, ())) for x in second.values()) == [2, 2, 2]
    assert second["m1"][t] <= first["m1"][t] and second["m2"][t] <= first["m2"][t]  # only moves to m3
    spec = GroupSpec({"m1": MemberSpec({t}, second["m1"]), "m3": MemberSpec({t}, second["m3"])}, True)
    third = UniformAssignor().assign(spec, {t: 6})
    assert third["m1"][t] >= second["m1"][t] and third["m3"][t] >= second["m3"][t]
    assert third["m1"][t] | third["m3"][t] == set(range(6)) and not third["m1"][t] & third["m3"][t]
    # heterogeneous subscriptions: each topic spread over its subscribers, every partition once
    u = b"U" * 16
    spec = GroupSpec({"m1": MemberSpec({t}, {}), "m2": MemberSpec({t, u}, {}), "m3": MemberSpec({u}, {})}, False)
    out = UniformAssignor().assign(spec, {t: 4, u: 4})
    counts = sorted(sum(len(ps) for ps in x.values()) for x in out.values())
    assert counts == [2, 3, 3] or counts == [2, 2, 4] or max(counts) - min(counts) <= 1
    assert sorted(p for x in out.values() for p in x.get(t, ())) == [0, 1, 2, 3]
    assert sorted(p for x in out.values() for p in x.get(u, ())) == [0, 1, 2, 3]


def test_migration_policy_disabled_keeps_the_classic_group():
    """testConsumerGroupHeartbeatWithNonEmptyClassicGroup under group.consumer.migration.policy=disabled
    (and =downgrade): a consumer-protocol member cannot join a non-empty classic group"""
    for policy in ("disabled", "downgrade"):
        ctx = CCtx(image((FOO, "foo", 2)), migration_policy=policy)
        sub = serialize_subscription(Subscription(1, ["foo"]))
        ctx.join(join_request(group_id=GID, protocols=[JoinGroupRequestProtocol(name="range", metadata=sub)],
                              session_timeout_ms=5000, rebalance_timeout_ms=5000))
        ctx.sleep(3000)
        with pytest.raises(GroupError) as e:
            ctx.hb(group_id=GID, member_id="m2", member_epoch=0, rebalance_timeout_ms=5000,
                   subscribed_topic_names=["foo"], topic_partitions=[])
        assert e.value.code == E.GROUP_ID_NOT_FOUND and ctx.group(GID).type == "classic"


def test_regex_refresh_keeps_the_topics_the_refreshing_member_may_see():
    """KAFKA-18813 (GroupMetadataManager.refreshRegularExpressions with an authorizer): a heartbeat carrying a
    topic filter resolves the group's regexes to the topics it lets through; a new metadata image refreshes
    them with the next such heartbeat; without a filter a regex resolves to every matching topic."""
    ctx = CCtx(image((FOO, "foo", 1), (BAR, "bar", 1)))
    hidden = {"bar"}

    def hb(**fields):
        rctx = ReqCtx("client", "/127.0.0.1", 1, topic_filter=lambda names: frozenset(names - hidden))
        res = ctx.shard.consumer_group_heartbeat(rctx, ConsumerGroupHeartbeatRequest(**fields), ctx.time)
        ctx._resolve(res)
        assert res.error is None
        return res.response

    joined = hb(group_id=GID, member_id="m1", member_epoch=0, rebalance_timeout_ms=5000, topic_partitions=[],
                subscribed_topic_regex="foo|bar|zar")
    assert set(ctx.group(GID).subscription_metadata) == {"foo"}
    assert ctx.shard.consumer.regex_topics[GID]["foo|bar|zar"][1] == {"foo"}
    ctx.image = MetadataImage(offset=2, topics_by_name={**ctx.image.topics_by_name, "zar": TopicInfo(
        "zar", ZAR, {0: PartitionInfo(0, (1,), (1,), 1, 0, 0)})},
        topics_by_id={**ctx.image.topics_by_id, ZAR: None})
    hidden = set()
    hb(group_id=GID, member_id="m1", member_epoch=joined.member_epoch)
    assert set(ctx.group(GID).subscription_metadata) == {"foo", "bar", "zar"}
    # at the same image the resolution is not refreshed again, whoever heartbeats (Kafka refreshes a regex only
    # once it is stale): a member that may see only foo joins and the regex keeps all three topics
    hidden = {"bar", "zar"}
    hb(group_id=GID, member_id="m2", member_epoch=0, rebalance_timeout_ms=5000, topic_partitions=[],
       subscribed_topic_names=["foo"])
    assert ctx.shard.consumer.regex_topics[GID]["foo|bar|zar"][1] == {"foo", "bar", "zar"}
