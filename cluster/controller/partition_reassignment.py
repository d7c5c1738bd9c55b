"""A partition reassignment's replica lists (KIP-455): Kafka's PartitionReassignmentReplicas and
PartitionReassignmentRevert, plain lists in and out.

While a partition moves, its ``replicas`` are the target replicas followed by the ones being removed;
``adding`` are the target replicas it did not have, ``removing`` the current ones the target drops. The move
completes once the ISR holds every target replica: the removing ones leave the replicas and the ISR.
Cancelling (a null target) goes back to the original replicas: the adding ones leave the replicas and the ISR.
"""

from __future__ import annotations


class InvalidReplicaAssignment(Exception):
    """Kafka's InvalidReplicaAssignmentException (INVALID_REPLICA_ASSIGNMENT)."""


class PartitionReassignmentReplicas:
    def __init__(self, removing: list[int], adding: list[int], replicas: list[int]) -> None:
        self.removing = list(removing)
        self.adding = list(adding)
        self.replicas = list(replicas)

    @classmethod
    def of(cls, current: list[int], target: list[int]) -> "PartitionReassignmentReplicas":
        """From the current and the target replicas: the replicas are the target's, then the removed ones (in
        broker id order, as Kafka's TreeSet)."""
        removing = sorted(set(current) - set(target))
        adding = sorted(set(target) - set(current))
        return cls(removing, adding, list(target) + removing)

    @property
    def in_progress(self) -> bool:
        return bool(self.removing or self.adding)

    def maybe_complete_reassignment(self, target_isr: list[int]) -> tuple[list[int], list[int]] | None:
        """(replicas, ISR) once the reassignment is complete with ``target_isr``; None while it is not (or when
        there is none)."""
        if not self.in_progress:
            return None
        isr, replicas = list(target_isr), self.replicas
        if self.removing:
            isr = [r for r in target_isr if r not in self.removing]
            if not isr:
                return None
            replicas = [r for r in self.replicas if r not in self.removing]
            if not replicas:
                return None
        if not set(replicas) <= set(isr):
            return None
        return replicas, isr

    def original_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PartitionReassignmentReplicas)
                and (self.removing, self.adding, self.replicas) == (other.removing, other.adding, other.replicas))

    def __repr__(self) -> str:
        return f"PartitionReassignmentReplicas(removing={self.removing}, adding={self.adding}, " \
               f"replicas={self.replicas})"


class PartitionReassignmentRevert:
    """The replicas and ISR after cancelling an ongoing reassignment: the adding replicas are taken out. When the
    ISR held only adding replicas, the first original replica becomes the ISR: an unclean election, which the
    caller allows only with ``unclean.leader.election.enable``."""

    def __init__(self, replicas: list[int], isr: list[int], removing: list[int], adding: list[int]) -> None:
        ongoing = PartitionReassignmentReplicas(removing, adding, replicas)
        self.replicas = ongoing.original_replicas()
        self.isr = [r for r in isr if r not in ongoing.adding]
        self.unclean = False
        if not self.isr:
            if not self.replicas:
                raise InvalidReplicaAssignment("Invalid replica assignment: addingReplicas contains all replicas.")
            self.isr = [self.replicas[0]]
            self.unclean = True
