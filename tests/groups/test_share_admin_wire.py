"""Share groups' admin APIs on the wire (KIP-932, Kafka 4.2): DescribeShareGroupOffsets v0-1 (SPSO, v1's lag of
KIP-1226), AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0, as kafka-share-groups.sh and the Java Admin send
them (confluent-kafka 2.16's AdminClient has no share-group offsets methods, so the requests are raw).

The share state is the real share coordinator's: a member's join initializes it, AlterShareGroupOffsets initializes
it again at a new start offset and state epoch, and a partition leader's progress is written as a broker writes it,
with WriteShareGroupState v1 (start offset and delivery complete count), since ShareFetch is not served yet.
"""

from __future__ import annotations

import uuid

import pytest

from broker.testing.embedded import EmbeddedBroker
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    AlterShareGroupOffsetsRequest, ConsumerGroupHeartbeatRequest, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, ReadShareGroupStateSummaryRequest, ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest, WriteShareGroupStateRequest,
)
from protocol.generated.messages import alter_share_group_offsets_request as asgo
from protocol.generated.messages import delete_share_group_offsets_request as dsgo
from protocol.generated.messages import describe_share_group_offsets_request as dsgoq
from protocol.generated.messages import read_share_group_state_summary_request as rssq
from protocol.generated.messages import write_share_group_state_request as wsgs
from tests.groups.workload import create_topic, produce
from tests.kafka_wire import KafkaWire

TOPIC = "share-admin"


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-admin"),
                        overrides={"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0,
                                   "metrics.prometheus.listener": "127.0.0.1:0"}) as b:
        create_topic(b.bootstrap, TOPIC, 3)
        produce(b.bootstrap, TOPIC, 0, 30, 3)  # 10 records in each partition
        yield b


@pytest.fixture
def wire(sbroker):
    with KafkaWire(sbroker.port, client_id="share-admin") as w:
        yield w


def join(wire, group) -> tuple[str, int]:
    mid = str(uuid.uuid4())
    resp = wire.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=mid, member_epoch=0,
                                                       subscribed_topic_names=[TOPIC]))
    assert resp.error_code == 0
    return mid, resp.member_epoch


def leave(wire, group, mid) -> None:
    resp = wire.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=mid, member_epoch=-1))
    assert resp.error_code == 0


def describe(wire, group, topics=None, version=1):
    req = DescribeShareGroupOffsetsRequest(groups=[dsgoq.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None if topics is None else [
            dsgoq.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in topics])])
    (g,) = wire.call(90, version, req).groups
    return g


def offsets(g) -> dict:
    """(topic, partition) -> (start offset, lag, error)."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
            for t in g.topics for p in t.partitions}


def alter(wire, group, *topics):
    return wire.call(91, 0, AlterShareGroupOffsetsRequest(group_id=group, topics=[
        asgo.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=[
            asgo.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps])
        for t, ps in topics]))


def delete(wire, group, *topics):
    return wire.call(92, 0, DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        dsgo.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]))


def summary(wire, sbroker, group, partitions=(0, 1, 2)):
    topic_id = sbroker.broker.metadata.image.topic(TOPIC).topic_id
    resp = wire.call(87, 1, ReadShareGroupStateSummaryRequest(group_id=group, topics=[
        rssq.ReadStateSummaryData(topic_id=topic_id, partitions=[rssq.PartitionData(partition=p)
                                                                 for p in partitions])]))
    return {p.partition: (p.error_code, p.start_offset, p.state_epoch) for t in resp.results for p in t.partitions}


def test_describe_alter_describe_delete(sbroker, wire):
    """A joined member initializes the partitions (SPSO -1, lag -1); while it is a member the offsets cannot be
    altered; once the group is empty the alteration bumps the group epoch, which is the new state epoch, and the
    SPSO moves; a leader's written progress gives the lag; deleting the topic's offsets removes its share state
    from the group, so describing the whole group lists nothing."""
    g = "sa-flow"
    assert offsets(describe(wire, g, [(TOPIC, [0])])) == {(TOPIC, 0): (-1, -1, 0)}  # no state: -1, no error
    mid, epoch = join(wire, g)
    assert offsets(describe(wire, g)) == {(TOPIC, p): (-1, -1, 0) for p in range(3)}
    non_empty = alter(wire, g, (TOPIC, [(0, 5)]))
    assert (non_empty.error_code, non_empty.responses) == (E.NON_EMPTY_GROUP, [])
    assert delete(wire, g, TOPIC).error_code == E.NON_EMPTY_GROUP
    leave(wire, g, mid)
    before = wire.call(77, 1, ShareGroupDescribeRequest(group_ids=[g])).groups[0].group_epoch

    resp = alter(wire, g, (TOPIC, [(0, 5), (1, 0), (7, 1)]), ("sa-no-such-topic", [(0, 1)]))
    assert resp.error_code == 0
    got = {(t.topic_name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}
    assert got == {(TOPIC, 0): 0, (TOPIC, 1): 0, (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                   ("sa-no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    after = wire.call(77, 1, ShareGroupDescribeRequest(group_ids=[g])).groups[0]
    assert (after.group_state, after.group_epoch) == ("Empty", before + 1)
    states = summary(wire, sbroker, g)
    assert states[0] == (0, 5, before + 1) and states[1] == (0, 0, before + 1)
    assert states[2][1:] == (-1, epoch)  # not altered: its state as the join initialized it

    # a leader's progress: SPSO 7 with 2 records past it delivered (KIP-1226): lag = 10 - 7 - 2
    topic_id = sbroker.broker.metadata.image.topic(TOPIC).topic_id
    written = wire.call(85, 1, WriteShareGroupStateRequest(group_id=g, topics=[wsgs.WriteStateData(
        topic_id=topic_id, partitions=[wsgs.PartitionData(partition=0, state_epoch=before + 1, leader_epoch=0,
                                                          start_offset=7, delivery_complete_count=2,
                                                          state_batches=[])])]))
    assert written.results[0].partitions[0].error_code == 0
    v1 = offsets(describe(wire, g, [(TOPIC, [0, 1, 2])]))
    assert v1[(TOPIC, 0)] == (7, 1, 0)
    assert v1[(TOPIC, 2)] == (-1, -1, 0)
    v0 = describe(wire, g, [(TOPIC, [0])], version=0)
    assert v0.topics[0].partitions[0].start_offset == 7

    deleted = delete(wire, g, TOPIC, "sa-no-such-topic")
    assert deleted.error_code == 0
    assert {t.topic_name: t.error_code for t in deleted.responses} == {
        TOPIC: 0, "sa-no-such-topic": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert describe(wire, g).topics == []  # no initialized partitions left
    again = delete(wire, g, TOPIC)  # nothing left to delete
    assert [(t.topic_name, t.error_code) for t in again.responses] == [(TOPIC, E.UNKNOWN_TOPIC_OR_PARTITION)]
    # a member joining again initializes the partitions anew
    mid, _ = join(wire, g)
    assert set(offsets(describe(wire, g))) == {(TOPIC, p) for p in range(3)}
    leave(wire, g, mid)


def test_alter_creates_the_group_and_sets_its_start(sbroker, wire):
    """kafka-share-groups.sh --reset-offsets before the group's first use (KAFKA-19662): the group is created
    (Empty, epoch 1) with the partitions' state initialized at the given start offsets, and only those are
    described."""
    g = "sa-new"
    assert alter(wire, g, (TOPIC, [(2, 4)])).error_code == 0
    d = wire.call(77, 1, ShareGroupDescribeRequest(group_ids=[g])).groups[0]
    assert (d.error_code, d.group_state, d.group_epoch) == (0, "Empty", 1)
    assert summary(wire, sbroker, g, (2,)) == {2: (0, 4, 1)}
    # initialized at a start offset, no delivery is complete yet (KAFKA-20034): the lag is every record past it
    assert offsets(describe(wire, g)) == {(TOPIC, 2): (4, 10 - 4, 0)}


def test_groups_of_another_type_and_bad_ids(wire):
    cg = wire.call(68, 1, ConsumerGroupHeartbeatRequest(group_id="sa-consumer", member_id=str(uuid.uuid4()),
                                                        member_epoch=0, rebalance_timeout_ms=10_000,
                                                        subscribed_topic_names=[TOPIC], topic_partitions=[]))
    assert cg.error_code == 0
    assert alter(wire, "sa-consumer", (TOPIC, [(0, 1)])).error_code == E.GROUP_ID_NOT_FOUND
    assert delete(wire, "sa-consumer", TOPIC).error_code == E.GROUP_ID_NOT_FOUND
    assert delete(wire, "sa-missing", TOPIC).error_code == E.GROUP_ID_NOT_FOUND
    assert alter(wire, "", (TOPIC, [(0, 1)])).error_code == E.INVALID_GROUP_ID
    assert delete(wire, "", TOPIC).error_code == E.INVALID_GROUP_ID
    empty = wire.call(90, 1, DescribeShareGroupOffsetsRequest(groups=[
        dsgoq.DescribeShareGroupOffsetsRequestGroup(group_id="sa-missing", topics=[])]))
    assert (empty.groups[0].error_code, empty.groups[0].topics) == (0, [])


def group_metrics(sbroker) -> dict:
    """The group coordinator's samples as the Prometheus endpoint serves them."""
    from tests.broker.test_metrics import scrape

    samples = scrape(sbroker.broker.metrics.port)
    return {(name, tuple(v for _, v in labels)): value for (name, labels), value in samples.items()
            if name.startswith("kafka_server_group_coordinator_metrics_")}


def test_group_coordinator_metrics(sbroker, wire):
    """group-coordinator-metrics as Kafka names them: group-count{protocol=share}, share-group-count{state} and
    share-group-rebalance-count, moved by a member joining (a new group, Stable, an epoch bump) and leaving."""
    before = group_metrics(sbroker)
    mid, _ = join(wire, "sa-metrics")
    joined = group_metrics(sbroker)
    assert joined[("kafka_server_group_coordinator_metrics_group_count", ("share",))] == \
        before[("kafka_server_group_coordinator_metrics_group_count", ("share",))] + 1
    assert joined[("kafka_server_group_coordinator_metrics_share_group_count", ("Stable",))] == \
        before[("kafka_server_group_coordinator_metrics_share_group_count", ("Stable",))] + 1
    assert joined[("kafka_server_group_coordinator_metrics_share_group_rebalance_total", ())] == \
        before[("kafka_server_group_coordinator_metrics_share_group_rebalance_total", ())] + 1
    leave(wire, "sa-metrics", mid)
    left = group_metrics(sbroker)
    assert left[("kafka_server_group_coordinator_metrics_share_group_count", ("Stable",))] == \
        before[("kafka_server_group_coordinator_metrics_share_group_count", ("Stable",))]
    assert left[("kafka_server_group_coordinator_metrics_share_group_count", ("Empty",))] == \
        before[("kafka_server_group_coordinator_metrics_share_group_count", ("Empty",))] + 1


def test_cluster_status_lists_share_groups(sbroker, wire, capsys):
    """``odradek cluster status``: each share group with its state, members and lag per topic (the sum of its
    partitions', ``-`` while one is unknown: a member's fresh partitions start at -1)."""
    from broker import cluster_status

    assert alter(wire, "sa-status-reset", (TOPIC, [(0, 3)])).error_code == 0  # lag 10 - 3 - 0
    mid, _ = join(wire, "sa-status-live")
    try:
        assert cluster_status.main(["status", "--bootstrap-server", sbroker.bootstrap]) == 0
    finally:
        leave(wire, "sa-status-live", mid)
    out = capsys.readouterr().out
    lines = out[out.index("Share groups:"):].splitlines()
    assert f"  sa-status-reset  Empty  members=0  {TOPIC} lag=7" in lines
    assert f"  sa-status-live  Stable  members=1  {TOPIC} lag=-" in lines
