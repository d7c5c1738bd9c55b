"""The share-group assignor of Kafka 4.2 (KIP-932): ``simple`` (Kafka's SimpleAssignor with its
SimpleHomogeneousAssignmentBuilder and SimpleHeterogeneousAssignmentBuilder, as finalized by KAFKA-19362 and
KAFKA-19363).

Share-group members share partitions, so the assignor balances two loads at once. With M members and P
assignable partitions, each partition wants ``ceil(M / P)`` members (the *sharing*), and member i (in member
order) wants ``ceil(x * (i + 1)) - ceil(x * i)`` partitions with ``x = sharing * P / M``: every member's load is
within one of every other's, and every partition is assigned when there is at least one member. Balance comes
first, then stickiness: a member keeps the partitions it has up to its load, over-shared partitions and overfilled
members give partitions back, and the partitions still short of members go round-robin to the members still
short of partitions. When members subscribe to different topics (heterogeneous), each topic is balanced over the
members subscribed to it.

Only *assignable* partitions are assigned: those whose share state the share coordinator has initialized
(``ShareGroupStatePartitionMetadata``'s initialized topics; Kafka's ``GroupSpec.isPartitionAssignable``).

Differences from Kafka, all in Kafka's corner cases, none in its balance rules: iteration follows the member order
and sorted partitions rather than Java hash order (assignments are deterministic); a member that gives a partition
back is only counted as unfilled when it is below its load, a member revoked for being overfilled loses the
partition from its assignment too, and partitions the round-robin cannot place (every unfilled member already has
them) do not stop the partitions after them from being placed.
"""

from __future__ import annotations

import math

from cluster.groups.assignors import Assignment, GroupSpec, PartitionAssignorError

TopicPartition = tuple[bytes, int]


class SimpleAssignor:
    """Kafka's ``simple`` ShareGroupPartitionAssignor."""

    name = "simple"

    def assign(self, spec: GroupSpec, partitions: dict[bytes, int],
               assignable: dict[bytes, set[int]] | None = None) -> dict[str, Assignment]:
        """``partitions``: topic id -> partition count; ``assignable``: topic id -> the partitions that may be
        assigned (None: all of them). Returns every member's new target assignment."""
        if not spec.members:
            return {}
        member_ids = list(spec.members)
        subscribed = set().union(*(m.subscribed for m in spec.members.values()))
        for t in sorted(subscribed):
            if t not in partitions:
                raise PartitionAssignorError(f"Members are subscribed to topic {t.hex()} which doesn't exist in "
                                             "the topic metadata.")
        if not subscribed:
            return {}

        def targets(topics) -> list[TopicPartition]:
            out = []
            for t in sorted(topics):
                allowed = None if assignable is None else assignable.get(t, set())
                out += [(t, p) for p in range(partitions[t]) if allowed is None or p in allowed]
            return out

        old = [{t: set(ps) for t, ps in spec.members[mid].assignment.items()} for mid in member_ids]
        new: list[Assignment] = [{} for _ in member_ids]
        if spec.homogeneous:
            topics = spec.members[member_ids[0]].subscribed
            _Balancer(list(range(len(member_ids))), targets(topics), set(topics), old, new).build()
        else:
            for t in sorted(subscribed):
                subscribers = [i for i, mid in enumerate(member_ids) if t in spec.members[mid].subscribed]
                _Balancer(subscribers, targets([t]), {t}, old, new).build()
        return {mid: {t: ps for t, ps in new[i].items() if ps} for i, mid in enumerate(member_ids)}


class _Balancer:
    """One balancing scope: the whole group (homogeneous) or one topic and its subscribers (heterogeneous).
    Reads the members' old assignments within the scope's topics and writes their new ones into ``new``."""

    def __init__(self, members: list[int], targets: list[TopicPartition], topics: set[bytes],
                 old: list[Assignment], new: list[Assignment]) -> None:
        self.members = members
        self.targets = targets
        self.topics = topics
        self.old = old
        self.new = new
        n_members, n_parts = len(members), len(targets)
        self.sharing = 0 if n_parts == 0 or n_members == 0 else (n_members + n_parts - 1) // n_parts
        precise = self.sharing * n_parts / n_members if n_members else 0.0
        # the desired number of partitions of each member, in member order (Kafka's desiredAssignmentCount)
        self.desired = {m: math.ceil(precise * (k + 1)) - math.ceil(precise * k) for k, m in enumerate(members)}
        # ordered sets (dicts): partition -> members holding it, member -> partitions it holds
        self.by_partition: dict[TopicPartition, dict[int, None]] = {}
        self.by_member: dict[int, dict[TopicPartition, None]] = {m: {} for m in members}

    def _give(self, m: int, tp: TopicPartition) -> None:
        self.by_partition.setdefault(tp, {})[m] = None
        self.by_member[m][tp] = None
        self.new[m].setdefault(tp[0], set()).add(tp[1])

    def _take(self, m: int, tp: TopicPartition) -> None:
        self.by_partition[tp].pop(m, None)
        self.by_member[m].pop(tp, None)
        ps = self.new[m].get(tp[0])
        if ps is not None:
            ps.discard(tp[1])

    def build(self) -> None:
        self._keep_assignable()
        self._revoke_overshared()
        self._revoke_overfilled()
        self._assign_remaining()

    def _keep_assignable(self) -> None:
        """Each member keeps its partitions still subscribed and assignable (revokeUnassignablePartitions)."""
        targets = set(self.targets)
        for m in self.members:
            for t in sorted(self.topics):
                for p in sorted(self.old[m].get(t, ())):
                    if (t, p) in targets:
                        self._give(m, (t, p))

    def _revoke_overshared(self) -> None:
        """Partitions shared by more members than desired give them up, overfilled members first
        (revokeOversharedPartitions)."""
        for tp in self.targets:
            holders = self.by_partition.get(tp, {})
            excess = len(holders) - self.sharing
            if excess <= 0:
                continue
            overfilled = [m for m in holders if len(self.by_member[m]) > self.desired[m]]
            others = [m for m in holders if m not in overfilled]
            for m in (overfilled + others)[:excess]:
                self._take(m, tp)

    def _revoke_overfilled(self) -> None:
        """Members with more partitions than desired give up the excess (revokeOverfilledMembers)."""
        for m in self.members:
            held = list(self.by_member[m])
            for tp in held[:max(0, len(held) - self.desired[m])]:
                self._take(m, tp)

    def _assign_remaining(self) -> None:
        """Partitions short of members go round-robin to the members short of partitions
        (assignRemainingPartitions). Bounded: each pass over the unfilled members assigns or ends the partition."""
        unfilled = [m for m in self.members if len(self.by_member[m]) < self.desired[m]]
        pos = 0
        assigned_this_pass = False
        for tp in self.targets:
            if not unfilled:
                break
            holders = self.by_partition.setdefault(tp, {})
            need = self.sharing - len(holders)
            while need > 0 and unfilled:
                if pos >= len(unfilled):
                    stuck = not assigned_this_pass
                    pos, assigned_this_pass = 0, False
                    if stuck:  # every unfilled member already holds tp: tolerate the slight imbalance
                        break
                m = unfilled[pos]
                if m not in holders:
                    self._give(m, tp)
                    need -= 1
                    assigned_this_pass = True
                    if len(self.by_member[m]) >= self.desired[m]:
                        unfilled.pop(pos)
                        continue
                pos += 1
