"""The classic group state machine, driven directly with a mock clock.

Each test ports the Kafka test named in its docstring: apache/kafka
group-coordinator/src/test/java/org/apache/kafka/coordinator/group/GroupMetadataManagerTest.java
(the classic-group cases), with the defaults of GroupMetadataManagerTestContext (initial rebalance
delay 3000 ms, JoinGroup session/rebalance timeouts 500 ms, the new-member join timeout 5 minutes).
"""

from __future__ import annotations

import pytest

from cluster.groups.group_classic import ClassicGroupMember
from cluster.groups.group_classic import ClassicGroupState as S
from cluster.groups.group_record_helpers import group_metadata_record
from protocol.errors import ErrorCode as E
from tests.groups.coordinator_ctx import (
    NEW_MEMBER_JOIN_TIMEOUT_MS, UNKNOWN_MEMBER_ID, Ctx, join_request, sync_request, to_protocols,
)

RANGE = to_protocols("range")


def _no_records(results) -> bool:
    return all(not r.records for r in results)


def test_join_group_unknown_member_new_group():
    """testJoinGroupUnknownMemberNewGroup"""
    ctx = Ctx()
    o = ctx.join(join_request(member_id="member-id"))
    assert o.records == [] and o.future.get().error_code == E.UNKNOWN_MEMBER_ID
    o = ctx.join(join_request(member_id="member-id", instance_id="group-instance-id"))
    assert o.records == [] and o.future.get().error_code == E.UNKNOWN_MEMBER_ID


def test_classic_group_join_inconsistent_protocol_type():
    """testClassicGroupJoinInconsistentProtocolType"""
    ctx = Ctx()
    ctx.create_classic_group()
    ctx.join_as_dynamic_member_and_complete_join(join_request(protocols=RANGE))
    o = ctx.join(join_request(protocol_type="connect", protocols=to_protocols("range")))
    assert o.records == [] and o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_join_group_with_empty_protocol_type():
    """testJoinGroupWithEmptyProtocolType"""
    ctx = Ctx()
    ctx.create_classic_group()
    o = ctx.join(join_request(protocol_type="", protocols=RANGE))
    assert o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    o = ctx.join(join_request(protocol_type="", protocols=RANGE, instance_id="group-instance-id"), version=9)
    assert o.records == [] and o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_join_group_with_empty_group_protocol():
    """testJoinGroupWithEmptyGroupProtocol"""
    ctx = Ctx()
    ctx.create_classic_group()
    o = ctx.join(join_request(protocols=[]))
    assert o.records == [] and o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_new_member_join_expiration():
    """testNewMemberJoinExpiration"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    req = join_request(protocols=RANGE, session_timeout_ms=5000 + NEW_MEMBER_JOIN_TIMEOUT_MS,
                       rebalance_timeout_ms=2 * NEW_MEMBER_JOIN_TIMEOUT_MS)
    first = ctx.join_as_dynamic_member_and_complete_join(req)
    assert first.leader == first.member_id and first.error_code == 0
    assert not any(m.is_new for m in group.members.values())
    req.session_timeout_ms = req.rebalance_timeout_ms = 5000
    second = ctx.join(req)
    assert second.records == [] and not second.future.done
    assert group.num_members() == 2 and sum(m.is_new for m in group.members.values()) == 1
    assert _no_records(ctx.sleep(NEW_MEMBER_JOIN_TIMEOUT_MS))
    assert second.future.get().error_code == E.UNKNOWN_MEMBER_ID
    assert list(group.members) == [first.member_id]


def test_join_group_inconsistent_group_protocol_and_second_join():
    """testJoinGroupInconsistentGroupProtocol, testJoinGroupSecondJoinInconsistentProtocol"""
    ctx = Ctx()
    ctx.create_classic_group()
    first = ctx.join(join_request(protocols=to_protocols("range")))
    assert not first.future.done
    o = ctx.join(join_request(protocols=to_protocols("roundrobin")))
    assert o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    ctx.sleep(3000)
    assert first.future.get().error_code == 0
    # the member rejoins with a protocol the group does not support
    o = ctx.join(join_request(member_id=first.future.get().member_id, protocols=to_protocols("roundrobin")))
    assert o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_static_member_join_as_first_member():
    """testStaticMemberJoinAsFirstMember"""
    ctx = Ctx()
    ctx.create_classic_group()
    o = ctx.join(join_request(instance_id="group-instance-id", protocols=RANGE), version=9)
    assert o.records == [] and not o.future.done


def test_static_member_rejoin_with_explicit_unknown_member_id():
    """testStaticMemberRejoinWithExplicitUnknownMemberId"""
    ctx = Ctx()
    ctx.create_classic_group()
    req = join_request(instance_id="group-instance-id", protocols=RANGE, session_timeout_ms=5000,
                       rebalance_timeout_ms=5000)
    ctx.join(req, version=9)
    ctx.sleep(3000)
    o = ctx.join(join_request(member_id="unknown-member-id", instance_id="group-instance-id", protocols=RANGE,
                              session_timeout_ms=5000, rebalance_timeout_ms=5000), version=9)
    assert o.future.get().error_code == E.FENCED_INSTANCE_ID


def test_join_group_unknown_consumer_existing_group():
    """testJoinGroupUnknownConsumerExistingGroup"""
    ctx = Ctx()
    ctx.create_classic_group()
    ctx.join_as_dynamic_member_and_complete_join(join_request(protocols=RANGE, session_timeout_ms=5000,
                                                              rebalance_timeout_ms=5000))
    o = ctx.join(join_request(member_id="other-member-id", protocols=RANGE))
    assert o.records == [] and o.future.get().error_code == E.UNKNOWN_MEMBER_ID


def test_join_group_returns_the_protocol_type_and_omits_it_on_error():
    """testJoinGroupReturnsTheProtocolType, testJoinGroupProtocolTypeIsNotProvidedWhenAnErrorOccurs"""
    ctx = Ctx()
    ctx.create_classic_group()
    o = ctx.join(join_request(member_id="member-id", protocols=RANGE))
    assert o.future.get().error_code == E.UNKNOWN_MEMBER_ID and o.future.get().protocol_type is None
    leader = ctx.join(join_request(protocols=RANGE))
    follower = ctx.join(join_request(protocols=RANGE))
    ctx.sleep(3000)
    assert leader.future.get().protocol_type == follower.future.get().protocol_type == "consumer"


def test_delay_initial_rebalance_by_group_initial_rebalance_delay_on_empty_group():
    """testDelayInitialRebalanceByGroupInitialRebalanceDelayOnEmptyGroup"""
    ctx = Ctx()
    ctx.create_classic_group()
    o = ctx.join(join_request(protocols=RANGE))
    assert o.records == [] and not o.future.done
    assert _no_records(ctx.sleep(1500))
    assert not o.future.done
    assert _no_records(ctx.sleep(1501))
    assert o.future.get().error_code == 0


def test_reset_rebalance_delay_when_new_member_joins_group_during_initial_rebalance():
    """testResetRebalanceDelayWhenNewMemberJoinsGroupDuringInitialRebalance"""
    ctx = Ctx()
    ctx.create_classic_group()
    req = join_request(protocols=RANGE, rebalance_timeout_ms=3000 * 3)
    first = ctx.join(req)
    ctx.sleep(2999)
    second = ctx.join(req)
    assert not first.future.done and not second.future.done
    ctx.sleep(2)
    ctx.sleep(1501)
    assert not first.future.done and not second.future.done
    ctx.sleep(1500)
    assert first.future.get().error_code == 0 and second.future.get().error_code == 0


def test_delay_rebalance_upto_rebalance_timeout():
    """testDelayRebalanceUptoRebalanceTimeout"""
    ctx = Ctx()
    ctx.create_classic_group()
    req = join_request(protocols=RANGE, rebalance_timeout_ms=3000 * 2)
    first, second = ctx.join(req), ctx.join(req)
    ctx.sleep(3001)
    third = ctx.join(req)
    assert not third.future.done
    ctx.sleep(2999)
    assert not (first.future.done or second.future.done or third.future.done)
    ctx.sleep(1)
    assert all(o.future.get().error_code == 0 for o in (first, second, third))


def test_join_group_replace_static_member():
    """testJoinGroupReplaceStaticMember"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    req = join_request(instance_id="group-instance-id", protocols=RANGE, session_timeout_ms=5000)
    old = ctx.join(req)
    assert not old.future.done and group.num_members_awaiting_join == 1 and group.num_members() == 1
    new = ctx.join(req)
    assert not new.future.done and old.future.get().error_code == E.FENCED_INSTANCE_ID
    assert group.num_members_awaiting_join == 1 and group.num_members() == 1
    ctx.sleep(3000)
    assert new.future.get().error_code == 0
    assert group.num_members_awaiting_join == 0 and group.num_members() == 1


def test_heartbeat_expiration_should_remove_pending_member():
    """testHeartbeatExpirationShouldRemovePendingMember"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    o = ctx.join(join_request(protocols=RANGE, session_timeout_ms=1000), version=4)
    assert o.future.get().error_code == E.MEMBER_ID_REQUIRED
    assert group.num_members() == 0 and len(group.pending_join_members) == 1
    ctx.sleep(1000)
    assert len(group.pending_join_members) == 0


def test_heartbeat_expiration_should_remove_member():
    """testHeartbeatExpirationShouldRemoveMember"""
    ctx = Ctx(initial_rebalance_delay_ms=10 * 60 * 1000)
    group = ctx.create_classic_group()
    o = ctx.join(join_request(protocols=RANGE))
    assert not o.future.done and group.num_members() == 1
    timeouts = ctx.sleep(NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert len(timeouts) == 1
    assert timeouts[0].records == [group_metadata_record(group, group.group_assignment())]
    assert o.future.get().error_code == E.UNKNOWN_MEMBER_ID
    assert group.num_members() == 0 and group.state is S.EMPTY


def test_existing_member_join_dead_group():
    """testExistingMemberJoinDeadGroup"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    resp = ctx.join_as_dynamic_member_and_complete_join(join_request(protocols=RANGE))
    group.transition_to(S.DEAD, ctx.time)
    o = ctx.join(join_request(member_id=resp.member_id, protocols=RANGE))
    assert o.future.get().error_code == E.COORDINATOR_NOT_AVAILABLE


def test_join_group_existing_pending_member_with_group_instance_id_throws():
    """testJoinGroupExistingPendingMemberWithGroupInstanceIdThrowsException"""
    ctx = Ctx()
    ctx.create_classic_group()
    o = ctx.join(join_request(protocols=RANGE), version=4)
    with pytest.raises(AssertionError):
        ctx.join(join_request(member_id=o.future.get().member_id, instance_id="group-instance-id", protocols=RANGE))


def test_join_group_existing_member_updated_metadata_triggers_rebalance():
    """testJoinGroupExistingMemberUpdatedMetadataTriggersRebalance"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    resp = ctx.join_as_dynamic_member_and_complete_join(join_request(protocols=RANGE))
    assert group.state is S.COMPLETING_REBALANCE and group.generation_id == 1
    protocols = to_protocols("range", "roundrobin")
    o = ctx.join(join_request(member_id=resp.member_id, protocols=protocols))
    assert o.future.get().error_code == 0
    assert group.state is S.COMPLETING_REBALANCE and group.generation_id == 2
    assert group.member(resp.member_id).supported_protocols == [(p.name, p.metadata) for p in protocols]


def test_join_group_as_existing_leader_triggers_rebalance_in_stable_state():
    """testJoinGroupAsExistingLeaderTriggersRebalanceInStableState"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    resp = ctx.join_as_dynamic_member_and_complete_join(join_request(protocols=RANGE))
    assert group.is_leader(resp.member_id)
    group.transition_to(S.STABLE, ctx.time)
    o = ctx.join(join_request(member_id=resp.member_id, protocols=RANGE))
    assert o.future.get().error_code == 0
    assert group.state is S.COMPLETING_REBALANCE and group.generation_id == 2


def test_join_group_existing_member_does_not_trigger_rebalance_in_stable_state():
    """testJoinGroupExistingMemberDoesNotTriggerRebalanceInStableState,
    testJoinGroupAsExistingMemberWithUpdatedMetadataTriggersRebalanceInStableState"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    req = join_request(protocols=RANGE)
    leader = ctx.join_as_dynamic_member_and_complete_join(req)
    member = ctx.join(req)
    assert not member.future.done
    lj = ctx.join(join_request(member_id=leader.leader, protocols=RANGE))
    assert lj.future.done and member.future.done
    assert group.state is S.COMPLETING_REBALANCE and group.num_members() == 2 and group.generation_id == 2
    mid = member.future.get().member_id
    group.transition_to(S.STABLE, ctx.time)
    same = ctx.join(join_request(member_id=mid, protocols=RANGE))
    assert same.future.get().error_code == 0 and same.future.get().generation_id == 2
    assert group.state is S.STABLE
    changed = ctx.join(join_request(member_id=mid, protocols=to_protocols("range", "roundrobin")))
    assert not changed.future.done and group.state is S.PREPARING_REBALANCE
    ctx.join(join_request(member_id=leader.leader, protocols=RANGE))
    assert changed.future.get().error_code == 0 and group.generation_id == 3


def test_join_group_existing_member_in_empty_state():
    """testJoinGroupExistingMemberInEmptyState"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    resp = ctx.join_as_dynamic_member_and_complete_join(join_request(protocols=RANGE))
    group.transition_to(S.PREPARING_REBALANCE, ctx.time)
    group.transition_to(S.EMPTY, ctx.time)
    o = ctx.join(join_request(member_id=resp.member_id, protocols=RANGE))
    assert o.future.get().error_code == E.UNKNOWN_MEMBER_ID and o.future.get().generation_id == -1


def test_complete_join_remove_not_yet_rejoined_dynamic_members():
    """testCompleteJoinRemoveNotYetRejoinedDynamicMembers"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    req = join_request(protocols=RANGE, session_timeout_ms=1000, rebalance_timeout_ms=1000)
    ctx.join_as_dynamic_member_and_complete_join(req)
    member = ctx.join(req)
    assert not member.future.done and group.num_members() == 2 and group.state is S.PREPARING_REBALANCE
    ctx.sleep(1000)
    assert member.future.get().error_code == 0
    assert list(group.members) == [member.future.get().member_id] and group.generation_id == 2


def test_complete_join_phase_in_empty_state_skips_rebalance():
    """testCompleteJoinPhaseInEmptyStateSkipsRebalance"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    ctx.join(join_request(protocols=RANGE, session_timeout_ms=1000, rebalance_timeout_ms=1000))
    assert group.generation_id == 0 and group.state is S.PREPARING_REBALANCE
    group.transition_to(S.DEAD, ctx.time)
    ctx.sleep(3000)
    assert group.generation_id == 0


def test_replace_static_member_in_stable_state_no_error():
    """testReplaceStaticMemberInStableStateNoError (both supportSkippingAssignment values)"""
    for skip in (False, True):
        ctx = Ctx()
        group = ctx.create_classic_group()
        req = join_request(instance_id="group-instance-id", protocols=RANGE)
        first = ctx.join(req, version=9 if skip else 4)
        ctx.sleep(3000)
        old_id = first.future.get().member_id
        group.transition_to(S.STABLE, ctx.time)
        protocols = to_protocols("range", "roundrobin")
        o = ctx.join(join_request(instance_id="group-instance-id", protocols=protocols, rebalance_timeout_ms=7000,
                                  session_timeout_ms=4500), version=9 if skip else 4)
        assert o.records == [group_metadata_record(group, group.group_assignment())]
        resp = o.future.get()
        new_id = group.static_member_id("group-instance-id")
        assert resp.member_id == new_id != old_id
        assert resp.generation_id == 1 and resp.protocol_name == "range" and resp.skip_assignment is skip
        assert resp.leader == (new_id if skip else old_id)
        assert [m.member_id for m in resp.members] == ([new_id] if skip else [])
        m = group.member(new_id)
        assert (m.rebalance_timeout_ms, m.session_timeout_ms) == (7000, 4500)
        assert group.num_members() == 1 and group.generation_id == 1 and group.state is S.STABLE


def test_replace_static_member_in_stable_state_with_updated_protocol_triggers_rebalance():
    """testReplaceStaticMemberInStableStateWithUpdatedProtocolTriggersRebalance"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    req = join_request(instance_id="group-instance-id", protocols=to_protocols("range", "roundrobin"))
    ctx.join(req, version=9)
    ctx.sleep(3000)
    group.transition_to(S.STABLE, ctx.time)
    o = ctx.join(join_request(instance_id="group-instance-id", protocols=to_protocols("roundrobin")), version=9)
    assert o.records == [] and group.state is S.COMPLETING_REBALANCE or group.state is S.PREPARING_REBALANCE


def test_replace_static_member_in_completing_rebalance_state_triggers_rebalance():
    """testReplaceStaticMemberInCompletingRebalanceStateTriggersRebalance"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    req = join_request(instance_id="group-instance-id", protocols=RANGE)
    ctx.join(req, version=9)
    ctx.sleep(3000)
    assert group.state is S.COMPLETING_REBALANCE
    o = ctx.join(req, version=9)
    # the only member rejoined: the join phase completes at once with a new generation
    assert o.future.get().error_code == 0 and group.generation_id == 2
    assert group.state is S.COMPLETING_REBALANCE


def test_static_member_fence_duplicate_rejoined_follower():
    """testStaticMemberFenceDuplicateRejoinedFollower"""
    ctx = Ctx()
    leader_id, follower_id, _ = ctx.static_members_join_and_rebalance("group-id", "leader-instance-id",
                                                                      "follower-instance-id")
    group = ctx.group()
    ctx.join(join_request(protocols=RANGE))
    assert group.state is S.PREPARING_REBALANCE
    old = ctx.join(join_request(member_id=follower_id, instance_id="follower-instance-id", protocols=RANGE))
    assert old.records == [] and not old.future.done
    ctx.join(join_request(instance_id="follower-instance-id", protocols=RANGE))
    resp = old.future.get()
    assert resp.error_code == E.FENCED_INSTANCE_ID and resp.member_id == follower_id
    assert resp.protocol_name is None and resp.protocol_type is None and resp.generation_id == -1
    assert group.state is S.PREPARING_REBALANCE


def test_static_member_fence_duplicate_syncing_follower_after_member_id_changed():
    """testStaticMemberFenceDuplicateSyncingFollowerAfterMemberIdChanged"""
    ctx = Ctx()
    leader_id, follower_id, gen = ctx.static_members_join_and_rebalance("group-id", "leader-instance-id",
                                                                        "follower-instance-id")
    group = ctx.group()
    # the leader rejoins (rebalance), then the follower too: both get generation 2
    lj = ctx.join(join_request(member_id=leader_id, instance_id="leader-instance-id",
                               protocols=to_protocols("range", "roundrobin")))
    fj = ctx.join(join_request(member_id=follower_id, instance_id="follower-instance-id",
                               protocols=to_protocols("range", "roundrobin")))
    assert lj.future.get().generation_id == fj.future.get().generation_id == 2
    # the follower syncs (parked: the leader has not synced)
    fs = ctx.sync(sync_request(member_id=follower_id, generation_id=2, instance_id="follower-instance-id"))
    assert not fs.future.done
    # a duplicate follower with an unknown member id replaces it: the syncing one is fenced
    dup = ctx.join(join_request(instance_id="follower-instance-id", protocols=to_protocols("range", "roundrobin")))
    assert fs.future.get().error_code == E.FENCED_INSTANCE_ID
    assert group.state is S.PREPARING_REBALANCE
    assert not dup.future.done


def test_static_member_rejoin_as_follower_with_mismatched_instance_id():
    """testStaticMemberRejoinAsFollowerWithMismatchedInstanceId,
    testStaticMemberRejoinAsLeaderWithMismatchedInstanceId"""
    ctx = Ctx()
    leader_id, follower_id, _ = ctx.static_members_join_and_rebalance("group-id", "leader-instance-id",
                                                                      "follower-instance-id")
    o = ctx.join(join_request(member_id=follower_id, instance_id="leader-instance-id", protocols=RANGE))
    assert o.future.get().error_code == E.FENCED_INSTANCE_ID
    o = ctx.join(join_request(member_id=leader_id, instance_id="follower-instance-id", protocols=RANGE))
    assert o.future.get().error_code == E.FENCED_INSTANCE_ID


def test_static_member_sync_as_leader_with_invalid_member_id():
    """testStaticMemberSyncAsLeaderWithInvalidMemberId"""
    ctx = Ctx()
    ctx.static_members_join_and_rebalance("group-id", "leader-instance-id", "follower-instance-id")
    o = ctx.sync(sync_request(member_id="invalid-member-id", generation_id=1, instance_id="leader-instance-id"))
    assert o.future.get().error_code == E.FENCED_INSTANCE_ID


def test_get_different_static_member_id_after_each_rejoin():
    """testGetDifferentStaticMemberIdAfterEachRejoin"""
    ctx = Ctx()
    leader_id, _, _ = ctx.static_members_join_and_rebalance("group-id", "leader-instance-id", "follower-instance-id")
    seen = {leader_id}
    for _ in range(5):
        o = ctx.join(join_request(instance_id="leader-instance-id", protocols=to_protocols("range", "roundrobin")),
                     version=9)
        mid = o.future.get().member_id
        assert mid not in seen and o.future.get().error_code == 0
        seen.add(mid)


def test_static_member_join_with_unknown_instance_id_and_known_member_id():
    """testStaticMemberJoinWithUnknownInstanceIdAndKnownMemberId"""
    ctx = Ctx()
    leader_id, _, _ = ctx.static_members_join_and_rebalance("group-id", "leader-instance-id", "follower-instance-id")
    o = ctx.join(join_request(member_id=leader_id, instance_id="unknown-instance-id", protocols=RANGE))
    assert o.future.get().error_code == E.UNKNOWN_MEMBER_ID


def test_static_member_follower_fail_to_rejoin_before_rebalance_timeout():
    """testStaticMemberFollowerFailToRejoinBeforeRebalanceTimeout: static members are not removed when
    the join phase completes without them"""
    ctx = Ctx()
    leader_id, follower_id, _ = ctx.static_members_join_and_rebalance(
        "group-id", "leader-instance-id", "follower-instance-id", rebalance_timeout_ms=10000, session_timeout_ms=60000)
    group = ctx.group()
    lj = ctx.join(join_request(member_id=leader_id, instance_id="leader-instance-id",
                               protocols=to_protocols("range", "roundrobin"), rebalance_timeout_ms=10000,
                               session_timeout_ms=60000))
    assert not lj.future.done
    ctx.sleep(10000)
    assert lj.future.get().error_code == 0 and lj.future.get().generation_id == 2
    assert set(group.members) == {leader_id, follower_id}


def test_sync_group_errors():
    """testSyncGroupFromUnknownGroup, testSyncGroupFromUnknownMember, testSyncGroupFromIllegalGeneration,
    testSyncGroupReturnsAnErrorWhenProtocolTypeIsInconsistent / ...NameIsInconsistent,
    testSyncGroupSucceedWhenProtocolTypeAndNameAreNotProvided"""
    ctx = Ctx()
    o = ctx.sync(sync_request(member_id="member-id", generation_id=1))
    assert o.records == [] and o.future.get().error_code == E.UNKNOWN_MEMBER_ID
    ctx.create_classic_group()
    req = join_request(instance_id="leader-instance-id", protocols=RANGE)
    ctx.join(req, version=9)
    ctx.sleep(3000)
    mid = ctx.group().leader_id
    o = ctx.sync(sync_request(member_id=mid, generation_id=2))
    assert o.future.get().error_code == E.ILLEGAL_GENERATION
    o = ctx.sync(sync_request(member_id=mid, generation_id=1, protocol_type="connect"))
    assert o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    o = ctx.sync(sync_request(member_id=mid, generation_id=1, protocol_name="roundrobin"))
    assert o.future.get().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    o = ctx.sync(sync_request(member_id=mid, generation_id=1, assignments=[(mid, b"abc")]))
    assert o.future.get().error_code == 0 and o.future.get().assignment == b"abc"
    o = ctx.sync(sync_request(member_id="unknown-member-id", generation_id=1))
    assert o.records == [] and o.future.get().error_code == E.UNKNOWN_MEMBER_ID
    assert o.future.get().assignment == b""


def _two_member_group(ctx):
    leader = ctx.join_as_dynamic_member_and_complete_rebalance("group-id")
    req = join_request(protocols=RANGE, rebalance_timeout_ms=10000, session_timeout_ms=5000)
    follower = ctx.join(req)
    assert not follower.future.done
    lj = ctx.join(join_request(member_id=leader.member_id, protocols=RANGE, rebalance_timeout_ms=10000,
                               session_timeout_ms=5000))
    assert lj.future.get().error_code == 0 and follower.future.get().error_code == 0
    assert lj.future.get().leader == follower.future.get().leader == leader.member_id
    return leader.member_id, follower.future.get().member_id, lj.future.get().generation_id


def test_leader_failure_in_sync_group():
    """testLeaderFailureInSyncGroup"""
    ctx = Ctx()
    leader_id, follower_id, gen = _two_member_group(ctx)
    group = ctx.group()
    fs = ctx.sync(sync_request(member_id=follower_id, generation_id=gen))
    assert fs.records == [] and not fs.future.done
    timeouts = ctx.sleep(10000)
    assert len(timeouts) <= 2 and _no_records(timeouts)
    assert fs.future.get().error_code == E.REBALANCE_IN_PROGRESS
    assert list(group.members) == [follower_id] and group.state is S.PREPARING_REBALANCE


def test_sync_group_follower_after_leader_and_leader_after_follower():
    """testSyncGroupFollowerAfterLeader, testSyncGroupLeaderAfterFollower"""
    for follower_first in (False, True):
        ctx = Ctx()
        leader_id, follower_id, gen = _two_member_group(ctx)
        group = ctx.group()
        assignments = [(leader_id, b"leader"), (follower_id, b"follower")]
        if follower_first:
            fs = ctx.sync(sync_request(member_id=follower_id, generation_id=gen))
            assert not fs.future.done
            ls = ctx.sync(sync_request(member_id=leader_id, generation_id=gen, assignments=assignments))
            assert ls.records == [group_metadata_record(group, dict(assignments))]
        else:
            ls = ctx.sync(sync_request(member_id=leader_id, generation_id=gen, assignments=assignments))
            assert ls.records == [group_metadata_record(group, dict(assignments))]
            fs = ctx.sync(sync_request(member_id=follower_id, generation_id=gen))
            assert fs.records == []
        assert ls.future.get().assignment == b"leader" and fs.future.get().assignment == b"follower"
        assert group.state is S.STABLE


def test_join_group_from_unchanged_follower_does_not_rebalance():
    """testJoinGroupFromUnchangedFollowerDoesNotRebalance"""
    ctx = Ctx()
    leader_id, follower_id, gen = _two_member_group(ctx)
    o = ctx.join(join_request(member_id=follower_id, protocols=RANGE, rebalance_timeout_ms=10000,
                              session_timeout_ms=5000))
    assert o.future.get().error_code == 0 and o.future.get().generation_id == gen
    assert ctx.group().state is S.COMPLETING_REBALANCE


def test_join_group_completion_when_pending_member_joins_or_times_out():
    """testJoinGroupCompletionWhenPendingMemberJoins, testJoinGroupCompletionWhenPendingMemberTimesOut
    (GroupMetadataManagerTestContext.setupGroupWithPendingMember)"""
    for joins in (True, False):
        ctx = Ctx()
        leader_id, follower_id, gen = _two_member_group(ctx)
        group = ctx.group()
        ls = ctx.sync(sync_request(member_id=leader_id, generation_id=gen))
        assert ls.future.get().error_code == 0 and group.state is S.STABLE
        req = join_request(member_id=leader_id, protocols=RANGE, rebalance_timeout_ms=10000, session_timeout_ms=5000)
        lj = ctx.join(req)
        assert not lj.future.done and group.state is S.PREPARING_REBALANCE
        pending = ctx.join(join_request(protocols=RANGE, rebalance_timeout_ms=10000, session_timeout_ms=2500),
                           version=4)
        assert pending.future.get().error_code == E.MEMBER_ID_REQUIRED and len(group.pending_join_members) == 1
        fj = ctx.join(join_request(member_id=follower_id, protocols=RANGE, rebalance_timeout_ms=10000,
                                   session_timeout_ms=5000))
        assert not fj.future.done and group.num_members() == 2
        if joins:
            o = ctx.join(join_request(member_id=pending.future.get().member_id, protocols=RANGE))
            assert o.future.get().error_code == 0 and group.num_members() == 3
        else:
            ctx.sleep(3000)
            assert group.num_members() == 2
        assert group.state is S.COMPLETING_REBALANCE and not group.pending_join_members


def test_generation_id_increments_on_rebalance():
    """testGenerationIdIncrementsOnRebalance"""
    ctx = Ctx()
    leader = ctx.join_as_dynamic_member_and_complete_rebalance("group-id")
    o = ctx.join(join_request(member_id=leader.member_id, protocols=RANGE))
    assert o.future.get().generation_id == 2 and o.future.get().error_code == 0


def test_heartbeat_cases():
    """testHeartbeatUnknownGroup, testHeartbeatDeadGroup, testHeartbeatEmptyGroup,
    testHeartbeatUnknownMemberExistingGroup, testHeartbeatIllegalGeneration, testValidHeartbeat,
    testHeartbeatDuringPreparingRebalance, testHeartbeatDuringCompletingRebalance"""
    ctx = Ctx()
    assert ctx.heartbeat_code("group-id", "member-id", 1) == E.UNKNOWN_MEMBER_ID
    leader = ctx.join_as_dynamic_member_and_complete_rebalance("group-id")
    group = ctx.group()
    assert ctx.heartbeat_code("group-id", "unknown", 1) == E.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat_code("group-id", leader.member_id, 2) == E.ILLEGAL_GENERATION
    assert ctx.heartbeat_code("group-id", leader.member_id, 1) == 0
    follower = ctx.join(join_request(protocols=RANGE, rebalance_timeout_ms=10000, session_timeout_ms=5000))
    assert group.state is S.PREPARING_REBALANCE
    assert ctx.heartbeat_code("group-id", leader.member_id, 1) == E.REBALANCE_IN_PROGRESS
    ctx.join(join_request(member_id=leader.member_id, protocols=RANGE, rebalance_timeout_ms=10000,
                          session_timeout_ms=5000))
    assert group.state is S.COMPLETING_REBALANCE
    assert ctx.heartbeat_code("group-id", follower.future.get().member_id, 2) == 0
    group.transition_to(S.DEAD, ctx.time)
    assert ctx.heartbeat_code("group-id", leader.member_id, 2) == E.COORDINATOR_NOT_AVAILABLE


def test_classic_group_member_session_timeout_and_heartbeat_maintains_session():
    """testClassicGroupMemberSessionTimeout, testClassicGroupMemberHeartbeatMaintainsSession"""
    ctx = Ctx()
    leader = ctx.join_as_dynamic_member_and_complete_rebalance("group-id")
    group = ctx.group()
    for _ in range(3):
        ctx.sleep(2500)
        assert ctx.heartbeat_code("group-id", leader.member_id, 1) == 0
    timeouts = ctx.sleep(5000)
    assert group.state is S.EMPTY and group.num_members() == 0
    assert timeouts[-1].records == [group_metadata_record(group, {})]
    assert ctx.heartbeat_code("group-id", leader.member_id, 1) == E.UNKNOWN_MEMBER_ID


def test_classic_group_member_session_timeout_during_rebalance():
    """testClassicGroupMemberSessionTimeoutDuringRebalance"""
    ctx = Ctx()
    leader = ctx.join_as_dynamic_member_and_complete_rebalance("group-id")
    group = ctx.group()
    other = ctx.join(join_request(protocols=RANGE, rebalance_timeout_ms=2000, session_timeout_ms=1000))
    assert group.state is S.PREPARING_REBALANCE
    # the leader's heartbeat during the rebalance answers REBALANCE_IN_PROGRESS and keeps its session
    ctx.sleep(2500)
    assert ctx.heartbeat_code("group-id", leader.member_id, 1) == E.REBALANCE_IN_PROGRESS
    ctx.sleep(8000)
    # the leader never rejoined: it is removed when the join phase completes (rebalance timeout 10 s)
    assert other.future.get().error_code == 0
    assert list(group.members) == [other.future.get().member_id]


def test_second_member_partially_join_and_timeout():
    """testSecondMemberPartiallyJoinAndTimeout"""
    ctx = Ctx()
    group = ctx.create_classic_group()
    req = join_request(instance_id="leader-instance-id", protocols=RANGE, rebalance_timeout_ms=10000,
                       session_timeout_ms=5000)
    j = ctx.join(req, version=9)
    ctx.sleep(3000)
    first = j.future.get()
    assert ctx.sync(sync_request(member_id=first.member_id, generation_id=1)).future.get().error_code == 0
    o = ctx.join(join_request(protocols=RANGE, rebalance_timeout_ms=10000, session_timeout_ms=5000), version=9)
    assert o.future.get().error_code == E.MEMBER_ID_REQUIRED and len(group.pending_join_members) == 1
    for _ in range(2):
        ctx.sleep(2500)
        assert ctx.heartbeat_code("group-id", first.member_id, 1) == 0
    assert list(group.members) == [first.member_id] and group.generation_id == 1 and group.state is S.STABLE
    assert not group.pending_join_members


def test_rebalance_times_out_when_sync_request_is_not_received():
    """testRebalanceTimesOutWhenSyncRequestIsNotReceived"""
    ctx = Ctx()
    responses = ctx.join_with_n_members("group-id", 3, 5000, 5000)
    group = ctx.group()
    ctx.sleep(2500)
    for r in responses:
        assert ctx.heartbeat_code("group-id", r.member_id, r.generation_id) == 0
    timeouts = ctx.sleep(2500)
    assert len(timeouts) == 1 and timeouts[0].records == [group_metadata_record(group, {})]
    for r in responses:
        assert ctx.heartbeat_code("group-id", r.member_id, r.generation_id) == E.UNKNOWN_MEMBER_ID
    assert group.state is S.EMPTY


def test_rebalance_times_out_when_sync_request_is_not_received_from_followers():
    """testRebalanceTimesOutWhenSyncRequestIsNotReceivedFromFollowers"""
    ctx = Ctx()
    responses = ctx.join_with_n_members("group-id", 3, 5000, 5000)
    group = ctx.group()
    ctx.sleep(2500)
    for r in responses:
        assert ctx.heartbeat_code("group-id", r.member_id, r.generation_id) == 0
    s = ctx.sync(sync_request(member_id=responses[0].member_id, generation_id=1))
    assert s.future.get().error_code == 0 and group.state is S.STABLE
    assert ctx.heartbeat_code("group-id", responses[0].member_id, 1) == 0
    timeouts = ctx.sleep(2500)
    assert len(timeouts) == 1 and timeouts[0].records == []
    assert ctx.heartbeat_code("group-id", responses[0].member_id, 1) == E.REBALANCE_IN_PROGRESS
    for r in responses[1:]:
        assert ctx.heartbeat_code("group-id", r.member_id, r.generation_id) == E.UNKNOWN_MEMBER_ID
    assert group.state is S.PREPARING_REBALANCE


def test_rebalance_times_out_when_sync_request_is_not_received_from_leaders():
    """testRebalanceTimesOutWhenSyncRequestIsNotReceivedFromLeaders: the followers' syncs are answered
    REBALANCE_IN_PROGRESS and the leader is removed"""
    ctx = Ctx()
    responses = ctx.join_with_n_members("group-id", 3, 5000, 5000)
    group = ctx.group()
    ctx.sleep(2500)
    for r in responses:
        assert ctx.heartbeat_code("group-id", r.member_id, r.generation_id) == 0
    syncs = [ctx.sync(sync_request(member_id=r.member_id, generation_id=1)) for r in responses[1:]]
    assert not any(s.future.done for s in syncs)
    timeouts = ctx.sleep(2500)
    assert len(timeouts) == 1 and timeouts[0].records == []
    assert all(s.future.get().error_code == E.REBALANCE_IN_PROGRESS for s in syncs)
    assert ctx.heartbeat_code("group-id", responses[0].member_id, 1) == E.UNKNOWN_MEMBER_ID
    assert group.state is S.PREPARING_REBALANCE and group.num_members() == 2


def test_rebalance_does_not_time_out_when_all_sync_are_received():
    """testRebalanceDoesNotTimeOutWhenAllSyncAreReceived"""
    ctx = Ctx()
    responses = ctx.join_with_n_members("group-id", 3, 5000, 5000)
    group = ctx.group()
    for r in sorted(responses, key=lambda r: r.member_id != r.leader):
        ctx.sync(sync_request(member_id=r.member_id, generation_id=r.generation_id))
    ctx.sleep(2500)
    for r in responses:
        assert ctx.heartbeat_code("group-id", r.member_id, r.generation_id) == 0
    ctx.sleep(2500)
    assert group.state is S.STABLE and group.num_members() == 3


def test_heartbeat_during_rebalance_causes_rebalance_in_progress():
    """testHeartbeatDuringRebalanceCausesRebalanceInProgress"""
    ctx = Ctx()
    ctx.create_classic_group()
    req = join_request(instance_id="leader-instance-id", protocols=RANGE)
    j = ctx.join(req, version=9)
    ctx.sleep(3000)
    resp = j.future.get()
    ctx.join(join_request(protocols=RANGE))  # a new member: the group prepares a rebalance
    assert ctx.heartbeat_code("group-id", resp.member_id, resp.generation_id) == E.REBALANCE_IN_PROGRESS


def test_max_size():
    """testJoinGroupShouldReceiveErrorIfGroupOverMaxSize, testDynamicMembersJoinGroupWithMaxSizeAndRequiredKnownMember,
    testStaticMembersJoinGroupWithMaxSize"""
    ctx = Ctx(max_size=1)
    ctx.create_classic_group()
    ctx.join(join_request(protocols=RANGE, rebalance_timeout_ms=10000, session_timeout_ms=10000))
    o = ctx.join(join_request(protocols=RANGE))
    assert o.future.get().error_code == E.GROUP_MAX_SIZE_REACHED
    o = ctx.join(join_request(protocols=RANGE, instance_id="static"), version=9)
    assert o.future.get().error_code == E.GROUP_MAX_SIZE_REACHED
    assert ctx.group().num_members() == 1


def test_last_joining_members_are_kicked_out_when_rejoining_group_with_max_size():
    """testLastJoiningMembersAreKickedOutWhenRejoiningGroupWithMaxSize"""
    ctx = Ctx(max_size=10, initial_rebalance_delay_ms=50)
    group = ctx.create_classic_group()
    ids = [f"client-id-{i}" for i in range(12)]
    for mid in ids:
        group.add(ClassicGroupMember(mid, None, "client-id", "client-host", 10000, 5000, "consumer",
                                     [(p.name, p.metadata) for p in RANGE]))
    ctx.shard._run(ctx.time, ctx.shard._prepare_rebalance, group, "test")
    joins = [ctx.join(join_request(member_id=mid, protocols=RANGE, rebalance_timeout_ms=10000)) for mid in ids]
    assert group.num_members() == 10 and group.num_members_awaiting_join == 10
    assert group.state is S.PREPARING_REBALANCE
    ctx.sleep(10000)
    errors = [j.future.get().error_code for j in joins]
    assert errors == [0] * 10 + [E.GROUP_MAX_SIZE_REACHED] * 2
    assert group.state is S.COMPLETING_REBALANCE and set(group.members) == set(ids[:10])


def test_leave_group_cases():
    """testLeaveGroupUnknownGroup, testLeaveGroupUnknownMemberIdExistingGroup, testValidLeaveGroup,
    testLeaveGroupWithFencedInstanceId, testLeaveGroupStaticMemberWithUnknownMemberId,
    testPendingMembersLeaveGroup"""
    ctx = Ctx()
    o = ctx.leave("group-id", [("member-id", None)])
    assert o.error is not None and o.error.code == E.UNKNOWN_MEMBER_ID
    leader_id, follower_id, _ = ctx.static_members_join_and_rebalance("group-id", "leader-instance-id",
                                                                      "follower-instance-id")
    group = ctx.group()
    o = ctx.leave("group-id", [("unknown", None)])
    assert [m.error_code for m in o.response.members] == [E.UNKNOWN_MEMBER_ID]
    o = ctx.leave("group-id", [("other-member-id", "leader-instance-id")])
    assert [m.error_code for m in o.response.members] == [E.FENCED_INSTANCE_ID]
    # administrative removal by instance id with an unknown member id (KIP-345)
    o = ctx.leave("group-id", [(UNKNOWN_MEMBER_ID, "follower-instance-id"), (UNKNOWN_MEMBER_ID, "nope")])
    assert [m.error_code for m in o.response.members] == [0, E.UNKNOWN_MEMBER_ID]
    assert list(group.members) == [leader_id] and group.state is S.PREPARING_REBALANCE
    pending = ctx.join(join_request(protocols=RANGE), version=4).future.get().member_id
    assert pending in group.pending_join_members
    o = ctx.leave("group-id", [(pending, None), (leader_id, "leader-instance-id")])
    assert [m.error_code for m in o.response.members] == [0, 0]
    assert not group.pending_join_members and group.num_members() == 0


def test_describe_and_list_groups():
    """testDescribeGroupStable, testDescribeGroupRebalancing, testDescribeGroupsGroupIdNotFoundException,
    testListGroups"""
    ctx = Ctx()
    leader = ctx.join_as_dynamic_member_and_complete_rebalance("group-id")
    d = ctx.shard.describe_groups(["group-id", "unknown"])
    assert d[0].group_state == "Stable" and d[0].protocol_type == "consumer" and d[0].protocol_data == "range"
    assert [m.member_id for m in d[0].members] == [leader.member_id]
    assert d[0].members[0].member_metadata == RANGE[0].metadata
    assert d[1].group_state == "Dead" and d[1].members == []
    ctx.join(join_request(member_id=leader.member_id, protocols=to_protocols("range", "roundrobin")))
    ctx.join(join_request(protocols=RANGE))
    d = ctx.shard.describe_groups(["group-id"])[0]
    assert d.group_state == "PreparingRebalance" and d.protocol_data == ""
    assert all(m.member_metadata == b"" for m in d.members)
    ctx.commit("simple", "", -1, {("foo", 0): (5, "")})
    listed = {g.group_id: (g.group_state, g.group_type) for g in ctx.shard.list_groups(set(), set())}
    assert listed == {"group-id": ("PreparingRebalance", "classic"), "simple": ("Empty", "classic")}
    assert [g.group_id for g in ctx.shard.list_groups({"empty"}, set())] == ["simple"]
    assert [g.group_id for g in ctx.shard.list_groups({"PREPARINGREBALANCE"}, {"Classic"})] == ["group-id"]
    assert ctx.shard.list_groups(set(), {"consumer"}) == []


def test_classic_group_delete_and_maybe_delete():
    """testClassicGroupDelete, testClassicGroupMaybeDelete (GroupCoordinatorShard.deleteGroups)"""
    ctx = Ctx()
    leader = ctx.join_as_dynamic_member_and_complete_rebalance("group-id")
    ctx.commit("group-id", leader.member_id, 1, {("foo", 0): (10, "m")})
    res = ctx.shard.delete_groups(["group-id", "unknown"], ctx.time)
    assert res.response == [("group-id", E.NON_EMPTY_GROUP), ("unknown", E.GROUP_ID_NOT_FOUND)]
    ctx.leave("group-id", [(leader.member_id, None)])
    assert ctx.group().state is S.EMPTY
    res = ctx.shard.delete_groups(["group-id"], ctx.time)
    assert res.response == [("group-id", 0)]
    keys = [(type(r.key).__name__, r.value) for r in res.records]
    assert keys == [("OffsetCommitKey", None), ("GroupMetadataKey", None)]
    assert ctx.group() is None and ctx.shard.offsets.count() == 0


def test_on_loaded_schedules_classic_group_member_heartbeats():
    """testReplayGroupMetadataRecords, testOnLoadedSchedulesClassicGroupMemberHeartbeats"""
    ctx = Ctx()
    leader_id, follower_id, _ = ctx.static_members_join_and_rebalance("group-id", "leader-instance-id",
                                                                      "follower-instance-id")
    group = ctx.group()
    record = group_metadata_record(group, group.group_assignment())
    fresh = Ctx()
    fresh.shard.replay(record, 10)
    g = fresh.group()
    assert g.state is S.STABLE and g.generation_id == 1 and set(g.members) == {leader_id, follower_id}
    assert g.leader_id == group.leader_id and g.static_member_id("leader-instance-id") == leader_id
    fresh.shard.on_loaded(0)
    assert fresh.shard.timer.is_scheduled(f"heartbeat-group-id-{leader_id}")
    fresh.sleep(5000)
    assert g.state is S.PREPARING_REBALANCE or g.state is S.EMPTY


def test_on_loaded_exceed_group_max_size_triggers_rebalance():
    """testOnLoadedExceedGroupMaxSizeTriggersRebalance"""
    ctx = Ctx()
    ctx.static_members_join_and_rebalance("group-id", "leader-instance-id", "follower-instance-id")
    group = ctx.group()
    fresh = Ctx(max_size=1)
    fresh.shard.replay(group_metadata_record(group, group.group_assignment()), 0)
    fresh.shard.on_loaded(0)
    assert fresh.group().state is S.PREPARING_REBALANCE


def test_classic_group_on_unloaded_completing_rebalance():
    """testClassicGroupOnUnloadedEmptyAndPreparingRebalance, testClassicGroupOnUnloadedCompletingRebalance"""
    ctx = Ctx()
    ctx.create_classic_group()
    j = ctx.join(join_request(protocols=RANGE))
    res = ctx.shard.on_unloaded()
    ctx._resolve(res)
    assert j.future.get().error_code == E.NOT_COORDINATOR
    assert ctx.group().state is S.DEAD and len(ctx.shard.timer) == 0


def test_generate_records_on_new_classic_group():
    """testGenerateRecordsOnNewClassicGroup: a join that creates the group writes an empty GroupMetadata"""
    ctx = Ctx()
    o = ctx.join(join_request(protocols=RANGE), version=4)
    assert o.future.get().error_code == E.MEMBER_ID_REQUIRED
    assert [(type(r.key).__name__, r.value.members, r.value.generation) for r in o.records] == [
        ("GroupMetadataKey", [], 0)]
