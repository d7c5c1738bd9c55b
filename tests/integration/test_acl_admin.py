"""The ACL admin APIs (issue 29): DescribeAcls (29) on the broker from its image, CreateAcls (30) and DeleteAcls (31)
forwarded to the controller. Against a node with Kafka's StandardAuthorizer (tests/authz_harness.py): each API's
cluster permission as a user without and with the minimal ACL (``ROWS``), the bad creations an admin can send (Kafka's
INVALID_REQUEST, nothing committed), request classes' parse failures, SECURITY_DISABLED on a node without an
authorizer, kafka-python's and confluent-kafka's admin clients; then a 3-node secured cluster: an ACL made through
one broker is seen by every node, and is still there after a metadata snapshot and a restart of every node."""

from __future__ import annotations

import re
import ssl
import time

import pytest

from broker.network.blocking_request import request
from broker.security.node_links import LinkSecurity
from broker.testing.embedded_cluster import EmbeddedCluster, wait_until
from cluster.acls import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from cluster.authorizer import AUTHORIZER_CLASS
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, DescribeQuorumRequest,
)
from protocol.generated.messages.create_acls_request import AclCreation
from protocol.generated.messages.delete_acls_request import DeleteAclsFilter
from protocol.generated.messages.describe_quorum_request import PartitionData, TopicData
from tests.authz_harness import SUPER_USER, AuthzNode, cluster_acl, password_of

# API key -> the Kafka check each test below asserts, as a user without and with the minimal ACL
ROWS = {
    29: "AclApis.handleDescribeAcls: DESCRIBE on CLUSTER else CLUSTER_AUTHORIZATION_FAILED (the response's error)",
    30: "ControllerApis -> AclApis.handleCreateAcls: ALTER on CLUSTER else CLUSTER_AUTHORIZATION_FAILED per creation",
    31: "ControllerApis -> AclApis.handleDeleteAcls: ALTER on CLUSTER else CLUSTER_AUTHORIZATION_FAILED per filter",
}

TOPIC, GROUP, CLUSTER = int(ResourceType.TOPIC), int(ResourceType.GROUP), int(ResourceType.CLUSTER)
ANY, MATCH, LITERAL, PREFIXED = int(PatternType.ANY), int(PatternType.MATCH), int(PatternType.LITERAL), \
    int(PatternType.PREFIXED)
READ, ALTER, DESCRIBE = int(AclOperation.READ), int(AclOperation.ALTER), int(AclOperation.DESCRIBE)
ALLOW = int(AclPermissionType.ALLOW)

NOBODY, DESCRIBER, ALTERER = "nobody", "describer", "alterer"  # no ACL; DESCRIBE on CLUSTER; ALTER on CLUSTER


def creation(name: str, rtype: int = TOPIC, pattern: int = LITERAL, principal: str = "User:reader",
             op: int = READ, perm: int = ALLOW, host: str = "*") -> AclCreation:
    return AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern, principal=principal,
                       host=host, operation=op, permission_type=perm)


def describe_all(rtype: int = 1, name: str | None = None, pattern: int = ANY) -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
                               principal_filter=None, host_filter=None, operation=1, permission_type=1)


def delete_filter(name: str | None, rtype: int = TOPIC, pattern: int = ANY) -> DeleteAclsFilter:
    return DeleteAclsFilter(resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
                            principal_filter=None, host_filter=None, operation=1, permission_type=1)


def bindings(response) -> set[tuple]:
    """A DescribeAcls answer as (type, name, pattern, principal, host, operation, permission) tuples."""
    assert response.error_code == 0, response
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in response.resources for a in r.acls}


def as_tuple(c: AclCreation) -> tuple:
    return (c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
            c.permission_type)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with AuthzNode(tmp_path_factory.mktemp("acl-admin"), [NOBODY, DESCRIBER, ALTERER],
                   [cluster_acl(DESCRIBER, AclOperation.DESCRIBE), cluster_acl(ALTERER, AclOperation.ALTER)]) as n:
        yield n


def acls_now(node) -> set[tuple]:
    return bindings(node.call(SUPER_USER, describe_all(), 3))


# ---- each API's cluster permission (ROWS) -------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 3])
def test_describe_acls_needs_describe_on_the_cluster(node, version):
    assert 29 in ROWS
    denied = node.call(NOBODY, describe_all(), version)
    assert denied.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and denied.resources == []
    seen = bindings(node.call(DESCRIBER, describe_all(CLUSTER), version))
    assert (CLUSTER, CLUSTER_NAME, LITERAL, f"User:{DESCRIBER}", "*", DESCRIBE, ALLOW) in seen


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_acls_needs_alter_on_the_cluster(node, version):
    assert 30 in ROWS
    wanted = [creation(f"row30-v{version}-a"), creation(f"row30-v{version}-b", GROUP, PREFIXED)]
    denied = node.call(NOBODY, CreateAclsRequest(creations=wanted), version)
    assert [r.error_code for r in denied.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
    assert not {as_tuple(c) for c in wanted} & acls_now(node), "a refused CreateAcls committed an ACL"
    made = node.call(ALTERER, CreateAclsRequest(creations=wanted), version)
    assert [(r.error_code, r.error_message) for r in made.results] == [(0, None)] * 2
    assert {as_tuple(c) for c in wanted} <= acls_now(node)


@pytest.mark.parametrize("version", [1, 3])
def test_delete_acls_needs_alter_on_the_cluster(node, version):
    assert 31 in ROWS
    name = f"row31-v{version}"
    assert node.call(SUPER_USER, CreateAclsRequest(creations=[creation(name)]), 3).results[0].error_code == 0
    denied = node.call(NOBODY, DeleteAclsRequest(filters=[delete_filter(name)]), version)
    assert [(r.error_code, r.matching_acls) for r in denied.filter_results] == [
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])]
    assert as_tuple(creation(name)) in acls_now(node)
    deleted = node.call(ALTERER, DeleteAclsRequest(filters=[delete_filter(name)]), version)
    (result,) = deleted.filter_results
    assert result.error_code == 0
    assert [(m.error_code, m.resource_name, m.principal, m.operation) for m in result.matching_acls] == [
        (0, name, "User:reader", READ)]
    assert as_tuple(creation(name)) not in acls_now(node)


def test_an_acl_made_through_the_api_changes_what_the_authorizer_answers(node):
    """ALTER on the cluster given to ``nobody`` by CreateAcls: its next CreateAcls succeeds; taken back by
    DeleteAcls: refused again."""
    grant = creation(CLUSTER_NAME, CLUSTER, LITERAL, f"User:{NOBODY}", ALTER)
    probe = CreateAclsRequest(creations=[creation("granted-probe")])
    assert node.call(ALTERER, CreateAclsRequest(creations=[grant]), 3).results[0].error_code == 0
    assert node.call(NOBODY, probe, 3).results[0].error_code == 0
    revoke = DeleteAclsFilter(resource_type_filter=CLUSTER, resource_name_filter=CLUSTER_NAME,
                              pattern_type_filter=LITERAL, principal_filter=f"User:{NOBODY}", host_filter=None,
                              operation=1, permission_type=1)
    assert len(node.call(ALTERER, DeleteAclsRequest(filters=[revoke]), 3).filter_results[0].matching_acls) == 1
    assert node.call(NOBODY, probe, 3).results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


# ---- Admin bad input ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, message", [
    (creation("bad-any", rtype=1), "Invalid resourceType ANY"),
    (creation("bad-match", pattern=MATCH), "Invalid patternType MATCH"),
    (creation("bad-op", op=1), "Invalid operation ANY"),
    (creation(""), "Invalid empty resource name"),
    (creation("my-cluster", CLUSTER, op=ALTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (creation("bad-principal", principal="reader"),
     "expected a string in format principalType:principalName but got reader"),
], ids=["type-any", "pattern-match", "operation-any", "empty-name", "cluster-name", "principal"])
def test_bad_creations_get_invalid_request_and_commit_nothing(node, bad, message):
    before = acls_now(node)
    response = node.call(SUPER_USER, CreateAclsRequest(creations=[bad]), 3)
    assert [(r.error_code, r.error_message) for r in response.results] == [(ErrorCode.INVALID_REQUEST, message)]
    assert acls_now(node) == before


def test_an_identical_acl_is_one_acl_and_both_creations_succeed(node):
    twice = [creation("dup-topic"), creation("dup-topic")]
    assert [r.error_code for r in node.call(SUPER_USER, CreateAclsRequest(creations=twice), 3).results] == [0, 0]
    assert [r.error_code for r in node.call(SUPER_USER, CreateAclsRequest(creations=twice[:1]), 3).results] == [0]
    response = node.call(SUPER_USER, describe_all(TOPIC, "dup-topic", LITERAL), 3)
    assert [len(r.acls) for r in response.resources] == [1]


def test_unknown_wire_codes_fail_parsing_and_close_the_connection(node):
    """Kafka's request classes refuse a code 0 (UNKNOWN) while parsing (CreateAclsRequest.validate,
    DeleteAclsRequest/DescribeAclsRequest.normalizeAndValidate): no answer, the connection closes."""
    before = acls_now(node)
    with pytest.raises(ConnectionError):
        node.call(SUPER_USER, CreateAclsRequest(creations=[creation("unknown-type", rtype=0)]), 3)
    with pytest.raises(ConnectionError):
        node.call(SUPER_USER, DeleteAclsRequest(filters=[delete_filter(None, rtype=0)]), 3)
    with pytest.raises(ConnectionError):
        node.call(SUPER_USER, DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                                  pattern_type_filter=ANY, principal_filter=None, host_filter=None,
                                                  operation=0, permission_type=1), 3)
    assert acls_now(node) == before


def test_without_an_authorizer_every_acl_api_answers_security_disabled(broker):
    """The session's plain broker (no ``authorizer.class.name``): AclApis' SecurityDisabledException."""
    described = request(broker.port, describe_all(), 3)
    assert described.error_code == ErrorCode.SECURITY_DISABLED
    created = request(broker.port, CreateAclsRequest(creations=[creation("a"), creation("b")]), 3)
    assert [r.error_code for r in created.results] == [ErrorCode.SECURITY_DISABLED] * 2
    deleted = request(broker.port, DeleteAclsRequest(filters=[delete_filter(None)]), 3)
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED]


# ---- real clients ---------------------------------------------------------------------------------------------

def test_kafka_python_admin_creates_describes_and_deletes_acls(node):
    from kafka.admin import (
        ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
        ResourcePattern, ResourcePatternFilter, ResourceType as KResourceType,
    )
    from kafka.errors import ClusterAuthorizationFailedError

    def admin(user):
        return KafkaAdminClient(bootstrap_servers=node.bootstrap, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username=user,
                                sasl_plain_password=password_of(user), request_timeout_ms=15000)

    acls = [ACL("User:kp", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(KResourceType.TOPIC, "kp-topic", ACLResourcePatternType.LITERAL)),
            ACL("User:kp", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(KResourceType.GROUP, "kp-", ACLResourcePatternType.PREFIXED))]
    kp_filter = ACLFilter("User:kp", None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
    a = admin(ALTERER)
    try:
        result = a.create_acls(acls)
        assert result["failed"] == [] and len(result["succeeded"]) == 2
        found, error = a.describe_acls(kp_filter)
        assert {(x.resource_pattern.resource_type, x.resource_pattern.resource_name,
                 x.resource_pattern.pattern_type) for x in found} == {
            (KResourceType.TOPIC, "kp-topic", ACLResourcePatternType.LITERAL),
            (KResourceType.GROUP, "kp-", ACLResourcePatternType.PREFIXED)}
        (_, matched, error), = a.delete_acls([kp_filter])
        assert error.__name__ == "NoError" and len(matched) == 2
        assert a.describe_acls(kp_filter)[0] == []
    finally:
        a.close()
    b = admin(NOBODY)
    try:
        assert b.create_acls(acls[:1])["failed"] == [ClusterAuthorizationFailedError]
        with pytest.raises(ClusterAuthorizationFailedError):
            b.describe_acls(kp_filter)
    finally:
        b.close()


def test_confluent_kafka_admin_creates_describes_and_deletes_acls(node):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation as COp, AclPermissionType as CPerm, AdminClient,
        ResourcePatternType, ResourceType as CType,
    )

    a = AdminClient(node.client_config(ALTERER))
    made = [AclBinding(CType.TOPIC, "ck-topic", ResourcePatternType.LITERAL, "User:ck", "*", COp.WRITE,
                       CPerm.ALLOW),
            AclBinding(CType.TOPIC, "ck-", ResourcePatternType.PREFIXED, "User:ck", "*", COp.READ, CPerm.DENY)]
    for future in a.create_acls(made, request_timeout=15).values():
        assert future.result(20) is None
    ck = AclBindingFilter(CType.ANY, None, ResourcePatternType.ANY, "User:ck", None, COp.ANY, CPerm.ANY)
    assert set(a.describe_acls(ck, request_timeout=15).result(20)) == set(made)
    # MATCH: every pattern that applies to the topic ck-topic
    match = AclBindingFilter(CType.TOPIC, "ck-topic", ResourcePatternType.MATCH, None, None, COp.ANY, CPerm.ANY)
    assert set(a.describe_acls(match, request_timeout=15).result(20)) == set(made)
    (deleted,) = a.delete_acls([ck], request_timeout=15).values()
    assert set(deleted.result(20)) == set(made)
    assert a.describe_acls(ck, request_timeout=15).result(20) == []
    bad = AclBinding(CType.TOPIC, "", ResourcePatternType.LITERAL, "User:ck", "*", COp.READ, CPerm.ALLOW)
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        a.create_acls([bad], request_timeout=15)[bad].result(20)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST
    nobody = AdminClient(node.client_config(NOBODY))
    with pytest.raises(confluent_kafka.KafkaException) as denied:
        nobody.create_acls(made[:1], request_timeout=15)[made[0]].result(20)
    assert denied.value.args[0].code() == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' top-level error code (rd_kafka_DescribeAclsResponse_parse), against Kafka too:
    # the refusal reaches the application as an empty listing
    assert nobody.describe_acls(ck, request_timeout=15).result(20) == []


# ---- a 3-node cluster -----------------------------------------------------------------------------------------

SNAPSHOT_LINE = re.compile(r"wrote the metadata snapshot (\d+)-\d+")


def last_snapshot_end(log_text: str) -> int:
    ends = [int(m.group(1)) for m in SNAPSHOT_LINE.finditer(log_text)]
    return max(ends, default=-1)


def test_an_acl_made_through_one_broker_is_seen_on_every_node_and_survives_a_snapshot_and_restart(tmp_path,
                                                                                                   record_property):
    """Three combined nodes over SASL_SSL with the authorizer; ACLs created through broker 2 (forwarded to the
    active controller) are answered by DescribeAcls on every node; after each node has written a snapshot past
    them, every node is killed and started again: every node still answers them. Prints how long the ACLs took
    to reach every node."""
    # the nodes' SASL user and their controller-listener certificate are super users, as an operator sets it
    super_users = "User:admin;User:odradek-node;User:CN=node,O=odradek-tests"
    c = EmbeddedCluster(brokers=3, data_dir=tmp_path, security="SASL_SSL", users=("admin", "reader"), overrides={
        "authorizer.class.name": AUTHORIZER_CLASS, "super.users": super_users,
        "metadata.log.max.snapshot.interval.ms": 500})
    c.start()
    try:
        conf = c.client_config("admin")
        security = LinkSecurity(ssl=ssl.create_default_context(cafile=conf["ssl.ca.location"]),
                                mechanism=conf["sasl.mechanism"], username="admin",
                                password=conf["sasl.password"])

        def call(node_id: int, body, version: int = 3):
            return request(c.broker_ports[node_id], body, version, timeout=10.0, security=security)

        wanted = [creation("orders", principal="User:reader"),
                  creation("reports-", GROUP, PREFIXED, principal="User:reader")]
        made = call(2, CreateAclsRequest(creations=wanted))
        answered = time.monotonic()
        assert [r.error_code for r in made.results] == [0, 0]
        expected = {as_tuple(w) for w in wanted}

        def seen_everywhere() -> bool:
            return all(expected <= bindings(call(i, describe_all())) for i in c.nodes)

        wait_until(seen_everywhere, 30.0, 0.01, "the ACLs on every node", retry=(OSError, ValueError))
        propagation_ms = (time.monotonic() - answered) * 1000
        print(f"\nACLs made through broker 2 seen by DescribeAcls on all 3 nodes {propagation_ms:.1f} ms "
              "after the CreateAcls answer (an upper bound: each poll opens a SASL_SSL connection per node)")
        record_property("acl_propagation_ms", round(propagation_ms, 1))

        quorum = call(2, DescribeQuorumRequest(topics=[TopicData(
            topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 2)
        committed = quorum.topics[0].partitions[0].high_watermark
        assert committed > 0
        ticks = iter(range(1000))

        def snapshots_past_the_acls() -> bool:
            """A node snapshots when it commits a batch at least the interval after its last snapshot: until every
            node has one past the ACLs, commit one more (a tick ACL) per turn."""
            if all(last_snapshot_end(n.log_path.read_text()) >= committed for n in c.nodes.values()):
                return True
            tick = creation(f"tick-{next(ticks)}", principal="User:ticker")
            assert call(1, CreateAclsRequest(creations=[tick])).results[0].error_code == 0
            return False

        wait_until(snapshots_past_the_acls, 30.0, 0.6, f"every node's snapshot past offset {committed}",
                   retry=(OSError,))
        for i in c.nodes:
            c.kill(i)
        c.start()
        for i in c.nodes:
            assert expected <= bindings(call(i, describe_all())), f"node {i} lost the ACLs over its restart"
            assert c.nodes[i].log_lines(r"opened .*snapshot \d+-\d+") >= 1, f"node {i} did not load a snapshot"
    finally:
        c.stop()
