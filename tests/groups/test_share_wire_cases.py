"""Issue 30's claims that the other wire tests (test_share_wire.py, test_share_fetch_wire.py, test_share_admin_wire.py)
leave open, on one in-process broker with raw requests:

- the SimpleAssignor over ShareGroupHeartbeat: 3 members on 6 partitions get 2 each, 3 members of a 1-partition
  topic all get it;
- DeleteGroups of a share group: NON_EMPTY_GROUP while it has a member; once empty, its share state is deleted at the
  share coordinator, then the group;
- a final ShareAcknowledge (epoch -1) answers its acknowledgements, closes the session and releases the member's
  other records without counting their delivery; a final ShareFetch naming forgotten topics is INVALID_REQUEST;
- the rest of the ShareFetch/ShareAcknowledge bad input (an unknown topic id to fetch, a type outside 0-4 with
  IsRenewAck), each refusal logged and nothing changed;
- the share coordinator's stale epochs on the wire: an older state epoch FENCED_STATE_EPOCH, an older leader epoch
  FENCED_LEADER_EPOCH;
- ``share.auto.offset.reset=by_duration:PT1H`` used when the share partition's state is initialized: the first record
  at most an hour old; with none, OFFSET_NOT_AVAILABLE on each fetch until one is written;
- ``__share_group_state`` made on first use with Kafka's topic configs, and its RF and min ISR 1 in
  ``config/single-node.yaml`` and the container's default properties (Kafka's defaults 3 and 2 elsewhere).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from broker.testing.embedded import EmbeddedBroker
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    DeleteGroupsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, MetadataRequest, ProduceRequest,
    ShareFetchRequest, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
)
from protocol.generated.messages import incremental_alter_configs_request as iac
from protocol.generated.messages import share_fetch_request as sfr
from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch
from protocol.topics import SHARE_GROUP_STATE_TOPIC
from tests.groups.test_share_fetch_wire import ACCEPT, RENEW, Member, Setup, acquired, fetch_until, partition
from tests.groups.workload import create_topic
from tests.kafka_wire import KafkaWire
from tests.share.share_rpcs import initialize, only, read, summary, write

REPO = Path(__file__).resolve().parents[2]
GROUP_CONFIG = 32


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-wire-cases"),
                        overrides={"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0,
                                   "group.share.min.record.lock.duration.ms": 1000}) as b:
        yield b


def _hb(w, group, member, epoch, topics=None):
    return w.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                    subscribed_topic_names=topics))


def _settled_assignment(w, group: str, members: list[str], topic: str) -> dict[str, set[int]]:
    """Every member heartbeats (bounded rounds) until the group's assignment epoch is each member's epoch; then each
    member's partitions as ShareGroupDescribe shows them."""
    epochs = {}
    for m in members:
        joined = _hb(w, group, m, 0, [topic])
        assert joined.error_code == 0, joined
        epochs[m] = joined.member_epoch
    for _ in range(6):
        for m in members:
            resp = _hb(w, group, m, epochs[m])
            assert resp.error_code == 0, resp
            epochs[m] = resp.member_epoch
        (d,) = w.call(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups
        if all(m.member_epoch == d.assignment_epoch for m in d.members) and all(
                m.assignment.topic_partitions for m in d.members):
            return {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions} for m in d.members}
    raise AssertionError(f"the group did not settle: {d}")


def test_three_members_on_six_partitions_get_two_each_and_all_three_share_one(sbroker):
    create_topic(sbroker.bootstrap, "swc-six", 6)
    create_topic(sbroker.bootstrap, "swc-one", 1)
    members = [str(uuid.uuid4()) for _ in range(3)]
    with KafkaWire(sbroker.port) as w:
        six = _settled_assignment(w, "swc-six", members, "swc-six")
        assert sorted(len(ps) for ps in six.values()) == [2, 2, 2]
        assert set().union(*six.values()) == set(range(6))
        one = _settled_assignment(w, "swc-one", members, "swc-one")
        assert one == {m: {0} for m in members}
        for group in ("swc-six", "swc-one"):
            for m in members:
                assert _hb(w, group, m, -1).error_code == 0


def test_delete_groups_of_a_share_group_deletes_its_share_state(sbroker):
    create_topic(sbroker.bootstrap, "swc-del", 2)
    tid = sbroker.broker.metadata.image.topic("swc-del").topic_id
    group, member = "swc-del-group", str(uuid.uuid4())
    with KafkaWire(sbroker.port) as w:
        assert _hb(w, group, member, 0, ["swc-del"]).error_code == 0  # initializes both partitions' share state
        assert [only(w.call(87, 1, summary(group, tid, p))).error_code for p in (0, 1)] == [0, 0]
        (r,) = w.call(42, 2, DeleteGroupsRequest(groups_names=[group])).results
        assert (r.group_id, r.error_code) == (group, E.NON_EMPTY_GROUP)
        (d,) = w.call(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups
        assert (d.error_code, len(d.members)) == (0, 1)
        assert [only(w.call(87, 1, summary(group, tid, p))).error_code for p in (0, 1)] == [0, 0]

        assert _hb(w, group, member, -1).error_code == 0
        (r,) = w.call(42, 2, DeleteGroupsRequest(groups_names=[group])).results
        assert (r.group_id, r.error_code) == (group, 0)
        (d,) = w.call(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups
        assert d.error_code == E.GROUP_ID_NOT_FOUND
        # the share state went first: the coordinator no longer has it (uninitialized, as before the first join)
        assert [only(w.call(84, 0, read(group, tid, p, leader_epoch=0))).error_code for p in (0, 1)] == \
            [E.INVALID_REQUEST] * 2


def test_final_share_acknowledge_releases_without_counting_and_closes_the_session(sbroker):
    s = Setup(sbroker, "final", [4])
    a, b = Member(sbroker, s), Member(sbroker, s)
    try:
        assert acquired(fetch_until(a)) == [(0, 3, 1)]
        final = a.ack([(0, 0, [ACCEPT])], epoch=-1)
        assert final.error_code == 0 and [p.error_code for t in final.responses for p in t.partitions] == [0]
        # the rest came back Available with their delivery not counted: b's first delivery is count 1
        assert [(o, n) for f, last, n in acquired(fetch_until(b)) for o in range(f, last + 1)] == \
            [(1, 1), (2, 1), (3, 1)]
        assert a.fetch(epoch=a.epoch).error_code == E.SHARE_SESSION_NOT_FOUND  # the session is gone
        assert partition(b.fetch(acks=[(1, 3, [ACCEPT])])).acknowledge_error_code == 0
        sp = sbroker.broker.share_partitions.partitions[(s.group, s.topic_id, 0)].sp
        assert sp.start_offset == 4
        # a final ShareFetch may neither fetch nor forget (newContext): INVALID_REQUEST, b's session unharmed
        forget = b.w.call(78, 1, ShareFetchRequest(
            group_id=s.group, member_id=b.id, share_session_epoch=-1, max_wait_ms=0, min_bytes=0, max_records=0,
            batch_size=0, topics=[], forgotten_topics_data=[sfr.ForgottenTopic(topic_id=s.topic_id, partitions=[0])]))
        assert forget.error_code == E.INVALID_REQUEST
        assert b.fetch().error_code == 0
    finally:
        a.close()
        b.close()


def test_more_share_fetch_and_acknowledge_bad_input_is_logged_and_changes_nothing(sbroker, caplog):
    caplog.set_level("INFO", logger="odradek.share.fetch")
    s = Setup(sbroker, "bad-more", [3])
    a = Member(sbroker, s, version=2)
    try:
        assert acquired(fetch_until(a)) == [(0, 2, 1)]
        caplog.clear()
        unknown = b"\x01" * 16
        resp = a.w.call(78, 2, ShareFetchRequest(
            group_id=s.group, member_id=a.id, share_session_epoch=a.epoch, max_wait_ms=0, min_bytes=1,
            max_records=10, batch_size=10,
            topics=[sfr.FetchTopic(topic_id=unknown, partitions=[sfr.FetchPartition(partition_index=0)])]))
        a.epoch += 1
        assert resp.error_code == 0
        codes = {(t.topic_id, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}
        assert codes[(unknown, 0)] == E.UNKNOWN_TOPIC_ID
        assert codes.get((s.topic_id, 0), 0) == 0  # the session's own partition: nothing new to acquire, no error
        refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(refused) == 1 and "UNKNOWN_TOPIC_ID" in refused[0] and f"{unknown.hex()}-0" in refused[0], refused
        caplog.clear()

        bad = a.ack([(0, 2, [5])], is_renew_ack=True)  # a type outside 0-4 even with IsRenewAck
        assert [p.error_code for t in bad.responses for p in t.partitions] == [E.INVALID_REQUEST]
        refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert any("INVALID_REQUEST" in m for m in refused), refused
        caplog.clear()
        assert a.ack([(0, 0, [ACCEPT])], epoch=0).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert a.fetch(epoch=0, acks=[(0, 0, [ACCEPT])]).error_code == E.INVALID_REQUEST
        refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(refused) == 2 and "INVALID_SHARE_SESSION_EPOCH" in refused[0] and "INVALID_REQUEST" in refused[1]

        sp = sbroker.broker.share_partitions.partitions[(s.group, s.topic_id, 0)].sp
        assert [(st.name, n, m) for st, n, m in (sp.record_state(o) for o in range(3))] == \
            [("ACQUIRED", 1, a.id)] * 3
        renew = a.ack([(0, 2, [RENEW])], is_renew_ack=True)
        assert [p.error_code for t in renew.responses for p in t.partitions] == [0]
        done = a.fetch(acks=[(0, 2, [ACCEPT])])  # the session holds the unknown topic's partition too
        assert [p.acknowledge_error_code for t in done.responses if t.topic_id == s.topic_id
                for p in t.partitions] == [0]
        assert sp.start_offset == 3
    finally:
        a.close()


def test_share_coordinator_fences_older_state_and_leader_epochs(sbroker):
    create_topic(sbroker.bootstrap, "swc-fence", 1)
    tid = sbroker.broker.metadata.image.topic("swc-fence").topic_id
    group = "swc-fence-group"
    with KafkaWire(sbroker.port) as w:
        def call(key, version, req):
            for _ in range(200):  # bounded (20 s): the coordinator's partition may still be loading after its creation
                p = only(w.call(key, version, req))
                if p.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
                    return p
                time.sleep(0.1)
            raise AssertionError(f"the share coordinator kept answering {E(p.error_code).name}")
        assert call(83, 0, initialize(group, tid, 0, state_epoch=3)).error_code == 0
        assert call(85, 1, write(group, tid, 0, 0, [(0, 4, 2, 1)], leader_epoch=5, state_epoch=3)).error_code == 0
        assert call(85, 1, write(group, tid, 0, 5, [], leader_epoch=5, state_epoch=2)).error_code == \
            E.FENCED_STATE_EPOCH
        assert call(85, 1, write(group, tid, 0, 5, [], leader_epoch=4, state_epoch=3)).error_code == \
            E.FENCED_LEADER_EPOCH
        assert call(84, 0, read(group, tid, 0, leader_epoch=4)).error_code == E.FENCED_LEADER_EPOCH
        got = call(84, 0, read(group, tid, 0, leader_epoch=5))
        assert (got.error_code, got.start_offset, got.state_epoch) == (0, 0, 3)  # the refused writes changed nothing


def test_by_duration_reset_starts_at_the_first_record_of_the_last_hour(sbroker):
    topic, group = "swc-by-duration", "swc-by-duration-group"
    create_topic(sbroker.bootstrap, topic, 1)
    tid = sbroker.broker.metadata.image.topic(topic).topic_id
    now = int(time.time() * 1000)
    with KafkaWire(sbroker.port) as w:
        assert w.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
            resource_type=GROUP_CONFIG, resource_name=group, configs=[iac.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="by_duration:PT1H")])])).responses[0] \
            .error_code == 0
        for ts, n in ((now - 2 * 3600_000, 3), (now - 1800_000, 2), (now, 1)):  # offsets 0-2, 3-4, 5
            batch = build_batch([Record(value=b"v", timestamp=ts) for _ in range(n)])
            r = w.call(0, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]))
            assert r.responses[0].partition_responses[0].error_code == 0
        member = str(uuid.uuid4())
        assert _hb(w, group, member, 0, [topic]).error_code == 0
        got = []
        epoch = 0
        for _ in range(10):  # bounded long polls
            resp = w.call(78, 1, ShareFetchRequest(
                group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=2000, min_bytes=1,
                max_records=100, batch_size=100,
                topics=[sfr.FetchTopic(topic_id=tid, partitions=[sfr.FetchPartition(partition_index=0)])]))
            assert resp.error_code == 0, resp
            epoch += 1
            got += [(a.first_offset, a.last_offset) for t in resp.responses for p in t.partitions
                    for a in p.acquired_records]
            if got:
                break
        assert got == [(3, 5)]
        assert _hb(w, group, member, -1).error_code == 0


def test_by_duration_reset_without_a_record_in_its_window_answers_offset_not_available_until_one_is(sbroker):
    """ShareFetchUtils.offsetForTimestamp finds nothing: the partition answers OFFSET_NOT_AVAILABLE (no state is
    kept) and each fetch tries again; once a record of the last hour is written, the next fetch acquires it."""
    topic, group = "swc-by-duration-empty", "swc-by-duration-empty-group"
    create_topic(sbroker.bootstrap, topic, 1)
    tid = sbroker.broker.metadata.image.topic(topic).topic_id
    now = int(time.time() * 1000)
    with KafkaWire(sbroker.port) as w:
        assert w.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
            resource_type=GROUP_CONFIG, resource_name=group, configs=[iac.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="by_duration:PT1H")])])).responses[0] \
            .error_code == 0

        def produce(ts, n):
            batch = build_batch([Record(value=b"v", timestamp=ts) for _ in range(n)])
            r = w.call(0, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]))
            assert r.responses[0].partition_responses[0].error_code == 0

        produce(now - 2 * 3600_000, 3)  # offsets 0-2, all older than the hour
        member = str(uuid.uuid4())
        assert _hb(w, group, member, 0, [topic]).error_code == 0
        epoch = 0

        def fetch():
            nonlocal epoch
            resp = w.call(78, 1, ShareFetchRequest(
                group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=500, min_bytes=1,
                max_records=100, batch_size=100,
                topics=[] if epoch else [sfr.FetchTopic(topic_id=tid, partitions=[sfr.FetchPartition(0)])]))
            assert resp.error_code == 0, resp
            epoch += 1
            ps = [p for t in resp.responses for p in t.partitions]  # none: nothing to answer for it
            assert len(ps) <= 1, ps
            return (ps[0].error_code, [(a.first_offset, a.last_offset) for a in ps[0].acquired_records]) if ps \
                else (0, [])

        assert fetch() == (E.OFFSET_NOT_AVAILABLE, [])
        assert fetch() == (E.OFFSET_NOT_AVAILABLE, [])
        assert (group, tid, 0) not in sbroker.broker.share_partitions.partitions
        produce(now, 2)  # offsets 3-4
        got = []
        for _ in range(10):  # bounded long polls
            code, acq = fetch()
            assert code == 0
            got += acq
            if got:
                break
        assert got == [(3, 4)]
        assert _hb(w, group, member, -1).error_code == 0


def test_share_group_state_topic_is_made_on_first_use_with_kafkas_configs(sbroker):
    """ShareCoordinatorService's topic: 50 partitions (share.coordinator.state.topic.num.partitions), RF and
    min.insync.replicas from .replication.factor and .min.isr (1 on this one-node broker, as single-node.yaml sets),
    cleanup.policy=delete, retention.ms=-1."""
    from broker.config import BrokerConfig
    from broker.config.container_config import DEFAULT_SERVER_PROPERTIES

    keys = ("share.coordinator.state.topic.num.partitions", "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr")
    assert tuple(BrokerConfig({}).get(k) for k in keys) == (50, 3, 2)  # Kafka's defaults
    single = BrokerConfig.load(REPO / "config" / "single-node.yaml")
    assert tuple(single.get(k) for k in keys) == (50, 1, 1)
    container = dict(line.split("=", 1) for line in DEFAULT_SERVER_PROPERTIES.splitlines() if "=" in line)
    assert (container[keys[1]], container[keys[2]]) == ("1", "1")

    create_topic(sbroker.bootstrap, "swc-state", 1)
    with KafkaWire(sbroker.port) as w:
        assert _hb(w, "swc-state-group", str(uuid.uuid4()), 0, ["swc-state"]).error_code == 0  # first use
        (t,) = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=SHARE_GROUP_STATE_TOPIC)])).topics
        assert (t.error_code, t.is_internal, len(t.partitions)) == (0, True, 50)
        assert {len(p.replica_nodes) for p in t.partitions} == {1}
        (r,) = w.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=2, resource_name=SHARE_GROUP_STATE_TOPIC)])).results
        configs = {c.name: c.value for c in r.configs}
        assert (r.error_code, configs["cleanup.policy"], configs["retention.ms"], configs["min.insync.replicas"]) \
            == (0, "delete", "-1", "1")


def test_refused_admin_requests_on_a_share_group_are_logged_and_change_nothing(sbroker, caplog):
    """The issue's bad input past the heartbeat and fetch paths, each with Kafka's code and one log line, the group
    and its configs as they were: a bad group config (INVALID_CONFIG), Alter/DeleteShareGroupOffsets and DeleteGroups
    of a share group with a member (NON_EMPTY_GROUP), FindCoordinator's share key below v6 or malformed
    (INVALID_REQUEST)."""
    from protocol.generated.messages import (
        AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest, FindCoordinatorRequest,
    )
    from protocol.generated.messages import alter_share_group_offsets_request as asgo
    from protocol.generated.messages import delete_share_group_offsets_request as dsgo

    create_topic(sbroker.bootstrap, "swc-refused", 1)
    group, member = "swc-refused-group", str(uuid.uuid4())
    caplog.set_level("INFO", logger="odradek")
    with KafkaWire(sbroker.port) as w:
        def config(value):
            return w.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
                resource_type=GROUP_CONFIG, resource_name=group, configs=[iac.AlterableConfig(
                    name="share.isolation.level", config_operation=0, value=value)])])).responses[0].error_code

        def described():
            (d,) = w.call(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups
            return d.error_code, d.group_epoch, d.assignment_epoch, [(m.member_id, m.member_epoch) for m in d.members]

        def isolation():
            (r,) = w.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
                resource_type=GROUP_CONFIG, resource_name=group)])).results
            return {c.name: c.value for c in r.configs}["share.isolation.level"]

        assert config("read_committed") == 0
        assert _hb(w, group, member, 0, ["swc-refused"]).error_code == 0
        before = described(), isolation()
        cases = [
            (lambda: config("dirty"), E.INVALID_CONFIG),
            (lambda: w.call(91, 0, AlterShareGroupOffsetsRequest(group_id=group, topics=[
                asgo.AlterShareGroupOffsetsRequestTopic(topic_name="swc-refused", partitions=[
                    asgo.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])).error_code,
             E.NON_EMPTY_GROUP),
            (lambda: w.call(92, 0, DeleteShareGroupOffsetsRequest(group_id=group, topics=[
                dsgo.DeleteShareGroupOffsetsRequestTopic(topic_name="swc-refused")])).error_code, E.NON_EMPTY_GROUP),
            (lambda: w.call(42, 2, DeleteGroupsRequest(groups_names=[group])).results[0].error_code,
             E.NON_EMPTY_GROUP),
            (lambda: w.call(10, 5, FindCoordinatorRequest(key_type=2, coordinator_keys=[
                f"{group}:AAAAAAAAAAAAAAAAAAAAAA:0"])).coordinators[0].error_code, E.INVALID_REQUEST),
            (lambda: w.call(10, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[f"{group}:nope:0"]))
             .coordinators[0].error_code, E.INVALID_REQUEST),
        ]
        for call, code in cases:
            caplog.clear()
            assert call() == code
            lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
            assert len(lines) == 1 and E(code).name in lines[0], (E(code).name, lines)
        assert (described(), isolation()) == before
        assert _hb(w, group, member, -1).error_code == 0


def test_deleting_a_topic_drops_its_share_state(sbroker):
    """Item 5's last rule on the wire: DeleteTopics of a topic a share group reads tombstones its share-partitions'
    state at the share coordinator (a read then finds them uninitialized, INVALID_REQUEST as Kafka's), the group
    forgets the topic (DescribeShareGroupOffsets lists nothing) and its member's next heartbeat has no partitions."""
    from protocol.generated.messages import DeleteTopicsRequest, DescribeShareGroupOffsetsRequest
    from protocol.generated.messages import describe_share_group_offsets_request as dsgoq
    from protocol.generated.messages.delete_topics_request import DeleteTopicState

    topic, group, member = "swc-deleted", "swc-deleted-group", str(uuid.uuid4())
    create_topic(sbroker.bootstrap, topic, 2)
    tid = sbroker.broker.metadata.image.topic(topic).topic_id
    with KafkaWire(sbroker.port) as w:
        joined = _hb(w, group, member, 0, [topic])
        assigned = _hb(w, group, member, joined.member_epoch)
        assert [(t.topic_id, t.partitions) for t in assigned.assignment.topic_partitions] == [(tid, [0, 1])]
        assert [only(w.call(84, 0, read(group, tid, p, leader_epoch=0))).error_code for p in (0, 1)] == [0, 0]
        (d,) = w.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name=topic)], timeout_ms=10000)).responses
        assert d.error_code == 0

        def offsets():
            (g,) = w.call(90, 1, DescribeShareGroupOffsetsRequest(groups=[
                dsgoq.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])).groups
            return g.error_code, [t.topic_name for t in g.topics]
        for _ in range(200):  # bounded (20 s): the coordinators see the topic gone with the next metadata image
            codes = [only(w.call(84, 0, read(group, tid, p, leader_epoch=0))).error_code for p in (0, 1)]
            if codes == [E.INVALID_REQUEST] * 2 and offsets() == (0, []):
                break
            time.sleep(0.1)
        assert codes == [E.INVALID_REQUEST] * 2 and offsets() == (0, [])
        after = _hb(w, group, member, assigned.member_epoch)
        assert after.error_code == 0 and after.assignment is not None and after.assignment.topic_partitions == []
        assert _hb(w, group, member, -1).error_code == 0
