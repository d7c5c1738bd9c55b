"""The group edge cases that broke other Kafka-compatible brokers, and bad input, on the wire.

Raw requests at exact versions (tests/groups/kclient.py) against the embedded broker:
two members joining in the same instant, a heartbeat from a stale generation, commits during a
rebalance, a SyncGroup assignment larger than 1 MiB, and Kafka's error codes for bad input without
any effect on another group.
"""

from __future__ import annotations

import os
import threading

import pytest

from cluster.groups.group_records import Subscription, serialize_subscription
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest,
)
from protocol.generated.messages.join_group_request import JoinGroupRequestProtocol
from protocol.generated.messages.leave_group_request import MemberIdentity
from protocol.generated.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from protocol.generated.messages.sync_group_request import SyncGroupRequestAssignment
from tests.groups.conftest import make_broker
from tests.kafka_wire import KafkaWire
from tests.groups.helpers import in_thread, wait_until
from tests.groups.workload import create_topic

JOIN_V, SYNC_V, HB_V, COMMIT_V = 9, 5, 4, 9


def sub(*topics) -> list[JoinGroupRequestProtocol]:
    return [JoinGroupRequestProtocol(name="range", metadata=serialize_subscription(Subscription(1, list(topics))))]


def join(c: KafkaWire, group: str, member_id: str = "", instance_id=None, session_ms=3000, rebalance_ms=3000,
         protocols=None, version=JOIN_V):
    return c.call(11, version, JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocols=protocols or sub("t")))


def join_fully(c: KafkaWire, group: str, **kw):
    """MEMBER_ID_REQUIRED round trip, then the real join (blocks until the join phase completes)."""
    r = join(c, group, **kw)
    if r.error_code == E.MEMBER_ID_REQUIRED:
        r = join(c, group, member_id=r.member_id, **kw)
    return r


def sync(c: KafkaWire, group, member_id, generation, assignments=(), version=SYNC_V):
    return c.call(14, version, SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer",
        protocol_name="range", assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a)
                                            for m, a in assignments]))


def heartbeat(c: KafkaWire, group, member_id, generation):
    return c.call(12, HB_V, HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)).error_code


def commit(c: KafkaWire, group, member_id, generation, topic="t", partition=0, offset=1, metadata="",
           version=COMMIT_V):
    r = c.call(8, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=[
            OffsetCommitRequestTopic(name=topic, partitions=[OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata)])]))
    return r.topics[0].partitions[0].error_code


@pytest.fixture
def clients(gbroker):
    made = []

    def make(name="raw"):
        c = KafkaWire(gbroker.port, client_id=name)
        made.append(c)
        return c
    create_topic(gbroker.bootstrap, "t", 2)
    yield make
    for c in made:
        c.close()


def stable_victim(make, group="victim"):
    """A one-member stable group whose health the bad-input tests check afterwards."""
    c = make("victim")
    r = join_fully(c, group)
    assert r.error_code == 0
    assert sync(c, group, r.member_id, r.generation_id, [(r.member_id, b"mine")]).assignment == b"mine"
    return c, r.member_id, r.generation_id


def test_two_consumers_joining_in_the_same_instant(clients):
    a, b = clients("a"), clients("b")
    barrier = threading.Barrier(2)

    def go(c):
        barrier.wait()
        return join_fully(c, "same-instant")
    ra, rb = in_thread(go, a), in_thread(go, b)
    ja, jb = ra.result(), rb.result()
    assert ja.error_code == jb.error_code == 0  # no UNKNOWN_MEMBER_ID for either
    assert ja.generation_id == jb.generation_id == 1 and ja.leader == jb.leader
    leader, follower = (ja, jb) if ja.member_id == ja.leader else (jb, ja)
    assert sorted(m.member_id for m in leader.members) == sorted([ja.member_id, jb.member_id])
    assert follower.members == []
    fs = in_thread(sync, b if follower is jb else a, "same-instant", follower.member_id, 1)
    ls = sync(a if leader is ja else b, "same-instant", leader.member_id, 1,
              [(leader.member_id, b"L"), (follower.member_id, b"F")])
    assert ls.assignment == b"L" and fs.result().assignment == b"F"


def test_heartbeat_from_a_stale_generation(clients):
    a, b = clients("a"), clients("b")
    ja = join_fully(a, "stale")
    assert sync(a, "stale", ja.member_id, 1, [(ja.member_id, b"x")]).error_code == 0
    jb = in_thread(join_fully, b, "stale")  # a second member: rebalance to generation 2
    wait_until(lambda: heartbeat(a, "stale", ja.member_id, 1) == E.REBALANCE_IN_PROGRESS, what="the rebalance")
    ja2 = join(a, "stale", member_id=ja.member_id)
    jb = jb.result()
    assert ja2.generation_id == jb.generation_id == 2
    assert heartbeat(a, "stale", ja.member_id, 1) == E.ILLEGAL_GENERATION
    assert heartbeat(b, "stale", jb.member_id, 1) == E.ILLEGAL_GENERATION
    assert heartbeat(a, "stale", "not-a-member", 2) == E.UNKNOWN_MEMBER_ID
    assert sync(a, "stale", ja.member_id, 1).error_code == E.ILLEGAL_GENERATION


def test_commit_during_a_rebalance(clients):
    a, b = clients("a"), clients("b")
    ja = join_fully(a, "rebal")
    assert sync(a, "rebal", ja.member_id, 1, [(ja.member_id, b"x")]).error_code == 0
    assert commit(a, "rebal", ja.member_id, 1, offset=5) == 0
    jb = in_thread(join_fully, b, "rebal")
    # PreparingRebalance: the current generation may still commit (it is revoking its partitions)
    wait_until(lambda: heartbeat(a, "rebal", ja.member_id, 1) == E.REBALANCE_IN_PROGRESS, what="the rebalance")
    assert commit(a, "rebal", ja.member_id, 1, offset=6) == 0
    ja2 = join(a, "rebal", member_id=ja.member_id)
    jb = jb.result()
    # CompletingRebalance: the new generation must wait for its assignment
    assert commit(a, "rebal", ja.member_id, 2, offset=7) == E.REBALANCE_IN_PROGRESS
    # ... and the old generation is gone
    assert commit(a, "rebal", ja.member_id, 1, offset=7) == E.ILLEGAL_GENERATION
    leader, lc = (ja2, a) if ja2.member_id == ja2.leader else (jb, b)
    follower, fc = (jb, b) if leader is ja2 else (ja2, a)
    fs = in_thread(sync, fc, "rebal", follower.member_id, 2)
    sync(lc, "rebal", leader.member_id, 2, [(ja2.member_id, b"1"), (jb.member_id, b"2")])
    fs.result()
    assert commit(a, "rebal", ja.member_id, 2, offset=8) == 0
    fetched = a.call(9, 8, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
        group_id="rebal", topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]))
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 8


def test_sync_group_assignment_larger_than_one_mib_is_returned_byte_exact(tmp_path):
    big_leader, big_follower = os.urandom(1_300_000), os.urandom(1_600_000)
    data = tmp_path / "data"
    with make_broker(data) as b:
        create_topic(b.bootstrap, "t", 2)
        a, f = KafkaWire(b.port, "a"), KafkaWire(b.port, "f")
        try:
            ja = in_thread(join_fully, a, "huge")
            jf = join_fully(f, "huge")
            ja = ja.result()
            leader, lc = (ja, a) if ja.member_id == ja.leader else (jf, f)
            follower, fc = (jf, f) if leader is ja else (ja, a)
            fs = in_thread(sync, fc, "huge", follower.member_id, 1)
            ls = sync(lc, "huge", leader.member_id, 1, [(leader.member_id, big_leader),
                                                         (follower.member_id, big_follower)])
            assert ls.error_code == 0 and ls.assignment == big_leader
            got = fs.result()
            assert got.error_code == 0 and got.assignment == big_follower
            d = a.call(15, 5, DescribeGroupsRequest(groups=["huge"])).groups[0]
            assert {m.member_id: bytes(m.member_assignment) for m in d.members} == {
                leader.member_id: big_leader, follower.member_id: big_follower}
        finally:
            a.close()
            f.close()
    with make_broker(data) as b:  # and it was stored: the restarted coordinator still has it
        c = KafkaWire(b.port)
        d = c.call(15, 5, DescribeGroupsRequest(groups=["huge"])).groups[0]
        assert d.group_state == "Stable"
        assert sorted(len(m.member_assignment) for m in d.members) == [1_300_000, 1_600_000]
        c.close()


def test_bad_input_answers_kafka_errors_without_touching_other_groups(clients):
    victim, vid, vgen = stable_victim(clients)
    c = clients("bad")
    # invalid session timeouts (group.min.session.timeout.ms 500 in these tests; max 1800000)
    assert join(c, "bad", session_ms=100).error_code == E.INVALID_SESSION_TIMEOUT
    assert join(c, "bad", session_ms=1800001).error_code == E.INVALID_SESSION_TIMEOUT
    # empty group id
    assert join(c, "").error_code == E.INVALID_GROUP_ID
    assert c.call(12, HB_V, HeartbeatRequest(group_id="", member_id="m")).error_code == E.INVALID_GROUP_ID
    # unknown group
    assert heartbeat(c, "nope", "m", 1) == E.UNKNOWN_MEMBER_ID
    assert sync(c, "nope", "m", 1).error_code == E.UNKNOWN_MEMBER_ID
    assert join(c, "nope", member_id="made-up").error_code == E.UNKNOWN_MEMBER_ID
    leave = c.call(13, 5, LeaveGroupRequest(group_id="nope", members=[MemberIdentity(member_id="m")]))
    assert [m.error_code for m in leave.members] == [E.UNKNOWN_MEMBER_ID]
    assert c.call(13, 2, LeaveGroupRequest(group_id="nope", member_id="m")).error_code == E.UNKNOWN_MEMBER_ID
    d5, d6 = (c.call(15, v, DescribeGroupsRequest(groups=["nope"])).groups[0] for v in (5, 6))
    assert (d5.error_code, d5.group_state) == (0, "Dead")
    assert d6.error_code == E.GROUP_ID_NOT_FOUND
    fetched = c.call(9, 8, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
        group_id="nope", topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]))
    assert fetched.groups[0].error_code == 0
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == -1
    # a generation from the past / from the future on the victim's group, from another member id
    assert heartbeat(c, "victim", vid, vgen - 1) == E.ILLEGAL_GENERATION
    assert commit(c, "victim", vid, vgen + 5) == E.ILLEGAL_GENERATION
    assert commit(c, "victim", "intruder", vgen) == E.UNKNOWN_MEMBER_ID
    assert commit(c, "unknown-group", "m", 3) == E.GROUP_ID_NOT_FOUND  # v9+
    assert commit(c, "unknown-group", "m", 3, version=8) == E.ILLEGAL_GENERATION
    # commits for unknown topics and partitions; oversized commit metadata
    assert commit(c, "victim", vid, vgen, topic="no-such-topic") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(c, "victim", vid, vgen, partition=99) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(c, "victim", vid, vgen, metadata="m" * 4097) == E.OFFSET_METADATA_TOO_LARGE
    # a join with a protocol type / protocol the group does not use
    r = c.call(11, JOIN_V, JoinGroupRequest(group_id="victim", session_timeout_ms=3000, rebalance_timeout_ms=3000,
                                            member_id="", protocol_type="connect", protocols=sub("t")))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    other = [JoinGroupRequestProtocol(name="cooperative-sticky", metadata=b"")]
    assert join(c, "victim", protocols=other, version=3).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # the victim never noticed
    assert heartbeat(victim, "victim", vid, vgen) == 0
    assert sync(victim, "victim", vid, vgen).assignment == b"mine"
    d = victim.call(15, 5, DescribeGroupsRequest(groups=["victim"])).groups[0]
    assert d.group_state == "Stable" and [m.member_id for m in d.members] == [vid]


def test_oversized_member_metadata(tmp_path):
    """A JoinGroup larger than socket.request.max.bytes closes that connection (Kafka's
    InvalidReceiveException); metadata under the limit reaches the leader byte-exact. Other groups
    are not affected."""
    with make_broker(tmp_path / "data", **{"socket.request.max.bytes": 2 * 1024 * 1024}) as b:
        create_topic(b.bootstrap, "t", 1)
        made = []

        def make(name="raw"):
            c = KafkaWire(b.port, client_id=name)
            made.append(c)
            return c
        try:
            victim, vid, vgen = stable_victim(make)
            c = make("big")
            huge = [JoinGroupRequestProtocol(name="range", metadata=os.urandom(3 * 1024 * 1024))]
            try:
                c.send(11, JOIN_V, JoinGroupRequest(group_id="big", session_timeout_ms=3000, rebalance_timeout_ms=3000,
                                                    member_id="", protocol_type="consumer", protocols=huge))
                closed = c.recv() is None
            except ConnectionError:  # the broker closed it on the size prefix, before the body was sent
                closed = True
            assert closed
            meta = os.urandom(1024 * 1024)
            c2 = make("big2")
            r = join_fully(c2, "big", protocols=[JoinGroupRequestProtocol(name="range", metadata=meta)])
            assert r.error_code == 0 and [bytes(m.metadata) for m in r.members] == [meta]
            assert heartbeat(victim, "victim", vid, vgen) == 0
        finally:
            for c in made:
                c.close()
