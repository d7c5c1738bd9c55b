"""A leader's view of its followers (broker/replication/replica_state.py): Kafka's ReplicaTest cases, and the high
watermark and ISR rules of Partition.scala."""

from __future__ import annotations

from broker.replication.replica_state import FollowerState, leader_high_watermark, may_join_isr, out_of_sync_replicas

LAG = 30_000
T0 = 1_000_000


def test_is_caught_up_when_replica_is_caught_up_to_log_end():
    """ReplicaTest.testIsCaughtUpWhenReplicaIsCaughtUpToLogEnd"""
    r = FollowerState()
    assert not r.is_caught_up(10, T0, LAG)
    r.update_fetch(10, 1, T0, 10, -1)
    assert r.is_caught_up(10, T0, LAG)
    assert r.is_caught_up(10, T0 + LAG + 1, LAG)  # at the leader's end: caught up however long ago


def test_is_caught_up_when_replica_is_not_caught_up_to_log_end():
    """ReplicaTest.testIsCaughtUpWhenReplicaIsNotCaughtUpToLogEnd"""
    r = FollowerState()
    assert not r.is_caught_up(10, T0, LAG)
    r.update_fetch(5, 1, T0, 10, -1)
    assert not r.is_caught_up(10, T0, LAG)
    r.update_fetch(10, 1, T0, 15, -1)  # reached the leader's end as of its previous fetch: caught up then
    assert r.is_caught_up(16, T0, LAG)
    assert not r.is_caught_up(16, T0 + LAG + 1, LAG)


def test_high_watermark_is_the_smallest_isr_log_end():
    followers = {2: FollowerState(), 3: FollowerState()}
    followers[2].update_fetch(7, 0, T0, 7, -1)  # at the leader's end then; the leader has appended since
    followers[3].update_fetch(9, 0, T0, 10, -1)
    assert leader_high_watermark(10, followers, (1, 2, 3), T0, LAG, lambda r: True) == 7
    # a follower outside the ISR that is far behind does not hold it back ...
    stale = {2: FollowerState(), 3: followers[3]}
    stale[2].update_fetch(1, 0, T0 - 2 * LAG, 10, -1)
    assert leader_high_watermark(10, stale, (1, 3), T0, LAG, lambda r: True) == 9
    # ... but one caught up enough to join does (so it can ever join), unless it may not join (fenced)
    assert leader_high_watermark(10, followers, (1, 3), T0, LAG, lambda r: True) == 7
    assert leader_high_watermark(10, followers, (1, 3), T0, LAG, lambda r: r != 2) == 9
    # a follower that has not fetched in this leader epoch holds an ISR back entirely
    assert leader_high_watermark(10, {2: FollowerState()}, (1, 2), T0, LAG, lambda r: True) == -1
    assert leader_high_watermark(10, {}, (1,), T0, LAG, lambda r: True) == 10


def test_out_of_sync_replicas_and_isr_joining():
    followers = {2: FollowerState(), 3: FollowerState()}
    followers[2].update_fetch(10, 0, T0, 10, -1)
    followers[3].update_fetch(4, 0, T0, 10, -1)  # last caught up never
    assert out_of_sync_replicas(10, followers, (1, 2, 3), T0, LAG) == {3}
    assert out_of_sync_replicas(12, followers, (1, 2, 3), T0 + LAG + 1, LAG) == {2, 3}
    assert not may_join_isr(followers[3], high_watermark=8, epoch_start_offset=0)
    assert may_join_isr(followers[2], high_watermark=8, epoch_start_offset=9)
    assert not may_join_isr(followers[2], high_watermark=8, epoch_start_offset=11)  # not yet in this epoch
