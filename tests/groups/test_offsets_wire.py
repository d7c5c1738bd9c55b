"""OffsetCommit / OffsetFetch versions on the wire: v1 (oldest served fetch), v2+ all-topics fetch, v8
multi-group fetch, v10 by topic id (unknown ids: UNKNOWN_TOPIC_ID), and the KIP-848 member checks."""

from __future__ import annotations

from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    ConsumerGroupHeartbeatRequest, OffsetCommitRequest, OffsetFetchRequest,
)
from protocol.generated.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from protocol.generated.messages.offset_fetch_request import (
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
)
from tests.kafka_wire import KafkaWire
from tests.groups.workload import create_topic


def _commit(c, version, group, topics, member_id="", epoch=-1):
    return c.call(8, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id, topics=[
            OffsetCommitRequestTopic(name=name, topic_id=tid, partitions=[
                  OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata=f"m{o}")
                  for p, o in parts]) for name, tid, parts in topics]))


def test_offset_commit_and_fetch_across_versions(gbroker):
    create_topic(gbroker.bootstrap, "t", 3)
    tid = gbroker.broker.image.topic("t").topic_id
    unknown_id = bytes(range(16))
    c = KafkaWire(gbroker.port)
    try:
        r = _commit(c, 10, "v10", [("", tid, [(0, 5), (1, 6)]), ("", unknown_id, [(0, 1)])])
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in r.topics] == [
            (tid, [0, 0]), (unknown_id, [E.UNKNOWN_TOPIC_ID])]
        f = c.call(9, 10, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="v10", topics=[
            OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0, 1, 2]),
            OffsetFetchRequestTopics(topic_id=unknown_id, partition_indexes=[0])])]))
        g = f.groups[0]
        assert [(t.topic_id, [(p.committed_offset, p.metadata, p.error_code) for p in t.partitions])
                for t in g.topics] == [(tid, [(5, "m5", 0), (6, "m6", 0), (-1, "", 0)]),
                                       (unknown_id, [(-1, "", E.UNKNOWN_TOPIC_ID)])]
        f = c.call(9, 10, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="v10", topics=None)]))
        assert [(t.topic_id, len(t.partitions)) for t in f.groups[0].topics] == [(tid, 2)]
        # v2: the same offsets by name; v1: no null topics, per-partition answers
        r = _commit(c, 2, "v2", [("t", None, [(2, 9)])])
        assert r.topics[0].partitions[0].error_code == 0
        f1 = c.call(9, 1, OffsetFetchRequest(group_id="v10", topics=[OffsetFetchRequestTopic(name="t",
                                                                                             partition_indexes=[0])]))
        assert f1.topics[0].partitions[0].committed_offset == 5
        f2 = c.call(9, 2, OffsetFetchRequest(group_id="v2", topics=None))
        assert f2.error_code == 0 and [(t.name, [p.committed_offset for p in t.partitions]) for t in f2.topics] == [
            ("t", [9])]
        # v8: several groups in one request, each with its own answer
        f8 = c.call(9, 8, OffsetFetchRequest(groups=[
            OffsetFetchRequestGroup(group_id="v10", topics=None), OffsetFetchRequestGroup(group_id="v2", topics=None),
            OffsetFetchRequestGroup(group_id="nobody", topics=None)], require_stable=True))
        assert [(g.group_id, g.error_code, sum(len(t.partitions) for t in g.topics)) for g in f8.groups] == [
            ("v10", 0, 2), ("v2", 0, 1), ("nobody", 0, 0)]
    finally:
        c.close()


def test_consumer_protocol_member_commits_with_its_epoch(gbroker):
    create_topic(gbroker.bootstrap, "t", 2)
    tid = gbroker.broker.image.topic("t").topic_id
    c = KafkaWire(gbroker.port)
    try:
        hb = c.call(68, 1, ConsumerGroupHeartbeatRequest(
            group_id="kip848-commits", member_id="member-1", member_epoch=0, rebalance_timeout_ms=5000,
            subscribed_topic_names=["t"], topic_partitions=[]))
        assert hb.error_code == 0 and hb.member_epoch == 1
        assert sorted(hb.assignment.topic_partitions[0].partitions) == [0, 1]
        ok = _commit(c, 9, "kip848-commits", [("t", None, [(0, 3)])], member_id="member-1", epoch=1)
        stale = _commit(c, 9, "kip848-commits", [("t", None, [(0, 4)])], member_id="member-1", epoch=0)
        old = _commit(c, 8, "kip848-commits", [("t", None, [(0, 4)])], member_id="member-1", epoch=1)
        assert [r.topics[0].partitions[0].error_code for r in (ok, stale, old)] == [
            0, E.STALE_MEMBER_EPOCH, E.UNSUPPORTED_VERSION]
        f = c.call(9, 9, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id="kip848-commits", member_id="member-1", member_epoch=1,
            topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]))
        assert f.groups[0].topics[0].partitions[0].committed_offset == 3
        f = c.call(9, 9, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id="kip848-commits", member_id="member-1", member_epoch=7, topics=None)]))
        assert f.groups[0].error_code == E.STALE_MEMBER_EPOCH
        bye = c.call(68, 1, ConsumerGroupHeartbeatRequest(group_id="kip848-commits", member_id="member-1",
                                                          member_epoch=-1))
        assert bye.error_code == 0 and bye.member_epoch == -1
    finally:
        c.close()
    assert tid
