"""Kafka's ElectionState: what a node must remember across restarts about an epoch (the ``quorum-state`` file).

A node that voted in an epoch, or knows its leader, writes this before it acts on it: otherwise a restart
could make it vote twice in one epoch or forget the epoch it had reached.
"""

from __future__ import annotations

import dataclasses

NO_ID = -1


@dataclasses.dataclass(frozen=True)
class ElectionState:
    epoch: int
    leader_id: int = NO_ID
    voted_id: int = NO_ID
    voters: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError(f"negative epoch {self.epoch}")

    @property
    def has_leader(self) -> bool:
        return self.leader_id != NO_ID

    @property
    def has_voted(self) -> bool:
        return self.voted_id != NO_ID

    @classmethod
    def with_unknown_leader(cls, epoch: int, voters=frozenset()) -> "ElectionState":
        return cls(epoch, NO_ID, NO_ID, frozenset(voters))

    @classmethod
    def with_voted_candidate(cls, epoch: int, voted_id: int, voters=frozenset()) -> "ElectionState":
        return cls(epoch, NO_ID, voted_id, frozenset(voters))

    @classmethod
    def with_elected_leader(cls, epoch: int, leader_id: int, voters=frozenset(), voted_id: int = NO_ID
                            ) -> "ElectionState":
        return cls(epoch, leader_id, voted_id, frozenset(voters))
