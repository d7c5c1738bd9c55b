"""ACL checks of the data and transaction handlers (issue 29), as Kafka 4.x's KafkaApis makes them: one node with
StandardAuthorizer (tests/authz_harness.py), one user per case and every ACL from the start, each request sent as a
user without and with the minimal ACL; then the pattern rules on Produce and Fetch (prefixed, ``*``, ``User:*``,
DENY wins, hosts, the super user) and real clients (confluent-kafka) told what Kafka tells them.

``ROWS`` names Kafka's check behind each API key's tests (KafkaApis.scala unless said otherwise).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker.security.authorization import SUPPORTED_OPERATIONS, to_32bit_field
from cluster.client_metrics import uuid_string
from cluster.acls import AclOperation as Op
from cluster.acls import AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DeleteRecordsRequest, DescribeLogDirsRequest,
    DescribeProducersRequest, DescribeTopicPartitionsRequest, DescribeTransactionsRequest, EndTxnRequest,
    FetchRequest, FindCoordinatorRequest, InitProducerIdRequest, ListOffsetsRequest, ListTransactionsRequest,
    MetadataRequest, OffsetForLeaderEpochRequest, ProduceRequest, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
)
from protocol.generated.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
)
from protocol.generated.messages.delete_records_request import DeleteRecordsPartition, DeleteRecordsTopic
from protocol.generated.messages.describe_producers_request import TopicRequest as ProducersTopic
from protocol.generated.messages.describe_topic_partitions_request import TopicRequest as DescribeTopic
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic, ReplicaState
from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from protocol.generated.messages.offset_for_leader_epoch_request import OffsetForLeaderPartition, OffsetForLeaderTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.generated.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
)
from protocol.generated.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from protocol.message import ZERO_UUID
from protocol.record_codec import Record, build_batch
from tests.authz_harness import SUPER_USER, AuthzNode, acl, cluster_acl

ROWS: dict[int, str] = {
    0: "KafkaApis.handleProduceRequest: TRANSACTIONAL_ID WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, acks=0 "
       "closes), TOPIC WRITE per partition (TOPIC_AUTHORIZATION_FAILED); no IDEMPOTENT_WRITE since KIP-679",
    1: "KafkaApis.handleFetchRequest: follower CLUSTER CLUSTER_ACTION else TOPIC_AUTHORIZATION_FAILED for all; "
       "consumer TOPIC READ per partition of the fetch context (sessions, topic ids)",
    2: "KafkaApis.handleListOffsetRequestV1AndAbove: TOPIC DESCRIBE (partitionSeqByAuthorized)",
    3: "KafkaApis.handleTopicMetadataRequest: TOPIC DESCRIBE filter (all topics: dropped), auto-create needs CLUSTER "
       "or TOPIC CREATE, topic/cluster authorized operations (v8-10 cluster, AuthHelper.authorizedOperations)",
    21: "KafkaApis.handleDeleteRecordsRequest: TOPIC DELETE per topic",
    22: "KafkaApis.handleInitProducerIdRequest: TRANSACTIONAL_ID WRITE; else CLUSTER IDEMPOTENT_WRITE or "
        "authorizeByResourceType TOPIC WRITE (KIP-679) else CLUSTER_AUTHORIZATION_FAILED",
    23: "KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER CLUSTER_ACTION, else TOPIC DESCRIBE (KIP-320)",
    24: "KafkaApis.handleAddPartitionsToTxnRequest: v4+ CLUSTER CLUSTER_ACTION (authorizeClusterOperation); v0-3 "
        "TRANSACTIONAL_ID WRITE, TOPIC WRITE (internal topics never)",
    25: "KafkaApis.handleAddOffsetsToTxnRequest: TRANSACTIONAL_ID WRITE, then GROUP READ",
    26: "KafkaApis.handleEndTxnRequest: TRANSACTIONAL_ID WRITE",
    27: "KafkaApis.handleWriteTxnMarkersRequest: CLUSTER ALTER or CLUSTER_ACTION (getErrorResponse per partition)",
    28: "KafkaApis.handleTxnOffsetCommitRequest: TRANSACTIONAL_ID WRITE, GROUP READ, TOPIC READ",
    35: "KafkaApis.handleDescribeLogDirsRequest: CLUSTER DESCRIBE, else no results and CLUSTER_AUTHORIZATION_FAILED",
    61: "KafkaApis.handleDescribeProducersRequest: TOPIC READ per topic",
    65: "KafkaApis.handleDescribeTransactionsRequest: TRANSACTIONAL_ID DESCRIBE, topics filtered by TOPIC DESCRIBE",
    66: "KafkaApis.handleListTransactionsRequest: only TRANSACTIONAL_IDs with DESCRIBE",
    75: "DescribeTopicPartitionsRequestHandler: TOPIC DESCRIBE per topic, topic authorized operations",
    83: "KafkaApis.handleInitializeShareGroupStateRequest: CLUSTER CLUSTER_ACTION (getErrorResponse per partition)",
    84: "KafkaApis.handleReadShareGroupStateRequest: CLUSTER CLUSTER_ACTION (getErrorResponse per partition)",
    85: "KafkaApis.handleWriteShareGroupStateRequest: CLUSTER CLUSTER_ACTION (getErrorResponse per partition)",
    86: "KafkaApis.handleDeleteShareGroupStateRequest: CLUSTER CLUSTER_ACTION (getErrorResponse per partition)",
    87: "KafkaApis.handleReadShareGroupStateSummaryRequest: CLUSTER CLUSTER_ACTION (getErrorResponse per partition)",
}

ORDERS, SECRET, PUBLIC, PFX_TOPIC = "orders", "secret", "public", "pfx-orders"
MARKERS, TRIM = "markers", "trim-me"
TOPICS = (ORDERS, SECRET, PUBLIC, PFX_TOPIC, MARKERS, TRIM)
T, ALLOW, DENY, PREFIXED = ResourceType, AclPermissionType.ALLOW, AclPermissionType.DENY, PatternType.PREFIXED
ANY_OPS = -2147483648  # the schema default: not computed


def _rw(principal: str, name: str, **kw) -> list:
    """READ and WRITE on topics ``name``: the same pattern for the Produce and Fetch cases."""
    return [acl(principal, T.TOPIC, name, Op.WRITE, **kw), acl(principal, T.TOPIC, name, Op.READ, **kw)]


ACLS = [
    *_rw("literal", ORDERS),
    *_rw("pfx", "pfx-", pattern=PREFIXED),
    *_rw("star", "*"),
    *_rw("User:*", PUBLIC),
    # User:*'s WRITE on public would give everyone WRITE on some topic (InitProducerId's authorizeByResourceType):
    # these two are denied it, so they stay without any WRITE (nobody without READ too: DENY wins over User:*)
    acl("nobody", T.TOPIC, PUBLIC, Op.WRITE, DENY), acl("nobody", T.TOPIC, PUBLIC, Op.READ, DENY),
    acl("reader", T.TOPIC, PUBLIC, Op.WRITE, DENY),
    *_rw("deny", "*"),
    acl("deny", T.TOPIC, ORDERS, Op.WRITE, DENY), acl("deny", T.TOPIC, ORDERS, Op.READ, DENY),
    *_rw("remote", ORDERS, host="10.9.9.9"),
    *_rw("local", ORDERS, host="127.0.0.1"),
    acl("reader", T.TOPIC, ORDERS, Op.READ), acl("reader", T.GROUP, "authz-consumer", Op.READ),
    acl("writer", T.TOPIC, ORDERS, Op.WRITE), acl("writer", T.GROUP, "authz-consumer", Op.READ),
    acl("describer", T.TOPIC, ORDERS, Op.DESCRIBE),
    cluster_acl("follower", Op.CLUSTER_ACTION),
    cluster_acl("alterer", Op.ALTER),
    cluster_acl("idem", Op.IDEMPOTENT_WRITE),
    acl("deleter", T.TOPIC, TRIM, Op.DELETE),
    acl("auto", T.TOPIC, "auto-", Op.DESCRIBE, pattern=PREFIXED),
    acl("creator", T.TOPIC, "made-", Op.DESCRIBE, pattern=PREFIXED),
    acl("creator", T.TOPIC, "made-", Op.CREATE, pattern=PREFIXED),
    acl("cluster_creator", T.TOPIC, "cc-", Op.DESCRIBE, pattern=PREFIXED), cluster_acl("cluster_creator", Op.CREATE),
    cluster_acl("viewer", Op.DESCRIBE), cluster_acl("viewer", Op.ALTER),
    acl("txn", T.TRANSACTIONAL_ID, "tx-", Op.WRITE, pattern=PREFIXED), acl("txn", T.TOPIC, ORDERS, Op.WRITE),
    acl("txn_group", T.TRANSACTIONAL_ID, "tx-", Op.WRITE, pattern=PREFIXED),
    acl("txn_group", T.GROUP, "g-", Op.READ, pattern=PREFIXED),
    acl("txn_full", T.TRANSACTIONAL_ID, "tx-", Op.WRITE, pattern=PREFIXED),
    acl("txn_full", T.GROUP, "g-", Op.READ, pattern=PREFIXED), acl("txn_full", T.TOPIC, ORDERS, Op.READ),
    acl("txn_viewer", T.TRANSACTIONAL_ID, "tx-desc", Op.DESCRIBE), acl("txn_viewer", T.TOPIC, ORDERS, Op.DESCRIBE),
    acl("app", T.TRANSACTIONAL_ID, "app-", Op.WRITE, pattern=PREFIXED), *_rw("app", ORDERS),
    acl("app", T.GROUP, "app-check", Op.READ),
]
USERS = sorted({a.principal.split(":", 1)[1] for a in ACLS} - {"*"} | {"anyone"})


def _wait(what: str, probe, timeout: float = 30.0):
    """``probe()`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """The module's node (one per xdist worker): every test uses its own users, ids and topics' state."""
    with AuthzNode(tmp_path_factory.mktemp("authz-data"), USERS, ACLS) as n:
        def created():  # auto-created by the super user's Metadata (the broker's own CreateTopics)
            r = n.call(SUPER_USER, MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in TOPICS]), 12)
            return all(t.error_code == 0 and t.partitions and t.partitions[0].leader_id == 1 for t in r.topics)
        _wait("the topics", created)
        for topic in (ORDERS, SECRET, PUBLIC, PFX_TOPIC):  # something to fetch, whichever test runs first
            _wait("a record appended", lambda topic=topic: produce(n, SUPER_USER, topic).error_code == 0)
        _wait("the transaction coordinator",
              lambda: n.call(SUPER_USER, FindCoordinatorRequest(key="tx-x", key_type=1), 3).error_code == 0)
        yield n


# ---- helpers -------------------------------------------------------------------------------------------------

def batch(pid: int = -1, epoch: int = -1, seq: int = -1, transactional: bool = False) -> bytes:
    return build_batch([Record(key=b"k", value=b"v", timestamp=int(time.time() * 1000))], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


def produce(node, user: str, topic: str, acks: int = -1, version: int = 9, txn_id: str | None = None,
            records: bytes | None = None):
    r = node.call(user, _produce_request(topic, acks, txn_id, records), version)
    (t,) = r.responses
    (p,) = t.partition_responses
    return p


def _produce_request(topic: str, acks: int = -1, txn_id: str | None = None, records: bytes | None = None):
    return ProduceRequest(transactional_id=txn_id, acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=records or batch())])])


def fetch_request(*topics: str, topic_ids=(), replica_id: int = -1, session_id: int = 0, epoch: int = -1):
    parts = [FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]
    return FetchRequest(replica_id=replica_id, replica_state=ReplicaState(replica_id=replica_id, replica_epoch=-1),
                        max_wait_ms=0, min_bytes=0, isolation_level=0, session_id=session_id, session_epoch=epoch,
                        topics=[FetchTopic(topic=t, partitions=parts) for t in topics]
                        + [FetchTopic(topic_id=i, partitions=parts) for i in topic_ids])


def fetch(node, user: str, *topics: str, version: int = 12, **kw) -> dict:
    """{topic (or id): the partition's answer}."""
    r = node.call(user, fetch_request(*topics, **kw), version)
    assert r.error_code == 0, E(r.error_code).name
    return {t.topic if version < 13 else t.topic_id: t.partitions[0] for t in r.responses}


def topic_id(node, topic: str) -> bytes:
    (t,) = node.call(SUPER_USER, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                 allow_auto_topic_creation=False), 12).topics
    return t.topic_id


def init_pid(node, user: str, txn_id: str | None) -> tuple[int, int]:
    def once():
        r = node.call(user, InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000), 4)
        if r.error_code in (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE):
            return None
        assert r.error_code == 0, E(r.error_code).name
        return r.producer_id, r.producer_epoch
    return _wait(f"InitProducerId {txn_id}", once)


def add_partitions(node, user: str, txn_id: str, pid: int, epoch: int, partitions, version: int = 3) -> dict:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    topics = [AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    r = node.call(user, AddPartitionsToTxnRequest(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                                  v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics),
                  version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(node, user: str, txn_id: str, pid: int, epoch: int, commit: bool = False) -> int:
    def once():
        r = node.call(user, EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                          committed=commit), 3)
        return None if r.error_code == E.CONCURRENT_TRANSACTIONS else (r.error_code,)
    return _wait(f"EndTxn {txn_id}", once)[0]


def codes(answers: dict) -> dict:
    return {k: E(v.error_code if hasattr(v, "error_code") else v).name for k, v in answers.items()}


# ---- k00 Produce ---------------------------------------------------------------------------------------------

def test_produce_topic_write(node):
    assert produce(node, "nobody", ORDERS).error_code == E.TOPIC_AUTHORIZATION_FAILED
    # the topic's existence is not disclosed: authorization comes first
    assert produce(node, "nobody", "no-such-topic").error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert produce(node, "literal", "no-such-topic").error_code == E.TOPIC_AUTHORIZATION_FAILED
    ok = produce(node, "writer", ORDERS)
    assert (ok.error_code, ok.base_offset >= 1) == (0, True)
    assert produce(node, "reader", ORDERS).error_code == E.TOPIC_AUTHORIZATION_FAILED  # READ is not WRITE


def test_produce_v13_topic_ids(node):
    """Produce v13 names topics by id: an unknown id is UNKNOWN_TOPIC_ID whoever asks, a known one is authorized."""
    tid = topic_id(node, ORDERS)

    def send(user: str, ident: bytes):
        req = _produce_request("")
        req.topic_data[0].topic_id = ident
        (t,) = node.call(user, req, 13).responses
        return t.partition_responses[0].error_code

    assert send("nobody", tid) == E.TOPIC_AUTHORIZATION_FAILED
    assert send("writer", tid) == 0
    assert send("nobody", b"\x01" * 16) == E.UNKNOWN_TOPIC_ID


def test_produce_transactional_id_write(node):
    """Transactional records need WRITE on the transactional id: every partition answers
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no message: the error's default one is not sent)."""
    records = batch(pid=12345, epoch=0, seq=0, transactional=True)
    p = produce(node, "writer", ORDERS, txn_id="tx-p", records=records)
    assert (p.error_code, p.error_message, p.base_offset) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1)
    # with WRITE on the id and the topic the request gets past authorization to KIP-890's verification: the
    # coordinator knows no producer 12345 for tx-p
    p = produce(node, "txn", ORDERS, txn_id="tx-p", records=records)
    assert E(p.error_code).name == "INVALID_PRODUCER_ID_MAPPING"


def test_produce_idempotent_needs_only_topic_write(node):
    """KIP-679: idempotent records need no IDEMPOTENT_WRITE at Produce (InitProducerId checked it)."""
    pid, epoch = init_pid(node, "writer", None)
    assert produce(node, "writer", ORDERS, records=batch(pid, epoch, 0)).error_code == 0


def test_produce_acks0_denied_closes_the_connection(node):
    """acks=0 has no response: a denial closes the connection, as Kafka does; an allowed one keeps it open."""
    for user, txn_id, records in (("nobody", None, None),
                                  ("writer", "tx-acks0", batch(pid=777, epoch=0, seq=0, transactional=True))):
        with node.wire(user) as w:
            w.send(0, 9, _produce_request(ORDERS, acks=0, txn_id=txn_id, records=records))
            assert w.recv_frame() is None, user
    with node.wire("writer") as w:
        w.send(0, 9, _produce_request(ORDERS, acks=0))
        r = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=ORDERS)]))
        assert r.topics[0].error_code == 0


# pattern rules on Produce and Fetch: (user, topic, allowed)
PATTERN_CASES = [
    ("nobody", ORDERS, False),
    ("literal", ORDERS, True), ("literal", PFX_TOPIC, False),
    ("pfx", PFX_TOPIC, True), ("pfx", ORDERS, False),           # PREFIXED
    ("star", ORDERS, True), ("star", SECRET, True),             # resource name *
    ("anyone", PUBLIC, True), ("describer", PUBLIC, True),      # principal User:*
    ("nobody", PUBLIC, False),                                  # ... but a DENY for nobody's WRITE and READ
    ("deny", ORDERS, False), ("deny", PFX_TOPIC, True),         # DENY on orders beats ALLOW on *
    ("remote", ORDERS, False), ("local", ORDERS, True),         # hosts: the ACL's host must be the client's
    (SUPER_USER, SECRET, True),                                 # super.users: no ACL needed
]


@pytest.mark.parametrize("user,topic,allowed", PATTERN_CASES)
def test_produce_patterns(node, user, topic, allowed):
    assert produce(node, user, topic).error_code == (0 if allowed else E.TOPIC_AUTHORIZATION_FAILED)


@pytest.mark.parametrize("user,topic,allowed", PATTERN_CASES)
def test_fetch_patterns(node, user, topic, allowed):
    p = fetch(node, user, topic)[topic]
    if allowed:
        assert (p.error_code, len(p.records) > 0) == (0, True)
    else:
        assert (p.error_code, len(p.records or b"")) == (E.TOPIC_AUTHORIZATION_FAILED, 0)


# ---- k01 Fetch -----------------------------------------------------------------------------------------------

def test_fetch_topic_read(node):
    assert codes(fetch(node, "nobody", ORDERS)) == {ORDERS: "TOPIC_AUTHORIZATION_FAILED"}
    assert codes(fetch(node, "writer", ORDERS)) == {ORDERS: "TOPIC_AUTHORIZATION_FAILED"}  # WRITE is not READ
    assert codes(fetch(node, "nobody", "no-such-topic")) == {"no-such-topic": "TOPIC_AUTHORIZATION_FAILED"}
    got = fetch(node, "reader", ORDERS, SECRET)
    assert codes(got) == {ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED"}
    assert len(got[ORDERS].records) > 0


def test_fetch_topic_ids(node):
    tid = topic_id(node, ORDERS)
    unknown = b"\x02" * 16
    assert codes(fetch(node, "nobody", topic_ids=[tid, unknown], version=16)) == {
        tid: "TOPIC_AUTHORIZATION_FAILED", unknown: "UNKNOWN_TOPIC_ID"}
    assert codes(fetch(node, "reader", topic_ids=[tid], version=16)) == {tid: "NONE"}


def test_fetch_session_partitions_are_authorized_every_time(node):
    """A full fetch that creates a session, then an incremental one naming nothing: the session's denied
    partition answers TOPIC_AUTHORIZATION_FAILED again (KafkaApis authorizes fetchContext.foreachPartition)."""
    r = node.call("reader", fetch_request(ORDERS, SECRET, epoch=0), 12)
    assert r.session_id != 0
    assert {t.topic: E(t.partitions[0].error_code).name for t in r.responses} == {
        ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED"}
    r2 = node.call("reader", FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, session_id=r.session_id,
                                          session_epoch=1, topics=[]), 12)
    assert r2.error_code == 0
    got = {t.topic: E(t.partitions[0].error_code).name for t in r2.responses}
    assert got.pop(SECRET) == "TOPIC_AUTHORIZATION_FAILED" and set(got.values()) <= {"NONE"}, got


@pytest.mark.parametrize("version", [12, 15])
def test_fetch_from_follower_needs_cluster_action(node, version):
    """A replica's fetch (replica_id, or replica_state from v15) needs CLUSTER_ACTION; READ is not enough, and even
    an unknown topic id is answered TOPIC_AUTHORIZATION_FAILED. With it (or as the node's own super user) the fetch
    is served as a follower's: node 2 is no replica here."""
    if version >= 13:
        orders, secret, unknown = topic_id(node, ORDERS), topic_id(node, SECRET), b"\x03" * 16

        def ask(user, *topics):
            return codes(fetch(node, user, topic_ids=topics, replica_id=2, version=version))
    else:
        orders, secret, unknown = ORDERS, SECRET, "no-such-topic"

        def ask(user, *topics):
            return codes(fetch(node, user, *topics, replica_id=2, version=version))
    assert ask("reader", orders, unknown) == {orders: "TOPIC_AUTHORIZATION_FAILED",
                                              unknown: "TOPIC_AUTHORIZATION_FAILED"}
    for user in ("follower", SUPER_USER):
        assert ask(user, orders, secret) == {orders: "NOT_LEADER_OR_FOLLOWER", secret: "NOT_LEADER_OR_FOLLOWER"}


# ---- k02 ListOffsets -----------------------------------------------------------------------------------------

def list_offsets(node, user: str, *topics: str) -> dict:
    r = node.call(user, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=t, partitions=[
        ListOffsetsPartition(partition_index=0, timestamp=-1)]) for t in topics]), 7)
    return {t.name: t.partitions[0] for t in r.topics}


def test_list_offsets_topic_describe(node):
    got = list_offsets(node, "nobody", ORDERS)
    assert (got[ORDERS].error_code, got[ORDERS].offset, got[ORDERS].timestamp) == (E.TOPIC_AUTHORIZATION_FAILED, -1, -1)
    got = list_offsets(node, "describer", SECRET, ORDERS)
    assert codes(got) == {ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED"} and got[ORDERS].offset >= 1
    assert codes(list_offsets(node, "reader", ORDERS)) == {ORDERS: "NONE"}  # READ implies DESCRIBE


# ---- k03 Metadata and k75 DescribeTopicPartitions ------------------------------------------------------------

def metadata(node, user: str, topics=None, version: int = 12, auto: bool = False, **kw):
    req = MetadataRequest(topics=None if topics is None else [
        MetadataRequestTopic(name=t) if isinstance(t, str) else MetadataRequestTopic(topic_id=t, name=None)
        for t in topics], allow_auto_topic_creation=auto, **kw)
    return node.call(user, req, version)


def test_metadata_filters_to_describable_topics(node):
    assert {t.name for t in metadata(node, "nobody").topics} == {PUBLIC}  # User:* READ/WRITE imply DESCRIBE
    assert {t.name for t in metadata(node, "describer").topics} == {ORDERS, PUBLIC}
    assert {t.name for t in metadata(node, SUPER_USER).topics} >= set(TOPICS)
    r = metadata(node, "describer", [ORDERS, SECRET, "no-such-topic"])
    got = {t.name: t for t in r.topics}
    assert codes(got) == {ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED",
                          "no-such-topic": "TOPIC_AUTHORIZATION_FAILED"}
    assert (got[SECRET].topic_id, got[SECRET].partitions, got[SECRET].is_internal) == (ZERO_UUID, [], False)
    assert [t.name for t in r.topics][0] == ORDERS  # Kafka's order: answered topics, then the denied ones


def test_metadata_by_topic_id(node):
    """Asked by id, a topic not describable answers its id back (ids are not sensitive) and no name."""
    tid = topic_id(node, SECRET)
    (t,) = metadata(node, "describer", [tid]).topics
    assert (E(t.error_code).name, t.name, t.topic_id) == ("TOPIC_AUTHORIZATION_FAILED", None, tid)
    (t,) = metadata(node, SUPER_USER, [tid]).topics
    assert (t.error_code, t.name) == (0, SECRET)


def test_metadata_auto_creation_needs_create(node):
    (t,) = metadata(node, "auto", ["auto-x"], auto=True).topics
    assert (E(t.error_code).name, t.topic_id) == ("TOPIC_AUTHORIZATION_FAILED", ZERO_UUID)
    (t,) = metadata(node, "auto", ["auto-x"], auto=False).topics
    assert E(t.error_code).name == "UNKNOWN_TOPIC_OR_PARTITION"  # no creation asked: nothing to authorize
    for user, topic in (("creator", "made-x"), ("cluster_creator", "cc-x")):  # CREATE on the topic / the cluster
        (t,) = metadata(node, user, [topic], auto=True).topics
        assert t.error_code in (0, E.LEADER_NOT_AVAILABLE), E(t.error_code).name
        _wait(f"{topic} created",
              lambda user=user, topic=topic: metadata(node, user, [topic]).topics[0].error_code == 0)
    assert metadata(node, SUPER_USER, ["auto-x"]).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_authorized_operations(node):
    topic_ops = to_32bit_field(SUPPORTED_OPERATIONS[T.TOPIC])
    cluster_ops = to_32bit_field(SUPPORTED_OPERATIONS[T.CLUSTER])
    r = metadata(node, "literal", [ORDERS, SECRET], version=10, include_topic_authorized_operations=True,
                 include_cluster_authorized_operations=True)
    got = {t.name: t.topic_authorized_operations for t in r.topics}
    assert got == {ORDERS: to_32bit_field([Op.READ, Op.WRITE, Op.DESCRIBE]), SECRET: ANY_OPS}
    assert r.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    r = metadata(node, "viewer", [], version=10, include_cluster_authorized_operations=True)
    assert r.cluster_authorized_operations == to_32bit_field([Op.DESCRIBE, Op.ALTER])
    r = metadata(node, SUPER_USER, [ORDERS], version=10, include_topic_authorized_operations=True,
                 include_cluster_authorized_operations=True)
    assert (r.topics[0].topic_authorized_operations, r.cluster_authorized_operations) == (topic_ops, cluster_ops)
    r = metadata(node, SUPER_USER, [ORDERS], version=10)  # not asked for: not computed
    assert (r.topics[0].topic_authorized_operations, r.cluster_authorized_operations) == (ANY_OPS, ANY_OPS)
    r = metadata(node, "viewer", [], version=12, include_cluster_authorized_operations=True)
    assert r.cluster_authorized_operations == ANY_OPS  # v11+: DescribeCluster's job


def test_describe_topic_partitions(node):
    r = node.call("describer", DescribeTopicPartitionsRequest(topics=[DescribeTopic(name=n) for n in (
        SECRET, ORDERS, "no-such-topic")]), 0)
    got = {t.name: t for t in r.topics}
    assert codes(got) == {ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED",
                          "no-such-topic": "TOPIC_AUTHORIZATION_FAILED"}
    assert got[ORDERS].topic_authorized_operations == to_32bit_field([Op.DESCRIBE])
    assert (got[SECRET].topic_id, got[SECRET].partitions, got[SECRET].topic_authorized_operations) == (
        ZERO_UUID, [], ANY_OPS)
    r = node.call("describer", DescribeTopicPartitionsRequest(topics=[]), 0)
    assert {t.name for t in r.topics} == {ORDERS, PUBLIC}


# ---- k21 DeleteRecords ---------------------------------------------------------------------------------------

def test_delete_records_topic_delete(node):
    def delete(user: str, topic: str):
        r = node.call(user, DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=topic, partitions=[
            DeleteRecordsPartition(partition_index=0, offset=-1)])], timeout_ms=5000), 2)
        return r.topics[0].partitions[0]
    p = delete("nobody", TRIM)
    assert (p.error_code, p.low_watermark) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
    assert delete("star", TRIM).error_code == E.TOPIC_AUTHORIZATION_FAILED  # READ/WRITE do not imply DELETE
    p = delete("deleter", TRIM)
    assert (p.error_code, p.low_watermark) == (0, 0)


# ---- k22 InitProducerId --------------------------------------------------------------------------------------

def test_init_producer_id(node):
    def init(user: str, txn_id: str | None):
        return node.call(user, InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000), 4)
    r = init("nobody", None)
    assert (E(r.error_code).name, r.producer_id, r.producer_epoch) == ("CLUSTER_AUTHORIZATION_FAILED", -1, -1)
    assert init("reader", None).error_code == E.CLUSTER_AUTHORIZATION_FAILED  # READ on a topic is not WRITE
    assert init("idem", None).error_code == 0  # IDEMPOTENT_WRITE on the cluster
    assert init("pfx", None).error_code == 0  # KIP-679: WRITE on some topic (a prefixed ACL counts)
    r = init("writer", "tx-init")
    assert (E(r.error_code).name, r.producer_id, r.producer_epoch) == ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", -1, -1)
    assert init_pid(node, "txn", "tx-init")[0] >= 0


# ---- k23 OffsetForLeaderEpoch --------------------------------------------------------------------------------

def test_offset_for_leader_epoch(node):
    def ask(user: str, *topics: str) -> dict:
        r = node.call(user, OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(
            topic=t, partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=0)]) for t in topics]), 4)
        return {t.topic: t.partitions[0] for t in r.topics}
    got = ask("describer", SECRET, ORDERS)
    assert codes(got) == {ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED"}
    assert (got[SECRET].leader_epoch, got[SECRET].end_offset) == (-1, -1)
    assert [t for t in got] == [ORDERS, SECRET]  # the authorized topics first
    assert codes(ask("follower", SECRET, ORDERS)) == {ORDERS: "NONE", SECRET: "NONE"}  # CLUSTER_ACTION: every topic


# ---- k24 AddPartitionsToTxn, k26 EndTxn ----------------------------------------------------------------------

def test_add_partitions_to_txn_and_end_txn(node):
    pid, epoch = init_pid(node, "txn", "tx-add")
    assert add_partitions(node, "writer", "tx-add", pid, epoch, [(ORDERS, 0)]) == {
        (ORDERS, 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert codes(add_partitions(node, "txn", "tx-add", pid, epoch, [(ORDERS, 0), (SECRET, 0)])) == {
        (ORDERS, 0): "OPERATION_NOT_ATTEMPTED", (SECRET, 0): "TOPIC_AUTHORIZATION_FAILED"}
    # internal topics are never WRITE-authorized for a client, not even for the super user
    assert codes(add_partitions(node, SUPER_USER, "tx-add", pid, epoch, [(ORDERS, 0), ("__consumer_offsets", 0)])) == {
        (ORDERS, 0): "OPERATION_NOT_ATTEMPTED", ("__consumer_offsets", 0): "TOPIC_AUTHORIZATION_FAILED"}
    assert add_partitions(node, "txn", "tx-add", pid, epoch, [(ORDERS, 0)]) == {(ORDERS, 0): 0}
    r = node.call("writer", EndTxnRequest(transactional_id="tx-add", producer_id=pid, producer_epoch=epoch), 3)
    assert E(r.error_code).name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert end_txn(node, "txn", "tx-add", pid, epoch) == 0


def test_add_partitions_to_txn_from_brokers_needs_cluster_action(node):
    """v4+ come from brokers (KIP-890's verification): CLUSTER_ACTION, else a top-level CLUSTER_AUTHORIZATION_FAILED."""
    pid, epoch = init_pid(node, "txn", "tx-verify")
    req = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id="tx-verify", producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[AddPartitionsToTxnTopic(name=ORDERS, partitions=[0])])])
    r = node.call("txn", req, 4)
    assert (E(r.error_code).name, r.results_by_transaction) == ("CLUSTER_AUTHORIZATION_FAILED", [])
    for user in ("follower", SUPER_USER):
        r = node.call(user, req, 4)
        assert r.error_code == 0 and [t.transactional_id for t in r.results_by_transaction] == ["tx-verify"]


# ---- k25 AddOffsetsToTxn, k28 TxnOffsetCommit ----------------------------------------------------------------

def test_add_offsets_and_txn_offset_commit(node):
    pid, epoch = init_pid(node, "txn_full", "tx-offsets")

    def add_offsets(user: str) -> str:
        r = node.call(user, AddOffsetsToTxnRequest(transactional_id="tx-offsets", producer_id=pid,
                                                   producer_epoch=epoch, group_id="g-offsets"), 3)
        return E(r.error_code).name

    assert add_offsets("writer") == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert add_offsets("txn") == "GROUP_AUTHORIZATION_FAILED"
    _wait("AddOffsetsToTxn", lambda: add_offsets("txn_group") != "CONCURRENT_TRANSACTIONS")
    assert add_offsets("txn_group") == "NONE"

    def commit(user: str) -> dict:
        r = node.call(user, TxnOffsetCommitRequest(
            transactional_id="tx-offsets", group_id="g-offsets", producer_id=pid, producer_epoch=epoch,
            topics=[TxnOffsetCommitRequestTopic(name=t, partitions=[TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=1)]) for t in (ORDERS, SECRET)]), 2)
        return {t.name: E(t.partitions[0].error_code).name for t in r.topics}

    assert commit("writer") == {ORDERS: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                                SECRET: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}
    assert commit("txn") == {ORDERS: "GROUP_AUTHORIZATION_FAILED", SECRET: "GROUP_AUTHORIZATION_FAILED"}
    assert commit("txn_group") == {ORDERS: "TOPIC_AUTHORIZATION_FAILED", SECRET: "TOPIC_AUTHORIZATION_FAILED"}
    assert commit("txn_full") == {ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED"}
    assert end_txn(node, "txn_full", "tx-offsets", pid, epoch) == 0


# ---- k27 WriteTxnMarkers -------------------------------------------------------------------------------------

def test_write_txn_markers_need_cluster_action_or_alter(node):
    def write(user: str, producer_id: int) -> dict:
        r = node.call(user, WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=producer_id, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[WritableTxnMarkerTopic(name=MARKERS, partition_indexes=[0])])]), 1)
        (m,) = r.markers
        return {(m.producer_id, t.name, p.partition_index): E(p.error_code).name
                for t in m.topics for p in t.partitions}

    end_before = list_offsets(node, SUPER_USER, MARKERS)[MARKERS].offset
    assert write("writer", 9001) == {(9001, MARKERS, 0): "CLUSTER_AUTHORIZATION_FAILED"}
    assert list_offsets(node, SUPER_USER, MARKERS)[MARKERS].offset == end_before  # nothing written
    assert write("follower", 9002) == {(9002, MARKERS, 0): "NONE"}  # CLUSTER_ACTION: a coordinator
    assert write("alterer", 9003) == {(9003, MARKERS, 0): "NONE"}  # ALTER: an admin aborting a hanging one


# ---- k83-k87 the share coordinator's RPCs; FindCoordinator's SHARE keys --------------------------------------

def test_share_state_rpcs_need_cluster_action(node):
    """Each share-state RPC as a user without CLUSTER_ACTION: CLUSTER_AUTHORIZATION_FAILED for every partition and
    nothing written; as a broker's principal (CLUSTER_ACTION) it is served; FindCoordinator's SHARE key likewise."""
    from tests.share.share_rpcs import share_rpcs

    tid = topic_id(node, ORDERS)
    for name, version, request, _ in share_rpcs("authz-share", tid, 0):
        r = node.call("writer", request, version)
        assert [(t.topic_id, p.partition, E(p.error_code).name) for t in r.results for p in t.partitions] == \
            [(tid, 0, "CLUSTER_AUTHORIZATION_FAILED")], name
    key = f"authz-share:{uuid_string(tid)}:0"
    (c,) = node.call("writer", FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6).coordinators
    assert (E(c.error_code).name, c.node_id) == ("CLUSTER_AUTHORIZATION_FAILED", -1)
    (c,) = _wait("the share coordinator", lambda: [c for c in node.call(
        "follower", FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6).coordinators if c.error_code == 0])
    assert c.node_id == 1
    for name, version, request, check in share_rpcs("authz-share", tid, 0):  # in order: initialize first
        r = node.call("follower", request, version)
        check(r)


# ---- k35 DescribeLogDirs -------------------------------------------------------------------------------------

def test_describe_log_dirs_cluster_describe(node):
    r = node.call("nobody", DescribeLogDirsRequest(topics=None), 4)
    assert (E(r.error_code).name, r.results) == ("CLUSTER_AUTHORIZATION_FAILED", [])
    r = node.call("nobody", DescribeLogDirsRequest(topics=None), 1)  # no error field before v3
    assert r.results == []
    r = node.call("viewer", DescribeLogDirsRequest(topics=None), 4)
    assert r.error_code == 0 and {t.name for d in r.results for t in d.topics} >= {ORDERS, SECRET}


# ---- k61 DescribeProducers -----------------------------------------------------------------------------------

def test_describe_producers_topic_read(node):
    def describe(user: str) -> dict:
        r = node.call(user, DescribeProducersRequest(topics=[ProducersTopic(name=t, partition_indexes=[0])
                                                             for t in (ORDERS, SECRET)]), 0)
        return {t.name: t.partitions[0] for t in r.topics}
    got = describe("describer")  # DESCRIBE is not enough: READ
    assert codes(got) == {ORDERS: "TOPIC_AUTHORIZATION_FAILED", SECRET: "TOPIC_AUTHORIZATION_FAILED"}
    assert got[ORDERS].error_message == "Topic authorization failed."
    assert codes(describe("reader")) == {ORDERS: "NONE", SECRET: "TOPIC_AUTHORIZATION_FAILED"}


# ---- k65 DescribeTransactions, k66 ListTransactions ----------------------------------------------------------

def test_describe_and_list_transactions(node):
    pid, epoch = init_pid(node, SUPER_USER, "tx-desc")
    assert add_partitions(node, SUPER_USER, "tx-desc", pid, epoch, [(ORDERS, 0), (SECRET, 0)]) == {
        (ORDERS, 0): 0, (SECRET, 0): 0}
    try:
        def describe(user: str):
            (s,) = node.call(user, DescribeTransactionsRequest(transactional_ids=["tx-desc"]), 0).transaction_states
            return E(s.error_code).name, sorted(t.topic for t in s.topics)
        assert describe("nobody") == ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", [])
        assert describe("txn_viewer") == ("NONE", [ORDERS])  # only the topics it may describe
        assert describe(SUPER_USER) == ("NONE", [ORDERS, SECRET])

        def listed(user: str) -> set:
            r = node.call(user, ListTransactionsRequest(), 1)
            assert r.error_code == 0
            return {s.transactional_id for s in r.transaction_states}
        assert listed("nobody") == set()
        assert listed("txn_viewer") == {"tx-desc"}
        assert "tx-desc" in listed(SUPER_USER)
    finally:
        end_txn(node, SUPER_USER, "tx-desc", pid, epoch)


# ---- real clients --------------------------------------------------------------------------------------------

def _deliver(node, user: str, topic: str, **extra):
    p = Producer({**node.client_config(user), "message.timeout.ms": 10000, **extra})
    results = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    assert p.flush(20) == 0
    return results[0]


def test_confluent_producer(node):
    err = _deliver(node, "reader", ORDERS)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert _deliver(node, "writer", ORDERS) is None
    assert _deliver(node, "writer", ORDERS, **{"enable.idempotence": True}) is None  # KIP-679


def test_confluent_consumer(node):
    def first(user: str):
        c = Consumer({**node.client_config(user), "group.id": "authz-consumer", "enable.auto.commit": False,
                      "enable.partition.eof": False})
        try:
            c.assign([TopicPartition(ORDERS, 0, 0)])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None:
                    return m
            raise AssertionError(f"{user}: no message and no error")
        finally:
            c.close()
    m = first("writer")
    assert m.error() is not None and m.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, m.error()
    m = first("reader")
    assert m.error() is None and m.value() is not None


def test_confluent_transactional_producer(node):
    """Without WRITE on the transactional id InitProducerId fails; with it a transaction commits, which also takes
    the node's own traffic (WriteTxnMarkers, the verification's AddPartitionsToTxn) through the authorizer as the
    node's principal."""
    p = Producer({**node.client_config("writer"), "transactional.id": "app-1"})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(20)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, info.value
    p = Producer({**node.client_config("app"), "transactional.id": "app-1"})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(ORDERS, b"committed")
    p.commit_transaction(20)
    c = Consumer({**node.client_config("app"), "group.id": "app-check", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(ORDERS, 0, 0)])
        deadline = time.monotonic() + 20
        seen = []
        while time.monotonic() < deadline and b"committed" not in seen:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.append(m.value())
        assert b"committed" in seen
    finally:
        c.close()
