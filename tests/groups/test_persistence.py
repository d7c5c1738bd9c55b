"""``__consumer_offsets``: Kafka's record format, state reloaded at start, tombstones, compaction,
and loading/unloading a partition when its leadership moves."""

from __future__ import annotations

import asyncio
import struct
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from cluster.groups.group_records import partition_for
from protocol.topics import GROUP_METADATA_TOPIC
from protocol.generated.metadata import PartitionChangeRecord
from tests.groups.conftest import make_broker
from tests.kafka_wire import KafkaWire
from tests.groups.helpers import wait_until
from tests.groups.test_edge_cases import commit, heartbeat, join_fully, sync
from tests.groups.workload import create_topic, kp_committed, read_offsets_topic


def test_java_string_hashcode_partition_mapping():
    """GroupCoordinatorService.partitionFor: Utils.abs(groupId.hashCode()) % numPartitions, over UTF-16."""
    # Java: "".hashCode()=0, "hello".hashCode()=99162322, "polygenelubricants".hashCode()=Integer.MIN_VALUE
    # (Utils.abs maps it to 0); "\U0001F600" is the surrogate pair D83D DE00: 0xD83D*31 + 0xDE00 = 1772899
    assert partition_for("", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("\U0001F600", 50) == (0xD83D * 31 + 0xDE00) % 50 == 1772899 % 50


def _raw_records(bootstrap):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw-reader", "enable.auto.commit": False})
    md = c.list_topics(GROUP_METADATA_TOPIC, timeout=10).topics[GROUP_METADATA_TOPIC]
    out = []
    for p in md.partitions:
        lo, hi = c.get_watermark_offsets(TopicPartition(GROUP_METADATA_TOPIC, p), timeout=10)
        if hi == 0:
            continue
        c.assign([TopicPartition(GROUP_METADATA_TOPIC, p, 0)])
        while True:
            m = c.poll(1.0)
            if m is None:
                break
            if not m.error():
                out.append((m.key(), m.value()))
                if m.offset() + 1 >= hi:
                    break
    c.close()
    return out


def test_records_have_kafkas_key_and_value_layout(gbroker):
    create_topic(gbroker.bootstrap, "t", 2)
    c = KafkaWire(gbroker.port, "layout")
    r = join_fully(c, "layout")
    sync(c, "layout", r.member_id, 1, [(r.member_id, b"assigned")])
    assert commit(c, "layout", r.member_id, 1, offset=42, metadata="meta") == 0
    c.close()
    raw = _raw_records(gbroker.bootstrap)
    # OffsetCommitKey v1: int16 version, string group, string topic, int32 partition
    key = struct.pack(">h", 1) + struct.pack(">h", 6) + b"layout" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    values = [v for k, v in raw if k == key]
    assert len(values) == 1
    # OffsetCommitValue v3: int16 version, int64 offset, int32 leader epoch, string metadata, int64 commit timestamp
    version, offset, epoch, mlen = struct.unpack_from(">hqih", values[0])
    assert (version, offset, epoch, mlen) == (3, 42, -1, 4) and values[0][16:20] == b"meta"
    (ts,) = struct.unpack_from(">q", values[0], 20)
    assert abs(ts - time.time() * 1000) < 60_000 and len(values[0]) == 28
    # GroupMetadataKey v2: int16 version 2, string group; GroupMetadataValue v3
    gkey = struct.pack(">hh", 2, 6) + b"layout"
    gvalues = [v for k, v in raw if k == gkey]
    assert gvalues and all(struct.unpack_from(">h", v)[0] == 3 for v in gvalues)
    last = gvalues[-1]
    (plen,) = struct.unpack_from(">h", last, 2)
    assert last[4:4 + plen] == b"consumer"  # protocolType
    assert b"assigned" in last and r.member_id.encode() in last


def test_group_state_is_reloaded_and_deletions_leave_tombstones(tmp_path):
    data = tmp_path / "data"
    with make_broker(data) as b:
        create_topic(b.bootstrap, "t", 2)
        c = KafkaWire(b.port, "reload")
        r = join_fully(c, "kept")
        sync(c, "kept", r.member_id, 1, [(r.member_id, b"kept-assignment")])
        assert commit(c, "kept", r.member_id, 1, offset=11, metadata="k") == 0
        assert commit(c, "kept", r.member_id, 1, partition=1, offset=12, metadata="k1") == 0
        r2 = join_fully(c, "doomed-group", session_ms=600, rebalance_ms=600)
        sync(c, "doomed-group", r2.member_id, 1)
        assert commit(c, "doomed-group", r2.member_id, 1, offset=5) == 0
        c.close()
        # the doomed group's member stops heartbeating: it expires and the group becomes Empty
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        wait_until(lambda: str(admin.describe_consumer_groups(["doomed-group"])["doomed-group"].result(10).state)
                   .endswith("EMPTY"), timeout=10, what="the member to expire")
        admin.delete_consumer_groups(["doomed-group"])["doomed-group"].result(10)
        from kafka import KafkaAdminClient
        from kafka import TopicPartition as KTP
        ka = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        # OffsetDelete on a group whose members are subscribed to the topic: GROUP_SUBSCRIBED_TO_TOPIC
        res = ka.delete_group_offsets("kept", [KTP("t", 1)])
        assert "GroupSubscribedToTopic" in repr(res) or "GROUP_SUBSCRIBED_TO_TOPIC" in repr(res).upper()
        ka.close()
        records = read_offsets_topic(b.bootstrap)
        tomb = [(type(r.key).__name__, getattr(r.key, "group", None)) for _, _, r in records if r.value is None]
        assert ("OffsetCommitKey", "doomed-group") in tomb and ("GroupMetadataKey", "doomed-group") in tomb
    with make_broker(data) as b:
        c = KafkaWire(b.port, "reload")
        # the stable member is still known after the restart (its session restarted at load)
        assert heartbeat(c, "kept", r.member_id, 1) == 0
        assert kp_committed(b.bootstrap, "kept") == {("t", 0): (11, "k"), ("t", 1): (12, "k1")}
        assert kp_committed(b.bootstrap, "doomed-group") == {}  # deleted
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert "doomed-group" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
        c.close()


def test_compaction_keeps_offsets_topic_small_and_state_intact(tmp_path):
    overrides = {"offsets.topic.segment.bytes": 16384, "log.cleaner.backoff.ms": 100,
                 "offsets.topic.num.partitions": 1}
    data = tmp_path / "data"
    with make_broker(data, **overrides) as b:
        create_topic(b.bootstrap, "t", 2)
        c = KafkaWire(b.port, "compact")
        for i in range(1500):
            assert commit(c, "compacted", "", -1, partition=i % 2, offset=i, metadata=f"m{i}") == 0
        c.close()
        log = b.broker.replicas.get(GROUP_METADATA_TOPIC, 0).log
        assert log.log_end_offset >= 1500  # one batch per commit, ~100 bytes each: several 16 KiB segments
        # the cleaner keeps the latest record per key (2 offsets, 1 group) plus the active segment
        wait_until(lambda: sum(1 for _ in log.iter_batches(0)) < 300 and log.size < 40_000, timeout=30,
                   what="the log cleaner to compact __consumer_offsets")
    with make_broker(data, **overrides) as b:
        assert kp_committed(b.bootstrap, "compacted") == {("t", 0): (1498, "m1498"), ("t", 1): (1499, "m1499")}


def test_partition_is_unloaded_and_reloaded_when_leadership_moves(gbroker):
    create_topic(gbroker.bootstrap, "t", 2)
    c = KafkaWire(gbroker.port, "moves")
    r = join_fully(c, "moving")
    sync(c, "moving", r.member_id, 1, [(r.member_id, b"a")])
    assert commit(c, "moving", r.member_id, 1, offset=3) == 0
    broker = gbroker.broker
    p = broker.groups.partition_for("moving")
    topic = broker.image.topic(GROUP_METADATA_TOPIC)

    def change(leader):
        rec = PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, leader=leader)
        asyncio.run_coroutine_threadsafe(broker.raft.commit([rec]), gbroker._loop).result(10)

    change(-1)  # this broker no longer leads the group's partition
    wait_until(lambda: p not in broker.groups.shards, timeout=5, what="the partition to be unloaded")
    assert heartbeat(c, "moving", r.member_id, 1) == 16  # NOT_COORDINATOR
    change(broker.node_id)
    wait_until(lambda: p in broker.groups.shards, timeout=5, what="the partition to be loaded again")
    assert heartbeat(c, "moving", r.member_id, 1) == 0
    assert kp_committed(gbroker.bootstrap, "moving") == {("t", 0): (3, "")}
    c.close()


def test_consumer_protocol_group_is_reloaded_from_its_records(tmp_path):
    """A KIP-848 group is rebuilt from its ConsumerGroup* records: members, epochs, target and current
    assignments; its members keep heartbeating at their epoch after the restart."""
    from protocol.generated.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

    data = tmp_path / "data"

    def describe(c):
        d = c.call(69, 0, ConsumerGroupDescribeRequest(group_ids=["kip848"])).groups[0]
        return (d.group_state, d.group_epoch, d.assignment_epoch,
                sorted((m.member_id, m.member_epoch, tuple(sorted(p for t in m.assignment.topic_partitions
                                                                  for p in t.partitions))) for m in d.members))

    with make_broker(data) as b:
        create_topic(b.bootstrap, "t", 4)
        c = KafkaWire(b.port)
        hb = lambda mid, epoch, **kw: c.call(68, 1, ConsumerGroupHeartbeatRequest(  # noqa: E731
            group_id="kip848", member_id=mid, member_epoch=epoch, **kw))
        first = dict(rebalance_timeout_ms=5000, subscribed_topic_names=["t"], topic_partitions=[])
        assert hb("a", 0, **first).member_epoch == 1
        assert hb("b", 0, **first).member_epoch == 2
        tid = b.broker.image.topic("t").topic_id
        ra = hb("a", 1)  # a learns what to revoke, revokes it, then b gets the rest
        keep = sorted(ra.assignment.topic_partitions[0].partitions)
        from protocol.generated.messages.consumer_group_heartbeat_request import TopicPartitions
        hb("a", 1, topic_partitions=[TopicPartitions(topic_id=tid, partitions=keep)])
        hb("b", 2, topic_partitions=[])
        before = describe(c)
        assert before[0] == "Stable" and [m[1] for m in before[3]] == [2, 2]
        c.close()
    with make_broker(data) as b:
        c = KafkaWire(b.port)
        assert describe(c) == before
        assert c.call(68, 1, ConsumerGroupHeartbeatRequest(group_id="kip848", member_id="a",
                                                           member_epoch=2)).error_code == 0
        c.close()
