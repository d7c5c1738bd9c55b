"""Heartbeat: v0-4.

Behaviour (GroupMetadataManager.classicGroupHeartbeat): restarts the member's session timer;
REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member must rejoin);
ILLEGAL_GENERATION for a stale generation, UNKNOWN_MEMBER_ID for an unknown member or group,
FENCED_INSTANCE_ID for a replaced static member; classic members of a consumer-protocol group are
told to rejoin when their assignment changes.
Authorization (KafkaApis.handleHeartbeatRequest): GROUP READ, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import HeartbeatRequest, HeartbeatResponse

API_KEY = 12
VERSIONS = (0, 4)


async def handle(ctx, req: HeartbeatRequest) -> HeartbeatResponse:
    if req.group_id is not None and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not req.group_id:
        return HeartbeatResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    try:
        res = await ctx.park(ctx.groups.run(req.group_id, GroupCoordinatorShard.heartbeat, req_ctx(ctx), req))
    except GroupError as exc:
        if exc.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return HeartbeatResponse(error_code=0)  # GroupCoordinatorService: the group is loading, answer blindly
        return HeartbeatResponse(error_code=exc.code)
    if res.error is not None:
        return HeartbeatResponse(error_code=res.error.code)
    return res.response
