"""Scale-out: consumers join a 6-partition topic's group one by one while records keep arriving.

What must hold (issue 7): at every stable generation the assignment is disjoint and covers all
partitions (read back from the GroupMetadata records the coordinator stored for each generation),
and every produced record is processed exactly once by the group when consumers commit after
processing and none crash.
"""

from __future__ import annotations

import threading

import pytest

from tests.groups.helpers import wait_until
from tests.groups.runners import RUNNERS
from tests.groups.workload import check_exactly_once, check_generations, create_topic, generations, produce

PARTITIONS = 6


def scale_out(broker, kinds: list[str], group: str, topic: str, per_step: int = 30) -> list:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    consumed: list = []
    lock = threading.Lock()
    produced = produce(broker.bootstrap, topic, 0, per_step, PARTITIONS)
    runners = []
    try:
        for i, kind in enumerate(kinds):
            r = RUNNERS[kind](broker.bootstrap, group, topic, consumed, lock, f"{kind}-{i}").start()
            runners.append(r)
            # the new member is in the group with some partitions before the next step
            wait_until(lambda: r.assigned and sum(len(x.assigned) for x in runners) == PARTITIONS,
                       timeout=30, what=f"{r.name} to get partitions")
            produced += produce(broker.bootstrap, topic, per_step * (i + 1), per_step, PARTITIONS)
        wait_until(lambda: len(consumed) >= len(produced), timeout=30, what="every record to be consumed")
    finally:
        for r in reversed(runners):
            r.stop()
    check_exactly_once(consumed, produced)
    gens = generations(broker.bootstrap, group)
    check_generations(gens, topic, PARTITIONS)
    assert len({g for g, _ in gens}) >= len(kinds)  # one generation per join at least
    assert max(len(m) for _, m in gens) == len(kinds)
    return runners


@pytest.mark.parametrize("kind", ["confluent", "kafka-python", "aiokafka"])
def test_scale_out_one_client(gbroker, kind):
    runners = scale_out(gbroker, [kind] * 3, f"scale-{kind}", f"scale-{kind}")
    assert all(r.processed for r in runners)


def test_scale_out_mixed_clients_in_one_group(gbroker):
    """confluent-kafka, kafka-python and aiokafka share one classic group: the broker selects the
    protocol every member supports (roundrobin) and passes the leader's assignment through."""
    runners = _scale_out_mixed(gbroker)
    assert {r.kind for r in runners} == {"confluent", "kafka-python", "aiokafka"}
    assert all(r.processed for r in runners)


def _scale_out_mixed(broker):
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRoundRobin

    topic = group = "scale-mixed"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    consumed: list = []
    lock = threading.Lock()
    produced = produce(broker.bootstrap, topic, 0, 30, PARTITIONS)
    extra = {"confluent": {"partition.assignment.strategy": "roundrobin"},
             "kafka-python": {"partition_assignment_strategy": (RoundRobinPartitionAssignor,)},
             "aiokafka": {"partition_assignment_strategy": (AioRoundRobin,)}}
    runners = []
    try:
        for i, kind in enumerate(("confluent", "kafka-python", "aiokafka")):
            r = RUNNERS[kind](broker.bootstrap, group, topic, consumed, lock, f"{kind}-{i}", **extra[kind]).start()
            runners.append(r)
            wait_until(lambda: r.assigned and sum(len(x.assigned) for x in runners) == PARTITIONS,
                       timeout=30, what=f"{r.name} to get partitions")
            produced += produce(broker.bootstrap, topic, 30 * (i + 1), 30, PARTITIONS)
        wait_until(lambda: len(consumed) >= len(produced), timeout=30, what="every record to be consumed")
    finally:
        for r in reversed(runners):
            r.stop()
    check_exactly_once(consumed, produced)
    check_generations(generations(broker.bootstrap, group), topic, PARTITIONS)
    return runners
