"""Share groups' admin APIs on a 3-node cluster (issue 30, item 6): partitions led by every node, their share state
kept by share coordinators on other nodes. AlterShareGroupOffsets sent to the group's coordinator initializes each
partition's state at its coordinator (through the persister's peer links); DescribeShareGroupOffsets v1 reads it
back and asks each partition's leader for its end offset (ListOffsets) for the lag, and ``odradek cluster status``
sums it. One short profile: a cluster start and a few requests.
"""

from __future__ import annotations

from broker import cluster_status
from broker.testing.embedded_cluster import EmbeddedCluster, wait_until
from protocol.errors import ErrorCode as E
from protocol.generated.messages import AlterShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest
from protocol.generated.messages import alter_share_group_offsets_request as asgo
from protocol.generated.messages import describe_share_group_offsets_request as dsgo
from tests.groups.workload import produce
from tests.integration.test_share_groups_cluster import coordinator
from tests.kafka_wire import KafkaWire

GROUP, TOPIC = "share-admin-cluster", "share-admin-cluster-topic"
RETRIABLE = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE}


def test_offsets_and_lag_across_nodes(tmp_path, capsys):
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedCluster(brokers=3, data_dir=tmp_path) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
        produce(c.bootstrap_servers, TOPIC, 0, 30, 3)  # 10 records in each partition
        leaders = {c.leader_of(TOPIC, p) for p in range(3)}
        node = coordinator(c, GROUP)

        def alter():
            """Sent again on a retriable error (the first use creates __share_group_state, whose coordinators may
            still be elected past the persister's retries), as the Java Admin retries."""
            altered = w.call(91, 0, AlterShareGroupOffsetsRequest(group_id=GROUP, topics=[
                asgo.AlterShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[
                    asgo.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=p + 1)
                    for p in range(3)])]))
            codes = {altered.error_code} | {p.error_code for t in altered.responses for p in t.partitions}
            assert codes <= {0} | RETRIABLE, altered
            return codes == {0}
        with KafkaWire(c.broker_ports[node], timeout=30) as w:
            wait_until(alter, 60, 0.5, "AlterShareGroupOffsets answered without error")
            (g,) = w.call(90, 1, DescribeShareGroupOffsetsRequest(groups=[
                dsgo.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=None)])).groups
        assert g.error_code == 0
        got = {p.partition_index: (p.start_offset, p.lag, p.error_code) for t in g.topics for p in t.partitions}
        # start offset p + 1, nothing delivered yet: lag = 10 - (p + 1)
        assert got == {p: (p + 1, 10 - (p + 1), 0) for p in range(3)}, (got, leaders)
        assert cluster_status.main(["status", "--bootstrap-server", c.bootstrap_servers.split(",")[0]]) == 0
        out = capsys.readouterr().out
        assert f"  {GROUP}  Empty  members=0  {TOPIC} lag={9 + 8 + 7}" in out.splitlines()
