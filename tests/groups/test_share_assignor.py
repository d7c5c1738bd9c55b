"""The share-group ``simple`` assignor (cluster/groups/share_assignor.py).

Each test ports the Kafka test named in its docstring from apache/kafka
group-coordinator/src/test/java/org/apache/kafka/coordinator/group/assignor/SimpleAssignorTest.java (Kafka 4.2, after
KAFKA-19362/19363). Kafka checks every partition is assigned (assertEveryPartitionGetsAssignment) and, where
its iteration order makes it deterministic, the exact assignment; the exact assignments here follow odradek's
member/partition order, so besides coverage the tests check what the order cannot change: the balance (loads within
one, each partition on ceil(M/P) members) and the stickiness.
"""

from __future__ import annotations

import math
import uuid

import pytest

from cluster.groups.assignors import GroupSpec, MemberSpec, PartitionAssignorError
from cluster.groups.share_assignor import SimpleAssignor

T1, T2, T3, T4 = (uuid.UUID(int=i).bytes for i in (1, 2, 3, 4))
A, B, C = "A", "B", "C"


def spec(members: dict[str, tuple[set, dict]], homogeneous: bool) -> GroupSpec:
    return GroupSpec({m: MemberSpec(set(subs), {t: set(ps) for t, ps in a.items()}) for m, (subs, a) in
                      members.items()}, homogeneous)


def by_partition(result) -> dict[tuple[bytes, int], list[str]]:
    out: dict = {}
    for mid, a in result.items():
        for t, ps in a.items():
            for p in ps:
                out.setdefault((t, p), []).append(mid)
    return out


def assert_every_partition_gets_assignment(n: int, result) -> None:
    """assertEveryPartitionGetsAssignment."""
    assert len(by_partition(result)) == n


def assert_balanced(result, n_partitions: int) -> None:
    """The balance SimpleAssignor promises: member loads within one; each partition on ceil(M/P) members at most."""
    loads = [sum(len(ps) for ps in a.values()) for a in result.values()]
    assert max(loads) - min(loads) <= 1, loads
    sharing = math.ceil(len(result) / n_partitions)
    assert all(len(ms) <= sharing for ms in by_partition(result).values())


def test_name():
    """testName."""
    assert SimpleAssignor().name == "simple"


def test_assign_with_empty_members():
    """testAssignWithEmptyMembers."""
    assert SimpleAssignor().assign(GroupSpec({}, True), {}) == {}
    assert SimpleAssignor().assign(GroupSpec({}, False), {}) == {}


def test_assign_with_no_subscribed_topic():
    """testAssignWithNoSubscribedTopic."""
    assert SimpleAssignor().assign(spec({A: (set(), {})}, True), {T1: 3}) == {}


def test_assign_with_subscribed_to_non_existent_topic():
    """testAssignWithSubscribedToNonExistentTopic."""
    with pytest.raises(PartitionAssignorError):
        SimpleAssignor().assign(spec({A: ({T2}, {})}, True), {T1: 3})


def test_assign_with_two_members_and_two_topics_homogeneous():
    """testAssignWithTwoMembersAndTwoTopicsHomogeneous: 5 partitions over 2 members, 3 and 2."""
    res = SimpleAssignor().assign(spec({A: ({T1, T3}, {}), B: ({T1, T3}, {})}, True), {T1: 3, T3: 2})
    assert_every_partition_gets_assignment(5, res)
    assert sorted(sum(len(ps) for ps in a.values()) for a in res.values()) == [2, 3]
    assert all(len(ms) == 1 for ms in by_partition(res).values())


def test_assign_with_two_members_and_two_topics_homogeneous_with_allowed_map():
    """testAssignWithTwoMembersAndTwoTopicsHomogeneousWithAllowedMap: T3:2 is not assignable."""
    res = SimpleAssignor().assign(spec({A: ({T1, T3}, {}), B: ({T1, T3}, {})}, True), {T1: 3, T3: 3},
                                  {T1: {0, 1, 2}, T3: {0, 1}})
    assert_every_partition_gets_assignment(5, res)
    assert (T3, 2) not in by_partition(res)


def test_assign_with_two_members_and_two_topics_homogeneous_with_non_assignable_topic():
    """testAssignWithTwoMembersAndTwoTopicsHomogeneousWithNonAssignableTopic: none of T3 is assignable."""
    res = SimpleAssignor().assign(spec({A: ({T1, T3}, {}), B: ({T1, T3}, {})}, True), {T1: 3, T3: 2},
                                  {T1: {0, 1, 2}})
    assert_every_partition_gets_assignment(3, res)
    assert all(t == T1 for t, _ in by_partition(res))


def test_assign_with_three_members_three_topics_heterogeneous():
    """testAssignWithThreeMembersThreeTopicsHeterogeneous: each topic balanced over its subscribers."""
    res = SimpleAssignor().assign(spec({A: ({T1, T2}, {}), B: ({T3}, {}), C: ({T2, T3}, {})}, False),
                                  {T1: 3, T2: 3, T3: 2})
    assert_every_partition_gets_assignment(8, res)
    assert res[A][T1] == {0, 1, 2}  # A alone subscribes to T1
    assert sorted([len(res[A][T2]), len(res[C][T2])]) == [1, 2]
    assert len(res[B][T3]) == len(res[C][T3]) == 1


def test_assign_with_three_members_three_topics_heterogeneous_with_allowed_map():
    """testAssignWithThreeMembersThreeTopicsHeterogeneousWithAllowedMap."""
    res = SimpleAssignor().assign(spec({A: ({T1, T2}, {}), B: ({T3}, {}), C: ({T2, T3}, {})}, False),
                                  {T1: 3, T2: 3, T3: 2}, {T1: {0, 1}, T2: {0, 2}, T3: {1}})
    assert_every_partition_gets_assignment(5, res)
    assert set(by_partition(res)) == {(T1, 0), (T1, 1), (T2, 0), (T2, 2), (T3, 1)}


def test_assign_with_three_members_three_topics_heterogeneous_with_non_assignable_topic():
    """testAssignWithThreeMembersThreeTopicsHeterogeneousWithNonAssignableTopic: B (only T3) gets nothing."""
    res = SimpleAssignor().assign(spec({A: ({T1, T2}, {}), B: ({T3}, {}), C: ({T2, T3}, {})}, False),
                                  {T1: 3, T2: 3, T3: 2}, {T1: {0, 1, 2}, T2: {0, 1, 2}})
    assert_every_partition_gets_assignment(6, res)
    assert res == {A: {T1: {0, 1, 2}, T2: {0, 2}}, B: {}, C: {T2: {1}}}  # Kafka's expected assignment


def test_assign_with_one_member_no_assigned_topic_heterogeneous():
    """testAssignWithOneMemberNoAssignedTopicHeterogeneous."""
    res = SimpleAssignor().assign(spec({A: ({T1, T2}, {}), B: (set(), {})}, False), {T1: 3, T2: 2})
    assert res == {A: {T1: {0, 1, 2}, T2: {0, 1}}, B: {}}


def _grow_then_shrink(homogeneous: bool) -> None:
    n_partitions, n_members = 24, 101
    counts = {T1: 24} if homogeneous else {T1: 12, T2: 8, T3: 4}
    subs = [{T1}] if homogeneous else [{T1, T2, T3}, {T2}, {T3}, {T1, T2}]
    members: dict[str, tuple[set, dict]] = {}
    assignor = SimpleAssignor()
    res = {}
    for i in range(n_members):
        members[f"M{i}"] = (subs[i % len(subs)], {})
        res = assignor.assign(spec(members, homogeneous), counts)
        assert_every_partition_gets_assignment(n_partitions, res)
        if homogeneous:
            assert_balanced(res, n_partitions)
        members = {m: (s, res[m]) for m, (s, _) in members.items()}
    for i in range(n_members - 1, 0, -1):
        del members[f"M{i}"]
        before = {m: a for m, (_, a) in members.items()}
        res = assignor.assign(spec(members, homogeneous), counts)
        assert_every_partition_gets_assignment(n_partitions, res)
        if homogeneous:
            assert_balanced(res, n_partitions)
            if len(members) < n_partitions:
                # sticky (no shared partitions before or after): the leaving member's partitions move; the others
                # lose at most one each (their load is floor or ceil of P/M by their place in the member order)
                for m, a in before.items():
                    lost = sum(len(ps - res[m].get(t, set())) for t, ps in a.items())
                    assert lost <= 1, (m, a, res[m])
        members = {m: (s, res[m]) for m, (s, _) in members.items()}


def test_incremental_assignment_increasing_and_decreasing_members_homogeneous():
    """testIncrementalAssignmentIncreasingMembersHomogeneous, testIncrementalAssignmentDecreasingMembersHomogeneous:
    24 partitions, 1 to 101 members and back, every partition assigned and loads within one at each step."""
    _grow_then_shrink(True)


def test_incremental_assignment_increasing_and_decreasing_members_heterogeneous():
    """testIncrementalAssignmentIncreasingMembersHeterogeneous,
    testIncrementalAssignmentDecreasingMembersHeterogeneous."""
    _grow_then_shrink(False)


def test_assign_with_current_assignment_heterogeneous():
    """testAssignWithCurrentAssignmentHeterogeneous: new subscriptions over an existing assignment."""
    assignor = SimpleAssignor()
    first = assignor.assign(spec({A: ({T1, T2}, {}), B: ({T3}, {}), C: ({T2, T3}, {})}, False),
                            {T1: 3, T2: 3, T3: 2})
    assert_every_partition_gets_assignment(8, first)
    second = assignor.assign(spec({A: ({T1, T2, T3}, {T1: {0, 1, 2}, T2: {0, 2}}), B: ({T3, T4}, {T3: {0, 1}})},
                                  False), {T1: 3, T2: 3, T3: 2, T4: 1})
    assert_every_partition_gets_assignment(9, second)
    assert second[A][T1] == {0, 1, 2} and second[B][T4] == {0}


def test_balance_formula_more_members_than_partitions():
    """The issue's rule: M members on P partitions, each partition on ceil(M/P) members, loads within one
    (3 members on 1 partition all share it; 7 on 3: sharing 3, loads 1-2)."""
    assignor = SimpleAssignor()
    res = assignor.assign(spec({m: ({T1}, {}) for m in "ABC"}, True), {T1: 1})
    assert all(a == {T1: {0}} for a in res.values())
    res = assignor.assign(spec({m: ({T1}, {}) for m in "ABCDEFG"}, True), {T1: 3})
    assert all(len(ms) == 3 for ms in by_partition(res).values())
    assert_balanced(res, 3)


def test_stickiness_when_a_member_joins():
    """Balance first, then stickiness: a third member on 6 partitions takes 2, the others keep 2 of their 3."""
    assignor = SimpleAssignor()
    res = assignor.assign(spec({A: ({T1}, {}), B: ({T1}, {})}, True), {T1: 6})
    res2 = assignor.assign(spec({A: ({T1}, res[A]), B: ({T1}, res[B]), C: ({T1}, {})}, True), {T1: 6})
    assert [len(res2[m][T1]) for m in (A, B, C)] == [2, 2, 2]
    assert res2[A][T1] <= res[A][T1] and res2[B][T1] <= res[B][T1]


def test_unassignable_partition_is_revoked():
    """A partition no longer assignable (its share state deleted) leaves its member's assignment."""
    res = SimpleAssignor().assign(spec({A: ({T1}, {T1: {0, 1}})}, True), {T1: 2}, {T1: {0}})
    assert res == {A: {T1: {0}}}
