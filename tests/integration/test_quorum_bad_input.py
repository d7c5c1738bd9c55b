"""Bad input on a 3-node cluster's controller listener: KRaft RPCs from an old epoch or a node that is not a
voter, a Fetch from an unknown replica or another cluster, a controller RPC on a broker listener, a
registration that duplicates a live broker or names another cluster, a heartbeat from a fenced incarnation.
Each gets Kafka's error code (or a closed connection), changes nothing, and the cluster keeps working.
Then damage on disk: a torn tail of the metadata log is cut and fetched again; a corrupt quorum-state or a
corrupt batch below the recovery point stops that node with the file named, while the others serve."""

from __future__ import annotations


import pytest

from broker.quorum import wire
from cluster.raft import messages as m
from cluster.metadata_serde import decode_record
from protocol.errors import ErrorCode
from protocol.generated.metadata import BrokerRegistrationChangeRecord
from protocol.record_codec import iter_batches
from protocol.generated.messages import (
    BrokerHeartbeatRequest, BrokerRegistrationRequest, DescribeQuorumRequest,
)
from protocol.generated.messages.broker_registration_request import Listener
from protocol.generated.messages.describe_quorum_request import PartitionData, TopicData
from broker.testing.embedded_cluster import NodeProcess
from tests.harness import ClusterProcesses
from tests.integration.test_quorum_cluster import (
    FAST, admin, quorum_leader, topics_seen, until, wait_unfenced,
)
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import NewTopic  # noqa: E402

CLUSTER_ID = "b2RyYWRlay10ZXN0LWNsdQ"  # tests.harness.ClusterProcesses' id
DESCRIBE = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                   partitions=[PartitionData(partition_index=0)])])


def describe(c: ClusterProcesses, leader: int):
    with KafkaWire(c.controller_ports[leader]) as w:
        return w.call(55, 2, DESCRIBE).topics[0].partitions[0]


def committed_between(c: ClusterProcesses, leader: int, epoch: int, start: int, end: int) -> list[tuple[int, object]]:
    """(offset, record) of the metadata records committed in [start, end), fetched from the leader as an observer
    (control records are None)."""
    body = wire.to_request(m.FetchRequest(99, leader, epoch, 0, 0), CLUSTER_ID)
    records = call(c.controller_ports[leader], 1, 17, body).responses[0].partitions[0].records or b""
    out = []
    for header, batch in iter_batches(records):
        for r in batch:
            offset = header.base_offset + r.offset_delta
            if start <= offset < end:
                out.append((offset, None if header.is_control else decode_record(bytes(r.value))[0]))
    return out


def session_fence_and_unfence(c: ClusterProcesses, leader: int, records: list[tuple[int, object]]) -> bool:
    """Whether the records are only the cluster's own doing: a broker fenced because its session timed out (a
    heartbeat late on a loaded machine) and unfenced again, nothing the bad RPCs could have caused."""
    fenced = {r.broker_id for _, r in records if isinstance(r, BrokerRegistrationChangeRecord) and r.fenced == 1}
    return (all(isinstance(r, BrokerRegistrationChangeRecord) and r.fenced in (1, -1) and not r.in_controlled_shutdown
                for _, r in records)
            and all(c.nodes[leader].log_lines(rf"Fencing broker {b} because its session has timed out") >= 1
                    for b in fenced))


def call(port: int, api_key: int, version: int, body):
    with KafkaWire(port) as w:
        return w.call(api_key, version, body)


def make_topic(c: ClusterProcesses, name: str, exclude: int | None = None) -> None:
    a = admin(c, exclude=exclude)

    def made():
        try:
            a.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(15)
        except confluent_kafka.KafkaException as exc:
            if exc.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        return True
    until(made, 60, f"CreateTopics {name}")


@pytest.fixture
def cluster(tmp_path):
    c = ClusterProcesses(tmp_path, combined=3, overrides=FAST)
    try:
        c.start()
        wait_unfenced(c)
        yield c
    finally:
        c.close()


def test_bad_rpcs_get_kafkas_errors_and_change_nothing(cluster):
    c = cluster
    epoch, leader = until(lambda: quorum_leader(c) if quorum_leader(c)[1] > 0 else None, what="a leader")
    follower = min({1, 2, 3} - {leader})
    wait_unfenced(c)  # the start-up registrations and unfencings are committed before "before"
    before = describe(c, leader)
    port = c.controller_ports[leader]

    def rpc(msg, version):
        body = wire.to_request(msg, CLUSTER_ID)
        return call(port, body.API_KEY, version, body)

    # Vote from an old epoch, and from a node that is not a voter
    p = rpc(m.VoteRequest(follower, leader, epoch - 1, epoch - 1, 0), 2).topics[0].partitions[0]
    assert (p.error_code, p.vote_granted) == (ErrorCode.FENCED_LEADER_EPOCH, False)
    p = rpc(m.VoteRequest(99, leader, epoch + 1, epoch, 10**6), 2).topics[0].partitions[0]
    assert (p.error_code, p.vote_granted) == (ErrorCode.INCONSISTENT_VOTER_SET, False)
    # BeginQuorumEpoch from an old epoch, and one naming a leader that is not a voter
    p = rpc(m.BeginQuorumEpochRequest(follower, leader, epoch - 1), 1).topics[0].partitions[0]
    assert p.error_code == ErrorCode.FENCED_LEADER_EPOCH
    with KafkaWire(c.controller_ports[follower]) as w:
        body = wire.to_request(m.BeginQuorumEpochRequest(99, follower, epoch + 1), CLUSTER_ID)
        assert w.call(53, 1, body).topics[0].partitions[0].error_code == ErrorCode.INCONSISTENT_VOTER_SET
    # a Fetch of the metadata log from another cluster; one from an unknown replica is served as an
    # observer's (Kafka's leader serves any replica id) and moves nothing
    body = wire.to_request(m.FetchRequest(follower, leader, epoch, 0, 0), "QUJDREVGR0hJSktMTU5PUFFSUw")
    assert call(port, 1, 17, body).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    body = wire.to_request(m.FetchRequest(99, leader, epoch, 0, 0), CLUSTER_ID)
    answer = call(port, 1, 17, body)
    assert answer.error_code == 0 and answer.responses[0].partitions[0].error_code == 0
    # a KRaft RPC on a broker listener: not served there, the connection is closed (Kafka's behaviour)
    with KafkaWire(c.broker_ports[follower]) as w:
        w.send(52, 2, wire.to_request(m.VoteRequest(follower, leader, epoch + 1, epoch, 10**6), CLUSTER_ID))
        assert w.recv_frame() is None
    # BrokerRegistration: a live broker's id with another incarnation; another cluster's id
    registration = BrokerRegistrationRequest(
        broker_id=follower, cluster_id=CLUSTER_ID, incarnation_id=b"\x77" * 16, features=[], rack=None,
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0)], log_dirs=[])
    assert call(port, 62, 4, registration).error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    registration.cluster_id = "QUJDREVGR0hJSktMTU5PUFFSUw"
    assert call(port, 62, 4, registration).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    # a heartbeat from an incarnation that is no longer registered (an older broker epoch)
    heartbeat = BrokerHeartbeatRequest(broker_id=follower, broker_epoch=0, current_metadata_offset=10**6,
                                       want_fence=False, want_shut_down=False)
    assert call(port, 63, 1, heartbeat).error_code == ErrorCode.STALE_BROKER_EPOCH

    after = describe(c, leader)
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)
    # nothing was committed by any of it (a session that timed out on a loaded machine is the cluster's own doing)
    changes = committed_between(c, leader, epoch, before.high_watermark, after.high_watermark)
    assert not changes or session_fence_and_unfence(c, leader, changes), changes
    assert c.nodes[leader].log_lines(r"VoteRequest from node \d+ refused") >= 2
    assert c.nodes[leader].log_lines(r"names cluster QUJDREVGR0hJSktMTU5PUFFSUw") == 1
    make_topic(c, "still-working")
    for i in c.broker_ports:
        until(lambda i=i: "still-working" in topics_seen(c, i), 30, f"node {i} still follows")


def test_damage_on_disk_is_cut_or_stops_the_node_naming_the_file(cluster):
    c = cluster
    _, leader = until(lambda: quorum_leader(c) if quorum_leader(c)[1] > 0 else None, what="a leader")
    victim = max({1, 2, 3} - {leader})
    make_topic(c, "before")
    until(lambda: "before" in topics_seen(c, victim), 30, "the victim has the topic")
    metadata_dir = c.nodes[victim].data_dir / "__cluster_metadata-0"

    # a torn tail: kill -9, then half a batch more at the end of the active segment
    c.nodes[victim].kill()
    segment = max(metadata_dir.glob("*.log"))
    data = segment.read_bytes()
    segment.write_bytes(data + data[-200:-50])
    make_topic(c, "while-down", exclude=victim)
    c.start(victim)
    until(lambda: {"before", "while-down"} <= topics_seen(c, victim), 60, "the victim caught up again")

    # a corrupt quorum-state: the node stops, naming the file; the others serve
    assert c.nodes[victim].terminate(timeout=30) == 0
    (metadata_dir / "quorum-state").write_text('{"leaderId": 1, "leaderEpoch": ')
    c.nodes[victim].start(wait=False)
    assert c.nodes[victim].proc.wait(timeout=60) == 1
    assert f"the file {metadata_dir / 'quorum-state'}" in c.nodes[victim].stderr_tail()
    make_topic(c, "without-victim", exclude=victim)

    # a corrupt batch below the recovery point (a clean shutdown's log, one byte flipped in the middle)
    survivor = min({1, 2, 3} - {victim, leader})
    (metadata_dir / "quorum-state").unlink()
    assert c.nodes[survivor].terminate(timeout=30) == 0
    survivor_dir = c.nodes[survivor].data_dir / "__cluster_metadata-0"
    segment = min(survivor_dir.glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    c.nodes[survivor].start(wait=False)
    assert c.nodes[survivor].proc.wait(timeout=60) == 1
    tail = c.nodes[survivor].stderr_tail()
    assert f"the metadata log segment {segment} is corrupt below its recovery point" in tail, tail
    assert "Traceback" not in tail


def test_a_second_process_with_a_live_brokers_node_id_exits_naming_the_conflict(tmp_path):
    """A broker-only process started with the node.id of a live broker: the controller refuses its registration
    (DUPLICATE_BROKER_REGISTRATION) until ``initial.broker.registration.timeout.ms``, then it exits 1 naming the
    conflict (BrokerLifecycleManager's registration timeout); the live broker stays registered and serving."""
    c = ClusterProcesses(tmp_path / "c", combined=0, controllers=1, brokers=1, overrides=FAST)
    try:
        c.start()
        wait_unfenced(c)
        original = c.nodes[2]
        twin_dir = tmp_path / "twin"
        twin_dir.mkdir()
        twin = NodeProcess(twin_dir, {**original.overrides, "log.dirs": twin_dir,
                                      "listeners": "PLAINTEXT://127.0.0.1:0",
                                      "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
                                      "initial.broker.registration.timeout.ms": 3000})
        twin.start(wait=False)
        try:
            assert twin.proc.wait(60) == 1
            assert "DUPLICATE_BROKER_REGISTRATION" in twin.stderr_tail() and "node 2" in twin.stderr_tail()
        finally:
            twin.close()
        assert original.alive()
        make_topic(c, "still-served")
        until(lambda: "still-served" in topics_seen(c, 2), 30, "the live broker serving the new topic")
    finally:
        c.close()
