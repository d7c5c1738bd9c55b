"""Server-side assignors of the consumer (KIP-848) protocol: ``uniform`` and ``range``.

Both take a :class:`GroupSpec` (each member's subscribed topic ids, instance id and current target
assignment) and the partition count of every subscribed topic, and return member id ->
{topic id: set of partitions}.

* ``uniform`` (Kafka's UniformAssignor, the default): balanced (every member gets floor or ceil of
  the partitions it can take) and sticky (a member keeps what it has up to its quota). For groups
  whose members all subscribe to the same topics this is UniformHomogeneousAssignmentBuilder's
  algorithm; for heterogeneous subscriptions a sticky greedy pass balances each topic over the
  members subscribed to it (Kafka's UniformHeterogeneousAssignmentBuilder reaches the same kind of
  balance with more bookkeeping).
* ``range`` (Kafka's RangeAssignor): per topic, members sorted by instance id (static members first)
  then member id each take a contiguous range; co-partitioned when every member subscribes to the
  same topics and the topics have equal partition counts.
"""

from __future__ import annotations

import dataclasses

Assignment = dict[bytes, set[int]]


class PartitionAssignorError(Exception):
    pass


@dataclasses.dataclass
class MemberSpec:
    subscribed: set[bytes]
    assignment: Assignment
    instance_id: str | None = None
    rack_id: str | None = None


@dataclasses.dataclass
class GroupSpec:
    members: dict[str, MemberSpec]  # insertion order is the member order Kafka iterates
    homogeneous: bool


def subscription_is_homogeneous(members: dict[str, MemberSpec]) -> bool:
    subs = [frozenset(m.subscribed) for m in members.values()]
    return len(set(subs)) <= 1


class UniformAssignor:
    name = "uniform"

    def assign(self, spec: GroupSpec, partitions: dict[bytes, int]) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        for m in spec.members.values():
            for t in m.subscribed:
                if t not in partitions:
                    raise PartitionAssignorError(f"Members are subscribed to topic {t.hex()} which doesn't exist "
                                                 "in the topic metadata.")
        if spec.homogeneous:
            return self._homogeneous(spec, partitions)
        return self._heterogeneous(spec, partitions)

    def _homogeneous(self, spec: GroupSpec, partitions: dict[bytes, int]) -> dict[str, Assignment]:
        topics = sorted(next(iter(spec.members.values())).subscribed)
        if not topics:
            return {mid: {} for mid in spec.members}
        held = {(t, p) for m in spec.members.values() for t, ps in m.assignment.items() if t in topics
                for p in ps if p < partitions[t]}
        unassigned = [(t, p) for t in topics for p in range(partitions[t]) if (t, p) not in held]
        total = sum(partitions[t] for t in topics)
        n = len(spec.members)
        minimum, extra = divmod(total, n)
        out: dict[str, Assignment] = {}
        unfilled: list[tuple[str, int]] = []
        # members already holding more than the minimum keep the extra slots first (stickiness)
        order = sorted(spec.members, key=lambda mid: -sum(
            len(ps) for t, ps in spec.members[mid].assignment.items() if t in topics))
        quotas = {}
        for mid in order:
            q = minimum + (1 if extra > 0 else 0)
            if extra > 0:
                extra -= 1
            quotas[mid] = q
        kept: set[tuple[bytes, int]] = set()
        for mid, m in spec.members.items():
            quota = quotas[mid]
            new: Assignment = {}
            for t in sorted(m.assignment):
                if t not in topics:
                    continue
                for p in sorted(m.assignment[t]):
                    if p >= partitions[t] or (t, p) in kept:
                        continue
                    kept.add((t, p))
                    if quota > 0:
                        new.setdefault(t, set()).add(p)
                        quota -= 1
                    else:
                        unassigned.append((t, p))
            out[mid] = new
            if quota > 0:
                unfilled.append((mid, quota))
        unassigned.sort()
        i = 0
        for mid, quota in unfilled:
            for _ in range(quota):
                if i >= len(unassigned):
                    break
                t, p = unassigned[i]
                i += 1
                out[mid].setdefault(t, set()).add(p)
        if i < len(unassigned):
            raise PartitionAssignorError("Partitions were left unassigned")
        return out

    def _heterogeneous(self, spec: GroupSpec, partitions: dict[bytes, int]) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {mid: {} for mid in spec.members}
        load = {mid: 0 for mid in spec.members}
        owner: dict[tuple[bytes, int], str] = {}
        # keep current partitions the member is still subscribed to
        for mid, m in spec.members.items():
            for t, ps in m.assignment.items():
                if t in m.subscribed and t in partitions:
                    for p in ps:
                        if p < partitions[t] and (t, p) not in owner:
                            owner[(t, p)] = mid
                            out[mid].setdefault(t, set()).add(p)
                            load[mid] += 1
        # topics with the fewest subscribers first: they constrain the balance most
        topics = sorted({t for m in spec.members.values() for t in m.subscribed},
                        key=lambda t: (sum(1 for m in spec.members.values() if t in m.subscribed), t))
        for t in topics:
            subs = [mid for mid, m in spec.members.items() if t in m.subscribed]
            for p in range(partitions[t]):
                if (t, p) not in owner:
                    mid = min(subs, key=lambda x: (load[x], x))
                    owner[(t, p)] = mid
                    out[mid].setdefault(t, set()).add(p)
                    load[mid] += 1
            # rebalance: move partitions of this topic from the most to the least loaded subscriber
            while True:
                hi = max(subs, key=lambda x: (load[x], x))
                lo = min(subs, key=lambda x: (load[x], x))
                if load[hi] - load[lo] <= 1 or not out[hi].get(t):
                    break
                p = max(out[hi][t])
                out[hi][t].discard(p)
                if not out[hi][t]:
                    del out[hi][t]
                out[lo].setdefault(t, set()).add(p)
                load[hi] -= 1
                load[lo] += 1
        return out


class RangeAssignor:
    name = "range"

    def assign(self, spec: GroupSpec, partitions: dict[bytes, int]) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        order = sorted(spec.members, key=lambda mid: (
            0 if spec.members[mid].instance_id is not None else 1,
            spec.members[mid].instance_id or "", mid))
        out: dict[str, Assignment] = {mid: {} for mid in order}
        topics = sorted({t for m in spec.members.values() for t in m.subscribed})
        for t in topics:
            if t not in partitions:
                raise PartitionAssignorError("Member is subscribed to a non-existent topic")
            subs = [mid for mid in order if t in spec.members[mid].subscribed]
            minimum, extra = divmod(partitions[t], len(subs))
            start = 0
            for mid in subs:
                quota = minimum + (1 if extra > 0 else 0)
                if extra > 0:
                    extra -= 1
                end = min(start + quota, partitions[t])
                if start < end:
                    out[mid][t] = set(range(start, end))
                start = end
        return out


ASSIGNORS = {"uniform": UniformAssignor, "range": RangeAssignor}
