"""ShareGroupHeartbeat: v1 (KIP-932, Kafka 4.1+; v0 was the unstable preview and is gone).

Behaviour (GroupMetadataManager.shareGroupHeartbeat, run on the group's shard: cluster/groups/group_share.py):
epoch 0 joins with a client-made member id (creating the group), -1 leaves; the SimpleAssignor assigns only
partitions whose share state is initialized, and a heartbeat that finds subscribed partitions without state lists
an InitializeShareGroupState in the result's ``share_state`` for the share coordinator.
Errors: INVALID_REQUEST (empty group id, empty or over-36-character member id, empty rack, epoch below -1, a join
without topics), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED (group.share.max.size),
GROUP_ID_NOT_FOUND for a group of another type or a heartbeat with an epoch to an unknown group; UNSUPPORTED_VERSION
while ``share.version`` is 0 (broker/apis/share_gate.py, before this handler).
Authorization (KafkaApis.handleShareGroupHeartbeat, with KAFKA-18817): GROUP READ, else GROUP_AUTHORIZATION_FAILED;
then, when subscribed topic names are given, TOPIC DESCRIBE on each of them, else TOPIC_AUTHORIZATION_FAILED (the
member is left as it was).
"""

from __future__ import annotations

import logging

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

API_KEY = 76
VERSIONS = (1, 1)

log = logging.getLogger("odradek.groups")


async def handle(ctx, req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    if req.group_id is not None and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.subscribed_topic_names:
        wanted = set(req.subscribed_topic_names)
        if len(ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)) < len(wanted):
            return ShareGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    try:
        if not req.group_id or not req.group_id.strip():
            raise GroupError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        res = await ctx.park(ctx.groups.run(req.group_id, GroupCoordinatorShard.share_group_heartbeat, req_ctx(ctx),
                                            req))
        if res.error is not None:
            raise res.error
        return res.response
    except GroupError as exc:
        # one line per refused heartbeat (bad input, a fenced or unknown member): the group is left as it was
        log.info("ShareGroupHeartbeat of member %r (epoch %d) of group %r from %s refused: %s %s", req.member_id,
                 req.member_epoch, req.group_id, ctx.client_id, ErrorCode(exc.code).name, exc.message)
        return ShareGroupHeartbeatResponse(error_code=exc.code, error_message=exc.message)
