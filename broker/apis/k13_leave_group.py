"""LeaveGroup: v0-5.

Behaviour (GroupMetadataManager.classicGroupLeave): v0-2 name one member (member_id), v3+ a batch of
members with per-member errors (KIP-345: static members removed by group.instance.id with an empty
member id, as the admin client does); v5 reasons are logged. The group rebalances without the
members that left. An unknown group answers UNKNOWN_MEMBER_ID per member.
Authorization (KafkaApis.handleLeaveGroupRequest): GROUP READ, else a top-level GROUP_AUTHORIZATION_FAILED and
no members (LeaveGroupRequest.getErrorResponse).
"""

from __future__ import annotations

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import LeaveGroupRequest, LeaveGroupResponse
from protocol.generated.messages.leave_group_request import MemberIdentity
from protocol.generated.messages.leave_group_response import MemberResponse

API_KEY = 13
VERSIONS = (0, 5)


async def handle(ctx, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if req.group_id is not None and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[])
    if ctx.version < 3:
        req.members = [MemberIdentity(member_id=req.member_id)]
    if not req.group_id:
        return LeaveGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID, members=[])
    try:
        res = await ctx.park(ctx.groups.run(req.group_id, GroupCoordinatorShard.leave_group, req_ctx(ctx), req))
        if res.error is not None:
            raise res.error
        resp = res.response
    except GroupError as exc:
        if exc.code == ErrorCode.UNKNOWN_MEMBER_ID:
            resp = LeaveGroupResponse(members=[MemberResponse(member_id=m.member_id,
                                                              group_instance_id=m.group_instance_id,
                                                              error_code=ErrorCode.UNKNOWN_MEMBER_ID)
                                               for m in req.members])
        else:
            resp = LeaveGroupResponse(error_code=exc.code, members=[])
    if ctx.version < 3:
        # one member: its error becomes the top-level error (LeaveGroupResponse's v0-2 shape)
        code = resp.error_code or (resp.members[0].error_code if resp.members else 0)
        return LeaveGroupResponse(error_code=code)
    return resp
