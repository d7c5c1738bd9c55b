"""Kafka's PartitionChangeBuilderTest, ported for the parts odradek models (metadata.version 4.0 without ELR,
no reassignment): the same partitions FOO, BAZ and OFFLINE, the same targets, the same records."""

from __future__ import annotations

from cluster.controller.partition_change import (
    NO_LEADER, NO_LEADER_CHANGE, RECOVERED, RECOVERING, Election, PartitionChangeBuilder, change_record_is_no_op,
)
from cluster.metadata_image import MetadataImage, PartitionInfo
from protocol.generated.metadata import PartitionChangeRecord, PartitionRecord, TopicRecord

FOO = PartitionInfo(0, replicas=(2, 1, 3), isr=(2, 1, 3), leader=1, leader_epoch=100, partition_epoch=200)
FOO_ID = bytes.fromhex("15bae875c7e247e282d823d24c71a6b8")
BAZ = PartitionInfo(0, replicas=(2, 1, 3), isr=(1, 3), leader=3, leader_epoch=100, partition_epoch=200)
BAZ_ID = bytes.fromhex("c10cedee6e124f0b905d75ee45c8203b")
OFFLINE = PartitionInfo(0, replicas=(2, 1, 3), isr=(3,), leader=-1, leader_epoch=100, partition_epoch=200)
OFFLINE_ID = bytes.fromhex("2ca7d4b020754247a4bf2f4ee5d63d9e")


def foo():
    return PartitionChangeBuilder(FOO, FOO_ID, 0, lambda r: r != 3)


def baz():
    return PartitionChangeBuilder(BAZ, BAZ_ID, 0, lambda r: True)


def offline():
    return PartitionChangeBuilder(OFFLINE, OFFLINE_ID, 0, lambda r: r == 1)


def rec(topic_id, **fields):
    return PartitionChangeRecord(topic_id=topic_id, partition_id=0, **fields)


def same(a: PartitionChangeRecord | None, b: PartitionChangeRecord | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(getattr(a, f) == getattr(b, f) for f in PartitionChangeRecord.__slots__ if f != "unknown_tagged_fields")


def merge(partition: PartitionInfo, topic_id: bytes, change: PartitionChangeRecord) -> PartitionInfo:
    """PartitionRegistration.merge, through the metadata image's replay."""
    image = MetadataImage().apply([
        TopicRecord(name="t", topic_id=topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=list(partition.replicas), isr=list(partition.isr),
                        leader=partition.leader, leader_epoch=partition.leader_epoch,
                        partition_epoch=partition.partition_epoch,
                        leader_recovery_state=partition.leader_recovery_state),
        change], 2)
    return image.topic("t").partitions[0]


def test_change_record_is_no_op():
    """testChangeRecordIsNoOp"""
    assert change_record_is_no_op(PartitionChangeRecord())
    assert not change_record_is_no_op(PartitionChangeRecord(leader=1))
    assert not change_record_is_no_op(PartitionChangeRecord(isr=[1, 2, 3]))
    assert not change_record_is_no_op(PartitionChangeRecord(removing_replicas=[1]))
    assert not change_record_is_no_op(PartitionChangeRecord(adding_replicas=[4]))
    assert not change_record_is_no_op(PartitionChangeRecord(eligible_leader_replicas=[5]))
    assert not change_record_is_no_op(PartitionChangeRecord(last_known_elr=[6]))
    assert not change_record_is_no_op(PartitionChangeRecord(leader_recovery_state=RECOVERED))
    assert not change_record_is_no_op(PartitionChangeRecord(directories=[bytes(16)] * 3))


def test_elect_leader():
    """testElectLeader (partition change record versions 0 and 1: no ELR)"""
    assert foo().set_election(Election.PREFERRED).elect_leader() == (2, False)
    assert foo().elect_leader() == (1, False)
    assert foo().set_election(Election.UNCLEAN).elect_leader() == (1, False)
    assert foo().set_target_isr([1, 3]).elect_leader() == (1, False)
    assert foo().set_election(Election.UNCLEAN).set_target_isr([1, 3]).elect_leader() == (1, False)
    assert foo().set_target_isr([3]).elect_leader() == (NO_LEADER, False)
    assert foo().set_election(Election.UNCLEAN).set_target_isr([3]).elect_leader() == (2, True)
    assert (foo().set_election(Election.UNCLEAN).set_target_isr([4]).set_target_replicas([2, 1, 3, 4])
            .elect_leader() == (4, False))
    assert baz().set_election(Election.PREFERRED).elect_leader() == (3, False)
    assert baz().elect_leader() == (3, False)
    assert baz().set_election(Election.UNCLEAN).elect_leader() == (3, False)


def leader_after_bump(builder) -> int:
    built = builder.build()
    return NO_LEADER_CHANGE if built is None else built.leader


def test_no_leader_epoch_bump_if_nothing_changed():
    """testNoLeaderEpochBumpIfNothingChanged"""
    assert leader_after_bump(foo()) == NO_LEADER_CHANGE


def test_no_leader_epoch_bump_on_isr_shrink():
    """testNoLeaderEpochBumpOnIsrShrink (4.0-IV0)"""
    assert leader_after_bump(foo().set_target_isr([2, 1])) == NO_LEADER_CHANGE


def test_no_leader_epoch_bump_on_isr_expansion():
    """testNoLeaderEpochBumpOnIsrExpansion"""
    assert leader_after_bump(foo().set_target_isr([2, 1, 3, 4])) == NO_LEADER_CHANGE


def test_leader_epoch_bump_on_new_replica_set_disjoint():
    """testLeaderEpochBumpOnNewReplicaSetDisjoint"""
    assert leader_after_bump(foo().set_target_replicas([2, 1, 4])) == 1


def test_no_change():
    """testNoChange (the BAR cases need reassignment, which odradek does not serve)"""
    assert foo().build() is None
    assert foo().set_election(Election.UNCLEAN).build() is None
    assert baz().set_election(Election.PREFERRED).build() is None


def test_isr_change_doesnt_bump_leader_epoch():
    """testIsrChangeDoesntBumpLeaderEpoch"""
    assert same(foo().set_target_isr([2, 1]).build(), rec(FOO_ID, isr=[2, 1]))


def test_isr_change_and_leader_change():
    """testIsrChangeAndLeaderChange"""
    assert same(foo().set_target_isr([2, 3]).build(), rec(FOO_ID, isr=[2, 3], leader=2))


def test_unclean_leader_election():
    """testUncleanLeaderElection (versions 0-1)"""
    expected = rec(FOO_ID, isr=[2], leader=2, leader_recovery_state=RECOVERING)
    assert same(foo().set_election(Election.UNCLEAN).set_target_isr([3]).build(), expected)
    expected = rec(OFFLINE_ID, isr=[1], leader=1, leader_recovery_state=RECOVERING)
    assert same(offline().set_election(Election.UNCLEAN).build(), expected)
    assert same(offline().set_election(Election.UNCLEAN).set_target_isr([2]).build(), expected)


def test_change_in_leadership_does_not_change_recovery_state():
    """testChangeInLeadershipDoesNotChangeRecoveryState (leader recovery supported)"""
    registration = PartitionInfo(0, replicas=(1, 2, 3), isr=(1,), leader=1, leader_epoch=100, partition_epoch=200,
                                 leader_recovery_state=RECOVERING)
    change = PartitionChangeBuilder(registration, FOO_ID, 0, lambda b: False).set_target_isr([]).build()
    assert change.leader_recovery_state == -1 and change.leader == NO_LEADER
    registration = merge(registration, FOO_ID, change)
    assert (registration.leader, registration.isr[0], registration.leader_recovery_state) == (NO_LEADER, 1, RECOVERING)
    change = PartitionChangeBuilder(registration, FOO_ID, 0, lambda b: True).build()
    assert change.leader_recovery_state == -1
    registration = merge(registration, FOO_ID, change)
    assert (registration.leader, registration.isr[0], registration.leader_recovery_state) == (1, 1, RECOVERING)


def test_unclean_sets_leader_recovering_state():
    """testUncleanSetsLeaderRecoveringState (leader recovery supported)"""
    registration = PartitionInfo(0, replicas=(1, 2, 3), isr=(2, 3), leader=NO_LEADER, leader_epoch=100,
                                 partition_epoch=200)
    change = PartitionChangeBuilder(registration, FOO_ID, 0, lambda b: b == 1).set_election(Election.UNCLEAN).build()
    assert (change.leader_recovery_state, change.leader, change.isr) == (RECOVERING, 1, [1])
    merged = merge(registration, FOO_ID, change)
    assert (merged.leader, merged.isr, merged.leader_recovery_state) == (1, (1,), RECOVERING)
    assert merged.leader_epoch == 101 and merged.partition_epoch == 201


def test_leader_epoch_bumps_only_with_a_leader_change():
    """PartitionRegistration.merge: an ISR-only change keeps the leader epoch, a leader change bumps it."""
    isr_only = merge(FOO, FOO_ID, foo().set_target_isr([2, 1]).build())
    assert (isr_only.leader, isr_only.leader_epoch, isr_only.partition_epoch) == (1, 100, 201)
    new_leader = merge(FOO, FOO_ID, foo().set_target_isr([2, 3]).build())
    assert (new_leader.leader, new_leader.leader_epoch, new_leader.partition_epoch) == (2, 101, 201)
    assert new_leader.isr == (2, 3)
