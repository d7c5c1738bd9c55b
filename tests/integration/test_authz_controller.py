"""Authorization on the controller side and between nodes (issue 29), with Kafka's StandardAuthorizer.

Every API the controller listener serves, and every admin request a broker forwards to the controller in an
Envelope, is sent by a user without any ACL and by a user holding only the ACL Kafka requires (``ROWS``: the API
key and Kafka's check), and each answer is Kafka's: refused in the request's own error shape, or taken (the
request then gets past authorization to the controller's own answer). The node (tests/authz_harness.py) has a
SASL_PLAINTEXT controller listener with the same PLAIN users, so its controller APIs can be sent as anyone; the
forwarded ones go through its broker listener, and the controller authorizes them as the Envelope's principal.

The impersonations the issue names: an Envelope from a principal without CLUSTER_ACTION (the client's principal it
claims is never looked at); a client's Vote, BrokerRegistration or KRaft Fetch on the controller listener. A
3-node SASL_SSL cluster with the authorizer (its nodes' mTLS and SCRAM principals the super users) shows the
Envelope principal end to end: a CreateTopics sent to a broker that is not the controller succeeds for a user with
CREATE on the topic and is TOPIC_AUTHORIZATION_FAILED for one without.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Callable

import pytest

from broker.apis import HANDLERS
from broker.apis.forwarding import FORWARDED
from broker.controlplane.controller_authorization import CLUSTER_OPERATION
from broker.controlplane.controller_channel import principal_data
from broker.controlplane.controller_listener import CONTROLLER_LISTENER_HANDLERS
from cluster.acls import AclOperation, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.generated.api_keys import APIS
from protocol.generated.messages import (
    AllocateProducerIdsRequest, AlterClientQuotasRequest, AlterConfigsRequest, AlterPartitionReassignmentsRequest,
    AlterPartitionRequest, AlterUserScramCredentialsRequest, ApiVersionsRequest, BeginQuorumEpochRequest,
    BrokerHeartbeatRequest, BrokerRegistrationRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DescribeQuorumRequest, ElectLeadersRequest, EndQuorumEpochRequest, EnvelopeRequest,
    FetchRequest, FetchSnapshotRequest, IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
    MetadataRequest, RequestHeader, ResponseHeader, UnregisterBrokerRequest, VoteRequest,
)
from protocol.generated.messages import alter_client_quotas_request as acq
from protocol.generated.messages import alter_configs_request as ac
from protocol.generated.messages import alter_partition_reassignments_request as apr
from protocol.generated.messages import alter_user_scram_credentials_request as auc
from protocol.generated.messages import create_partitions_request as cp
from protocol.generated.messages import create_topics_request as ct
from protocol.generated.messages import delete_topics_request as dt
from protocol.generated.messages import describe_quorum_request as dq
from protocol.generated.messages import elect_leaders_request as el
from protocol.generated.messages import incremental_alter_configs_request as iac
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from protocol.topics import METADATA_TOPIC
from tests.authz_harness import AuthzNode, acl, cluster_acl

# API key -> Kafka's check (ControllerApis unless named), of the connection's principal on the controller listener
# and of the Envelope's principal for a forwarded request
ROWS: dict[int, str] = {
    1: "ControllerApis.handleFetch (KRaft): CLUSTER_ACTION on CLUSTER else top-level CLUSTER_AUTHORIZATION_FAILED",
    17: "ControllerApis.handleSaslHandshakeRequest: none (authentication comes before any authorization)",
    18: "ControllerApis.handleApiVersionsRequest: none",
    19: "ControllerApis.createTopics: CREATE on CLUSTER or on the TOPIC else TOPIC_AUTHORIZATION_FAILED; configs "
        "returned only with DESCRIBE_CONFIGS on the TOPIC, else topic_config_error_code TOPIC_AUTHORIZATION_FAILED",
    20: "ControllerApis.deleteTopics: DELETE on CLUSTER or on the TOPIC (DESCRIBE to learn of it) else "
        "TOPIC_AUTHORIZATION_FAILED",
    33: "ControllerApis.handleLegacyAlterConfigs/authorizeAlterResource: ALTER_CONFIGS on the TOPIC else "
        "TOPIC_AUTHORIZATION_FAILED, on CLUSTER for BROKER else CLUSTER_AUTHORIZATION_FAILED",
    36: "ControllerApis.handleSaslAuthenticateRequest: none (authentication comes before any authorization)",
    37: "ControllerApis.createPartitions: ALTER on the TOPIC else TOPIC_AUTHORIZATION_FAILED",
    43: "ControllerApis.handleElectLeaders: ALTER on CLUSTER else CLUSTER_AUTHORIZATION_FAILED (top level and per "
        "partition, ElectLeadersRequest.getErrorResponse)",
    44: "ControllerApis.handleIncrementalAlterConfigs/authorizeAlterResource: ALTER_CONFIGS on the TOPIC else "
        "TOPIC_AUTHORIZATION_FAILED, on CLUSTER for BROKER else CLUSTER_AUTHORIZATION_FAILED",
    45: "ControllerApis.handleAlterPartitionReassignments: ALTER on CLUSTER else CLUSTER_AUTHORIZATION_FAILED (top "
        "level and per partition)",
    46: "ControllerApis.handleListPartitionReassignments: DESCRIBE on CLUSTER else CLUSTER_AUTHORIZATION_FAILED",
    49: "ControllerApis.handleAlterClientQuotas: ALTER_CONFIGS on CLUSTER else CLUSTER_AUTHORIZATION_FAILED per entry",
    51: "ControllerApis.handleAlterUserScramCredentials: ALTER on CLUSTER else CLUSTER_AUTHORIZATION_FAILED per user",
    52: "ControllerApis.handleVote: CLUSTER_ACTION on CLUSTER else top-level CLUSTER_AUTHORIZATION_FAILED",
    53: "ControllerApis.handleBeginQuorumEpoch: CLUSTER_ACTION on CLUSTER else top-level CLUSTER_AUTHORIZATION_FAILED",
    54: "ControllerApis.handleEndQuorumEpoch: CLUSTER_ACTION on CLUSTER else top-level CLUSTER_AUTHORIZATION_FAILED",
    55: "ControllerApis.handleDescribeQuorum: DESCRIBE on CLUSTER else top-level CLUSTER_AUTHORIZATION_FAILED",
    56: "ControllerApis.handleAlterPartitionRequest: CLUSTER_ACTION on CLUSTER else CLUSTER_AUTHORIZATION_FAILED",
    58: "ControllerApis.handleEnvelopeRequest: CLUSTER_ACTION on CLUSTER of the sender else EnvelopeResponse "
        "CLUSTER_AUTHORIZATION_FAILED; the inner request is authorized as the Envelope's principal",
    59: "ControllerApis.handleFetchSnapshot: CLUSTER_ACTION on CLUSTER else top-level CLUSTER_AUTHORIZATION_FAILED",
    62: "ControllerApis.handleBrokerRegistration: CLUSTER_ACTION on CLUSTER else CLUSTER_AUTHORIZATION_FAILED",
    63: "ControllerApis.handleBrokerHeartBeatRequest: CLUSTER_ACTION on CLUSTER else CLUSTER_AUTHORIZATION_FAILED",
    64: "ControllerApis.handleUnregisterBroker: ALTER on CLUSTER else CLUSTER_AUTHORIZATION_FAILED",
    67: "ControllerApis.handleAllocateProducerIdsRequest: CLUSTER_ACTION on CLUSTER else CLUSTER_AUTHORIZATION_FAILED",
}

OTHER_CLUSTER = "some-other-cluster-id"
UNKNOWN_BROKER = 99
CAF, TAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED
PATHS = ("controller", "forwarded")


@dataclass(frozen=True)
class Case:
    """One API: the request (``path`` names its topics apart), the minimal ACLs (for user ``u<key>``), and what
    the refused and the taken answers are."""
    request: Callable[[str], object]
    acls: Callable[[str], list]
    refused: Callable[[object], None]
    taken: Callable[[object], None]


def _top(code):
    def check(r):
        assert r.error_code == code, r
    return check


def _topics(field, code):
    def check(r):
        items = getattr(r, field)
        assert items and all(getattr(i, "error_code") == code for i in items), r
    return check


def _partitions(code, top=0):
    def check(r):
        assert r.error_code == top, r
        parts = [p for t in (getattr(r, "replica_election_results", None) or getattr(r, "responses", None))
                 for p in (getattr(t, "partition_result", None) or getattr(t, "partitions", None))]
        assert parts and all(p.error_code == code for p in parts), r
    return check


def _cluster(op):
    return lambda user: [cluster_acl(user, op)]


def _topic(op, name):
    return lambda user: [acl(user, ResourceType.TOPIC, n, op) for n in (f"{name}-{p}" for p in PATHS)]


def _created_without_configs(r):
    """CREATE on the topic without DESCRIBE_CONFIGS: created, its configs withheld (ReplicationControlManager)."""
    (t,) = r.topics
    assert t.error_code == 0 and t.topic_config_error_code == TAF, t
    assert t.num_partitions == -1 and t.replication_factor == -1 and t.configs == [], t


def _kraft(request_type, **fields):
    """A KRaft RPC naming another cluster: once past authorization it is refused as INCONSISTENT_CLUSTER_ID, so
    the node's quorum is never disturbed."""
    return Case(lambda path: request_type(cluster_id=OTHER_CLUSTER, **fields), _cluster(AclOperation.CLUSTER_ACTION),
                _top(CAF), _top(ErrorCode.INCONSISTENT_CLUSTER_ID))


_QUORUM = [dq.TopicData(topic_name=METADATA_TOPIC, partitions=[dq.PartitionData(partition_index=0)])]

CASES: dict[int, Case] = {
    1: _kraft(FetchRequest, replica_id=-1, max_wait_ms=0, topics=[]),
    19: Case(lambda path: CreateTopicsRequest(topics=[ct.CreatableTopic(name=f"made-{path}", num_partitions=1,
                                                                       replication_factor=1)], timeout_ms=5000),
             _topic(AclOperation.CREATE, "made"), _topics("topics", TAF), _created_without_configs),
    20: Case(lambda path: DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=f"gone-{path}")], timeout_ms=5000),
             _topic(AclOperation.DELETE, "gone"), _topics("responses", TAF), _topics("responses", 0)),
    33: Case(lambda path: AlterConfigsRequest(validate_only=True, resources=[ac.AlterConfigsResource(
                 resource_type=2, resource_name=f"conf-{path}",
                 configs=[ac.AlterableConfig(name="retention.ms", value="1000")])]),
             _topic(AclOperation.ALTER_CONFIGS, "conf"), _topics("responses", TAF), _topics("responses", 0)),
    37: Case(lambda path: CreatePartitionsRequest(topics=[cp.CreatePartitionsTopic(name=f"grow-{path}", count=2,
                                                                                   assignments=None)],
                                                  timeout_ms=5000, validate_only=True),
             _topic(AclOperation.ALTER, "grow"), _topics("results", TAF), _topics("results", 0)),
    43: Case(lambda path: ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
                 el.TopicPartitions(topic="no-such-topic", partitions=[0])]),
             _cluster(AclOperation.ALTER), _partitions(CAF, CAF),
             _partitions(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
    44: Case(lambda path: IncrementalAlterConfigsRequest(validate_only=True, resources=[iac.AlterConfigsResource(
                 resource_type=2, resource_name=f"conf-{path}",
                 configs=[iac.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])]),
             _topic(AclOperation.ALTER_CONFIGS, "conf"), _topics("responses", TAF), _topics("responses", 0)),
    45: Case(lambda path: AlterPartitionReassignmentsRequest(timeout_ms=5000, topics=[apr.ReassignableTopic(
                 name="no-such-topic", partitions=[apr.ReassignablePartition(partition_index=0, replicas=[1])])]),
             _cluster(AclOperation.ALTER), _partitions(CAF, CAF),
             _partitions(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
    46: Case(lambda path: ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None),
             _cluster(AclOperation.DESCRIBE), _top(CAF), _top(0)),
    49: Case(lambda path: AlterClientQuotasRequest(validate_only=True, entries=[acq.EntryData(
                 entity=[acq.EntityData(entity_type="user", entity_name="someone")],
                 ops=[acq.OpData(key="producer_byte_rate", value=1024.0, remove=False)])]),
             _cluster(AclOperation.ALTER_CONFIGS), _topics("entries", CAF), _topics("entries", 0)),
    51: Case(lambda path: AlterUserScramCredentialsRequest(
                 deletions=[auc.ScramCredentialDeletion(name="no-such-user", mechanism=2)], upsertions=[]),
             _cluster(AclOperation.ALTER), _topics("results", CAF),
             _topics("results", ErrorCode.RESOURCE_NOT_FOUND)),
    52: _kraft(VoteRequest, voter_id=1, topics=[]),
    53: _kraft(BeginQuorumEpochRequest, voter_id=1, topics=[]),
    54: _kraft(EndQuorumEpochRequest, topics=[]),
    55: Case(lambda path: DescribeQuorumRequest(topics=_QUORUM), _cluster(AclOperation.DESCRIBE), _top(CAF),
             lambda r: (_top(0)(r), _topics_quorum_led_by_node_1(r))),
    56: Case(lambda path: AlterPartitionRequest(broker_id=UNKNOWN_BROKER, broker_epoch=5, topics=[]),
             _cluster(AclOperation.CLUSTER_ACTION), _top(CAF), _top(ErrorCode.STALE_BROKER_EPOCH)),
    59: _kraft(FetchSnapshotRequest, replica_id=2, topics=[]),
    62: Case(lambda path: BrokerRegistrationRequest(broker_id=UNKNOWN_BROKER, cluster_id=OTHER_CLUSTER,
                                                    incarnation_id=b"\x07" * 16, listeners=[], rack=None),
             _cluster(AclOperation.CLUSTER_ACTION), _top(CAF), _top(ErrorCode.INCONSISTENT_CLUSTER_ID)),
    63: Case(lambda path: BrokerHeartbeatRequest(broker_id=UNKNOWN_BROKER, broker_epoch=5),
             _cluster(AclOperation.CLUSTER_ACTION), _top(CAF), _top(ErrorCode.STALE_BROKER_EPOCH)),
    64: Case(lambda path: UnregisterBrokerRequest(broker_id=UNKNOWN_BROKER),
             _cluster(AclOperation.ALTER), _top(CAF), _top(ErrorCode.BROKER_ID_NOT_REGISTERED)),
    67: Case(lambda path: AllocateProducerIdsRequest(broker_id=UNKNOWN_BROKER, broker_epoch=5),
             _cluster(AclOperation.CLUSTER_ACTION), _top(CAF), _top(ErrorCode.BROKER_ID_NOT_REGISTERED)),
}


def _topics_quorum_led_by_node_1(r):
    (partition,) = r.topics[0].partitions
    assert partition.error_code == 0 and partition.leader_id == 1, r


ACL_APIS = {29, 30, 31}  # DescribeAcls, CreateAcls, DeleteAcls: tests/integration/test_acl_admin.py
# the broker forwards these (broker/apis/forwarding.py, and AlterConfigs/IncrementalAlterConfigs but for their
# BROKER_LOGGER resources); CreateAcls/DeleteAcls (30, 31) are covered with the ACL admin APIs
FORWARDED_HERE = sorted((set(FORWARDED) - ACL_APIS) | {33, 44})
SENT = [(key, "controller") for key in CASES] + [(key, "forwarded") for key in FORWARDED_HERE]
# users: "nobody" without any ACL, "u<key>" with the key's minimal ACL, "forwarder" with CLUSTER_ACTION (Envelopes)
USERS = ["nobody", "forwarder", "lister", "creator", "describer", "cluster-creator"] + [f"u{key}" for key in CASES]
TOPICS = [f"{name}-{path}" for name in ("gone", "grow", "conf") for path in PATHS] + ["by-id"]


def test_rows_cover_every_api_of_the_controller_listener_and_every_forwarded_one():
    assert set(ROWS) == (set(CONTROLLER_LISTENER_HANDLERS) | set(FORWARDED)) - ACL_APIS
    # every API with a CLUSTER operation is sent without and with it, on the controller listener
    assert set(CLUSTER_OPERATION) - {58} - ACL_APIS <= set(CASES)
    assert set(CASES) == set(CONTROLLER_LISTENER_HANDLERS) - {17, 18, 36, 58} - ACL_APIS


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    acls = [cluster_acl("forwarder", AclOperation.CLUSTER_ACTION), cluster_acl("lister", AclOperation.DESCRIBE),
            acl("creator", ResourceType.TOPIC, "enveloped-", AclOperation.CREATE, pattern=PatternType.PREFIXED),
            acl("describer", ResourceType.TOPIC, "by-id", AclOperation.DESCRIBE),
            cluster_acl("cluster-creator", AclOperation.CREATE),
            acl("cluster-creator", ResourceType.TOPIC, "described", AclOperation.DESCRIBE_CONFIGS)]
    for key, case in CASES.items():
        acls += case.acls(f"u{key}")
    with AuthzNode(tmp_path_factory.mktemp("authz-controller"), USERS, acls,
                   controller_listener="SASL_PLAINTEXT") as n:
        created = n.call("admin", CreateTopicsRequest(topics=[
            ct.CreatableTopic(name=t, num_partitions=1, replication_factor=1) for t in TOPICS], timeout_ms=10000), 7)
        assert all(t.error_code == 0 for t in created.topics), created
        yield n


def _version(key: int, path: str) -> int:
    return (CONTROLLER_LISTENER_HANDLERS if path == "controller" else HANDLERS)[key].versions[1]


@pytest.mark.parametrize("key,path", SENT, ids=[f"{k}-{p}" for k, p in SENT])
def test_without_and_with_the_minimal_acl(node, key, path):
    case = CASES[key]
    version = _version(key, path)
    controller = path == "controller"
    case.refused(node.call("nobody", case.request(path), version, controller=controller))
    case.taken(node.call(f"u{key}", case.request(path), version, controller=controller))


def _topic_names(node) -> set[str]:
    return {t.name for t in node.call("admin", MetadataRequest(topics=None), 12).topics}


def test_a_refused_create_or_delete_changes_nothing(node):
    """What the refusals leave behind: no topic made for ``nobody``, none deleted; an unknown topic is refused
    alike (a principal that may not describe it does not learn whether it exists)."""
    made = CreateTopicsRequest(topics=[ct.CreatableTopic(name="nobodys", num_partitions=1, replication_factor=1)])
    for controller in (True, False):
        (t,) = node.call("nobody", made, 7, controller=controller).topics
        assert (t.error_code, t.error_message) == (TAF, "Authorization failed.")
        r = node.call("nobody", DeleteTopicsRequest(topics=[dt.DeleteTopicState(name="grow-controller"),
                                                            dt.DeleteTopicState(name="never-was")]), 6,
                      controller=controller)
        assert sorted((x.name, x.error_code) for x in r.responses) == [("grow-controller", TAF), ("never-was", TAF)]
    assert "nobodys" not in _topic_names(node) and "grow-controller" in _topic_names(node)


def test_a_topic_named_by_id_is_named_back_only_to_whom_may_describe_it(node):
    """DeleteTopics v6 by id without DELETE: TOPIC_AUTHORIZATION_FAILED, with the topic's name only for a principal
    that may DESCRIBE it (ControllerApis.deleteTopics never reveals an id's name otherwise)."""
    topic_id = next(t.topic_id for t in node.call("admin", MetadataRequest(
        topics=[MetadataRequestTopic(name="by-id")]), 12).topics)
    request = DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=None, topic_id=topic_id)], timeout_ms=5000)
    answers = {user: [(r.name, r.topic_id, r.error_code) for r in node.call(user, request, 6).responses]
               for user in ("nobody", "describer")}
    assert answers == {"nobody": [(None, topic_id, TAF)], "describer": [("by-id", topic_id, TAF)]}
    assert "by-id" in _topic_names(node)


def test_create_on_the_cluster_and_describe_configs_on_the_topic_return_its_configs(node):
    """CREATE on the cluster allows any topic; the configs come back only where DESCRIBE_CONFIGS allows them."""
    r = node.call("cluster-creator", CreateTopicsRequest(topics=[
        ct.CreatableTopic(name=n, num_partitions=2, replication_factor=1) for n in ("described", "undescribed")],
        timeout_ms=5000), 7)
    by_name = {t.name: t for t in r.topics}
    described, undescribed = by_name["described"], by_name["undescribed"]
    assert described.error_code == undescribed.error_code == 0
    assert described.topic_config_error_code == 0 and described.num_partitions == 2
    assert "retention.ms" in {c.name for c in described.configs}
    assert undescribed.topic_config_error_code == TAF and undescribed.configs == []


def test_a_broker_resource_needs_alter_configs_on_the_cluster(node):
    r = node.call("u44", IncrementalAlterConfigsRequest(validate_only=True, resources=[iac.AlterConfigsResource(
        resource_type=4, resource_name="1", configs=[iac.AlterableConfig(name="log.cleaner.threads",
                                                                         config_operation=0, value="2")])]), 1)
    assert r.responses[0].error_code == CAF


def test_a_broker_logger_needs_alter_configs_on_the_cluster(node):
    """IncrementalAlterConfigs' BROKER_LOGGER resources are answered by the broker itself (ConfigAdminManager):
    ALTER_CONFIGS on the cluster (RuntimeLoggerManager), as ``u49`` holds, else CLUSTER_AUTHORIZATION_FAILED."""
    request = IncrementalAlterConfigsRequest(validate_only=True, resources=[iac.AlterConfigsResource(
        resource_type=8, resource_name="1", configs=[iac.AlterableConfig(name="odradek", config_operation=0,
                                                                         value="DEBUG")])])
    assert [r.error_code for r in node.call("nobody", request, 1).responses] == [CAF]
    assert [r.error_code for r in node.call("u49", request, 1).responses] == [0]


def test_the_sasl_exchange_and_api_versions_need_no_acl(node):
    """SaslHandshake and SaslAuthenticate (the connection's login, done by ``call``) and ApiVersions are answered
    for a principal without any ACL, on the controller listener the controller's table."""
    r = node.call("nobody", ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3,
                  controller=True)
    assert r.error_code == 0 and {a.api_key for a in r.api_keys} == set(CONTROLLER_LISTENER_HANDLERS)


# ---- impersonation --------------------------------------------------------------------------------------------

def _envelope(inner, version: int, principal: str) -> EnvelopeRequest:
    spec = APIS[inner.API_KEY]
    header = RequestHeader(inner.API_KEY, version, 11, "forwarded-client")
    return EnvelopeRequest(request_data=header.encode(spec.request_header_version(version)) + inner.encode(version),
                           request_principal=principal_data(principal).encode(0),
                           client_host_address=ipaddress.ip_address("127.0.0.1").packed)


def _inner(envelope_response, inner_type, version: int):
    assert envelope_response.error_code == 0, envelope_response
    spec = APIS[inner_type.API_KEY]
    data = memoryview(bytes(envelope_response.response_data))
    _, pos = ResponseHeader.decode_from(data, 0, spec.response_header_version(version))
    return spec.response.decode(data[pos:], version)


def test_an_envelope_needs_cluster_action_and_its_request_runs_as_the_envelope_principal(node):
    listing = ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None)
    # a client claiming to forward for the super user: refused before the inner request is looked at
    r = node.call("nobody", _envelope(listing, 0, "User:admin"), 0, controller=True)
    assert r.error_code == CAF and not r.response_data
    # a node forwarding: the inner request is authorized as the principal it names
    assert _inner(node.call("forwarder", _envelope(listing, 0, "User:nobody"), 0, controller=True),
                  ListPartitionReassignmentsRequest, 0).error_code == CAF
    assert _inner(node.call("forwarder", _envelope(listing, 0, "User:lister"), 0, controller=True),
                  ListPartitionReassignmentsRequest, 0).error_code == 0
    made = CreateTopicsRequest(topics=[ct.CreatableTopic(name="enveloped-1", num_partitions=1, replication_factor=1)],
                               timeout_ms=5000)
    (t,) = _inner(node.call("forwarder", _envelope(made, 7, "User:nobody"), 0, controller=True),
                  CreateTopicsRequest, 7).topics
    assert t.error_code == TAF
    (t,) = _inner(node.call("forwarder", _envelope(made, 7, "User:creator"), 0, controller=True),
                  CreateTopicsRequest, 7).topics
    assert t.error_code == 0 and t.topic_config_error_code == TAF


def test_a_client_cannot_register_a_broker_or_vote(node):
    """A BrokerRegistration naming this cluster, from a principal without CLUSTER_ACTION, registers nothing; a Vote
    and a KRaft Fetch naming it are refused before the Raft driver sees them (the node still leads its epoch)."""
    before = node.call("admin", DescribeQuorumRequest(topics=_QUORUM), 2).topics[0].partitions[0]
    r = node.call("nobody", BrokerRegistrationRequest(broker_id=7, cluster_id=node.broker.broker.cluster_id,
                                                      incarnation_id=b"\x07" * 16, listeners=[], rack=None), 4,
                  controller=True)
    assert r.error_code == CAF
    vote = VoteRequest(cluster_id=node.broker.broker.cluster_id, voter_id=1, topics=[])
    assert node.call("nobody", vote, 2, controller=True).error_code == CAF
    fetch = FetchRequest(cluster_id=node.broker.broker.cluster_id, replica_id=-1, topics=[])
    assert node.call("nobody", fetch, 17, controller=True).error_code == CAF
    after = node.call("admin", DescribeQuorumRequest(topics=_QUORUM), 2).topics[0].partitions[0]
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch) == (1, before.leader_epoch)
    assert 7 not in {b.node_id for b in node.call("admin", MetadataRequest(topics=[]), 12).brokers}


def test_a_plaintext_controller_listener_is_anonymous_and_anonymous_is_a_super_user(tmp_path):
    """Kafka deployments with an authorizer and a PLAINTEXT controller listener list User:ANONYMOUS in
    super.users (the nodes' own votes and registrations arrive as ANONYMOUS); the harness does the same."""
    with AuthzNode(tmp_path, ["nobody"], controller_listener="PLAINTEXT") as n:
        assert n.call(None, VoteRequest(cluster_id=OTHER_CLUSTER, voter_id=1, topics=[]), 2,
                      controller=True).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
        assert n.call(None, DescribeQuorumRequest(topics=_QUORUM), 2, controller=True).error_code == 0
        assert n.call("nobody", DescribeQuorumRequest(topics=_QUORUM), 2).error_code == CAF  # the broker listener


# ---- end to end ---------------------------------------------------------------------------------------------

def test_a_forwarded_create_topics_runs_as_the_client_across_a_secured_cluster(tmp_path):
    """Three combined nodes, SASL_SSL/SCRAM between brokers, mTLS on the quorum, StandardAuthorizer with the
    nodes' own principals as super users: the cluster forms and serves. A CreateTopics sent to a broker that is
    not the active controller travels in an Envelope over the mTLS controller listener and is authorized there as
    the client: a user with CREATE on the topic makes it, a user without gets TOPIC_AUTHORIZATION_FAILED."""
    from broker.network.blocking_request import request
    from broker.testing.embedded_cluster import EmbeddedCluster
    from broker.testing.secure_cluster import MECHANISM
    from broker.security.node_links import LinkSecurity

    grant = acl("creator", ResourceType.TOPIC, "granted", AclOperation.CREATE)
    with EmbeddedCluster(brokers=3, data_dir=tmp_path, security="SASL_SSL", authorizer=True,
                         users=("creator", "stranger"), acls=(grant,)) as c:
        controller = c.controller()
        broker = next(i for i in sorted(c.broker_ports) if i != controller)
        setup = c._security
        probe = setup.probe_security()

        def create(user: str, topic: str):
            security = LinkSecurity(ssl=probe.ssl, mechanism=MECHANISM, username=user,
                                    password=setup.passwords[user])
            body = CreateTopicsRequest(topics=[ct.CreatableTopic(name=topic, num_partitions=1, replication_factor=3)],
                                       timeout_ms=10000)
            (result,) = request(c.broker_ports[broker], body, 7, timeout=20, security=security).topics
            return result

        granted = create("creator", "granted")
        assert granted.error_code == 0 and granted.topic_config_error_code == TAF, granted
        refused = create("stranger", "refused")
        assert (refused.error_code, refused.error_message) == (TAF, "Authorization failed."), refused
        assert create("stranger", "granted").error_code == TAF  # the ACL names one user only
        md = request(c.broker_ports[broker], MetadataRequest(topics=[MetadataRequestTopic(name="granted"),
                                                                      MetadataRequestTopic(name="refused")],
                                                     allow_auto_topic_creation=False),
                     12, timeout=10, security=probe)
        assert {t.name: t.error_code for t in md.topics} == {"granted": 0,
                                                             "refused": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # a real client sees Kafka's error: confluent-kafka's AdminClient as the stranger
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(c.client_config("stranger"))
        with pytest.raises(KafkaException) as refused_by_client:
            admin.create_topics([NewTopic("refused-too", 1, 3)])["refused-too"].result(20)
        assert refused_by_client.value.args[0].code() == ErrorCode.TOPIC_AUTHORIZATION_FAILED
