"""DescribeGroups: v0-6.

Behaviour (GroupMetadataManager.describeGroups): state, protocol type, and members (client id, host,
group.instance.id v4+, assignment); the protocol name and each member's metadata only when the group
is Stable. An unknown group (or one that is not a classic group) is described as Dead with no
members; v6 answers GROUP_ID_NOT_FOUND instead (KIP-1043). Empty group id: INVALID_GROUP_ID.
Authorization (KafkaApis.handleDescribeGroupsRequest): GROUP DESCRIBE per group; the groups without it come
first, as DescribeGroupsResponse.groupError (GROUP_AUTHORIZATION_FAILED, empty state and protocol), then the
described ones; v3+ include_authorized_operations fills authorized_operations (AuthHelper.authorizedOperations
over the GROUP operations) of the groups described without error.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.generated.messages.describe_groups_response import DescribedGroup

API_KEY = 15
VERSIONS = (0, 6)


async def handle(ctx, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    groups = ctx.groups
    denied, out = [], []
    for gid in req.groups:
        if gid is None:
            out.append(DescribedGroup(group_id=None, error_code=ErrorCode.INVALID_GROUP_ID))
            continue
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            denied.append(DescribedGroup(group_id=gid, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[]))
            continue
        try:
            _, shard = await ctx.park(groups.shard_for(gid))
            d = shard.describe_groups([gid])[0]
        except GroupError as exc:
            d = DescribedGroup(group_id=gid, error_code=exc.code, members=[])
        if d.group_state == "Dead" and not d.members and not d.error_code and ctx.version >= 6:
            d.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            d.error_message = f"Group {gid} not found."
        if req.include_authorized_operations and ctx.version >= 3 and not d.error_code:
            d.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, gid)
        out.append(d)
    return DescribeGroupsResponse(groups=denied + out)
