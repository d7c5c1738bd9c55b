"""ACL checks of the broker's group, config and cluster handlers against Kafka's (issue 29, "Authorization").

One node with StandardAuthorizer for the module (tests/authz_harness.py); every case has its own users and
ACLs, created with the node, so the cases never see each other's grants. ``NOBODY`` has no ACL at all; each
row's test sends the request as a user without the ACL it needs and as one with just that ACL (prefixed and
DENY ACLs where Kafka's matching matters) and asserts Kafka's answer: error codes, where they sit in the
response, and what is left out. ``ROWS`` names the Kafka check each API key follows (KafkaApis,
ConfigHelper, AuthHelper in Kafka 4.x; 4.0/4.1 changes by their KAFKA issue).
"""

from __future__ import annotations

import time

import pytest

from cluster.acls import AclOperation as Op, AclPermissionType, PatternType, ResourceType as RT
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    AlterConfigsRequest, ApiVersionsRequest, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
    ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
    CreateDelegationTokenRequest, DeleteGroupsRequest, DescribeClientQuotasRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeDelegationTokenRequest, DescribeGroupsRequest,
    DescribeUserScramCredentialsRequest, ExpireDelegationTokenRequest, FindCoordinatorRequest,
    GetTelemetrySubscriptionsRequest, HeartbeatRequest, IncrementalAlterConfigsRequest, JoinGroupRequest,
    LeaveGroupRequest, ListConfigResourcesRequest, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, PushTelemetryRequest, RenewDelegationTokenRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest, SyncGroupRequest,
)
from protocol.generated.messages import (
    AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest,
)
from protocol.generated.messages import alter_configs_request as alter_req
from protocol.generated.messages import alter_share_group_offsets_request as asgo
from protocol.generated.messages import delete_share_group_offsets_request as dsgo
from protocol.generated.messages import describe_share_group_offsets_request as dsgoq
from protocol.generated.messages import incremental_alter_configs_request as inc_req
from protocol.generated.messages.create_delegation_token_request import CreatableRenewers
from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
from protocol.generated.messages.describe_user_scram_credentials_request import UserName
from protocol.generated.messages.join_group_request import JoinGroupRequestProtocol
from protocol.generated.messages.leave_group_request import MemberIdentity
from protocol.generated.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from protocol.generated.messages.offset_delete_request import OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestTopic
from tests.authz_harness import SUPER_USER, AuthzNode, acl, cluster_acl

ROWS: dict[int, str] = {
    8: "KafkaApis.handleOffsetCommitRequest: GROUP READ (else GROUP_AUTHORIZATION_FAILED on every partition), "
       "TOPIC READ per topic before the unknown-topic check",
    9: "KafkaApis.handleOffsetFetchRequest: GROUP DESCRIBE per group; named topics without TOPIC DESCRIBE "
       "TOPIC_AUTHORIZATION_FAILED, all-topics fetch leaves them out",
    10: "KafkaApis.getCoordinator: GROUP DESCRIBE / TRANSACTIONAL_ID DESCRIBE per key",
    11: "KafkaApis.handleJoinGroupRequest: GROUP READ",
    12: "KafkaApis.handleHeartbeatRequest: GROUP READ",
    13: "KafkaApis.handleLeaveGroupRequest: GROUP READ",
    14: "KafkaApis.handleSyncGroupRequest: v5 protocol type/name present, then GROUP READ",
    15: "KafkaApis.handleDescribeGroupsRequest: GROUP DESCRIBE per group; AuthHelper.authorizedOperations",
    16: "KafkaApis.handleListGroupsRequest: CLUSTER DESCRIBE, else groups filtered by GROUP DESCRIBE",
    17: "KafkaApis.handleSaslHandshakeRequest: no check (ILLEGAL_SASL_STATE after authentication)",
    18: "KafkaApis.handleApiVersionsRequest: no check",
    32: "ConfigHelper.handleDescribeConfigsRequest: DESCRIBE_CONFIGS per resource (BROKER, BROKER_LOGGER, "
        "CLIENT_METRICS on the CLUSTER; TOPIC; GROUP)",
    33: "KafkaApis.handleAlterConfigsRequest: no broker check (ConfigAdminManager.preprocess); the controller "
        "authorizes the forwarded resources",
    36: "KafkaApis.handleSaslAuthenticateRequest: no check (ILLEGAL_SASL_STATE after authentication)",
    38: "KafkaApis.handleCreateTokenRequest: USER CREATE_TOKENS on an owner other than the requester",
    39: "KafkaApis.handleRenewTokenRequest: no broker check (DELEGATION_TOKEN_AUTH_DISABLED without a secret)",
    40: "KafkaApis.handleExpireTokenRequest: no broker check (DELEGATION_TOKEN_AUTH_DISABLED without a secret)",
    41: "KafkaApis.handleDescribeTokensRequest: DELEGATION_TOKEN_AUTH_DISABLED before its DESCRIBE checks",
    42: "KafkaApis.handleDeleteGroupsRequest: GROUP DELETE per distinct group",
    44: "KafkaApis.handleIncrementalAlterConfigsRequest: BROKER_LOGGER needs CLUSTER ALTER_CONFIGS "
        "(ConfigAdminManager.preprocess); the controller authorizes the forwarded resources (GROUP: ALTER_CONFIGS "
        "on the group)",
    47: "KafkaApis.handleOffsetDeleteRequest: GROUP DELETE, TOPIC READ per topic",
    48: "KafkaApis.handleDescribeClientQuotasRequest: CLUSTER DESCRIBE_CONFIGS",
    50: "KafkaApis.handleDescribeUserScramCredentialsRequest: CLUSTER DESCRIBE",
    60: "AuthHelper.computeDescribeClusterResponse: no check; cluster_authorized_operations when asked",
    68: "KafkaApis.handleConsumerGroupHeartbeat: GROUP READ, TOPIC DESCRIBE on subscribed names (KAFKA-18813)",
    69: "KafkaApis.handleConsumerGroupDescribe: GROUP DESCRIBE; assigned topics need DESCRIBE (KAFKA-18813)",
    71: "KafkaApis.handleGetTelemetrySubscriptionsRequest: no check",
    72: "KafkaApis.handlePushTelemetryRequest: no check",
    74: "KafkaApis.handleListConfigResources: CLUSTER DESCRIBE_CONFIGS",
    76: "KafkaApis.handleShareGroupHeartbeat: share.version first, then GROUP READ, TOPIC DESCRIBE on subscribed "
        "names (KAFKA-18817)",
    77: "KafkaApis.handleShareGroupDescribe: share.version first, then GROUP DESCRIBE; assigned topics need DESCRIBE "
        "(KAFKA-18817)",
    90: "KafkaApis.handleDescribeShareGroupOffsetsRequest: share.version first, then GROUP DESCRIBE per group; named "
        "topics without TOPIC DESCRIBE TOPIC_AUTHORIZATION_FAILED per partition, all-topics leaves them out",
    91: "KafkaApis.handleAlterShareGroupOffsetsRequest: share.version first, then GROUP READ (top-level), TOPIC READ "
        "per topic before the unknown-topic check",
    92: "KafkaApis.handleDeleteShareGroupOffsetsRequest: share.version first, then GROUP DELETE (top-level), TOPIC "
        "READ per topic",
    78: "KafkaApis.handleShareFetchRequest: share.version first, then GROUP READ (top level), TOPIC READ per topic "
        "(TOPIC_AUTHORIZATION_FAILED for its partitions, acknowledgements too)",
    79: "KafkaApis.handleShareAcknowledgeRequest: share.version first, then GROUP READ (top level), TOPIC READ per "
        "topic (TOPIC_AUTHORIZATION_FAILED for its partitions)",
}

NOBODY = "nobody"
TOPIC_A, TOPIC_B, TOPIC_REAL = "authz-a", "authz-b", "authz-real"
MIN_INT = -2147483648
GROUP_OPS = {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
CLUSTER_OPS = {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
               Op.DESCRIBE}
TOPIC_CONFIG, BROKER_CONFIG, LOGGER_CONFIG, GROUP_CONFIG = 2, 4, 8, 32


def bits(ops) -> int:
    return sum(1 << int(op) for op in ops)


def prefixed(principal, rtype, name, op):
    return acl(principal, rtype, name, op, pattern=PatternType.PREFIXED)


def topic_read(principal, topic):
    return acl(principal, RT.TOPIC, topic, Op.READ)


ACLS = [
    # k08 OffsetCommit
    acl("commit", RT.GROUP, "oc-g", Op.READ), topic_read("commit", TOPIC_A),
    prefixed("commit_pfx", RT.GROUP, "pfx-", Op.READ), topic_read("commit_pfx", TOPIC_A),
    acl("commit_deny", RT.GROUP, "*", Op.READ), topic_read("commit_deny", TOPIC_A),
    acl("commit_deny", RT.GROUP, "oc-denied", Op.READ, permission=AclPermissionType.DENY),
    # k09 OffsetFetch
    acl("fetch", RT.GROUP, "of-g", Op.DESCRIBE), acl("fetch", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    # k10 FindCoordinator
    acl("findc", RT.GROUP, "fc-g", Op.DESCRIBE), acl("findc", RT.TRANSACTIONAL_ID, "fc-tx", Op.DESCRIBE),
    # k11-k14 classic membership
    acl("member", RT.GROUP, "cl-g", Op.READ),
    # k15 DescribeGroups
    acl("descg", RT.GROUP, "of-g", Op.DESCRIBE),
    # k16 ListGroups
    prefixed("listg", RT.GROUP, "lg-", Op.DESCRIBE), cluster_acl("listg_cluster", Op.DESCRIBE),
    # k32 DescribeConfigs
    acl("dconf", RT.TOPIC, TOPIC_A, Op.DESCRIBE_CONFIGS), acl("dconf", RT.GROUP, "cfg-g", Op.DESCRIBE_CONFIGS),
    cluster_acl("dconf_cluster", Op.DESCRIBE_CONFIGS),
    # k38 CreateDelegationToken
    acl("token", RT.USER, "User:owner", Op.CREATE_TOKENS),
    # k42 DeleteGroups
    acl("delg", RT.GROUP, "dl-a", Op.DELETE),
    # k44 IncrementalAlterConfigs
    cluster_acl("ialter", Op.ALTER_CONFIGS), acl("galter", RT.GROUP, "gcfg-g", Op.ALTER_CONFIGS),
    # k47 OffsetDelete
    acl("offdel", RT.GROUP, "od-g", Op.DELETE), topic_read("offdel", TOPIC_A),
    # k48 DescribeClientQuotas, k50 DescribeUserScramCredentials, k60 DescribeCluster, k74 ListConfigResources
    cluster_acl("quotas", Op.DESCRIBE_CONFIGS), cluster_acl("scram", Op.DESCRIBE),
    cluster_acl("dcluster", Op.DESCRIBE), cluster_acl("lconf", Op.DESCRIBE_CONFIGS),
    # k68 ConsumerGroupHeartbeat, k69 ConsumerGroupDescribe
    acl("cgh", RT.GROUP, "cg-g", Op.READ), acl("cgh", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    acl("cgd", RT.GROUP, "cg-g", Op.DESCRIBE), acl("cgd", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    acl("cgd_group_only", RT.GROUP, "cg-g", Op.DESCRIBE),
    acl("cgr", RT.GROUP, "cgr-g", Op.READ), acl("cgr", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    # k76 ShareGroupHeartbeat, k77 ShareGroupDescribe
    acl("sgh", RT.GROUP, "sg-g", Op.READ), acl("sgh", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    acl("sgd", RT.GROUP, "sg-g", Op.DESCRIBE),
    acl("sgd_topic", RT.GROUP, "sg-g", Op.DESCRIBE), acl("sgd_topic", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    # k90-k92 share group offsets
    acl("sgo_alter", RT.GROUP, "sgo-g", Op.READ), topic_read("sgo_alter", TOPIC_A),
    acl("sgo_desc", RT.GROUP, "sgo-g", Op.DESCRIBE), acl("sgo_desc", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    acl("sgo_desc_group", RT.GROUP, "sgo-g", Op.DESCRIBE),
    acl("sgo_del", RT.GROUP, "sgo-g", Op.DELETE), topic_read("sgo_del", TOPIC_A),
    # k78 ShareFetch, k79 ShareAcknowledge
    acl("sf", RT.GROUP, "sf-g", Op.READ), topic_read("sf", TOPIC_A), acl("sf", RT.TOPIC, TOPIC_A, Op.DESCRIBE),
    # real clients
    topic_read("consumer", TOPIC_REAL), acl("consumer", RT.GROUP, "real-g", Op.READ),
    topic_read("consumer_nogroup", TOPIC_REAL),
]
USERS = sorted({NOBODY, "owner"} | {a.principal.split(":", 1)[1] for a in ACLS})


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with AuthzNode(tmp_path_factory.mktemp("authz-groups"), USERS, ACLS,
                   overrides={"group.initial.rebalance.delay.ms": 0}) as n:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(n.client_config(SUPER_USER))
        for f in admin.create_topics([NewTopic(t, 2, 1) for t in (TOPIC_A, TOPIC_B, TOPIC_REAL)]).values():
            f.result(timeout=30)
        # groups with committed offsets on both topics (simple groups: generation -1, no member)
        for group in ("of-g", "od-g", "dl-a", "dl-b", "lg-1", "lg-2", "other-g"):
            commit = n.call(SUPER_USER, commit_request(group, TOPIC_A, TOPIC_B), 9)
            assert all(p.error_code == 0 for t in commit.topics for p in t.partitions), commit
        yield n


def commit_request(group: str, *topics: str, offset: int = 5) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name=t, partitions=[OffsetCommitRequestPartition(partition_index=0,
                                                                                  committed_offset=offset)])
        for t in topics])


def partition_errors(resp) -> dict[str, list[int]]:
    return {t.name: [p.error_code for p in t.partitions] for t in resp.topics}


# ---- groups ------------------------------------------------------------------------------------------------

def test_offset_commit_needs_group_read_and_topic_read(node):
    assert partition_errors(node.call(NOBODY, commit_request("oc-g", TOPIC_A, "authz-unknown"), 9)) == {
        TOPIC_A: [E.GROUP_AUTHORIZATION_FAILED], "authz-unknown": [E.GROUP_AUTHORIZATION_FAILED]}
    # READ on the group and on TOPIC_A only: the other topic is refused before its existence is checked
    assert partition_errors(node.call("commit", commit_request("oc-g", TOPIC_A, TOPIC_B, "authz-unknown"), 9)) == {
        TOPIC_A: [0], TOPIC_B: [E.TOPIC_AUTHORIZATION_FAILED], "authz-unknown": [E.TOPIC_AUTHORIZATION_FAILED]}
    # a prefixed group ACL covers the groups it prefixes, and only those
    assert partition_errors(node.call("commit_pfx", commit_request("pfx-1", TOPIC_A), 9)) == {TOPIC_A: [0]}
    assert partition_errors(node.call("commit_pfx", commit_request("xpfx-1", TOPIC_A), 9)) == {
        TOPIC_A: [E.GROUP_AUTHORIZATION_FAILED]}
    # DENY beats a wildcard ALLOW
    assert partition_errors(node.call("commit_deny", commit_request("oc-any", TOPIC_A), 9)) == {TOPIC_A: [0]}
    assert partition_errors(node.call("commit_deny", commit_request("oc-denied", TOPIC_A), 9)) == {
        TOPIC_A: [E.GROUP_AUTHORIZATION_FAILED]}


def test_offset_commit_v10_resolves_topic_ids_before_authorizing(node):
    from protocol.generated.messages import MetadataRequest
    from protocol.generated.messages.metadata_request import MetadataRequestTopic

    meta = node.call(SUPER_USER, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC_A),
                                                         MetadataRequestTopic(name=TOPIC_B)]), 12)
    ids = {t.name: t.topic_id for t in meta.topics}
    req = OffsetCommitRequest(group_id="oc-g", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(topic_id=ids[n], partitions=[OffsetCommitRequestPartition(partition_index=0,
                                                                                           committed_offset=1)])
        for n in (TOPIC_A, TOPIC_B)] + [OffsetCommitRequestTopic(topic_id=b"\x01" * 16, partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
    resp = node.call("commit", req, 10)
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in resp.topics] == [
        (ids[TOPIC_A], [0]), (ids[TOPIC_B], [E.TOPIC_AUTHORIZATION_FAILED]), (b"\x01" * 16, [E.UNKNOWN_TOPIC_ID])]


def test_offset_fetch_needs_group_describe_and_filters_topics(node):
    named = [OffsetFetchRequestTopics(name=t, partition_indexes=[0]) for t in (TOPIC_A, TOPIC_B)]
    resp = node.call("fetch", OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id="of-g", topics=named), OffsetFetchRequestGroup(group_id="od-g", topics=named),
        OffsetFetchRequestGroup(group_id="of-g", topics=None)]), 8)
    named_group, other_group, all_group = resp.groups
    assert [(t.name, [(p.committed_offset, p.error_code) for p in t.partitions]) for t in named_group.topics] == [
        (TOPIC_A, [(5, 0)]), (TOPIC_B, [(-1, E.TOPIC_AUTHORIZATION_FAILED)])]
    assert (other_group.group_id, other_group.error_code, other_group.topics) == (
        "od-g", E.GROUP_AUTHORIZATION_FAILED, [])
    # all topics: the one the user may not describe is silently left out
    assert (all_group.error_code, [t.name for t in all_group.topics]) == (0, [TOPIC_A])
    # v1-7: one group, its error at the top (v2+)
    old = node.call(NOBODY, OffsetFetchRequest(group_id="of-g", topics=[
        OffsetFetchRequestTopic(name=TOPIC_A, partition_indexes=[0])]), 7)
    assert (old.error_code, old.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    old = node.call("fetch", OffsetFetchRequest(group_id="of-g", topics=None), 7)
    assert (old.error_code, [t.name for t in old.topics]) == (0, [TOPIC_A])


def test_find_coordinator_needs_describe_on_each_key(node):
    groups = node.call("findc", FindCoordinatorRequest(key_type=0, coordinator_keys=["fc-g", "fc-other"]), 4)
    assert [(c.key, c.error_code) for c in groups.coordinators] == [
        ("fc-g", 0), ("fc-other", E.GROUP_AUTHORIZATION_FAILED)]
    refused = groups.coordinators[1]
    assert (refused.node_id, refused.host, refused.port, refused.error_message) == (-1, "", -1, None)
    assert groups.coordinators[0].port == node.port
    txns = node.call("findc", FindCoordinatorRequest(key_type=1, coordinator_keys=["fc-tx", "fc-tx2"]), 4)
    assert [(c.key, c.error_code) for c in txns.coordinators] == [
        ("fc-tx", 0), ("fc-tx2", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    old = node.call(NOBODY, FindCoordinatorRequest(key="fc-g", key_type=0), 3)
    assert (old.error_code, old.error_message, old.node_id, old.host, old.port) == (
        E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1)


def join_request(group: str) -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                            protocol_type="consumer", protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")])


def test_classic_membership_needs_group_read(node):
    """JoinGroup, Heartbeat, LeaveGroup and SyncGroup: GROUP READ before the coordinator sees the request."""
    denied = node.call(NOBODY, join_request("cl-g"), 7)
    assert (denied.error_code, denied.generation_id, denied.member_id, denied.leader, denied.protocol_name) == (
        E.GROUP_AUTHORIZATION_FAILED, -1, "", "", None)
    assert node.call("member", join_request("cl-g"), 7).error_code == E.MEMBER_ID_REQUIRED
    assert node.call("member", join_request("cl-other"), 7).error_code == E.GROUP_AUTHORIZATION_FAILED

    heartbeat = HeartbeatRequest(group_id="cl-g", generation_id=1, member_id="m")
    assert node.call(NOBODY, heartbeat, 4).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert node.call("member", heartbeat, 4).error_code == E.UNKNOWN_MEMBER_ID

    leave = LeaveGroupRequest(group_id="cl-g", members=[MemberIdentity(member_id="m")])
    denied = node.call(NOBODY, leave, 5)
    assert (denied.error_code, denied.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    allowed = node.call("member", leave, 5)
    assert (allowed.error_code, [m.error_code for m in allowed.members]) == (0, [E.UNKNOWN_MEMBER_ID])

    sync = SyncGroupRequest(group_id="cl-g", generation_id=1, member_id="m", protocol_type="consumer",
                            protocol_name="range", assignments=[])
    denied = node.call(NOBODY, sync, 5)
    assert (denied.error_code, denied.assignment) == (E.GROUP_AUTHORIZATION_FAILED, b"")
    assert node.call("member", sync, 5).error_code == E.UNKNOWN_MEMBER_ID
    # v5 without protocol type and name: Kafka answers that before it authorizes
    sync.protocol_type = sync.protocol_name = None
    assert node.call(NOBODY, sync, 5).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_describe_groups_needs_describe_and_computes_authorized_operations(node):
    resp = node.call("descg", DescribeGroupsRequest(groups=["od-g", "of-g"], include_authorized_operations=True), 5)
    denied, described = resp.groups
    assert (denied.group_id, denied.error_code, denied.group_state, denied.protocol_type, denied.members,
            denied.authorized_operations) == ("od-g", E.GROUP_AUTHORIZATION_FAILED, "", "", [], MIN_INT)
    assert (described.group_id, described.error_code, described.group_state) == ("of-g", 0, "Empty")
    assert described.authorized_operations == bits({Op.DESCRIBE})
    everything = node.call(SUPER_USER, DescribeGroupsRequest(groups=["of-g"], include_authorized_operations=True), 5)
    assert everything.groups[0].authorized_operations == bits(GROUP_OPS)
    unasked = node.call("descg", DescribeGroupsRequest(groups=["of-g"]), 5)
    assert unasked.groups[0].authorized_operations == MIN_INT


def test_list_groups_filters_by_describe_without_cluster_describe(node):
    def listed(user):
        return sorted(g.group_id for g in node.call(user, ListGroupsRequest(), 4).groups)

    assert listed(NOBODY) == []
    assert listed("listg") == ["lg-1", "lg-2"]  # the prefixed DESCRIBE ACL
    assert {"lg-1", "lg-2", "of-g", "other-g"} <= set(listed("listg_cluster"))


def test_delete_groups_needs_delete_per_distinct_group(node):
    resp = node.call("delg", DeleteGroupsRequest(groups_names=["dl-b", "dl-a", "dl-b"]), 2)
    assert [(r.group_id, r.error_code) for r in resp.results] == [("dl-a", 0), ("dl-b", E.GROUP_AUTHORIZATION_FAILED)]
    left = node.call(SUPER_USER, DescribeGroupsRequest(groups=["dl-a", "dl-b"]), 5)
    assert [g.group_state for g in left.groups] == ["Dead", "Empty"]


def test_offset_delete_needs_group_delete_and_topic_read(node):
    req = OffsetDeleteRequest(group_id="od-g", topics=[
        OffsetDeleteRequestTopic(name=t, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
        for t in (TOPIC_A, TOPIC_B)])
    denied = node.call(NOBODY, req, 0)
    assert (denied.error_code, denied.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    allowed = node.call("offdel", req, 0)
    assert allowed.error_code == 0
    assert partition_errors(allowed) == {TOPIC_A: [0], TOPIC_B: [E.TOPIC_AUTHORIZATION_FAILED]}


def heartbeat(node, user: str, topics: list[str], epoch: int = 0, member: str = "cgh-member-0000000001"):
    return node.call(user, ConsumerGroupHeartbeatRequest(
        group_id="cg-g", member_id=member, member_epoch=epoch, rebalance_timeout_ms=10_000,
        subscribed_topic_names=topics, topic_partitions=[] if epoch == 0 else None), 1)


def test_consumer_group_heartbeat_and_describe(node):
    """k68 then k69 on the group the heartbeat creates (its member is assigned TOPIC_A's two partitions)."""
    assert heartbeat(node, NOBODY, [TOPIC_A]).error_code == E.GROUP_AUTHORIZATION_FAILED
    refused = heartbeat(node, "cgh", [TOPIC_A, TOPIC_B])
    assert (refused.error_code, refused.error_message, refused.member_epoch) == (E.TOPIC_AUTHORIZATION_FAILED, None, 0)
    joined = heartbeat(node, "cgh", [TOPIC_A])
    assert joined.error_code == 0 and joined.member_epoch > 0
    assert sorted(p for t in joined.assignment.topic_partitions for p in t.partitions) == [0, 1]

    describe = ConsumerGroupDescribeRequest(group_ids=["cg-g", "of-g"], include_authorized_operations=True)
    denied = node.call(NOBODY, describe, 0).groups
    assert [(g.group_id, g.error_code) for g in denied] == [
        ("cg-g", E.GROUP_AUTHORIZATION_FAILED), ("of-g", E.GROUP_AUTHORIZATION_FAILED)]
    allowed = node.call("cgd", describe, 0).groups
    assert [(g.group_id, g.error_code) for g in allowed] == [("of-g", E.GROUP_AUTHORIZATION_FAILED), ("cg-g", 0)]
    assert allowed[1].authorized_operations == bits({Op.DESCRIBE})
    assert [m.member_id for m in allowed[1].members] == ["cgh-member-0000000001"]
    # the group's member is assigned a topic this user may not describe: the group is not shown
    hidden = node.call("cgd_group_only", ConsumerGroupDescribeRequest(group_ids=["cg-g"]), 0).groups[0]
    assert (hidden.group_id, hidden.error_code, hidden.members, hidden.group_state) == (
        "cg-g", E.TOPIC_AUTHORIZATION_FAILED, [], "")
    assert hidden.error_message == "The group has described topic(s) that the client is not authorized to describe."
    assert heartbeat(node, "cgh", [TOPIC_A], epoch=-1).error_code == 0  # leaves


def test_share_group_heartbeat_and_describe(node):
    """k76 then k77: GROUP READ and TOPIC DESCRIBE of the subscribed names to heartbeat, GROUP DESCRIBE to describe;
    once the member is assigned TOPIC_A, describing needs TOPIC DESCRIBE on it too."""
    member = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"

    def share_heartbeat(user, topics, epoch=0):
        return node.call(user, ShareGroupHeartbeatRequest(group_id="sg-g", member_id=member, member_epoch=epoch,
                                                          subscribed_topic_names=topics), 1)
    assert share_heartbeat(NOBODY, [TOPIC_A]).error_code == E.GROUP_AUTHORIZATION_FAILED
    refused = share_heartbeat("sgh", [TOPIC_A, TOPIC_B])
    assert (refused.error_code, refused.member_epoch) == (E.TOPIC_AUTHORIZATION_FAILED, 0)
    joined = share_heartbeat("sgh", [TOPIC_A])
    assert joined.error_code == 0 and joined.member_epoch > 0

    describe = ShareGroupDescribeRequest(group_ids=["sg-g", "of-g"], include_authorized_operations=True)
    denied = node.call(NOBODY, describe, 1).groups
    assert [(g.group_id, g.error_code) for g in denied] == [
        ("sg-g", E.GROUP_AUTHORIZATION_FAILED), ("of-g", E.GROUP_AUTHORIZATION_FAILED)]
    allowed = node.call("sgd", describe, 1).groups
    assert [(g.group_id, g.error_code) for g in allowed] == [("of-g", E.GROUP_AUTHORIZATION_FAILED), ("sg-g", 0)]
    assert allowed[1].authorized_operations == bits({Op.DESCRIBE})
    assert [m.member_id for m in allowed[1].members] == [member]
    # TOPIC_A's share state was initialized by the share coordinator when the member joined (the node's own
    # InitializeShareGroupState, in-process): its next heartbeat assigns it, and a user who may not describe TOPIC_A
    # no longer sees the group
    assigned = share_heartbeat("sgh", None, epoch=joined.member_epoch)
    assert sorted(p for t in assigned.assignment.topic_partitions for p in t.partitions) == [0, 1]
    hidden = node.call("sgd", ShareGroupDescribeRequest(group_ids=["sg-g"]), 1).groups[0]
    assert (hidden.error_code, hidden.members, hidden.error_message) == (
        E.TOPIC_AUTHORIZATION_FAILED, [], "The group has described topic(s) that the client is not authorized to "
                                          "describe.")
    shown = node.call("sgd_topic", ShareGroupDescribeRequest(group_ids=["sg-g"]), 1).groups[0]
    assert shown.error_code == 0 and [t.topic_name for t in shown.members[0].assignment.topic_partitions] == [TOPIC_A]
    assert share_heartbeat("sgh", None, epoch=-1).error_code == 0  # leaves


def test_share_group_offsets(node):
    """k91, k90, k92 on an empty share group (the alteration creates it): GROUP READ and TOPIC READ to alter,
    GROUP DESCRIBE and TOPIC DESCRIBE to describe, GROUP DELETE and TOPIC READ to delete."""
    def alter(user, *topics):
        return node.call(user, AlterShareGroupOffsetsRequest(group_id="sgo-g", topics=[
            asgo.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=[
                asgo.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)]) for t in topics]), 0)

    assert alter(NOBODY, TOPIC_A).error_code == E.GROUP_AUTHORIZATION_FAILED
    altered = alter("sgo_alter", TOPIC_A, TOPIC_B, "authz-missing")
    assert altered.error_code == 0
    assert [(t.topic_name, [p.error_code for p in t.partitions]) for t in altered.responses] == [
        (TOPIC_B, [E.TOPIC_AUTHORIZATION_FAILED]), ("authz-missing", [E.TOPIC_AUTHORIZATION_FAILED]),
        (TOPIC_A, [0])]

    def describe(user, topics):
        req = DescribeShareGroupOffsetsRequest(groups=[dsgoq.DescribeShareGroupOffsetsRequestGroup(
            group_id="sgo-g", topics=None if topics is None else [
                dsgoq.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=[0]) for t in topics])])
        return node.call(user, req, 1).groups[0]
    assert describe(NOBODY, [TOPIC_A]).error_code == E.GROUP_AUTHORIZATION_FAILED
    named = describe("sgo_desc", [TOPIC_B, TOPIC_A])
    assert [(t.topic_name, [(p.start_offset, p.error_code) for p in t.partitions]) for t in named.topics] == [
        (TOPIC_A, [(0, 0)]), (TOPIC_B, [(-1, E.TOPIC_AUTHORIZATION_FAILED)])]
    assert [t.topic_name for t in describe("sgo_desc", None).topics] == [TOPIC_A]
    assert describe("sgo_desc_group", None).topics == []  # all topics: the undescribable ones left out

    def delete(user, *topics):
        return node.call(user, DeleteShareGroupOffsetsRequest(group_id="sgo-g", topics=[
            dsgo.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), 0)
    assert delete("sgo_alter", TOPIC_A).error_code == E.GROUP_AUTHORIZATION_FAILED
    deleted = delete("sgo_del", TOPIC_B, TOPIC_A)
    assert (deleted.error_code, [(t.topic_name, t.error_code) for t in deleted.responses]) == (
        0, [(TOPIC_B, E.TOPIC_AUTHORIZATION_FAILED), (TOPIC_A, 0)])


def test_share_fetch_and_acknowledge_need_group_read_and_topic_read(node):
    """k78, k79: GROUP READ at the top level (no session opened), then TOPIC READ per topic: TOPIC_B's partition
    answers TOPIC_AUTHORIZATION_FAILED in the fetch and in the acknowledgement, TOPIC_A's is read."""
    from protocol.generated.messages import MetadataRequest, ShareAcknowledgeRequest, ShareFetchRequest
    from protocol.generated.messages import share_acknowledge_request as sar
    from protocol.generated.messages import share_fetch_request as sfr
    from protocol.generated.messages.metadata_request import MetadataRequestTopic

    meta = node.call(SUPER_USER, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC_A),
                                                         MetadataRequestTopic(name=TOPIC_B)]), 12)
    ids = {t.name: t.topic_id for t in meta.topics}
    member = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d"
    # a member's join has the share coordinator initialize TOPIC_A's share state (a fetch before it: uninitialized)
    joined = node.call("sf", ShareGroupHeartbeatRequest(group_id="sf-g", member_id=member, member_epoch=0,
                                                        subscribed_topic_names=[TOPIC_A]), 1)
    assert joined.error_code == 0

    sf = node.wire("sf")  # one connection: the share session lives as long as it

    def call(user, req):
        return sf.call(req.API_KEY, 1, req) if user == "sf" else node.call(user, req, 1)

    def fetch(user, epoch=0, max_wait_ms=0):
        return call(user, ShareFetchRequest(
            group_id="sf-g", member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
            max_records=10, batch_size=10,
            topics=[sfr.FetchTopic(topic_id=ids[n], partitions=[sfr.FetchPartition(partition_index=0)])
                    for n in (TOPIC_A, TOPIC_B)]))
    denied = fetch(NOBODY)
    assert (denied.error_code, denied.responses) == (E.GROUP_AUTHORIZATION_FAILED, [])
    # TOPIC_A's share state is read at its first fetch: a fetch whose wait ends first leaves it out (Kafka's)
    for _ in range(10):
        got = fetch("sf", max_wait_ms=500)
        assert got.error_code == 0
        if len(got.responses) == 2:
            break
    assert {t.topic_id: [p.error_code for p in t.partitions] for t in got.responses} == {
        ids[TOPIC_A]: [0], ids[TOPIC_B]: [E.TOPIC_AUTHORIZATION_FAILED]}

    def ack(user, epoch):
        return call(user, ShareAcknowledgeRequest(group_id="sf-g", member_id=member, share_session_epoch=epoch,
                                                       topics=[sar.AcknowledgeTopic(topic_id=ids[TOPIC_B], partitions=[
                                                           sar.AcknowledgePartition(partition_index=0,
                                                                                    acknowledgement_batches=[
                                                                                        sar.AcknowledgementBatch(
                                                                                            first_offset=0,
                                                                                            last_offset=0,
                                                                                            acknowledge_types=[1])])])]))
    assert ack(NOBODY, 1).error_code == E.GROUP_AUTHORIZATION_FAILED
    acked = ack("sf", 1)
    assert acked.error_code == 0
    assert [p.error_code for t in acked.responses for p in t.partitions] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert ack("sf", -1).error_code == 0  # closes the session
    sf.close()
    assert node.call("sf", ShareGroupHeartbeatRequest(group_id="sf-g", member_id=member, member_epoch=-1),
                     1).error_code == 0


def test_consumer_group_regex_resolves_to_describable_topics_only(node):
    """A regex subscription matching TOPIC_A and TOPIC_B, from a member that may describe only TOPIC_A: the
    coordinator's regex refresh keeps TOPIC_A (GroupMetadataManager.refreshRegularExpressions, KAFKA-18813)."""
    from protocol.generated.messages import MetadataRequest
    from protocol.generated.messages.metadata_request import MetadataRequestTopic

    meta = node.call(SUPER_USER, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC_A),
                                                         MetadataRequestTopic(name=TOPIC_B)]), 12)
    ids = {t.topic_id: t.name for t in meta.topics}
    member = "cgr-member-000000000001"
    joined = node.call("cgr", ConsumerGroupHeartbeatRequest(
        group_id="cgr-g", member_id=member, member_epoch=0, rebalance_timeout_ms=10_000,
        subscribed_topic_regex="authz-[ab]", topic_partitions=[]), 1)
    assert joined.error_code == 0
    assert {(ids[t.topic_id], tuple(t.partitions)) for t in joined.assignment.topic_partitions} == {
        (TOPIC_A, (0, 1))}
    described = node.call(SUPER_USER, ConsumerGroupDescribeRequest(group_ids=["cgr-g"]), 0).groups[0]
    assert [m.subscribed_topic_regex for m in described.members] == ["authz-[ab]"]
    assert {tp.topic_name for m in described.members for tp in m.target_assignment.topic_partitions} == {TOPIC_A}
    assert node.call("cgr", ConsumerGroupHeartbeatRequest(group_id="cgr-g", member_id=member, member_epoch=-1),
                     1).error_code == 0


# ---- configs -----------------------------------------------------------------------------------------------

def test_describe_configs_authorizes_each_resource(node):
    broker_id = str(node.broker.config.node_id)
    resources = [DescribeConfigsResource(resource_type=BROKER_CONFIG, resource_name=broker_id),
                 DescribeConfigsResource(resource_type=TOPIC_CONFIG, resource_name=TOPIC_B),
                 DescribeConfigsResource(resource_type=TOPIC_CONFIG, resource_name=TOPIC_A),
                 DescribeConfigsResource(resource_type=GROUP_CONFIG, resource_name="cfg-other"),
                 DescribeConfigsResource(resource_type=LOGGER_CONFIG, resource_name=broker_id)]
    resp = node.call("dconf", DescribeConfigsRequest(resources=resources), 4)
    # the described resources first, then the refused ones with the error's message and no configs
    assert [(r.resource_type, r.resource_name, r.error_code) for r in resp.results] == [
        (TOPIC_CONFIG, TOPIC_A, 0), (BROKER_CONFIG, broker_id, E.CLUSTER_AUTHORIZATION_FAILED),
        (TOPIC_CONFIG, TOPIC_B, E.TOPIC_AUTHORIZATION_FAILED),
        (GROUP_CONFIG, "cfg-other", E.GROUP_AUTHORIZATION_FAILED),
        (LOGGER_CONFIG, broker_id, E.CLUSTER_AUTHORIZATION_FAILED)]
    assert resp.results[0].configs and all(r.configs == [] for r in resp.results[1:])
    assert [r.error_message for r in resp.results[1:]] == [
        "Cluster authorization failed.", "Topic authorization failed.", "Group authorization failed.",
        "Cluster authorization failed."]
    cluster = node.call("dconf_cluster", DescribeConfigsRequest(resources=[resources[0], resources[4]]), 4)
    assert [(r.error_code, bool(r.configs)) for r in cluster.results] == [(0, True), (0, True)]


def test_alter_configs_has_no_broker_side_check(node):
    """BROKER_LOGGER is refused as INVALID_REQUEST whoever asks: the broker authorizes nothing itself."""
    req = AlterConfigsRequest(resources=[alter_req.AlterConfigsResource(
        resource_type=LOGGER_CONFIG, resource_name=str(node.broker.config.node_id),
        configs=[alter_req.AlterableConfig(name="root", value="INFO")])], validate_only=True)
    assert [r.error_code for r in node.call(NOBODY, req, 2).responses] == [E.INVALID_REQUEST]


def test_incremental_alter_configs_broker_logger_needs_cluster_alter_configs(node):
    req = IncrementalAlterConfigsRequest(resources=[inc_req.AlterConfigsResource(
        resource_type=LOGGER_CONFIG, resource_name=str(node.broker.config.node_id),
        configs=[inc_req.AlterableConfig(name="odradek.authz-test", config_operation=0, value="DEBUG")])],
        validate_only=True)
    denied = node.call(NOBODY, req, 1).responses[0]
    assert (denied.error_code, denied.error_message) == (E.CLUSTER_AUTHORIZATION_FAILED,
                                                         "Cluster authorization failed.")
    assert node.call("ialter", req, 1).responses[0].error_code == 0


def test_group_configs_need_alter_configs_and_describe_configs_on_the_group(node):
    """A GROUP resource (group configs) forwarded to the controller: ALTER_CONFIGS on the group, else
    GROUP_AUTHORIZATION_FAILED (ControllerApis.authorizeAlterResource); described with DESCRIBE_CONFIGS on it."""
    def req(group):
        return IncrementalAlterConfigsRequest(resources=[inc_req.AlterConfigsResource(
            resource_type=GROUP_CONFIG, resource_name=group,
            configs=[inc_req.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")])])
    denied = node.call(NOBODY, req("gcfg-g"), 1).responses[0]
    assert (denied.error_code, denied.error_message) == (E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    assert node.call("galter", req("gcfg-other"), 1).responses[0].error_code == E.GROUP_AUTHORIZATION_FAILED
    assert node.call("galter", req("gcfg-g"), 1).responses[0].error_code == 0
    described = node.call(SUPER_USER, DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=GROUP_CONFIG, resource_name="gcfg-g")]), 4).results[0]
    assert {c.name: c.value for c in described.configs}["share.auto.offset.reset"] == "earliest"
    mine = node.call("dconf", DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=GROUP_CONFIG, resource_name="cfg-g")]), 4).results[0]
    assert mine.error_code == 0 and "share.session.timeout.ms" in {c.name for c in mine.configs}


# ---- cluster -----------------------------------------------------------------------------------------------

def test_describe_client_quotas_needs_cluster_describe_configs(node):
    req = DescribeClientQuotasRequest(components=[], strict=False)
    denied = node.call(NOBODY, req, 1)
    assert (denied.error_code, denied.error_message, denied.entries) == (
        E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", None)
    assert node.call("quotas", req, 1).error_code == 0


def test_describe_user_scram_credentials_needs_cluster_describe(node):
    req = DescribeUserScramCredentialsRequest(users=[UserName(name="alice"), UserName(name="bob")])
    denied = node.call(NOBODY, req, 0)
    assert (denied.error_code, [(r.user, r.error_code) for r in denied.results]) == (
        E.CLUSTER_AUTHORIZATION_FAILED, [("", E.CLUSTER_AUTHORIZATION_FAILED)] * 2)
    allowed = node.call("scram", req, 0)
    assert (allowed.error_code, [(r.user, r.error_code) for r in allowed.results]) == (
        0, [("alice", E.RESOURCE_NOT_FOUND), ("bob", E.RESOURCE_NOT_FOUND)])


def test_describe_cluster_reports_cluster_authorized_operations(node):
    asked = DescribeClusterRequest(include_cluster_authorized_operations=True)
    nobody = node.call(NOBODY, asked, 1)
    assert (nobody.error_code, nobody.cluster_authorized_operations, len(nobody.brokers)) == (0, 0, 1)
    assert node.call("dcluster", asked, 1).cluster_authorized_operations == bits({Op.DESCRIBE})
    assert node.call(SUPER_USER, asked, 1).cluster_authorized_operations == bits(CLUSTER_OPS)
    assert node.call("dcluster", DescribeClusterRequest(), 1).cluster_authorized_operations == MIN_INT


def test_list_config_resources_needs_cluster_describe_configs(node):
    denied = node.call(NOBODY, ListConfigResourcesRequest(resource_types=[TOPIC_CONFIG]), 1)
    assert (denied.error_code, denied.config_resources) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    allowed = node.call("lconf", ListConfigResourcesRequest(resource_types=[TOPIC_CONFIG]), 1)
    assert allowed.error_code == 0 and {TOPIC_A, TOPIC_B} <= {r.resource_name for r in allowed.config_resources}


def test_apis_without_a_check_answer_a_user_without_acls(node):
    """k17, k18, k36, k39-k41, k71, k72: Kafka asks the authorizer nothing (the token APIs answer as a broker
    without a token secret; k41 would check DESCRIBE only once tokens exist)."""
    assert node.call(NOBODY, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3) \
        .error_code == 0
    assert node.call(NOBODY, SaslAuthenticateRequest(auth_bytes=b""), 2).error_code == E.ILLEGAL_SASL_STATE
    # on an authenticated connection SaslHandshake begins a re-authentication (the connection's authenticator
    # answers it before any handler); either way no ACL is asked for
    handshake = node.call(NOBODY, SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert (handshake.error_code, handshake.mechanisms) == (0, ["PLAIN"])
    assert node.call(NOBODY, RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1000), 2).error_code == \
        E.DELEGATION_TOKEN_AUTH_DISABLED
    assert node.call(NOBODY, ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=1000), 2).error_code == \
        E.DELEGATION_TOKEN_AUTH_DISABLED
    assert node.call(NOBODY, DescribeDelegationTokenRequest(owners=None), 3).error_code == \
        E.DELEGATION_TOKEN_AUTH_DISABLED
    subscriptions = node.call(NOBODY, GetTelemetrySubscriptionsRequest(), 0)
    assert subscriptions.error_code == 0 and subscriptions.client_instance_id != b"\0" * 16
    pushed = node.call(NOBODY, PushTelemetryRequest(client_instance_id=subscriptions.client_instance_id,
                                                    subscription_id=subscriptions.subscription_id), 0)
    assert pushed.error_code == 0


def test_create_delegation_token_for_another_owner_needs_create_tokens(node):
    own = node.call(NOBODY, CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), 3)
    assert (own.error_code, own.principal_name, own.token_requester_principal_name) == (
        E.DELEGATION_TOKEN_AUTH_DISABLED, NOBODY, NOBODY)
    for_owner = CreateDelegationTokenRequest(owner_principal_type="User", owner_principal_name="owner", renewers=[],
                                             max_lifetime_ms=-1)
    denied = node.call(NOBODY, for_owner, 3)
    assert (denied.error_code, denied.principal_name, denied.token_requester_principal_name) == (
        E.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "owner", NOBODY)
    assert node.call("token", for_owner, 3).error_code == E.DELEGATION_TOKEN_AUTH_DISABLED
    group_renewer = CreateDelegationTokenRequest(renewers=[CreatableRenewers(principal_type="Group",
                                                                             principal_name="g")], max_lifetime_ms=-1)
    assert node.call(NOBODY, group_renewer, 3).error_code == E.INVALID_PRINCIPAL_TYPE


# ---- real clients ------------------------------------------------------------------------------------------

def test_confluent_consumer_needs_group_read(node):
    from confluent_kafka import Consumer, KafkaError, Producer

    producer = Producer(node.client_config(SUPER_USER))
    for i in range(3):
        producer.produce(TOPIC_REAL, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0

    def consume(user: str):
        consumer = Consumer({**node.client_config(user), "group.id": "real-g", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            consumer.subscribe([TOPIC_REAL])
            got, deadline = [], time.monotonic() + 30
            while len(got) < 3 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    return msg.error().code()
                got.append(msg.value())
            return got
        finally:
            consumer.close()

    assert consume("consumer_nogroup") == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert consume("consumer") == [b"v0", b"v1", b"v2"]


def test_kafka_python_admin_lists_only_describable_groups(node):
    from kafka import KafkaAdminClient

    def groups(user: str) -> list[str]:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="PLAIN", sasl_plain_username=user,
                                 sasl_plain_password=f"{user}-secret", request_timeout_ms=10_000)
        try:
            return sorted(g["group_id"] for g in admin.list_groups())
        finally:
            admin.close()

    assert groups("listg") == ["lg-1", "lg-2"]
    assert groups(NOBODY) == []


def test_confluent_admin_describe_broker_configs_without_describe_configs(node):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource

    broker = ConfigResource(ConfigResource.Type.BROKER, str(node.broker.config.node_id))
    denied_admin = AdminClient(node.client_config("dconf"))
    with pytest.raises(KafkaException) as exc:
        denied_admin.describe_configs([broker])[broker].result(timeout=30)
    assert exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    allowed_admin = AdminClient(node.client_config("dconf_cluster"))
    assert "log.dirs" in allowed_admin.describe_configs([broker])[broker].result(timeout=30)


def test_rows_cover_every_api_key_of_the_brief():
    assert set(ROWS) == {8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 32, 33, 36, 38, 39, 40, 41, 42, 44, 47, 48, 50,
                         60, 68, 69, 71, 72, 74, 76, 77, 78, 79, 90, 91, 92}


def test_without_an_authorizer_every_check_answers_yes(tmp_path):
    """The same handlers on a node without ``authorizer.class.name``: nothing is refused or filtered, and the
    authorized-operations fields carry every operation of the resource type, as Kafka's ``authorizer.forall``."""
    from broker.network import blocking_request
    from broker.testing.embedded import EmbeddedBroker

    with EmbeddedBroker(tmp_path) as b:
        def call(body, version):
            return blocking_request.request(b.port, body, version, timeout=10)

        commit = call(commit_request("open-g", "open-unknown"), 9)
        assert partition_errors(commit) == {"open-unknown": [E.UNKNOWN_TOPIC_OR_PARTITION]}
        assert call(FindCoordinatorRequest(key_type=0, coordinator_keys=["open-g"]), 4).coordinators[0].error_code == 0
        described = call(DescribeGroupsRequest(groups=["open-g"], include_authorized_operations=True), 5).groups[0]
        assert (described.error_code, described.authorized_operations) == (0, bits(GROUP_OPS))
        cluster = call(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
        assert cluster.cluster_authorized_operations == bits(CLUSTER_OPS)
        assert call(DescribeClientQuotasRequest(components=[], strict=False), 1).error_code == 0
        assert call(ListConfigResourcesRequest(resource_types=[]), 1).error_code == 0
