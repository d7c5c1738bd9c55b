"""FindCoordinator: v0-6 (v4+ batches keys).

Behaviour (KafkaApis.getCoordinator): a GROUP key is coordinated by the leader of its
``__consumer_offsets`` partition, a TRANSACTION key (a transactional id) by the leader of its
``__transaction_state`` partition (each topic created first when missing), at that broker's endpoint for the
request's listener; COORDINATOR_NOT_AVAILABLE while the topic cannot be created (fewer live brokers than its
replication factor) or the partition has no live leader. A SHARE key (type 2, v6+, KIP-932) is a share-partition
``group:topicId:partition``, coordinated by the leader of its ``__share_group_state`` partition
(ShareCoordinatorService.partitionFor); below v6 or malformed it is INVALID_REQUEST, as is any other key type.
Advertising this API matters beyond groups: librdkafka only compresses with LZ4 when FindCoordinator
is advertised.
Authorization (KafkaApis.getCoordinator, per key, before anything else): GROUP DESCRIBE on a GROUP key, else
GROUP_AUTHORIZATION_FAILED; TRANSACTIONAL_ID DESCRIBE on a TRANSACTION key, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; CLUSTER_ACTION on the cluster for a SHARE key (brokers' persisters), else
CLUSTER_AUTHORIZATION_FAILED; the coordinator then is Node.noNode (-1, "", -1).
"""

from __future__ import annotations

import logging

from broker.share.share_coordinator_service import ShareServiceError
from broker.transactions.txn_service import TxnServiceError
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.generated.messages.find_coordinator_response import Coordinator
from cluster.share.share_coordinator import parse_coordinator_key
from protocol.topics import GROUP_METADATA_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC

API_KEY = 10
VERSIONS = (0, 6)

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _not_available(key: str) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       error_message="The coordinator is not available.")


def _denied(ctx, key: str, key_type: int) -> int:
    """The authorization error of a key (0: allowed)."""
    if key_type == GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if key_type == SHARE and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return 0


log = logging.getLogger("odradek.coordinator")


def _invalid(key: str, message: str) -> Coordinator:
    log.info("FindCoordinator of key %r refused: INVALID_REQUEST %s", key, message)
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                       error_message=message)


async def _coordinator(ctx, key: str, key_type: int) -> Coordinator:
    if key_type == SHARE and ctx.version < 6:
        return _invalid(key, "Share coordinator keys need FindCoordinator v6 or later")
    denied = _denied(ctx, key, key_type)
    if denied:
        # v4+ carries no message for it; v0-3 are answered with the error's own message (getErrorResponse)
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=denied,
                           error_message=MESSAGES[ErrorCode(denied)] if ctx.version < 4 else None)
    if key_type == GROUP:
        service, topic_name = ctx.groups, GROUP_METADATA_TOPIC
    elif key_type == TRANSACTION:
        service, topic_name = ctx.txns, TRANSACTION_STATE_TOPIC
    elif key_type == SHARE:
        if parse_coordinator_key(key) is None:
            return _invalid(key, f"Invalid share coordinator key {key!r}: expected group:topicId:partition")
        service, topic_name = ctx.share_coordinator, SHARE_GROUP_STATE_TOPIC
    else:
        return _invalid(key, f"Unsupported key type {key_type}")
    try:
        await ctx.park(service.ensure_topic())
    except (GroupError, TxnServiceError, ShareServiceError):
        return _not_available(key)
    image = ctx.image
    topic = image.topic(topic_name)
    info = topic.partitions.get(service.partition_for(key)) if topic is not None else None
    leader = info.leader if info is not None else -1
    if leader == ctx.node_id:
        ep = ctx.handles.advertised_endpoint(ctx.listener)
        return Coordinator(key=key, node_id=leader, host=ep.host, port=ep.port, error_code=0)
    broker = image.brokers.get(leader)
    ep = broker.endpoint(ctx.listener) if broker is not None and not broker.fenced else None
    if ep is None:
        return _not_available(key)
    return Coordinator(key=key, node_id=leader, host=ep.host, port=ep.port, error_code=0)


async def handle(ctx, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.version >= 4:
        return FindCoordinatorResponse(coordinators=[await _coordinator(ctx, k, req.key_type)
                                                     for k in req.coordinator_keys])
    c = await _coordinator(ctx, req.key, req.key_type)
    return FindCoordinatorResponse(error_code=c.error_code, error_message=c.error_message, node_id=c.node_id,
                                   host=c.host, port=c.port)
