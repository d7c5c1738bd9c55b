"""A KRaft cluster of three combined nodes as processes on loopback: the quorum elects, a new controller takes
over after kill -9 of the active one with every acknowledged change kept, the nodes' metadata logs hold the
same records, a killed broker is fenced and loses its leaderships (a preferred leader election gives them back once
it is in the ISRs again), and SIGTERM is a controlled shutdown.

``ODRADEK_SOAK=1`` runs the long profile: 10 controller kills in a row instead of 3, and each test on both topologies
(3 combined nodes; 3 controllers + 3 brokers), where ``make test`` runs each on one, alternating.
"""

from __future__ import annotations

import os
import re
import subprocess
from broker.testing.embedded_cluster import FAST_FAILOVER
from pathlib import Path

import pytest

from cluster.metadata_serde import decode_record
from protocol.record_codec import decode_batch
from storage.config import LogConfig
from storage.log import FetchIsolation, Log
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeQuorumRequest, MetadataRequest
from protocol.generated.messages.describe_quorum_request import PartitionData, TopicData
from tests.harness import scrape, ODRADEK, REPO, ClusterProcesses, MetricsPorts, wait_until
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import ElectionType, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
)

SOAK = bool(os.environ.get("ODRADEK_SOAK"))
KILLS = 10 if SOAK else 3
FAST = FAST_FAILOVER


TOPOLOGIES = {"3 combined": {"combined": 3}, "3 controllers + 3 brokers": {"combined": 0, "controllers": 3,
                                                                           "brokers": 3}}


def topologies(in_ci: str) -> list[str]:
    """Both topologies in the long profile (``ODRADEK_SOAK=1``); the short one runs each test on one, the tests
    alternating (as test_replication_faults.py's)."""
    return list(TOPOLOGIES) if SOAK else [in_ci]


@pytest.fixture
def cluster(request, tmp_path):
    c = ClusterProcesses(tmp_path, overrides=FAST, **TOPOLOGIES[request.param])
    try:
        c.start()
        yield c
    finally:
        c.close()


def until(predicate, timeout: float = 30.0, what: str = "condition"):
    """wait_until that also rides out client errors while the cluster elects or catches up."""
    return wait_until(predicate, timeout, 0.1, what, retry=(Exception,))


def wait_unfenced(c: ClusterProcesses) -> None:
    """Every broker registered and unfenced: placement spreads replicas and leaders over all of them."""
    for i in c.broker_ports:
        node = c.nodes[i]
        until(lambda node=node, i=i: node.log_lines(rf"node {i} is unfenced") >= 1, 60, f"node {i} unfenced")


def quorum_leader(c: ClusterProcesses) -> tuple[int, int]:
    return c.quorum_leader()


def admin(c: ClusterProcesses, exclude: int | None = None) -> AdminClient:
    servers = ",".join(f"127.0.0.1:{p}" for i, p in c.broker_ports.items() if i != exclude)
    return AdminClient({"bootstrap.servers": servers, "socket.timeout.ms": 5000})


def topics_seen(c: ClusterProcesses, node_id: int) -> set[str]:
    """The topics broker ``node_id`` itself knows: a Metadata request on a connection to it (librdkafka's
    list_topics may ask any broker it has learnt of, so it would not show that this one caught up)."""
    with KafkaWire(c.broker_ports[node_id], timeout=5) as w:
        md = w.call(3, 12, MetadataRequest(topics=None))
    return {t.name for t in md.topics if not t.name.startswith("__")}


def six_led_partitions(a: AdminClient, topic: str):
    """The topic's partitions once the answering broker has all 6 with a leader (None before)."""
    parts = list(a.list_topics(topic, timeout=5).topics[topic].partitions.values())
    return parts if len(parts) == 6 and all(p.leader >= 0 for p in parts) else None


def metadata_records(node_dir: Path) -> list[tuple[int, bytes]]:
    """(offset, record value) of every metadata record in a node's ``__cluster_metadata-0`` log."""
    log = Log.open(str(node_dir / "__cluster_metadata-0"), LogConfig.from_props({}), now_ms=0)
    try:
        out = []
        for batch in log.iter_batches(0, FetchIsolation.LOG_END):
            header, records = decode_batch(bytes(batch))
            if header.is_control:
                continue
            out += [(header.base_offset + r.offset_delta, bytes(r.value)) for r in records]
        return out
    finally:
        log.close()


@pytest.mark.parametrize("cluster", topologies("3 combined"), indirect=True)
def test_controller_kills_keep_every_acknowledged_change_and_logs_agree(cluster):
    c = cluster
    until(lambda: quorum_leader(c)[1] > 0, what="a quorum leader")
    acked: list[str] = []
    configs: dict[str, str] = {}
    for round_ in range(KILLS):
        epoch, leader = until(lambda: quorum_leader(c) if quorum_leader(c)[1] > 0 else None, what="a leader")
        c.nodes[leader].kill()
        name = f"after-kill-{round_}"
        a = admin(c, exclude=leader)

        def create():
            try:
                a.create_topics([NewTopic(name, 2, 1)], operation_timeout=10)[name].result(15)
            except confluent_kafka.KafkaException as exc:
                if exc.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
            return True

        until(create, 60, f"CreateTopics {name} after killing controller {leader}")
        acked.append(name)
        new_epoch, new_leader = until(lambda: quorum_leader(c) if quorum_leader(c)[0] > epoch else None,
                                      what="a newer epoch")
        assert new_leader != leader
        value = str(60000 + round_)
        res = ConfigResource(ConfigResource.Type.TOPIC, name,
                             incremental_configs=[ConfigEntry("retention.ms", value,
                                                              incremental_operation=AlterConfigOpType.SET)])
        until(lambda: a.incremental_alter_configs([res])[res].result(15) is None, 60, f"config of {name}")
        configs[name] = value
        c.start(leader)
    for i in c.broker_ports:
        until(lambda i=i: set(acked) <= topics_seen(c, i), 30, f"broker {i} sees every acknowledged topic")
    a = admin(c)
    for name, value in configs.items():  # any broker may answer: each has the topic, and the config in time
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        until(lambda res=res, value=value: a.describe_configs([res])[res].result(15)["retention.ms"].value == value,
              30, f"retention.ms={value} of {name} described")
    assert set(c.terminate(timeout=30).values()) == {0}
    logs = {i: metadata_records(n.data_dir) for i, n in c.nodes.items()}
    shortest = min(len(v) for v in logs.values())
    assert shortest > 0
    for i, records in logs.items():
        assert records[:shortest] == logs[1][:shortest], f"node {i}'s metadata log differs from node 1's"
    names = set()
    for _, value in logs[1][:shortest]:
        record, _ = decode_record(value)
        if type(record).__name__ == "TopicRecord":
            names.add(record.name)
    assert set(acked) <= names


@pytest.mark.parametrize("topology", topologies("3 controllers + 3 brokers"))
def test_killed_broker_is_fenced_and_loses_its_leaderships(tmp_path, topology):
    c = ClusterProcesses(tmp_path, overrides=FAST,
                         **TOPOLOGIES[topology])
    try:
        c.start()
        wait_unfenced(c)
        a = admin(c)
        a.create_topics([NewTopic("spread", 6, 3)])["spread"].result(30)

        # the answering broker may not have applied the topic yet: wait for all 6 partitions, full ISRs
        parts = until(lambda: (ps := six_led_partitions(a, "spread")) and all(len(p.isrs) == 3 for p in ps) and ps,
                      what="the topic's 6 partitions with full ISRs")
        _, leader = quorum_leader(c)
        leaders = {p.leader for p in parts}
        # a broker that leads partitions, preferably not the active controller (its death is the other test's)
        victim = min(leaders - {leader}) if leaders - {leader} else min(leaders)
        c.nodes[victim].kill()
        a = admin(c, exclude=victim)

        def moved():
            parts = a.list_topics("spread", timeout=5).topics["spread"].partitions.values()
            return len(parts) == 6 and all(p.leader != victim and victim not in p.isrs for p in parts)

        until(moved, 30, f"broker {victim} fenced: out of every ISR, leaderships moved")
        c.start(victim)
        until(lambda: c.nodes[victim].log_lines(rf"node {victim} is unfenced") >= 1, 30,
              f"broker {victim} unfenced after its restart")

        # preferred leader election gives the restarted broker its leaderships back once it is in the ISRs
        until(lambda: all(victim in p.isrs for p in six_led_partitions(a, "spread")), 60,
              f"broker {victim} back in every ISR")
        preferred = {p.id for p in parts if p.replicas[0] == victim}
        assert preferred == {p.id for p in parts if p.leader == victim}  # it led where it is the preferred replica
        result = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition("spread", i) for i in range(6)]).result(30)
        codes = {tp.partition: err.code() if err is not None else None for tp, err in result.items()}
        assert codes == {i: None if i in preferred else confluent_kafka.KafkaError.ELECTION_NOT_NEEDED
                         for i in range(6)}
        until(lambda: {p.id for p in six_led_partitions(a, "spread") if p.leader == victim} == preferred, 30,
              f"broker {victim} leading its preferred partitions again")
    finally:
        c.close()


@pytest.mark.parametrize("topology", topologies("3 combined"))
def test_sigterm_is_a_controlled_shutdown(tmp_path, topology):
    c = ClusterProcesses(tmp_path, overrides=FAST,
                         **TOPOLOGIES[topology])
    try:
        c.start()
        wait_unfenced(c)
        a = admin(c)
        a.create_topics([NewTopic("moving", 6, 3)])["moving"].result(30)
        parts = until(lambda: six_led_partitions(a, "moving"), what="6 partitions with leaders")
        _, leader = quorum_leader(c)
        leaders = {p.leader for p in parts}
        victim = min(leaders - {leader}) if leaders - {leader} else min(leaders)  # it leads partitions
        assert c.nodes[victim].terminate(timeout=30) == 0
        assert c.nodes[victim].log_lines("controlled shutdown granted") == 1
        a = admin(c, exclude=victim)
        parts = until(lambda: six_led_partitions(a, "moving"), what="6 partitions with leaders after")
        assert all(p.leader != victim for p in parts)
    finally:
        c.close()


def cluster_status(port: int) -> str:
    done = subprocess.run([*ODRADEK, "cluster", "status", "--bootstrap-server", f"127.0.0.1:{port}"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_describe_quorum_cluster_status_and_controller_metrics(tmp_path):
    """3 controllers + 3 brokers: DescribeQuorum answered by the leader (a broker forwards it, other voters
    say NOT_LEADER_OR_FOLLOWER), ``odradek cluster status`` shows voters, observers, a fenced broker and the
    partition it left without a leader, and the controller metrics count the same."""
    c = ClusterProcesses(tmp_path, overrides=FAST, **TOPOLOGIES["3 controllers + 3 brokers"])
    metrics_ports = MetricsPorts(c.nodes)
    try:
        c.start()
        wait_unfenced(c)
        _, leader = until(lambda: quorum_leader(c) if quorum_leader(c)[1] > 0 else None, what="a leader")
        request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                          partitions=[PartitionData(partition_index=0)])])
        with KafkaWire(c.controller_ports[leader]) as w:
            answer = w.call(55, 2, request)
        p = answer.topics[0].partitions[0]
        assert (answer.error_code, p.error_code, p.leader_id) == (0, 0, leader)
        assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
        assert sorted(n.node_id for n in answer.nodes) == [1, 2, 3]
        def observers():
            with KafkaWire(c.controller_ports[leader]) as w:
                return sorted(o.replica_id for o in w.call(55, 2, request).topics[0].partitions[0].observers)

        until(lambda: observers() == [4, 5, 6], what="three observers")
        other = min({1, 2, 3} - {leader})
        with KafkaWire(c.controller_ports[other]) as w:
            p = w.call(55, 2, request).topics[0].partitions[0]
            assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            wrong = DescribeQuorumRequest(topics=[TopicData(topic_name="orders",
                                                            partitions=[PartitionData(partition_index=0)])])
            assert w.call(55, 2, wrong).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with KafkaWire(c.broker_ports[4]) as w:  # forwarded to the active controller
            p = w.call(55, 1, request).topics[0].partitions[0]
            assert (p.error_code, p.leader_id) == (0, leader)

        a = admin(c)
        a.create_topics([NewTopic("solo", 3, 1)])["solo"].result(30)
        parts = until(lambda: (ps := a.list_topics("solo", timeout=5).topics["solo"].partitions) and len(ps) == 3
                      and all(x.leader >= 0 for x in ps.values()) and ps, what="3 led partitions")
        victim = parts[0].leader
        c.nodes[victim].kill()
        survivor = min(set(c.broker_ports) - {victim})
        until(lambda: scrape(metrics_ports[leader]).get("kafka_controller_kafkacontroller_fencedbrokercount") == 1,
              30, "the controller counts one fenced broker")
        m = scrape(metrics_ports[leader])
        assert m["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        assert m["kafka_controller_kafkacontroller_activebrokercount"] == 2
        assert m["kafka_controller_kafkacontroller_offlinepartitionscount"] >= 1  # RF 1: its partitions are offline
        assert m["kafka_controller_kafkacontroller_globalpartitioncount"] == 3
        assert m["kafka_server_raft_metrics_current_leader"] == leader
        assert m["kafka_server_raft_metrics_high_watermark"] > 0
        assert m["kafka_server_raft_metrics_commit_latency_max"] >= m["kafka_server_raft_metrics_commit_latency_avg"]
        assert scrape(metrics_ports[other])["kafka_controller_kafkacontroller_activecontrollercount"] == 0
        assert "kafka_controller_kafkacontroller_activecontrollercount" not in scrape(metrics_ports[survivor])

        status = until(lambda: (s := cluster_status(c.broker_ports[survivor])) and f"{victim} " in s
                       and "fenced" in s and s, 30, "cluster status")
        assert f"LeaderId:               {leader}" in status
        assert '"id": 1' in status and '"id": 4' in status  # voters with endpoints, observers
        assert re.search(rf"^\s+{victim}\s+127\.0\.0\.1:\d+\s+rack=-\s+fenced$", status, re.M), status
        assert re.search(r"Partitions without a leader: .*solo-", status), status
    finally:
        c.close()
