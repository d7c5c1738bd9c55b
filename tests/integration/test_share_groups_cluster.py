"""Share groups on a 3-node cluster (issue 30, item 2's wire part, and item 3): a share group's members and epochs
survive the kill -9 of its coordinator (its records were committed before the answers, the new leader of its
``__consumer_offsets`` partition replays them), and a group config set through one broker (forwarded to the
controller, a ConfigRecord) is described by every broker and applied by the new coordinator.
"""

from __future__ import annotations

import time
import uuid

from broker.testing.embedded_cluster import EmbeddedCluster
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    DescribeConfigsRequest, FindCoordinatorRequest, IncrementalAlterConfigsRequest, ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from protocol.generated.messages import incremental_alter_configs_request as iac
from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
from tests.groups.workload import create_topic
from tests.kafka_wire import KafkaWire

GROUP_RESOURCE = 32
GROUP, TOPIC = "share-cluster", "share-cluster-topic"


def coordinator(c, group: str, timeout: float = 60.0) -> int:
    """The node FindCoordinator names for ``group``, asked of any live broker until one answers without error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node_id, port in c.broker_ports.items():
            if not c.nodes[node_id].alive():
                continue
            try:
                with KafkaWire(port, timeout=5) as w:
                    found = w.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
            except OSError:
                continue
            if found.error_code == 0 and c.nodes[found.node_id].alive():
                return found.node_id
        time.sleep(0.2)
    raise AssertionError(f"no coordinator for {group} within {timeout} s")


def heartbeat_until_answered(c, group: str, member: str, epoch: int, topics=None, timeout: float = 60.0):
    """A heartbeat sent to the group's coordinator, again while the coordinator moves or loads (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE: what a client retries)."""
    retriable = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE}
    deadline = time.monotonic() + timeout
    while True:
        node = coordinator(c, group, timeout=max(1.0, deadline - time.monotonic()))
        try:
            with KafkaWire(c.broker_ports[node], timeout=10) as w:
                resp = w.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                                subscribed_topic_names=topics))
        except (OSError, AssertionError):
            resp = None
        if resp is not None and resp.error_code not in retriable:
            return node, resp
        assert time.monotonic() < deadline, f"no answer to the heartbeat within {timeout} s: {resp}"
        time.sleep(0.2)


def test_share_group_survives_its_coordinators_kill_and_keeps_its_group_config(tmp_path):
    with EmbeddedCluster(brokers=3, data_dir=tmp_path) as c:
        _scenario(c)


def _scenario(c: EmbeddedCluster) -> None:
    create_topic(c.bootstrap_servers, TOPIC, 3)
    first = next(iter(c.broker_ports.values()))
    with KafkaWire(first) as w:  # set through one broker, forwarded to the controller
        set_hb = w.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
            resource_type=GROUP_RESOURCE, resource_name=GROUP, configs=[
                iac.AlterableConfig(name="share.heartbeat.interval.ms", config_operation=0, value="7000")])]))
        assert set_hb.responses[0].error_code == 0, set_hb

    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    node, joined_a = heartbeat_until_answered(c, GROUP, a, 0, [TOPIC])
    assert joined_a.error_code == 0 and joined_a.heartbeat_interval_ms == 7000
    _, joined_b = heartbeat_until_answered(c, GROUP, b, 0, [TOPIC])
    assert joined_b.error_code == 0
    epoch = joined_b.member_epoch

    c.kill(node)
    # the new coordinator replayed the group: both members go on at their epochs, with the group's interval
    new_node, again = heartbeat_until_answered(c, GROUP, b, epoch)
    assert new_node != node
    assert (again.error_code, again.member_epoch, again.heartbeat_interval_ms) == (0, epoch, 7000)
    _, again_a = heartbeat_until_answered(c, GROUP, a, joined_a.member_epoch)
    assert again_a.error_code == 0
    with KafkaWire(c.broker_ports[new_node]) as w:
        d = w.call(77, 1, ShareGroupDescribeRequest(group_ids=[GROUP])).groups[0]
        assert (d.error_code, d.group_epoch, sorted(m.member_id for m in d.members)) == (0, epoch, sorted([a, b]))
        # an unknown member of the replayed group, and a group nobody created
        assert w.call(76, 1, ShareGroupHeartbeatRequest(group_id=GROUP, member_id=str(uuid.uuid4()),
                                                        member_epoch=epoch)).error_code == E.UNKNOWN_MEMBER_ID
    _, unknown = heartbeat_until_answered(c, "share-cluster-unknown", str(uuid.uuid4()), 4)
    assert unknown.error_code == E.GROUP_ID_NOT_FOUND

    # every live broker describes the group config from its metadata image
    for node_id, port in c.broker_ports.items():
        if node_id == node:
            continue
        with KafkaWire(port) as w:
            r = w.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
                resource_type=GROUP_RESOURCE, resource_name=GROUP, configuration_keys=[
                    "share.heartbeat.interval.ms"])])).results[0]
            assert [(x.name, x.value, x.config_source) for x in r.configs] == [
                ("share.heartbeat.interval.ms", "7000", 8)]
