"""The nodes' own traffic with the authorizer on (issue 29): three nodes with Kafka's StandardAuthorizer whose
principal (the nodes' SCRAM user) is the only super user, as Kafka deployments make their brokers; clients have
ACLs only. A client writes with acks=all to an RF 3 topic with min.insync.replicas=2: the followers' Fetch is
authorized (CLUSTER_ACTION) as the node's principal, else the ISR would shrink below 2 and the writes fail. A
transaction commits with its partitions led by the three nodes: the leaders' KIP-890 verification (AddPartitionsToTxn
v4+, CLUSTER_ACTION) and the coordinator's WriteTxnMarkers go between nodes and are authorized the same way; its
records are read back read_committed. A client without ACLs is refused."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.embedded_cluster import EmbeddedCluster
from cluster.acls import AclOperation as Op
from cluster.acls import PatternType, ResourceType
from tests.authz_harness import acl

TOPIC = "guarded"
ACLS = [acl("app", ResourceType.TOPIC, TOPIC, op) for op in (Op.CREATE, Op.WRITE, Op.READ)] + [
    acl("app", ResourceType.TRANSACTIONAL_ID, "app-", Op.WRITE, pattern=PatternType.PREFIXED),
    acl("app", ResourceType.GROUP, "guarded-reader", Op.READ)]


def test_replication_and_transactions_between_nodes_are_authorized(tmp_path):
    with EmbeddedCluster(brokers=3, data_dir=tmp_path, security="SASL_SSL", users=("app", "stranger"), acls=ACLS,
                         authorizer=True, overrides={"min.insync.replicas": 2}) as c:
        app = c.client_config("app")
        admin = AdminClient(app)  # kept: a collected client fails its futures
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
        acked = []
        p = Producer({**app, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 30000})
        for i in range(300):
            p.produce(TOPIC, f"r{i}".encode(), partition=i % 3,
                      on_delivery=lambda err, msg: acked.append(err))
        assert p.flush(60) == 0
        assert len(acked) == 300 and set(acked) == {None}, {str(e) for e in acked}
        meta = admin.list_topics(TOPIC, timeout=20).topics[TOPIC]
        assert {len(pm.isrs) for pm in meta.partitions.values()} == {3}  # every follower fetched
        assert len({pm.leader for pm in meta.partitions.values()}) > 1  # the transaction spans nodes

        t = Producer({**app, "transactional.id": "app-guarded"})
        t.init_transactions(30)
        t.begin_transaction()
        for i in range(3):
            t.produce(TOPIC, f"txn{i}".encode(), partition=i)
        t.commit_transaction(30)
        consumer = Consumer({**app, "group.id": "guarded-reader", "isolation.level": "read_committed",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(TOPIC, i, 0) for i in range(3)])
            want = {f"txn{i}".encode() for i in range(3)}
            got: set[bytes] = set()
            deadline = time.monotonic() + 30
            while not want <= got and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    got.add(m.value())
            assert want <= got, got
        finally:
            consumer.close()

        refused = []
        s = Producer({**c.client_config("stranger"), "message.timeout.ms": 10000})
        s.produce(TOPIC, b"x", partition=0, on_delivery=lambda err, msg: refused.append(err))
        assert s.flush(30) == 0
        assert refused[0] is not None and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
