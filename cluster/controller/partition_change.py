"""Kafka's PartitionChangeBuilder: the one place a partition's leader, ISR and replicas change.

Given a partition and the target ISR / replicas, it elects a leader (the current one if still valid, else
the first acceptable ISR member in replica order; PREFERRED tries the first replica first; UNCLEAN falls
back to any acceptable replica, resets the ISR to it and marks the leader RECOVERING) and returns the
PartitionChangeRecord, or None when nothing changes. A leader change bumps the leader epoch (the record's
``leader`` field is set); an ISR change alone does not (metadata.version >= 3.6, KAFKA-15021).
A reassignment (KIP-455: target adding / removing replicas) completes in ``build`` once the ISR holds every
target replica (``complete_reassignment_if_needed``): the removing replicas leave the replicas and the ISR.
Not modelled: eligible leader replicas (KIP-966; ``eligible.leader.replicas.version`` is 0).
"""

from __future__ import annotations

import enum
import logging
from typing import Callable

from cluster.controller.partition_reassignment import PartitionReassignmentReplicas
from cluster.metadata_image import PartitionInfo
from protocol.generated.metadata import PartitionChangeRecord

log = logging.getLogger("odradek.controller")

NO_LEADER = -1
NO_LEADER_CHANGE = -2
RECOVERED, RECOVERING = 0, 1


class Election(enum.Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def change_record_is_no_op(r: PartitionChangeRecord) -> bool:
    return (r.isr is None and r.eligible_leader_replicas is None and r.last_known_elr is None
            and r.leader == NO_LEADER_CHANGE and r.replicas is None and r.removing_replicas is None
            and r.adding_replicas is None and r.leader_recovery_state == -1 and r.directories is None)


class PartitionChangeBuilder:
    def __init__(self, partition: PartitionInfo, topic_id: bytes, partition_id: int,
                 is_acceptable_leader: Callable[[int], bool]) -> None:
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        self.target_isr: list[int] = list(partition.isr)
        self.target_replicas: list[int] = list(partition.replicas)
        self.election = Election.ONLINE
        self.target_leader_recovery_state = partition.leader_recovery_state
        self.target_removing: list[int] = list(partition.removing_replicas)
        self.target_adding: list[int] = list(partition.adding_replicas)

    def set_target_isr(self, isr: list[int]) -> "PartitionChangeBuilder":
        self.target_isr = list(isr)
        return self

    def set_target_replicas(self, replicas: list[int]) -> "PartitionChangeBuilder":
        self.target_replicas = list(replicas)
        return self

    def set_target_removing(self, removing: list[int]) -> "PartitionChangeBuilder":
        self.target_removing = list(removing)
        return self

    def set_target_adding(self, adding: list[int]) -> "PartitionChangeBuilder":
        self.target_adding = list(adding)
        return self

    def set_election(self, election: Election) -> "PartitionChangeBuilder":
        self.election = election
        return self

    def set_target_leader_recovery_state(self, state: int) -> "PartitionChangeBuilder":
        self.target_leader_recovery_state = state
        return self

    # ---- election ---------------------------------------------------------------------------------

    def _valid_new_leader(self, replica: int) -> bool:
        return replica in self.target_isr and self.is_acceptable_leader(replica)

    def elect_leader(self) -> tuple[int, bool]:
        """(new leader or NO_LEADER, whether the election was unclean)."""
        current = self.partition.leader
        if self.election == Election.PREFERRED:
            preferred = self.target_replicas[0]
            if self._valid_new_leader(preferred):
                return preferred, False
            if self._valid_new_leader(current):
                return current, False
            for r in self.target_replicas[1:]:
                if self._valid_new_leader(r):
                    return r, False
            return NO_LEADER, False
        if self._valid_new_leader(current):
            return current, False
        for r in self.target_replicas:
            if self._valid_new_leader(r):
                return r, False
        if self.election == Election.UNCLEAN:
            for r in self.target_replicas:
                if self.is_acceptable_leader(r):
                    return r, True
        return NO_LEADER, False

    def _try_election(self, record: PartitionChangeRecord) -> None:
        leader, unclean = self.elect_leader()
        if leader == self.partition.leader:
            return
        if unclean:
            log.info("Setting new leader for topicId %s, partition %d to %d using an unclean election",
                     self.topic_id.hex(), self.partition_id, leader)
        record.leader = leader
        if unclean:  # the ISR is forced to the new leader: records it lacks are lost
            record.isr = [leader]
            if self.partition.leader_recovery_state != RECOVERING:
                record.leader_recovery_state = RECOVERING

    def _trigger_leader_epoch_bump_for_replica_reassignment(self, record: PartitionChangeRecord) -> None:
        if record.leader != NO_LEADER_CHANGE:
            return
        if not set(self.partition.replicas) <= set(self.target_replicas):
            record.leader = self.partition.leader  # replicas left the set: fence them with a new epoch

    def complete_reassignment_if_needed(self) -> None:
        """PartitionChangeBuilder.completeReassignmentIfNeeded: done once the ISR holds every target replica."""
        done = PartitionReassignmentReplicas(self.target_removing, self.target_adding, self.target_replicas
                                             ).maybe_complete_reassignment(self.target_isr)
        if done is not None:
            self.target_replicas, self.target_isr = done
            self.target_removing, self.target_adding = [], []

    def build(self) -> PartitionChangeRecord | None:
        record = PartitionChangeRecord(topic_id=self.topic_id, partition_id=self.partition_id)
        self.complete_reassignment_if_needed()
        self._try_election(record)
        self._trigger_leader_epoch_bump_for_replica_reassignment(record)
        if record.isr is None and self.target_isr and self.target_isr != list(self.partition.isr):
            record.isr = list(self.target_isr)
        if self.target_replicas and self.target_replicas != list(self.partition.replicas):
            record.replicas = list(self.target_replicas)
        if self.target_removing != list(self.partition.removing_replicas):
            record.removing_replicas = list(self.target_removing)
        if self.target_adding != list(self.partition.adding_replicas):
            record.adding_replicas = list(self.target_adding)
        if self.target_leader_recovery_state != self.partition.leader_recovery_state:
            record.leader_recovery_state = self.target_leader_recovery_state
        return None if change_record_is_no_op(record) else record
