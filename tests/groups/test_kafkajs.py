"""Scale-out with KafkaJS (its own group: KafkaJS names its assigner "RoundRobinAssigner", which no
other client proposes): three members join one by one, each in its own node process; every stable
generation's assignment is disjoint and covers the 6 partitions, and every record is processed
exactly once."""

from __future__ import annotations

import pytest

from tests.groups.helpers import wait_until
from tests.groups.js_member import JsMember, ensure_kafkajs
from tests.groups.workload import check_exactly_once, check_generations, create_topic, generations, produce

PARTITIONS = 6


@pytest.fixture(scope="module", autouse=True)
def kafkajs_installed():
    ensure_kafkajs()


def test_scale_out_kafkajs(gbroker):
    topic = group = "scale-kafkajs"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    produced = produce(gbroker.bootstrap, topic, 0, 30, PARTITIONS)
    members: list[JsMember] = []
    try:
        for i in range(3):
            m = JsMember(gbroker.bootstrap, group, topic, f"kafkajs-{i}")
            members.append(m)
            wait_until(lambda: len(members) == sum(1 for x in members if x.assigned())
                       and sum(len(x.assigned()) for x in members) == PARTITIONS, timeout=40,
                       what=f"kafkajs member {i} to get partitions")
            produced += produce(gbroker.bootstrap, topic, 30 * (i + 1), 30, PARTITIONS)
        consumed = lambda: [r for x in members for r in x.processed()]  # noqa: E731
        wait_until(lambda: len(consumed()) >= len(produced), timeout=30, what="every record to be consumed")
    finally:
        for m in reversed(members):
            m.stop()
    check_exactly_once(consumed(), produced)
    gens = generations(gbroker.bootstrap, group)
    check_generations(gens, topic, PARTITIONS)
    assert max(len(m) for _, m in gens) == 3
