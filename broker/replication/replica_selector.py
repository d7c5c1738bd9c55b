"""Fetch from the closest replica (KIP-392): ``replica.selector.class`` and the leader's choice of a consumer's
preferred read replica. Plain data and functions: the Fetch handler feeds them the leader's view of its
followers, the image's racks and the client's ``rack_id``; tests feed them numbers.

* ``replica.selector.class`` is unset by default: the leader serves every consumer itself, as Kafka. Kafka
  loads the class by name (``Class.forName``), so the one selector it ships is named
  ``org.apache.kafka.common.replica.RackAwareReplicaSelector``; its simple name ``RackAwareReplicaSelector``
  is taken too. Any other name fails config validation with Kafka's ConfigDef message.
* ``RackAwareReplicaSelector.select``: without a client rack, or when no replica is in the client's rack, or when
  the leader is, the leader; else the most caught-up replica in that rack (``ReplicaView.comparator``: highest
  log end offset, then the shortest time since it was last caught up, then the highest broker id).
* ``ReplicaManager.findPreferredReadReplica``: only on the leader and only for consumers; the candidates are the
  followers in the (committed) ISR whose log end offset and log start offset (as their fetches reported them)
  hold the fetch offset, on brokers the image has unfenced with an endpoint on the client's listener, and the
  leader itself (time since caught up 0). The leader chosen answers None: the leader reads as usual.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Mapping, NamedTuple

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class ReplicaView(NamedTuple):
    """Kafka's ``ReplicaView``: the replica's endpoint (broker id and rack), its log end offset and how long ago
    it was last caught up with the leader."""

    node_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


# (topic, partition, client rack, replicas, leader) -> the preferred replica, or None for no preference
ReplicaSelector = Callable[[str, int, str | None, "frozenset[ReplicaView]", ReplicaView], "ReplicaView | None"]


def _most_caught_up(view: ReplicaView) -> tuple[int, int, int]:
    """``ReplicaView.comparator()``: log end offset, then time since caught up reversed, then broker id."""
    return view.log_end_offset, -view.time_since_last_caught_up_ms, view.node_id


def rack_aware_select(topic: str, partition: int, client_rack: str | None, replicas: frozenset[ReplicaView],
                      leader: ReplicaView) -> ReplicaView | None:
    """``RackAwareReplicaSelector.select``."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=_most_caught_up)


SELECTORS: dict[str, ReplicaSelector] = {RACK_AWARE_REPLICA_SELECTOR: rack_aware_select}
_SIMPLE_NAMES = {name.rpartition(".")[2]: name for name in SELECTORS}


def replica_selector(class_name: object) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names (None: unset, the leader serves every fetch); ValueError with
    Kafka's ConfigDef message for a class that does not exist. Surrounding blanks are trimmed, as ConfigDef
    trims a string value."""
    return None if class_name is None else _selector(str(class_name))


@functools.lru_cache(maxsize=8)
def _selector(class_name: str) -> ReplicaSelector | None:
    name = class_name.strip()
    if not name:
        return None
    selector = SELECTORS.get(_SIMPLE_NAMES.get(name, name))
    if selector is None:
        raise ValueError(f"Invalid value {class_name} for configuration replica.selector.class: Class {class_name} "
                         f"could not be found. Known: {', '.join(SELECTORS)}")
    return selector


class FollowerView(NamedTuple):
    """What the leader knows of one follower from its fetches (``ReplicaState``)."""

    log_end_offset: int
    log_start_offset: int
    last_caught_up_ms: int


def preferred_read_replica(selector: ReplicaSelector, topic: str, partition: int, client_rack: str | None,
                           leader_id: int, leader_log_end_offset: int, followers: Mapping[int, FollowerView],
                           isr: Iterable[int], racks: Mapping[int, str | None], fetch_offset: int,
                           now_ms: int) -> int | None:
    """``ReplicaManager.findPreferredReadReplica`` on the leader for a consumer's fetch: the replica the client
    should fetch from instead, or None (the leader itself). ``racks`` maps each broker the client can reach (the
    image has it unfenced, with an endpoint on the client's listener) to its ``broker.rack``."""
    in_sync = set(isr)
    views = set()
    for replica_id, state in followers.items():
        # followers out of the ISR may lag behind for ever: a consumer sent there would fall behind the producers
        if (replica_id in in_sync and replica_id in racks and state.log_end_offset >= fetch_offset
                and state.log_start_offset <= fetch_offset):
            views.add(ReplicaView(replica_id, racks[replica_id], state.log_end_offset,
                                  now_ms - state.last_caught_up_ms))
    leader = ReplicaView(leader_id, racks.get(leader_id), leader_log_end_offset, 0)
    views.add(leader)
    selected = selector(topic, partition, client_rack, frozenset(views), leader)
    if selected is None or selected == leader or selected.node_id not in racks:
        return None
    return selected.node_id
