"""What the controller listener requires of whoever sends a request (Kafka's ControllerApis and
KafkaApis.handleEnvelope), and the answer to one that is refused.

``CLUSTER_OPERATION`` is the operation on the CLUSTER resource each API needs (``authHelper.
authorizeClusterOperation``): of the connection's principal for a request sent on the controller listener, of the
Envelope's principal for a forwarded one. The Envelope itself needs CLUSTER_ACTION of the connection (only nodes
forward). The APIs not listed authorize per resource inside their handlers (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs, IncrementalAlterConfigs) or need nothing (ApiVersions, the SASL exchange).

CreateAcls and DeleteAcls need ALTER on the cluster (AclApis), checked here like the others.

``error_response`` is each request's ``getErrorResponse``: the shape Kafka answers an exception in (a top-level
error, or the error repeated per topic, partition, entry or user the request named). The broker answers a
forwarded request with it too when the Envelope itself fails (ForwardingManager: UNKNOWN_SERVER_ERROR).
"""

from __future__ import annotations

from cluster.acls import AclOperation
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated import messages as m
from protocol.generated.messages import alter_client_quotas_response as acq
from protocol.generated.messages import alter_configs_response as ac
from protocol.generated.messages import alter_partition_reassignments_response as apr
from protocol.generated.messages import alter_user_scram_credentials_response as auc
from protocol.generated.messages import create_acls_response as ca
from protocol.generated.messages import create_partitions_response as cp
from protocol.generated.messages import create_topics_response as ct
from protocol.generated.messages import delete_acls_response as da
from protocol.generated.messages import delete_topics_response as dt
from protocol.generated.messages import elect_leaders_response as el
from protocol.generated.messages import fetch_response as fr
from protocol.generated.messages import incremental_alter_configs_response as iac
from protocol.generated.messages import list_partition_reassignments_response as lpr
from protocol.message import Message

CLUSTER_ACTION, ALTER, DESCRIBE = AclOperation.CLUSTER_ACTION, AclOperation.ALTER, AclOperation.DESCRIBE

# API key -> the CLUSTER operation ControllerApis requires (authorizeClusterOperation)
CLUSTER_OPERATION: dict[int, AclOperation] = {
    1: CLUSTER_ACTION,    # Fetch (the KRaft one): handleFetch
    30: ALTER,            # CreateAcls (AclApis.handleCreateAcls)
    31: ALTER,            # DeleteAcls (AclApis.handleDeleteAcls)
    43: ALTER,            # ElectLeaders
    45: ALTER,            # AlterPartitionReassignments
    46: DESCRIBE,         # ListPartitionReassignments
    49: AclOperation.ALTER_CONFIGS,  # AlterClientQuotas
    51: ALTER,            # AlterUserScramCredentials
    52: CLUSTER_ACTION,   # Vote
    53: CLUSTER_ACTION,   # BeginQuorumEpoch
    54: CLUSTER_ACTION,   # EndQuorumEpoch
    55: DESCRIBE,         # DescribeQuorum
    56: CLUSTER_ACTION,   # AlterPartition
    58: CLUSTER_ACTION,   # Envelope (handleEnvelopeRequest, of the connection's principal)
    59: CLUSTER_ACTION,   # FetchSnapshot
    62: CLUSTER_ACTION,   # BrokerRegistration
    63: CLUSTER_ACTION,   # BrokerHeartbeat
    64: ALTER,            # UnregisterBroker
    67: CLUSTER_ACTION,   # AllocateProducerIds
}


def refused_message(request: Message, principal: str) -> str:
    """ClusterAuthorizationException's message (AuthHelper.authorizeClusterOperation / handleEnvelopeRequest)."""
    if request.API_KEY == 58:
        return f"Principal {principal} does not have required CLUSTER_ACTION for envelope"
    return f"Request {type(request).__name__} from {principal} is not authorized."


def cluster_authorization_failed(request: Message, version: int, principal: str) -> Message:
    """The answer to a request whose principal lacks its CLUSTER operation."""
    return error_response(request, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                          refused_message(request, principal))


def error_response(request: Message, version: int, code: int, message: str | None = None) -> Message:
    """``request.getErrorResponse(e)`` for an exception of error ``code`` with ``message`` (ApiError.message;
    Errors.message where Kafka takes the error's default)."""
    default = MESSAGES.get(ErrorCode(code), None)
    message = message if message is not None else default
    builder = _BUILDERS.get(type(request))
    if builder is not None:
        return builder(request, version, code, message, default)
    # a top-level error_code and nothing else (Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, Envelope,
    # AlterPartition, BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AllocateProducerIds)
    return _RESPONSE[type(request)](error_code=code)


_RESPONSE = {m.VoteRequest: m.VoteResponse, m.BeginQuorumEpochRequest: m.BeginQuorumEpochResponse,
             m.EndQuorumEpochRequest: m.EndQuorumEpochResponse, m.FetchSnapshotRequest: m.FetchSnapshotResponse,
             m.EnvelopeRequest: m.EnvelopeResponse, m.AlterPartitionRequest: m.AlterPartitionResponse,
             m.BrokerRegistrationRequest: m.BrokerRegistrationResponse,
             m.BrokerHeartbeatRequest: m.BrokerHeartbeatResponse,
             m.UnregisterBrokerRequest: m.UnregisterBrokerResponse,
             m.AllocateProducerIdsRequest: m.AllocateProducerIdsResponse}


def _fetch(req, version, code, message, default):
    # v13+: the top-level error alone; before, also every partition at the error
    topics = [] if version >= 13 else [
        fr.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
            fr.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1)
            for p in t.partitions])
        for t in req.topics]
    return m.FetchResponse(error_code=code, session_id=req.session_id, responses=topics)


def _describe_quorum(req, version, code, message, default):
    return m.DescribeQuorumResponse(error_code=code, error_message=default, topics=[], nodes=[])


def _elect_leaders(req, version, code, message, default):
    results = [] if req.topic_partitions is None else [
        el.ReplicaElectionResult(topic=t.topic, partition_result=[
            el.PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
        for t in req.topic_partitions]
    return m.ElectLeadersResponse(error_code=code, replica_election_results=results)


def _alter_reassignments(req, version, code, message, default):
    return m.AlterPartitionReassignmentsResponse(error_code=code, error_message=message, responses=[
        apr.ReassignableTopicResponse(name=t.name, partitions=[
            apr.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                              error_message=message) for p in t.partitions])
        for t in req.topics])


def _list_reassignments(req, version, code, message, default):
    return m.ListPartitionReassignmentsResponse(error_code=code, error_message=message, topics=[] if req.topics is None
                                                else [lpr.OngoingTopicReassignment(name=t.name, partitions=[
                                                    lpr.OngoingPartitionReassignment(partition_index=p)
                                                    for p in t.partition_indexes]) for t in req.topics])


def _alter_client_quotas(req, version, code, message, default):
    return m.AlterClientQuotasResponse(entries=[
        acq.EntryData(error_code=code, error_message=default, entity=[
            acq.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])


def _alter_scram(req, version, code, message, default):
    users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
    return m.AlterUserScramCredentialsResponse(results=[
        auc.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message) for u in users])


def _create_topics(req, version, code, message, default):
    return m.CreateTopicsResponse(topics=[
        ct.CreatableTopicResult(name=t.name, error_code=code, error_message=message) for t in req.topics])


def _delete_topics(req, version, code, message, default):
    if version >= 6:
        return m.DeleteTopicsResponse(responses=[
            dt.DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code, error_message=None)
            for t in req.topics])
    return m.DeleteTopicsResponse(responses=[dt.DeletableTopicResult(name=n, error_code=code, error_message=None)
                                             for n in req.topic_names])


def _create_partitions(req, version, code, message, default):
    return m.CreatePartitionsResponse(results=[
        cp.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message) for t in req.topics])


def _alter_configs(req, version, code, message, default):
    return m.AlterConfigsResponse(responses=[
        ac.AlterConfigsResourceResponse(error_code=code, error_message=message, resource_type=r.resource_type,
                                        resource_name=r.resource_name) for r in req.resources])


def _incremental_alter_configs(req, version, code, message, default):
    return m.IncrementalAlterConfigsResponse(responses=[
        iac.AlterConfigsResourceResponse(error_code=code, error_message=message, resource_type=r.resource_type,
                                         resource_name=r.resource_name) for r in req.resources])


def _create_acls(req, version, code, message, default):
    return m.CreateAclsResponse(results=[ca.AclCreationResult(error_code=code, error_message=message)
                                         for _ in req.creations])


def _delete_acls(req, version, code, message, default):
    return m.DeleteAclsResponse(filter_results=[da.DeleteAclsFilterResult(error_code=code, error_message=message,
                                                                          matching_acls=[]) for _ in req.filters])


_BUILDERS = {m.FetchRequest: _fetch, m.DescribeQuorumRequest: _describe_quorum,
             m.ElectLeadersRequest: _elect_leaders, m.AlterPartitionReassignmentsRequest: _alter_reassignments,
             m.ListPartitionReassignmentsRequest: _list_reassignments,
             m.AlterClientQuotasRequest: _alter_client_quotas, m.AlterUserScramCredentialsRequest: _alter_scram,
             m.CreateTopicsRequest: _create_topics, m.DeleteTopicsRequest: _delete_topics,
             m.CreatePartitionsRequest: _create_partitions, m.AlterConfigsRequest: _alter_configs,
             m.IncrementalAlterConfigsRequest: _incremental_alter_configs,
             m.CreateAclsRequest: _create_acls, m.DeleteAclsRequest: _delete_acls}
