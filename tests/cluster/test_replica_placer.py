"""Kafka's StripedReplicaPlacerTest, ported: the same brokers, the same MockRandom, the same placements."""

from __future__ import annotations

import collections

import pytest

from cluster.controller.java_random import BitsRandom, MockRandom
from cluster.controller.replica_placer import (
    BrokerList, InvalidReplicationFactor, RackList, UsableBroker, java_hash_map_order, place,
)


def B(id, rack=None, fenced=False):
    return UsableBroker(id, rack, fenced)


def test_broker_list():
    """testBrokerList"""
    assert BrokerList().size() == 0 and BrokerList().next(1) == -1
    brokers = BrokerList().add(0).add(1).add(2).add(3)
    assert brokers.size() == 4
    assert [brokers.next(0) for _ in range(6)] == [0, 1, 2, 3, -1, -1]
    assert [brokers.next(1) for _ in range(5)] == [1, 2, 3, 0, -1]


def test_avoid_fenced_replica_if_possible_on_single_rack():
    """testAvoidFencedReplicaIfPossibleOnSingleRack"""
    rl = RackList(MockRandom(), [B(3), B(1, fenced=True), B(0), B(4), B(2)])
    assert (rl.num_total_brokers, rl.num_unfenced_brokers, rl.rack_names) == (5, 4, [None])
    for bad in (0, -1):
        with pytest.raises(InvalidReplicationFactor):
            rl.place(bad)
    assert [rl.place(4) for _ in range(5)] == [[3, 4, 0, 2], [4, 0, 2, 3], [0, 2, 3, 4], [2, 3, 4, 0], [0, 4, 3, 2]]


def test_multi_partition_topic_placement_on_single_unfenced_broker():
    """testMultiPartitionTopicPlacementOnSingleUnfencedBroker"""
    assert place(MockRandom(), 3, 1, [B(0), B(1, fenced=True)]) == [[0], [0], [0]]


def test_placement_on_fenced_replica_on_single_rack():
    """testPlacementOnFencedReplicaOnSingleRack"""
    rl = RackList(MockRandom(), [B(3), B(1, fenced=True), B(2)])
    assert (rl.num_total_brokers, rl.num_unfenced_brokers) == (3, 2)
    assert [rl.place(3) for _ in range(4)] == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_rack_list_with_multiple_racks():
    """testRackListWithMultipleRacks"""
    rl = RackList(MockRandom(), [B(11, "1"), B(10, "1"), B(30, "3"), B(31, "3"), B(21, "2"), B(20, "2", True)])
    assert (rl.num_total_brokers, rl.num_unfenced_brokers, rl.rack_names) == (6, 5, ["1", "2", "3"])
    assert [rl.place(4) for _ in range(3)] == [[11, 21, 31, 10], [21, 30, 10, 20], [31, 11, 21, 30]]


def test_rack_list_with_invalid_racks():
    """testRackListWithInvalidRacks"""
    rl = RackList(MockRandom(), [B(11, "1"), B(10, "1"), B(30, "3", True), B(31, "3", True), B(20, "2", True),
                                 B(21, "2", True), B(41, "4"), B(40, "4", True)])
    assert (rl.num_total_brokers, rl.num_unfenced_brokers, rl.rack_names) == (8, 3, ["1", "2", "3", "4"])
    assert [rl.place(4) for _ in range(3)] == [[41, 11, 21, 30], [10, 20, 31, 41], [41, 21, 30, 11]]


def test_all_brokers_fenced():
    """testAllBrokersFenced"""
    with pytest.raises(InvalidReplicationFactor, match="^All brokers are currently fenced.$"):
        place(MockRandom(), 1, 1, [B(11, "1", True), B(10, "1", True)])


def test_not_enough_brokers():
    """testNotEnoughBrokers"""
    with pytest.raises(InvalidReplicationFactor) as e:
        place(MockRandom(), 1, 3, [B(11, "1"), B(10, "1")])
    assert str(e.value) == ("The target replication factor of 3 cannot be reached because only 2 broker(s) "
                            "are registered.")


def test_non_positive_replication_factor():
    """testNonPositiveReplicationFactor"""
    with pytest.raises(InvalidReplicationFactor) as e:
        place(MockRandom(), 1, 0, [B(11, "1"), B(10, "1")])
    assert str(e.value) == "Invalid replication factor 0: the replication factor must be positive."


def test_successful_placement():
    """testSuccessfulPlacement"""
    assert place(MockRandom(), 5, 3, [B(0), B(3), B(2), B(1)]) == [[2, 3, 0], [3, 0, 1], [0, 1, 2], [1, 2, 3],
                                                                    [1, 0, 2]]


def test_even_distribution():
    """testEvenDistribution"""
    counts = collections.Counter(tuple(r) for r in place(MockRandom(), 200, 2, [B(0), B(1), B(2), B(3)]))
    assert counts == {(0, 1): 14, (0, 2): 22, (0, 3): 14, (1, 0): 17, (1, 2): 17, (1, 3): 16, (2, 0): 13,
                      (2, 1): 17, (2, 3): 20, (3, 0): 20, (3, 1): 19, (3, 2): 11}


def test_rack_list_all_brokers_fenced():
    """testRackListAllBrokersFenced"""
    rl = RackList(MockRandom(), [B(0, fenced=True), B(1, fenced=True), B(2, fenced=True)])
    assert (rl.num_total_brokers, rl.num_unfenced_brokers, rl.rack_names) == (3, 0, [None])
    with pytest.raises(InvalidReplicationFactor, match="^All brokers are currently fenced.$"):
        rl.place(3)


def test_rack_list_not_enough_brokers():
    """testRackListNotEnoughBrokers"""
    with pytest.raises(InvalidReplicationFactor, match="only 2 broker"):
        RackList(MockRandom(), [B(11, "1"), B(10, "1")]).place(3)


def test_rack_list_non_positive_replication_factor():
    """testRackListNonPositiveReplicationFactor"""
    with pytest.raises(InvalidReplicationFactor, match="^Invalid replication factor -1"):
        RackList(MockRandom(), [B(11, "1"), B(10, "1")]).place(-1)


# ---- beyond Kafka's tests ------------------------------------------------------------------------------------------

def test_java_next_int_matches_java_random():
    """java.util.Random(42).nextInt(10) x5 is 0, 3, 8, 4, 0 (Java's documented LCG, seeded as Random(seed))."""
    state = [(42 ^ 0x5DEECE66D) & ((1 << 48) - 1)]

    def next_bits(bits):
        state[0] = (state[0] * 0x5DEECE66D + 0xB) & ((1 << 48) - 1)
        v = state[0] >> (48 - bits)
        return v - (1 << 32) if v >= 1 << 31 else v

    r = BitsRandom(next_bits)
    assert [r.next_int(10) for _ in range(5)] == [0, 3, 8, 4, 0]


def test_hash_map_order_of_racks():
    """Single-character racks hash to consecutive buckets; Optional.empty() hashes to 0, the first bucket."""
    assert java_hash_map_order(["3", "1", None, "2"]) == [None, "1", "2", "3"]
    # "Aa" and "BB" collide in Java (2112): insertion order decides within the bucket
    assert java_hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]


def test_rack_aware_spread():
    """Three racks, replication factor 3: every partition has one replica per rack, the racks lead in turn and
    every broker leads some partitions."""
    brokers = [B(i, f"r{i % 3}") for i in range(9)]
    plan = place(MockRandom(7), 90, 3, brokers)
    assert all(len({b % 3 for b in replicas}) == 3 for replicas in plan)
    assert collections.Counter(r[0] % 3 for r in plan) == {0: 30, 1: 30, 2: 30}
    assert set(r[0] for r in plan) == set(range(9))
