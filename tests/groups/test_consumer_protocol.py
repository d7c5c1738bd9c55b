"""KIP-848 with a real client: confluent-kafka (librdkafka >= 2.12) with ``group.protocol=consumer``
speaks ConsumerGroupHeartbeat v1 and OffsetCommit/OffsetFetch v9+.

* three consumers joining one by one converge to a balanced assignment (2 partitions each) and
  process every record exactly once;
* a leaving member's partitions move to the others without any revocation on their side (they never
  stop consuming);
* the ``range`` server assignor (group.remote.assignor), regex subscriptions (new matching topics
  are picked up), ConsumerGroupDescribe through the admin client;
* a classic and a consumer-protocol member in one group follow group.consumer.migration.policy
  (bidirectional: upgrade when the consumer-protocol member joins, downgrade when it leaves).
"""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import AdminClient

from protocol.generated.messages import ListGroupsRequest
from tests.kafka_wire import KafkaWire
from tests.groups.helpers import wait_until
from tests.groups.runners import ConfluentRunner
from tests.groups.workload import check_at_least_once, create_topic, produce

PARTITIONS = 6
KIP848 = {"group.protocol": "consumer"}


def _group_type(broker, group):
    c = KafkaWire(broker.port)
    try:
        groups = c.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=[])).groups
        return {g.group_id: (g.group_type, g.group_state) for g in groups}.get(group)
    finally:
        c.close()


def _start(broker, group, topic, n, consumed, lock, prefix="c", **conf):
    return ConfluentRunner(broker.bootstrap, group, topic, consumed, lock, f"{prefix}{n}", **{**KIP848, **conf}).start()


def test_three_consumers_converge_and_a_leaving_member_moves_partitions_without_stopping_others(gbroker):
    topic = group = "kip848"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    produced = produce(gbroker.bootstrap, topic, 0, 30, PARTITIONS)
    consumed: list = []
    lock = threading.Lock()
    runners = []
    started = []
    try:
        for i in range(3):
            runners.append(_start(gbroker, group, topic, i, consumed, lock))
            started.append(runners[-1])
            wait_until(lambda: all(r.assigned for r in runners)
                       and sum(len(r.assigned) for r in runners) == PARTITIONS, timeout=30,
                       what=f"member {i} to get partitions")
            produced += produce(gbroker.bootstrap, topic, 30 * (i + 1), 30, PARTITIONS)
        wait_until(lambda: sorted(len(r.assigned) for r in runners) == [2, 2, 2], timeout=30,
                   what="the balanced assignment")
        parts = [r.assigned for r in runners]
        assert set().union(*parts) == {(topic, p) for p in range(PARTITIONS)} and sum(map(len, parts)) == PARTITIONS
        wait_until(lambda: len(consumed) >= len(produced), timeout=30, what="every record")
        # ConsumerGroupDescribe through the admin client
        admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})  # keep a reference: futures need it alive
        d = admin.describe_consumer_groups([group])[group].result(15)
        assert str(d.type).endswith("CONSUMER") and str(d.state).endswith("STABLE")
        assert sorted(len(m.assignment.topic_partitions) for m in d.members) == [2, 2, 2]
        assert _group_type(gbroker, group) == ("consumer", "Stable")

        # one member leaves: the others only gain partitions, and keep consuming meanwhile
        leaving, stay = runners[0], runners[1:]
        revocations = [r.revocations for r in stay]
        stop_producing = threading.Event()
        extra: list = []

        def keep_producing():
            i = 1000
            while not stop_producing.is_set():
                extra.extend(produce(gbroker.bootstrap, topic, i, 6, PARTITIONS))
                i += 6
                time.sleep(0.05)
        feeder = threading.Thread(target=keep_producing, daemon=True)
        feeder.start()
        time.sleep(0.3)
        leaving.stop()
        runners.remove(leaving)
        wait_until(lambda: sorted(len(r.assigned) for r in stay) == [3, 3], timeout=15,
                   what="the leaving member's partitions to move")
        time.sleep(0.3)
        stop_producing.set()
        feeder.join(10)
        assert [r.revocations for r in stay] == revocations  # nobody else gave anything up
        produced += extra
        wait_until(lambda: len(set(consumed)) >= len(produced), timeout=30, what="every record after the move")
    finally:
        for r in runners:
            r.stop()
    check_at_least_once(consumed, produced, [x for r in started for x in r.uncommitted],
                        [x for r in started for x in r.rewound])


def test_range_assignor_and_regex_subscription(gbroker):
    for t in ("rx-a", "rx-b"):
        create_topic(gbroker.bootstrap, t, 2)
    consumed: list = []
    lock = threading.Lock()
    r1 = ConfluentRunner(gbroker.bootstrap, "rx", "^rx-.*", consumed, lock, "rx1",
                         **{**KIP848, "group.remote.assignor": "range"}).start()
    r2 = None
    try:
        wait_until(lambda: len(r1.assigned) == 4, timeout=20, what="both matching topics")
        create_topic(gbroker.bootstrap, "rx-c", 2)  # a new topic matching the regex is picked up
        create_topic(gbroker.bootstrap, "other", 2)
        wait_until(lambda: len(r1.assigned) == 6, timeout=20, what="the new matching topic")
        r2 = ConfluentRunner(gbroker.bootstrap, "rx", "^rx-.*", consumed, lock, "rx2",
                             **{**KIP848, "group.remote.assignor": "range"}).start()
        wait_until(lambda: len(r1.assigned) == 3 and len(r2.assigned) == 3, timeout=20, what="the range split")
        admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
        d = admin.describe_consumer_groups(["rx"])["rx"].result(15)
        assert d.partition_assignor == "range"
        by_member = {m.client_id: sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
                     for m in d.members}
        # range: per topic, each of the two members takes one contiguous half (one partition here)
        for topic in ("rx-a", "rx-b", "rx-c"):
            owners = [cid for cid, tps in by_member.items() for t, _ in tps if t == topic]
            assert sorted(owners) == ["rx1", "rx2"]
        assert all(t != "other" for tps in by_member.values() for t, _ in tps)
    finally:
        r1.stop()
        if r2 is not None:
            r2.stop()


def test_classic_and_consumer_protocol_members_in_one_group_follow_the_migration_policy(gbroker):
    topic = group = "migrate"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    produced = produce(gbroker.bootstrap, topic, 0, 30, PARTITIONS)
    consumed: list = []
    lock = threading.Lock()
    classic = ConfluentRunner(gbroker.bootstrap, group, topic, consumed, lock, "classic").start()
    modern = None
    try:
        wait_until(lambda: len(classic.assigned) == PARTITIONS, timeout=20, what="the classic member")
        assert _group_type(gbroker, group) == ("classic", "Stable")
        # a consumer-protocol member joins: the classic group is upgraded to a consumer group
        modern = ConfluentRunner(gbroker.bootstrap, group, topic, consumed, lock, "modern", **KIP848).start()
        wait_until(lambda: modern.assigned and classic.assigned
                   and len(modern.assigned) + len(classic.assigned) == PARTITIONS
                   and not (modern.assigned & classic.assigned), timeout=30, what="both members to share")
        assert _group_type(gbroker, group)[0] == "consumer"
        produced += produce(gbroker.bootstrap, topic, 30, 30, PARTITIONS)
        wait_until(lambda: len(set(consumed)) >= len(produced), timeout=30, what="records during the mix")
        # the last consumer-protocol member leaves: the group goes back to the classic protocol
        modern.stop()
        modern = None
        wait_until(lambda: _group_type(gbroker, group) == ("classic", "Stable") and len(classic.assigned) == PARTITIONS,
                   timeout=30, what="the downgrade to a classic group")
        produced += produce(gbroker.bootstrap, topic, 60, 30, PARTITIONS)
        wait_until(lambda: len(set(consumed)) >= len(produced), timeout=30, what="records after the downgrade")
    finally:
        classic.stop()
        if modern is not None:
            modern.stop()
    assert set(consumed) == set(produced)
