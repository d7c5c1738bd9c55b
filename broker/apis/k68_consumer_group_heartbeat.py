"""ConsumerGroupHeartbeat: v0-1 (KIP-848; v1: the consumer generates its member id, KIP-1082, and may
subscribe with a regular expression).

Behaviour (GroupMetadataManager.consumerGroupHeartbeat): epoch 0 joins (creating the group, or
upgrading a classic group of consumer-protocol members when group.consumer.migration.policy allows
it), -1 leaves, -2 is a static member's temporary leave; a changed subscription bumps the group
epoch and the server-side assignor (``uniform`` or ``range``, the member's ServerAssignor or the
first of group.consumer.assignors) computes a new target assignment; each member then reconciles
towards it: partitions still owned by another member are withheld until released, partitions to
revoke must disappear from the member's owned partitions before it moves to the new epoch.
Errors: INVALID_REQUEST for malformed heartbeats, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
GROUP_MAX_SIZE_REACHED (group.consumer.max.size), GROUP_ID_NOT_FOUND for a classic group that
cannot be upgraded; UNSUPPORTED_VERSION when group.coordinator.rebalance.protocols
leaves out ``consumer``. The session (group.consumer.session.timeout.ms) and the rebalance timeout of a
member revoking partitions fence it when they expire.
Authorization (KafkaApis.handleConsumerGroupHeartbeat, Kafka 4.0+ with KAFKA-18813): after the protocol check,
GROUP READ, else GROUP_AUTHORIZATION_FAILED; then, when subscribed topic names are given, TOPIC DESCRIBE on each
of them, else TOPIC_AUTHORIZATION_FAILED (no message, the member is left as it was). With an authorizer the
coordinator is also given the heartbeating member's TOPIC DESCRIBE filter: a regex refreshed by this heartbeat
(new, or the metadata image changed) resolves only to the topics that member may describe, as Kafka's
GroupMetadataManager.refreshRegularExpressions.
"""

from __future__ import annotations

import dataclasses

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

API_KEY = 68
VERSIONS = (0, 1)


async def handle(ctx, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    protocols = str(ctx.config.get("group.coordinator.rebalance.protocols"))
    if "consumer" not in {p.strip().lower() for p in protocols.split(",")}:
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                              error_message="The consumer group protocol is disabled "
                                                            "(group.coordinator.rebalance.protocols).")
    if req.group_id is not None and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.subscribed_topic_names:
        wanted = set(req.subscribed_topic_names)
        if len(ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)) < len(wanted):
            return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if not req.group_id:
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.INVALID_REQUEST,
                                              error_message="GroupId can't be empty.")
    try:
        rctx = req_ctx(ctx)
        if ctx.handles.authorizer is not None:
            rctx = dataclasses.replace(rctx, topic_filter=lambda names: frozenset(
                ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_if_denied=False)))
        res = await ctx.park(ctx.groups.run(req.group_id, GroupCoordinatorShard.consumer_group_heartbeat, rctx, req))
        if res.error is not None:
            raise res.error
        return res.response
    except GroupError as exc:
        return ConsumerGroupHeartbeatResponse(error_code=exc.code, error_message=exc.message)
