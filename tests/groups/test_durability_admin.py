"""Durability and the admin clients' view.

* Offsets committed with metadata survive a broker restart: the group resumes from them and the
  metadata strings come back byte-exact (from __consumer_offsets, replayed at start).
* The admin clients of confluent-kafka, kafka-python and aiokafka list and describe groups and show
  lag (log end offset - committed offset) correctly; DeleteGroups / OffsetDelete remove them.
  (kcat cannot list groups, so it is not used here.)
"""

from __future__ import annotations

import asyncio
import threading

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.groups.conftest import make_broker
from tests.groups.helpers import wait_until
from tests.groups.runners import ConfluentRunner
from tests.groups.workload import committed_offsets, create_topic, kp_committed, produce

PARTITIONS = 3


def test_committed_offsets_and_metadata_survive_a_restart(tmp_path):
    """kafka-python commits with metadata (it sends the string as given; librdkafka appends a NUL byte,
    which the broker also keeps byte-exact); after a restart confluent-kafka reads the same offsets
    and metadata and resumes from them."""
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KTP

    data = tmp_path / "data"
    topic = group = "durable"
    meta = {0: "checkpoint-α", 1: "", 2: "x" * 4000}  # unicode, empty, close to offset.metadata.max.bytes
    with make_broker(data) as b:
        create_topic(b.bootstrap, topic, PARTITIONS)
        produce(b.bootstrap, topic, 0, 60, PARTITIONS)
        kc = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group, auto_offset_reset="earliest",
                           enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=300)
        got = []
        wait_until(lambda: got.extend(m for ms in kc.poll(timeout_ms=200).values() for m in ms) or len(got) >= 60,
                   timeout=30, what="60 records")
        kc.commit({KTP(topic, p): OffsetAndMetadata(7 + p, meta[p], -1) for p in range(PARTITIONS)})
        kc.close()
        first = committed_offsets(b.bootstrap, group)
        assert {k: (v.offset, v.metadata) for k, v in first.items()} == {
            (topic, p): (7 + p, meta[p]) for p in range(PARTITIONS)}
    with make_broker(data) as b:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                      "session.timeout.ms": 3000, "heartbeat.interval.ms": 300})
        assert kp_committed(b.bootstrap, group) == {(topic, p): (7 + p, meta[p]) for p in range(PARTITIONS)}
        c.subscribe([topic])
        firsts: dict = {}

        def poll_one():
            m = c.poll(0.2)
            if m is not None and not m.error():
                firsts.setdefault(m.partition(), m.offset())
            return len(firsts) == PARTITIONS
        wait_until(poll_one, timeout=30, what="a record of every partition")
        assert firsts == {p: 7 + p for p in range(PARTITIONS)}  # resumed from the committed offsets
        c.close()


def test_admin_clients_list_describe_and_show_lag(gbroker):
    topic = group = "lagging"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    produce(gbroker.bootstrap, topic, 0, 30, PARTITIONS)  # 10 per partition
    consumed: list = []
    member = ConfluentRunner(gbroker.bootstrap, group, topic, consumed, threading.Lock(), "laggard").start()
    try:
        wait_until(lambda: len(consumed) == 30, timeout=30, what="30 records")
    finally:
        member.stop()  # leaves the group: Empty, committed offsets kept
    produce(gbroker.bootstrap, topic, 30, 15, PARTITIONS)  # 5 more per partition, never consumed
    expected_lag = {p: 5 for p in range(PARTITIONS)}
    watcher = ConfluentRunner(gbroker.bootstrap, "described", topic, [], threading.Lock(), "watcher").start()
    try:
        wait_until(lambda: len(watcher.assigned) == PARTITIONS, timeout=30, what="the watcher's assignment")

        # confluent-kafka
        admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=15).valid}
        assert {group, "described"} <= set(listed)
        assert str(listed[group].state).endswith("EMPTY") and str(listed["described"].state).endswith("STABLE")
        desc = admin.describe_consumer_groups(["described", group])
        d = desc["described"].result(timeout=15)
        assert str(d.state).endswith("STABLE") and [m.client_id for m in d.members] == ["watcher"]
        assert {tp.partition for tp in d.members[0].assignment.topic_partitions} == set(range(PARTITIONS))
        assert d.partition_assignor == "range"
        assert str(desc[group].result(timeout=15).state).endswith("EMPTY")
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=15)
        committed = {tp.partition: tp.offset for tp in offsets.topic_partitions}
        c = Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": "lag-reader"})
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        c.close()
        assert {p: ends[p] - committed[p] for p in range(PARTITIONS)} == expected_lag

        # kafka-python
        from kafka import KafkaAdminClient, KafkaConsumer
        ka = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
        try:
            states = {g["group_id"]: g["group_state"] for g in ka.list_groups()}
            assert states[group] == "Empty" and states["described"] == "Stable"
            kd = ka.describe_groups(["described"])["described"]
            assert kd["group_state"] == "Stable" and kd["protocol_data"] == "range"
            assert [m["client_id"] for m in kd["members"]] == ["watcher"]
            kp_offsets = ka.list_group_offsets(group)
            kp_offsets = kp_offsets.get(group, kp_offsets)
            kc = KafkaConsumer(bootstrap_servers=gbroker.bootstrap)
            kp_ends = kc.end_offsets(list(kp_offsets))
            kc.close()
            assert {tp.partition: kp_ends[tp] - om.offset for tp, om in kp_offsets.items()} == expected_lag
        finally:
            ka.close()

        # aiokafka
        async def aio():
            from aiokafka.admin import AIOKafkaAdminClient
            aa = AIOKafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
            await aa.start()
            try:
                return (await aa.list_consumer_groups(), await aa.list_consumer_group_offsets(group),
                        await aa.describe_consumer_groups(["described"]))
            finally:
                await aa.close()
        groups, offs, described = asyncio.run(aio())
        assert {group, "described"} <= {g[0] for g in groups}
        assert {tp.partition: ends[tp.partition] - om.offset for tp, om in offs.items()} == expected_lag
        assert described[0].groups[0][1:3] == ("described", "Stable")  # (error, group id, state, ...)
    finally:
        watcher.stop()
