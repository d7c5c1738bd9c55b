"""JoinGroup: v0-9.

Behaviour (GroupCoordinatorService.joinGroup, GroupMetadataManager.classicGroupJoin): empty group id
INVALID_GROUP_ID; a session timeout outside group.min/max.session.timeout.ms INVALID_SESSION_TIMEOUT;
v4+ dynamic members first get MEMBER_ID_REQUIRED with their member id; the response is parked until
the rebalance's join phase completes (all members rejoined, the rebalance timeout, or for a new group
group.initial.rebalance.delay.ms); the leader gets every member's metadata; static members
(group.instance.id, v5+) rejoin a stable group without a rebalance; GROUP_MAX_SIZE_REACHED past
group.max.size; a consumer-protocol group answers classic members through the migration path.
Version notes: v0 has no rebalance timeout (the session timeout is used); v7 nullable protocol
name/type; v8 reason; v9 skip_assignment for a static leader rejoining a stable group.
Authorization (KafkaApis.handleJoinGroupRequest): GROUP READ before the coordinator validates anything, else
GROUP_AUTHORIZATION_FAILED (JoinGroupRequest.getErrorResponse: generation -1, empty member id and leader).
"""

from __future__ import annotations

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import JoinGroupRequest, JoinGroupResponse

API_KEY = 11
VERSIONS = (0, 9)


def _finish(resp: JoinGroupResponse, version: int) -> JoinGroupResponse:
    if version < 7 and resp.protocol_name is None:
        resp.protocol_name = ""
    if version >= 7 and resp.protocol_name == "":
        resp.protocol_name = None
    if resp.leader is None:
        resp.leader = ""
    if resp.member_id is None:
        resp.member_id = ""
    return resp


async def handle(ctx, req: JoinGroupRequest) -> JoinGroupResponse:
    groups = ctx.groups
    if ctx.version == 0:
        req.rebalance_timeout_ms = req.session_timeout_ms
    if req.group_id is not None and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _finish(JoinGroupResponse(generation_id=-1, member_id="", leader="", protocol_name="", members=[],
                                         error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED), ctx.version)
    if not req.group_id:
        return _finish(JoinGroupResponse(member_id=req.member_id, error_code=ErrorCode.INVALID_GROUP_ID), ctx.version)
    cfg = groups.config
    if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
        return _finish(JoinGroupResponse(member_id=req.member_id, error_code=ErrorCode.INVALID_SESSION_TIMEOUT),
                       ctx.version)
    try:
        resp = await ctx.park(groups.run_delayed(req.group_id, GroupCoordinatorShard.join_group, req_ctx(ctx), req))
    except GroupError as exc:
        resp = JoinGroupResponse(member_id=req.member_id, error_code=exc.code)
    return _finish(resp, ctx.version)
