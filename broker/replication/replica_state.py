"""What a partition leader knows about each follower, and the high watermark it allows (Kafka's ``Replica``
and ``Partition.maybeIncrementLeaderHW``). Plain data and functions: the replica manager feeds them fetches
and time, tests feed them numbers."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Mapping


@dataclasses.dataclass
class FollowerState:
    """``ReplicaState``: a follower's position as its fetches show it."""

    log_end_offset: int = -1  # the follower's fetch offset: it has everything below
    log_start_offset: int = -1
    last_caught_up_ms: int = 0  # the last time its fetch offset reached the leader's end at an earlier fetch
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_ms: int = 0
    broker_epoch: int = -1

    def update_fetch(self, fetch_offset: int, log_start_offset: int, fetch_ms: int, leader_end_offset: int,
                     broker_epoch: int) -> None:
        """``Replica.updateFetchStateOrThrow``: a fetch at the leader's end makes the follower caught up now;
        one at the leader's end as of its previous fetch makes it caught up as of that fetch."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, fetch_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_ms = fetch_ms
        self.broker_epoch = broker_epoch

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_max_ms: int) -> bool:
        """``ReplicaState.isCaughtUp``: at the leader's end, or caught up within ``replica.lag.time.max.ms``."""
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_ms <= lag_max_ms


def leader_high_watermark(leader_end_offset: int, followers: Mapping[int, FollowerState], isr: Iterable[int],
                          now_ms: int, lag_max_ms: int, isr_eligible: Callable[[int], bool]) -> int:
    """``maybeIncrementLeaderHW``'s candidate: the smallest log end offset among the (maximal) ISR members and
    the followers caught up enough to join it (so a catching-up follower is not left behind forever)."""
    in_sync = set(isr)
    hw = leader_end_offset
    for replica_id, state in followers.items():
        if state.log_end_offset < hw and (
                replica_id in in_sync
                or (state.is_caught_up(leader_end_offset, now_ms, lag_max_ms) and isr_eligible(replica_id))):
            hw = state.log_end_offset
    return hw


def out_of_sync_replicas(leader_end_offset: int, followers: Mapping[int, FollowerState], isr: Iterable[int],
                         now_ms: int, lag_max_ms: int) -> set[int]:
    """``Partition.getOutOfSyncReplicas``: ISR followers not caught up within ``replica.lag.time.max.ms``."""
    return {r for r in isr if r in followers and not followers[r].is_caught_up(leader_end_offset, now_ms, lag_max_ms)}


def may_join_isr(state: FollowerState, high_watermark: int, epoch_start_offset: int) -> bool:
    """``Partition.isFollowerInSync``: a follower joins the ISR once it has the high watermark and this leader
    epoch's first offset (else committed data between them could be lost if it became leader)."""
    return state.log_end_offset >= high_watermark and state.log_end_offset >= epoch_start_offset
