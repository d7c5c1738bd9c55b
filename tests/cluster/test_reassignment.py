"""Partition reassignment (KIP-455) in the controller: ReplicationControlManagerTest's testReassignPartitions and
testCancelReassignPartitions, PartitionReassignmentReplicasTest and PartitionReassignmentRevertTest ported, plus
every bad input changing nothing and the reassignment surviving a snapshot of the image."""

from __future__ import annotations

import pytest

from cluster.controller.partition_reassignment import (
    InvalidReplicaAssignment, PartitionReassignmentReplicas, PartitionReassignmentRevert,
)
from cluster.controller.replication_control import alter_partition
from cluster.image_writer import image_records
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from tests.cluster.test_broker_lifecycle import Cluster


def reassign(c: Cluster, targets: dict[str, dict[int, list[int] | None]], commit: bool = True, **kw):
    res = c.controller.alter_partition_reassignments(c.image, [(t, list(ps.items())) for t, ps in targets.items()],
                                                     **kw)
    if commit:
        c.commit(res.records)
    return res


def codes(res) -> dict[tuple[str, int], int]:
    return {(t, p): code for t, ps in res.response for p, code, _ in ps}


def ongoing(c: Cluster, topics=None) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    res = c.controller.list_partition_reassignments(c.image, topics)
    assert res.records == []
    return {(t, p.partition): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t, ps in res.response for p in ps}


def isr_change(c: Cluster, topic: str, partition: int, new_isr: list[int]):
    t = c.image.topic(topic)
    p = t.partitions[partition]
    return alter_partition(c.image, p.leader, c.image.brokers[p.leader].broker_epoch, t.topic_id, partition,
                           p.leader_epoch, p.partition_epoch, new_isr)


def test_reassign_partitions():
    """ReplicationControlManagerTest.testReassignPartitions"""
    c = Cluster(brokers=(0, 1, 2, 3))
    c.create("foo", 0, 0, assignments={0: [1, 2, 3], 1: [3, 2, 1]})
    c.create("bar", 0, 0, assignments={0: [1, 2, 3]})
    assert ongoing(c) == {}
    res = reassign(c, {"foo": {0: [3, 2, 1], 1: [0, 2, 1], 2: [0, 2, 1]}, "bar": {}})
    assert res.response == [("foo", [(0, 0, None), (1, 0, None),
                                     (2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition foo:2.")]),
                            ("bar", [])]
    foo = c.image.topic("foo").partitions
    assert foo[0].replicas == (3, 2, 1) and not foo[0].is_reassigning  # a reordering completes at once
    assert (foo[1].replicas, foo[1].adding_replicas, foo[1].removing_replicas) == ((0, 2, 1, 3), (0,), (3,))
    assert (foo[1].leader, foo[1].leader_epoch, foo[1].partition_epoch) == (3, 0, 1)  # stage 1: no new epoch
    current = {("foo", 1): ([0, 2, 1, 3], [0], [3])}
    assert ongoing(c) == current
    assert ongoing(c, [("bar", [0, 1, 2])]) == {}
    assert ongoing(c, [("foo", [0, 1, 2])]) == current

    # the leader of foo-1 (3, being removed) reports the new replica in sync: that completes the move, and the
    # leader moves off 3 (Kafka answers the AlterPartition NEW_LEADER_ELECTED)
    err, record, _ = isr_change(c, "foo", 1, [3, 0, 2, 1])
    assert err == 0
    assert (record.replicas, record.isr, record.leader, record.adding_replicas, record.removing_replicas) == (
        [0, 2, 1], [0, 2, 1], 0, [], [])
    c.commit([record])
    p = c.image.topic("foo").partitions[1]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.is_reassigning) == ((0, 2, 1), (0, 2, 1), 0, 1, False)
    assert ongoing(c) == {}


def test_cancel_reassign_partitions():
    """ReplicationControlManagerTest.testCancelReassignPartitions"""
    c = Cluster(brokers=(0, 1, 2, 3, 4))
    c.create("foo", 0, 0, assignments={0: [1, 2, 3, 4], 1: [0, 1, 2, 3], 2: [4, 3, 1, 0], 3: [2, 3, 4, 1]})
    c.create("bar", 0, 0, assignments={0: [4, 3, 2]})
    c.heartbeat(3, want_fence=True)
    assert c.image.topic("foo").partitions[0].isr == (1, 2, 4)
    before = c.image
    res = reassign(c, {"foo": {0: [1, 2, 4], 1: [1, 2, 3, 0], 2: [5, 6, 7], 3: []}, "bar": {0: [1, 2, 3, 4, 0]}})
    assert res.response == [
        ("foo", [(0, 0, None), (1, 0, None),
                 (2, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes broker 5, but no such broker is registered."),
                 (3, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes an empty replica list.")]),
        ("bar", [(0, 0, None)])]
    foo, bar = c.image.topic("foo").partitions, c.image.topic("bar").partitions[0]
    assert (foo[0].replicas, foo[0].isr, foo[0].leader, foo[0].leader_epoch, foo[0].partition_epoch) == (
        (1, 2, 4), (1, 2, 4), 1, 1, 2)
    assert (foo[1].replicas, foo[1].isr, foo[1].leader, foo[1].leader_epoch, foo[1].partition_epoch) == (
        (1, 2, 3, 0), (0, 1, 2), 0, 0, 2)
    assert foo[2] == before.topic("foo").partitions[2] and foo[3] == before.topic("foo").partitions[3]
    assert (bar.replicas, bar.isr, bar.adding_replicas, bar.leader, bar.leader_epoch, bar.partition_epoch) == (
        (1, 2, 3, 4, 0), (4, 2), (0, 1), 4, 0, 2)
    current = {("bar", 0): ([1, 2, 3, 4, 0], [0, 1], [])}
    assert ongoing(c) == current
    assert ongoing(c, [("foo", [0, 1, 2])]) == {}
    assert ongoing(c, [("bar", [0, 1, 2])]) == current

    # new replicas in the ISR, but not all of them (3 is fenced): not complete
    err, record, _ = isr_change(c, "bar", 0, [4, 1, 2, 0])
    assert err == 0 and (record.isr, record.replicas, record.leader) == ([4, 1, 2, 0], None, -2)

    res = reassign(c, {"foo": {0: None}, "bar": {0: None}}, commit=False)
    assert res.response == [("foo", [(0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)]), ("bar", [(0, 0, None)])]
    [r] = res.records
    assert (r.leader, r.replicas, r.removing_replicas, r.adding_replicas, r.isr) == (4, [2, 3, 4], None, [], None)
    c.commit(res.records)
    assert ongoing(c) == {}
    bar = c.image.topic("bar").partitions[0]
    assert (bar.replicas, bar.isr, bar.leader, bar.leader_epoch, bar.partition_epoch) == ((2, 3, 4), (4, 2), 4, 1, 3)


def test_move_off_the_leader_onto_a_new_broker():
    """The integration test's move, step by step: [1,2,3] -> [2,3,4]; the leader 1 keeps leading (and broker 4
    catches up from it) until the ISR holds 4, then the move completes with 2 leading."""
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create("m", 0, 0, assignments={0: [1, 2, 3]})
    res = reassign(c, {"m": {0: [2, 3, 4]}})
    assert codes(res) == {("m", 0): 0}
    p = c.image.topic("m").partitions[0]
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader, p.leader_epoch) == (
        (2, 3, 4, 1), (1, 2, 3), (4,), (1,), 1, 0)
    # an ISR without every target replica completes nothing: first the new one missing, then 3
    for isr in ([1, 2], [1, 2, 4]):
        err, record, _ = isr_change(c, "m", 0, isr)
        assert err == 0 and (record.replicas, record.removing_replicas, record.leader) == (None, None, -2)
        c.commit([record])
    err, record, _ = isr_change(c, "m", 0, [1, 2, 4, 3])
    c.commit([record])
    p = c.image.topic("m").partitions[0]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.is_reassigning) == ((2, 3, 4), (2, 4, 3), 2, 1, False)


def test_only_removals_complete_at_once_and_fence_the_removed():
    c = Cluster(brokers=(1, 2, 3))
    c.create("r", 0, 0, assignments={0: [1, 2, 3]})
    reassign(c, {"r": {0: [2, 3]}})
    p = c.image.topic("r").partitions[0]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.is_reassigning) == ((2, 3), (2, 3), 2, 1, False)


def test_a_new_target_replaces_the_ongoing_one():
    """testReassignPartitionsHandlesNewReassignmentThatRemovesPreviouslyAddingReplicas: [1,2,3] -> [4,5,6] ->
    [1,2,7]: the second target starts from the ongoing replica list."""
    c = Cluster(brokers=(1, 2, 3, 4, 5, 6, 7))
    c.create("n", 0, 0, assignments={0: [1, 2, 3]})
    reassign(c, {"n": {0: [4, 5, 6]}})
    p = c.image.topic("n").partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    reassign(c, {"n": {0: [1, 2, 7]}})
    p = c.image.topic("n").partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((1, 2, 7, 3, 4, 5, 6), (7,), (3, 4, 5, 6))
    assert ongoing(c) == {("n", 0): ([1, 2, 7, 3, 4, 5, 6], [7], [3, 4, 5, 6])}


@pytest.mark.parametrize("targets,code", [
    ({"nope": {0: [1, 2]}}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ({"t": {5: [1, 2]}}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ({"t": {0: [1, 9]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ({"t": {0: [1, 2, 1]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ({"t": {0: []}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ({"t": {0: None}}, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
    ({"nope": {0: None}}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
])
def test_bad_input_changes_nothing(targets, code):
    c = Cluster(brokers=(1, 2, 3))
    c.create("t", 0, 0, assignments={0: [1, 2, 3]})
    before = c.image
    res = reassign(c, targets, commit=False)
    assert res.records == [] and list(codes(res).values()) == [code]
    assert c.image is before and ongoing(c) == {}


def test_a_bad_partition_does_not_stop_the_good_one():
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create("t", 0, 0, assignments={0: [1, 2, 3], 1: [1, 2, 3]})
    res = reassign(c, {"t": {0: [1, 2, 4], 1: [1, 1, 4]}})
    assert codes(res) == {("t", 0): 0, ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT} and len(res.records) == 1
    assert list(ongoing(c)) == [("t", 0)] and c.image.topic("t").partitions[1].replicas == (1, 2, 3)


def test_replication_factor_change_refused_when_not_allowed():
    """KIP-860 (v1): with allow_replication_factor_change false, the target keeps the replica count (of the
    ongoing reassignment's target, if any)."""
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create("t", 0, 0, assignments={0: [1, 2, 3]})
    res = reassign(c, {"t": {0: [1, 2]}}, commit=False, allow_replication_factor_change=False)
    assert codes(res) == {("t", 0): ErrorCode.INVALID_REPLICATION_FACTOR} and res.records == []
    assert res.response[0][1][0][2] == "The replication factor is changed from 3 to 2"
    reassign(c, {"t": {0: [2, 3, 4]}}, allow_replication_factor_change=False)
    res = reassign(c, {"t": {0: [4, 3, 2, 1]}}, commit=False, allow_replication_factor_change=False)
    assert codes(res) == {("t", 0): ErrorCode.INVALID_REPLICATION_FACTOR}
    assert codes(reassign(c, {"t": {0: [1, 3, 4]}}, allow_replication_factor_change=False)) == {("t", 0): 0}


def test_cancel_needing_an_unclean_election():
    """PartitionReassignmentRevert's special case: only adding replicas in the ISR; refused unless unclean leader
    election is enabled for the topic."""
    for unclean, code in ((False, ErrorCode.INVALID_REPLICA_ASSIGNMENT), (True, 0)):
        c = Cluster(brokers=(1, 2, 3), config={"unclean.leader.election.enable": unclean})
        c.create("u", 0, 0, assignments={0: [1]})
        reassign(c, {"u": {0: [2, 3]}})  # replicas [2, 3, 1], adding [2, 3], removing [1]
        c.commit(isr_change(c, "u", 0, [1, 2])[1:2])  # 3 still missing: not complete
        c.heartbeat(1, want_fence=True)  # 1 leaves the ISR: only an adding replica is left in it
        c.heartbeat(1)
        p = c.image.topic("u").partitions[0]
        assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((2, 3, 1), (2,), 2, (2, 3))
        res = reassign(c, {"u": {0: None}})
        assert codes(res) == {("u", 0): code}
        p = c.image.topic("u").partitions[0]
        if unclean:
            assert (p.replicas, p.isr, p.leader, p.is_reassigning) == ((1,), (1,), 1, False)
        else:
            assert p.is_reassigning and "unclean leader election" in res.response[0][1][0][2]


def test_reassignment_survives_a_snapshot():
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create("s", 0, 0, assignments={0: [1, 2, 3]})
    reassign(c, {"s": {0: [2, 3, 4]}})
    restored = MetadataImage().apply(image_records(c.image), c.image.offset)
    assert restored.topic("s").partitions[0] == c.image.topic("s").partitions[0]


# ---- PartitionReassignmentReplicasTest / PartitionReassignmentRevertTest -----------------------------------------

def test_reassignment_replicas():
    """PartitionReassignmentReplicasTest: testNoneAddedOrRemoved, testAdditions, testRemovals,
    testAdditionsAndRemovals, testRearrangement, testDoesNotCompleteReassignment..."""
    r = PartitionReassignmentReplicas.of([3, 2, 1], [3, 2, 1])
    assert (r.removing, r.adding, r.replicas, r.in_progress) == ([], [], [3, 2, 1], False)
    r = PartitionReassignmentReplicas.of([3, 2, 1], [3, 2, 1, 0])
    assert (r.removing, r.adding, r.replicas) == ([], [0], [3, 2, 1, 0])
    r = PartitionReassignmentReplicas.of([3, 2, 1], [0, 1])
    assert (r.removing, r.adding, r.replicas) == ([2, 3], [0], [0, 1, 2, 3])
    r = PartitionReassignmentReplicas.of([0, 1, 2, 3], [3, 2, 1])
    assert (r.removing, r.adding, r.replicas) == ([0], [], [3, 2, 1, 0])
    assert r.original_replicas() == [3, 2, 1, 0]
    # testDoesNotCompleteReassignment / testDoesNotCompleteReassignmentIfNoneOngoing / testDoesCompleteReassignment
    r = PartitionReassignmentReplicas([0], [4], [1, 2, 4, 0])
    assert r.maybe_complete_reassignment([0, 1, 2]) is None
    assert PartitionReassignmentReplicas([], [], [0, 1]).maybe_complete_reassignment([0, 1]) is None
    assert r.maybe_complete_reassignment([0, 1, 2, 4]) == ([1, 2, 4], [1, 2, 4])
    # testDoesNotCompleteReassignmentIfIsrDoesNotHaveAllTargetReplicas
    assert PartitionReassignmentReplicas([3], [], [0, 1, 2, 3]).maybe_complete_reassignment([3]) is None


def test_reassignment_revert():
    """PartitionReassignmentRevertTest: testNoneAddedOrRemoved, testSomeRemoving, testSomeAdding,
    testSomeRemovingAndAdding, testIsrSpecialCase"""
    r = PartitionReassignmentRevert([3, 2, 1], [3, 2], [], [])
    assert (r.replicas, r.isr, r.unclean) == ([3, 2, 1], [3, 2], False)
    r = PartitionReassignmentRevert([3, 2, 1], [3, 2], [2, 1], [])
    assert (r.replicas, r.isr, r.unclean) == ([3, 2, 1], [3, 2], False)
    r = PartitionReassignmentRevert([4, 3, 2, 1], [4, 2], [], [4, 3])
    assert (r.replicas, r.isr, r.unclean) == ([2, 1], [2], False)
    r = PartitionReassignmentRevert([4, 3, 2, 1], [4, 2], [2], [4, 3])
    assert (r.replicas, r.isr, r.unclean) == ([2, 1], [2], False)
    r = PartitionReassignmentRevert([4, 3, 2, 1], [4, 3], [2], [4, 3])
    assert (r.replicas, r.isr, r.unclean) == ([2, 1], [2], True)
    with pytest.raises(InvalidReplicaAssignment):
        PartitionReassignmentRevert([4, 3], [4], [], [4, 3])
