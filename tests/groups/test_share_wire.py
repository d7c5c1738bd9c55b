"""Share groups (KIP-932) on the wire: ShareGroupHeartbeat v1 and ShareGroupDescribe v1 as a client sends them,
ListGroups and DescribeGroups of a share group, ShareGroupHeartbeat's bad input (Kafka's codes, no state change,
other members unharmed) and the ``share.version`` gate.

Without a share coordinator the group's partitions have no initialized share state, so the SimpleAssignor assigns
nothing: members join with an empty assignment (the share coordinator's branch initializes them).
"""

from __future__ import annotations

import uuid

import pytest

from broker.apis import share_gate
from broker.testing.embedded import EmbeddedBroker
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    ConsumerGroupHeartbeatRequest, DescribeGroupsRequest, JoinGroupRequest, ListGroupsRequest,
    ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
)
from protocol.generated.messages.join_group_request import JoinGroupRequestProtocol
from tests.groups.helpers import share_state_initialized
from tests.groups.workload import create_topic
from tests.kafka_wire import KafkaWire

TOPIC = "share-wire"


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-wire"),
                        overrides={"offsets.topic.num.partitions": 2, "group.share.max.size": 2,
                                   "group.initial.rebalance.delay.ms": 0}) as b:
        create_topic(b.bootstrap, TOPIC, 3)
        yield b


@pytest.fixture
def wire(sbroker):
    with KafkaWire(sbroker.port, client_id="share-wire") as w:
        yield w


def member_id() -> str:
    return str(uuid.uuid4())


def heartbeat(wire, group, member, epoch, topics=None, rack=None):
    return wire.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                       rack_id=rack, subscribed_topic_names=topics))


def describe(wire, *groups):
    return wire.call(77, 1, ShareGroupDescribeRequest(group_ids=list(groups), include_authorized_operations=True))


def test_join_describe_list_and_leave(wire):
    a, b = member_id(), member_id()
    joined = heartbeat(wire, "sw-g", a, 0, [TOPIC], rack="r1")
    assert (joined.error_code, joined.member_id, joined.heartbeat_interval_ms) == (0, a, 5000)
    assert joined.member_epoch >= 1
    assert joined.assignment is not None and joined.assignment.topic_partitions == []  # no share state yet
    second = heartbeat(wire, "sw-g", b, 0, [TOPIC])
    assert second.error_code == 0 and second.member_epoch > joined.member_epoch

    d = describe(wire, "sw-g").groups[0]
    assert (d.error_code, d.group_state, d.assignor_name) == (0, "Stable", "simple")
    assert d.group_epoch == second.member_epoch
    assert sorted(m.member_id for m in d.members) == sorted([a, b])
    ma = next(m for m in d.members if m.member_id == a)
    assert (ma.rack_id, ma.client_id, ma.client_host, ma.subscribed_topic_names) == (
        "r1", "share-wire", "/127.0.0.1", [TOPIC])
    assert d.authorized_operations > 0  # no authorizer: every GROUP operation

    listed = wire.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["share"])).groups
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed
            if g.group_id == "sw-g"] == [("sw-g", "share", "share", "Stable")]
    assert "sw-g" not in {g.group_id for g in
                          wire.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["consumer"])).groups}
    assert "sw-g" in {g.group_id for g in
                      wire.call(16, 4, ListGroupsRequest(states_filter=["stable"])).groups}

    # DescribeGroups treats a share group as a non-classic group: Dead below v6, GROUP_ID_NOT_FOUND at v6
    old = wire.call(15, 5, DescribeGroupsRequest(groups=["sw-g"])).groups[0]
    assert (old.error_code, old.group_state, old.members) == (0, "Dead", [])
    v6 = wire.call(15, 6, DescribeGroupsRequest(groups=["sw-g"])).groups[0]
    assert v6.error_code == E.GROUP_ID_NOT_FOUND

    left = heartbeat(wire, "sw-g", a, -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    assert heartbeat(wire, "sw-g", b, -1).error_code == 0
    d = describe(wire, "sw-g").groups[0]
    assert (d.group_state, d.members) == ("Empty", [])


def test_initialized_partitions_are_assigned_on_the_next_heartbeats(sbroker, wire):
    """Once the share state of the subscribed partitions is initialized, the SimpleAssignor assigns them: two
    members on three partitions each get some, every partition is assigned."""
    a, b = member_id(), member_id()
    ja = heartbeat(wire, "sw-assign", a, 0, [TOPIC])
    jb = heartbeat(wire, "sw-assign", b, 0, [TOPIC])
    assert ja.assignment.topic_partitions == [] and jb.assignment.topic_partitions == []
    share_state_initialized(sbroker, "sw-assign", TOPIC, range(3))
    # what each member was last told (an answer carries the assignment only when it changed)
    told, epochs = {}, {a: ja.member_epoch, b: jb.member_epoch}
    for m in (a, b, a, b):
        resp = heartbeat(wire, "sw-assign", m, epochs[m])
        assert resp.error_code == 0
        epochs[m] = resp.member_epoch
        if resp.assignment is not None:
            told[m] = {p for t in resp.assignment.topic_partitions for p in t.partitions}
    d = describe(wire, "sw-assign").groups[0]
    assigned = {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions} for m in d.members}
    assert assigned[a] and assigned[b] and assigned[a] | assigned[b] == {0, 1, 2}
    assert {t.topic_name for m in d.members for t in m.assignment.topic_partitions} == {TOPIC}
    assert told == assigned and epochs[a] == epochs[b] == d.assignment_epoch


def test_describe_of_unknown_empty_and_other_groups(wire):
    heartbeat(wire, "sw-other", member_id(), 0, [TOPIC])
    resp = wire.call(77, 1, ShareGroupDescribeRequest(group_ids=["sw-missing", "", "sw-other"]))
    assert [(g.group_id, g.error_code) for g in resp.groups] == [
        ("sw-missing", E.GROUP_ID_NOT_FOUND), ("", E.INVALID_GROUP_ID), ("sw-other", 0)]


def test_bad_heartbeats_change_nothing(wire, caplog):
    """Issue 30's bad-input list: each answered with Kafka's code and logged, the group and its member as
    before."""
    caplog.set_level("INFO", logger="odradek.groups")
    good = member_id()
    joined = heartbeat(wire, "sw-bad", good, 0, [TOPIC])
    assert joined.error_code == 0
    before = describe(wire, "sw-bad").groups[0]

    cases = [
        (("", member_id(), 0, [TOPIC]), E.INVALID_REQUEST),                        # empty group id
        (("sw-bad", "", 0, [TOPIC]), E.INVALID_REQUEST),                           # empty member id
        (("sw-bad", "x" * 37, 0, [TOPIC]), E.INVALID_REQUEST),                     # over 36 characters
        (("sw-bad", member_id(), -2, [TOPIC]), E.INVALID_REQUEST),                 # epoch below -1
        (("sw-bad", member_id(), 0, None), E.INVALID_REQUEST),                     # a join without topics
        (("sw-bad", member_id(), 0, []), E.INVALID_REQUEST),
        (("sw-bad", member_id(), 1, None), E.UNKNOWN_MEMBER_ID),                   # unknown member
        (("sw-bad", good, joined.member_epoch + 1, None), E.FENCED_MEMBER_EPOCH),  # an epoch from the future
        (("sw-unknown", member_id(), 3, None), E.GROUP_ID_NOT_FOUND),              # no such group
    ]
    for args, code in cases:
        caplog.clear()
        resp = heartbeat(wire, *args)
        assert resp.error_code == code, (args, resp)
        assert resp.error_message, (args, resp)
        refused = [r.getMessage() for r in caplog.records if "ShareGroupHeartbeat of member" in r.getMessage()]
        assert len(refused) == 1 and E(code).name in refused[0], (args, refused)
    after = describe(wire, "sw-bad").groups[0]
    assert (after.group_epoch, after.assignment_epoch, [(m.member_id, m.member_epoch) for m in after.members]) == (
        before.group_epoch, before.assignment_epoch, [(m.member_id, m.member_epoch) for m in before.members])
    # the member was unharmed: its next heartbeat is answered as before
    again = heartbeat(wire, "sw-bad", good, joined.member_epoch)
    assert (again.error_code, again.member_epoch) == (0, joined.member_epoch)


def test_full_group_answers_group_max_size_reached(wire):
    for _ in range(2):  # group.share.max.size = 2 on this broker
        assert heartbeat(wire, "sw-full", member_id(), 0, [TOPIC]).error_code == 0
    full = heartbeat(wire, "sw-full", member_id(), 0, [TOPIC])
    assert full.error_code == E.GROUP_MAX_SIZE_REACHED
    assert len(describe(wire, "sw-full").groups[0].members) == 2


def test_groups_of_another_type(wire):
    # a share heartbeat to a consumer group, a consumer heartbeat to a share group: GROUP_ID_NOT_FOUND
    cg = wire.call(68, 1, ConsumerGroupHeartbeatRequest(group_id="sw-consumer", member_id=member_id(),
                                                        member_epoch=0, rebalance_timeout_ms=10_000,
                                                        subscribed_topic_names=[TOPIC], topic_partitions=[]))
    assert cg.error_code == 0
    assert heartbeat(wire, "sw-consumer", member_id(), 0, [TOPIC]).error_code == E.GROUP_ID_NOT_FOUND
    assert heartbeat(wire, "sw-share", member_id(), 0, [TOPIC]).error_code == 0
    other = wire.call(68, 1, ConsumerGroupHeartbeatRequest(group_id="sw-share", member_id=member_id(),
                                                           member_epoch=0, rebalance_timeout_ms=10_000,
                                                           subscribed_topic_names=[TOPIC], topic_partitions=[]))
    assert other.error_code == E.GROUP_ID_NOT_FOUND
    assert describe(wire, "sw-consumer").groups[0].error_code == E.GROUP_ID_NOT_FOUND
    # JoinGroup on a share group: INCONSISTENT_GROUP_PROTOCOL, the share group as it was
    join = wire.call(11, 9, JoinGroupRequest(group_id="sw-share", session_timeout_ms=10_000,
                                             rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer",
                                             protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert join.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    d = describe(wire, "sw-share").groups[0]
    assert (d.error_code, len(d.members)) == (0, 1)


def test_share_version_0_answers_unsupported_version(tmp_path):
    """A cluster formatted with share.version=0 (``odradek format --feature share.version=0``): ApiVersions still
    lists the share APIs, as Kafka 4.2's does, and each answers UNSUPPORTED_VERSION in its error shape."""
    from broker.quorum.bootstrap_metadata import write_bootstrap
    from cluster.controller import BOOTSTRAP_FEATURES

    write_bootstrap(tmp_path, {**BOOTSTRAP_FEATURES, "share.version": 0})
    with EmbeddedBroker(tmp_path) as b, KafkaWire(b.port) as w:
        assert "share.version" not in b.broker.image.features
        from protocol.generated.messages import ApiVersionsRequest

        apis = {k.api_key: (k.min_version, k.max_version)
                for k in w.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
                .api_keys}
        assert apis[76] == (1, 1) and apis[77] == (1, 1)
        hb = heartbeat(w, "sv0", member_id(), 0, ["t"])
        assert hb.error_code == E.UNSUPPORTED_VERSION
        d = w.call(77, 1, ShareGroupDescribeRequest(group_ids=["a", "b"]))
        assert [(g.group_id, g.error_code) for g in d.groups] == [("a", E.UNSUPPORTED_VERSION),
                                                                   ("b", E.UNSUPPORTED_VERSION)]
        assert w.call(16, 5, ListGroupsRequest(types_filter=["share"])).groups == []  # nothing was created


@pytest.mark.parametrize("key", sorted(share_gate.GATED_KEYS))
def test_the_gate_answers_each_share_api_in_its_error_shape(key):
    """Every gated key's UNSUPPORTED_VERSION answer encodes at each of its versions, with the error where a client
    reads it (top level, or per group for ShareGroupDescribe and DescribeShareGroupOffsets)."""
    from protocol.generated import messages as m
    from protocol.generated.api_keys import APIS
    from protocol.generated.messages import describe_share_group_offsets_request as dsgo

    requests = {
        76: m.ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["t"]),
        77: m.ShareGroupDescribeRequest(group_ids=["g1", "g2"]),
        78: m.ShareFetchRequest(group_id="g", member_id="m", share_session_epoch=0),
        79: m.ShareAcknowledgeRequest(group_id="g", member_id="m", share_session_epoch=1),
        90: m.DescribeShareGroupOffsetsRequest(groups=[dsgo.DescribeShareGroupOffsetsRequestGroup(group_id="g1")]),
        91: m.AlterShareGroupOffsetsRequest(group_id="g"),
        92: m.DeleteShareGroupOffsetsRequest(group_id="g"),
    }
    resp = share_gate.unsupported_version(requests[key])
    spec = APIS[key]
    for v in range(spec.min_version, spec.stable_max + 1):
        decoded = spec.response.decode(resp.encode(v), v)
        if key in (77, 90):
            assert [g.error_code for g in decoded.groups] == [E.UNSUPPORTED_VERSION] * len(decoded.groups) != []
        else:
            assert decoded.error_code == E.UNSUPPORTED_VERSION
    assert share_gate.share_groups_enabled({"share.version": 1})
    assert not share_gate.share_groups_enabled({}) and not share_gate.share_groups_enabled({"share.version": 0})


def test_confluent_share_consumer_joins_and_leaves(sbroker, wire):
    """librdkafka's ShareConsumer (confluent-kafka 2.16) heartbeats v1: it joins, shows in ShareGroupDescribe with
    its client id, and leaves on close."""
    import time

    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": sbroker.bootstrap, "group.id": "sw-librdkafka",
                              "client.id": "share-client"})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        members = []
        while time.monotonic() < deadline and not members:
            consumer.poll(0.2)
            d = describe(wire, "sw-librdkafka").groups[0]
            members = d.members if d.error_code == 0 else []
        assert [(m.client_id, m.subscribed_topic_names) for m in members] == [("share-client", [TOPIC])]
    finally:
        consumer.close()
    d = describe(wire, "sw-librdkafka").groups[0]
    assert (d.group_state, d.members) == ("Empty", [])
