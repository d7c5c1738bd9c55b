"""The share coordinator on a 3-node cluster, over the wire: FindCoordinator's SHARE key (type 2) names the leader of
the share-partition's ``__share_group_state`` partition (created on first use, RF 3, min ISR 2); Initialize, Write,
Read, ReadSummary and Delete round-trip there, any other broker answers NOT_COORDINATOR; the state written survives
a kill -9 of the coordinator's broker (the new leader replays the committed log), and a write made after the move
is there when the old broker is back and leads again.

CI runs one kill; ``ODRADEK_SOAK=1`` runs 8 (``make soak``), each against a different share-partition's coordinator.
"""

from __future__ import annotations

import os

import pytest

from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.embedded_cluster import KAFKA_DEFAULT_TIMERS, EmbeddedCluster, wait_until
from cluster.client_metrics import uuid_string
from protocol.errors import ErrorCode
from protocol.generated.messages import FindCoordinatorRequest, MetadataRequest
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from tests.kafka_wire import KafkaWire
from tests.share.share_rpcs import initialize, only, read, read_batches, share_rpcs, summary, write

SOAK = bool(os.environ.get("ODRADEK_SOAK"))
KILLS = 8 if SOAK else 1
TOPIC = "shared"
GROUP = "share-coord-test"


def _call(c: EmbeddedCluster, node: int, request, version: int):
    with KafkaWire(c.broker_ports[node], timeout=30) as w:
        return w.call(request.API_KEY, version, request)


def _coordinator(c: EmbeddedCluster, key: str, avoid: int | None = None) -> int:
    """The coordinator FindCoordinator names for ``key``, asked of a live broker (not ``avoid``, just killed)."""
    def ask():
        for node in c.broker_ports:
            if node == avoid or not c.nodes[node].alive():
                continue
            (co,) = _call(c, node, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6).coordinators
            if co.error_code == 0 and co.node_id != avoid:
                assert co.port == c.broker_ports[co.node_id]
                return co.node_id
            return None
        return None
    return wait_until(ask, timeout=60, interval=0.2, what=f"the share coordinator of {key}",
                      retry=(ConnectionError, OSError))


def _until_ok(c: EmbeddedCluster, key: str, request, version: int, avoid: int | None = None):
    """Send to the key's coordinator until it answers without a retriable coordinator error (it moved or loads)."""
    def once():
        node = _coordinator(c, key, avoid)
        r = _call(c, node, request, version)
        if only(r).error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                  ErrorCode.COORDINATOR_NOT_AVAILABLE):
            return None
        return node, r
    return wait_until(once, timeout=60, interval=0.2, what=f"an answer from the coordinator of {key}",
                      retry=(ConnectionError, OSError))


@pytest.mark.parametrize("timers", ["fast failover", "Kafka's defaults"])
def test_share_state_round_trips_and_survives_the_coordinators_kill(tmp_path, timers):
    overrides = KAFKA_DEFAULT_TIMERS if timers == "Kafka's defaults" else None
    with EmbeddedCluster(brokers=3, data_dir=tmp_path, overrides=overrides) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, KILLS, 3)])[TOPIC].result(30)
        wait_until(lambda: all(c.leader_of(TOPIC, p) > 0 for p in range(KILLS)), timeout=30, what="the topic")
        (t,) = _call(c, 1, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]), 12).topics
        tid = t.topic_id

        # the five RPCs round-trip at the coordinator; FindCoordinator below v6 or a malformed key: INVALID_REQUEST
        key = f"{GROUP}:{uuid_string(tid)}:0"
        for name, version, request, check in share_rpcs(GROUP, tid, 0):
            node, r = _until_ok(c, key, request, version)  # the partition may still be loading: retriable
            check(r)
        (co,) = _call(c, node, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 5).coordinators
        assert co.error_code == ErrorCode.INVALID_REQUEST
        assert _call(c, node, FindCoordinatorRequest(key_type=2, key=key), 3).error_code == ErrorCode.INVALID_REQUEST
        (co,) = _call(c, node, FindCoordinatorRequest(key_type=2, coordinator_keys=[f"{GROUP}:nope:0"]),
                      6).coordinators
        assert co.error_code == ErrorCode.INVALID_REQUEST
        other = next(n for n in c.broker_ports if n != node)
        assert only(_call(c, other, read(GROUP, tid, 0), 0)).error_code == ErrorCode.NOT_COORDINATOR

        # each round: state written at the coordinator, the coordinator killed, the state read at its successor
        for p in range(KILLS):
            key = f"{GROUP}:{uuid_string(tid)}:{p}"
            _until_ok(c, key, initialize(GROUP, tid, p, state_epoch=3), 0)
            batches = [(100 * p, 100 * p + 9, 2, 1), (100 * p + 10, 100 * p + 19, 0, 2)]
            node, r = _until_ok(c, key, write(GROUP, tid, p, 100 * p, batches, leader_epoch=5, state_epoch=3), 1)
            assert only(r).error_code == 0
            c.kill(node)
            successor, r = _until_ok(c, key, read(GROUP, tid, p, leader_epoch=5), 0, avoid=node)
            assert successor != node
            assert read_batches(r) == (100 * p, 3, batches)
            # a write at the successor, then the old broker back: the state follows the partition
            _, r = _until_ok(c, key, write(GROUP, tid, p, 100 * p + 10, [(100 * p + 10, 100 * p + 19, 2, 2)],
                                           leader_epoch=6, state_epoch=3, delivery_complete_count=10), 1,
                             avoid=node)
            assert only(r).error_code == 0
            c.restart(node)
            _, r = _until_ok(c, key, summary(GROUP, tid, p), 1)
            s = only(r)
            assert (s.start_offset, s.state_epoch, s.leader_epoch, s.delivery_complete_count) == \
                (100 * p + 10, 3, 6, 10)
            # an older leader epoch is fenced wherever the coordinator is now
            _, r = _until_ok(c, key, read(GROUP, tid, p, leader_epoch=5), 0)
            assert only(r).error_code == ErrorCode.FENCED_LEADER_EPOCH
