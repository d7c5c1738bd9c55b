"""Fetch from the closest replica (KIP-392, broker/replication/replica_selector.py): Kafka's ReplicaSelectorTest, the
candidate rules of ReplicaManager.findPreferredReadReplica (ReplicaManagerTest's preferred-replica cases), properties of
the choice over random partitions, and ``replica.selector.class`` validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import DEFAULTS, BrokerConfig, ConfigException
from broker.replication.replica_selector import (
    RACK_AWARE_REPLICA_SELECTOR, FollowerView, ReplicaView, preferred_read_replica, rack_aware_select,
    replica_selector,
)

T0 = 1_000_000


def test_same_rack_selector():
    """ReplicaSelectorTest.testSameRackSelector"""
    views = [ReplicaView(0, "rack-a", 4, 0), ReplicaView(1, "rack-a", 2, 5), ReplicaView(2, "rack-b", 3, 3),
             ReplicaView(3, "rack-b", 4, 2)]
    leader = views[0]
    replicas = frozenset(views)
    selected = rack_aware_select("test", 0, "rack-b", replicas, leader)
    assert selected.rack == "rack-b" and selected.node_id == 3  # the more caught-up one
    assert rack_aware_select("test", 0, "not-a-rack", replicas, leader) == leader
    assert rack_aware_select("test", 0, "rack-a", replicas, leader) == leader  # the leader is in rack-a


@pytest.mark.parametrize("rack", [None, ""])
def test_no_client_rack_selects_the_leader(rack):
    leader = ReplicaView(0, "rack-a", 4, 0)
    replicas = frozenset({leader, ReplicaView(1, None, 9, 0), ReplicaView(2, "", 9, 0)})
    assert rack_aware_select("t", 0, rack, replicas, leader) == leader


def test_ties_go_to_the_most_recently_caught_up_then_the_highest_id():
    """ReplicaView.comparator: log end offset, then time since caught up reversed, then broker id."""
    leader = ReplicaView(1, "a", 10, 0)
    same_end = frozenset({leader, ReplicaView(2, "b", 10, 50), ReplicaView(3, "b", 10, 20)})
    assert rack_aware_select("t", 0, "b", same_end, leader).node_id == 3
    all_tied = frozenset({leader, ReplicaView(2, "b", 10, 20), ReplicaView(3, "b", 10, 20)})
    assert rack_aware_select("t", 0, "b", all_tied, leader).node_id == 3


RACKS = {1: "r1", 2: "r2", 3: "r3"}


def choose(client_rack, followers, isr=(1, 2, 3), racks=RACKS, fetch_offset=5, leader_end=10, leader=1):
    return preferred_read_replica(rack_aware_select, "t", 0, client_rack, leader, leader_end, followers, isr, racks,
                                  fetch_offset, T0)


CAUGHT_UP = {2: FollowerView(10, 0, T0), 3: FollowerView(10, 0, T0)}


def test_a_follower_in_the_clients_rack_is_preferred():
    assert choose("r2", CAUGHT_UP) == 2
    assert choose("r3", CAUGHT_UP) == 3


def test_the_leader_is_no_preferred_replica():
    """testPreferredReplicaAsLeader: the leader in the client's rack, no replica there, or no rack: None."""
    assert choose("r1", CAUGHT_UP) is None
    assert choose("elsewhere", CAUGHT_UP) is None
    assert choose("", CAUGHT_UP) is None
    assert choose(None, CAUGHT_UP) is None


def test_a_follower_out_of_the_isr_is_never_chosen():
    """testPreferredReplicaAsLeaderWhenSameRackFollowerIsOutOfIsr"""
    assert choose("r2", CAUGHT_UP, isr=(1, 3)) is None


def test_a_follower_must_hold_the_fetch_offset():
    behind = {2: FollowerView(4, 0, T0 - 10)}  # its log ends before the fetch offset
    assert choose("r2", behind, fetch_offset=5) is None
    assert choose("r2", behind, fetch_offset=4) == 2  # at its log end: it answers once it has more
    trimmed = {2: FollowerView(10, 6, T0)}  # its log starts after the fetch offset
    assert choose("r2", trimmed, fetch_offset=5) is None
    assert choose("r2", trimmed, fetch_offset=6) == 2
    never_fetched = {2: FollowerView(-1, -1, 0)}  # a new leader epoch: positions unknown until it fetches
    assert choose("r2", never_fetched, fetch_offset=0) is None


def test_a_fenced_broker_or_one_without_the_clients_listener_is_never_chosen():
    """getPartitionReplicaEndpoints: only unfenced brokers with an endpoint on the client's listener."""
    assert choose("r2", CAUGHT_UP, racks={1: "r1", 3: "r3"}) is None
    # the leader's own endpoint missing does not stop a follower from being chosen
    assert choose("r2", CAUGHT_UP, racks={2: "r2", 3: "r3"}) == 2


def test_the_most_caught_up_follower_in_the_rack_wins():
    racks = {1: "r1", 2: "r2", 3: "r2", 4: "r2"}
    followers = {2: FollowerView(9, 0, T0 - 100), 3: FollowerView(10, 0, T0 - 100), 4: FollowerView(10, 0, T0)}
    assert choose("r2", followers, isr=(1, 2, 3, 4), racks=racks) == 4


@st.composite
def partitions(draw):
    n = draw(st.integers(1, 5))
    ids = list(range(1, n + 1))
    leader = draw(st.sampled_from(ids))
    rack = st.sampled_from(["r1", "r2", "r3", None])
    racks = {i: draw(rack) for i in ids if draw(st.booleans()) or i == leader}
    leader_end = draw(st.integers(0, 20))
    followers = {}
    for i in ids:
        if i != leader:
            end = draw(st.integers(-1, leader_end))
            followers[i] = FollowerView(end, draw(st.integers(-1, max(0, end))), draw(st.integers(T0 - 50_000, T0)))
    isr = [i for i in ids if i == leader or draw(st.booleans())]
    return leader, leader_end, followers, isr, racks


@settings(max_examples=300, deadline=None)
@given(partitions(), st.sampled_from(["r1", "r2", "r3", "", None]), st.integers(0, 20))
def test_the_choice_is_an_eligible_same_rack_follower_or_none(partition, client_rack, fetch_offset):
    leader, leader_end, followers, isr, racks = partition
    got = choose(client_rack, followers, isr=isr, racks=racks, fetch_offset=fetch_offset, leader_end=leader_end,
                 leader=leader)
    eligible = {i: f for i, f in followers.items()
                if i in isr and i in racks and f.log_start_offset <= fetch_offset <= f.log_end_offset}
    in_rack = {i: f for i, f in eligible.items() if client_rack and racks[i] == client_rack}
    if not client_rack or racks.get(leader) == client_rack or not in_rack:
        assert got is None
    else:
        best = max(in_rack, key=lambda i: (in_rack[i].log_end_offset, in_rack[i].last_caught_up_ms, i))
        assert got == best


# ---- replica.selector.class -------------------------------------------------------------------------------------

def test_unset_by_default_the_leader_serves():
    assert DEFAULTS["replica.selector.class"] is None
    assert replica_selector(None) is None and replica_selector("") is None and replica_selector("  ") is None


@pytest.mark.parametrize("name", [RACK_AWARE_REPLICA_SELECTOR, f" {RACK_AWARE_REPLICA_SELECTOR} ",
                                  "RackAwareReplicaSelector"])
def test_the_rack_aware_selector_by_its_class_name(name):
    assert replica_selector(name) is rack_aware_select
    BrokerConfig({"replica.selector.class": name}).validate()


@pytest.mark.parametrize("name", ["non-a-class", "org.apache.kafka.common.replica.LeaderSelector",
                                  "rackawarereplicaselector"])
def test_an_unknown_class_fails_validation(name):
    """testUnknownReplicaSelector (Kafka fails at start with ClassNotFoundException; here config validation)."""
    with pytest.raises(ConfigException, match=rf"Invalid value {name} for configuration replica.selector.class: "
                                              rf"Class {name} could not be found"):
        BrokerConfig({"replica.selector.class": name}).validate()
