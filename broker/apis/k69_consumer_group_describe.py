"""ConsumerGroupDescribe: v0.

Behaviour (GroupMetadataManager.consumerGroupDescribe): state, group and assignment epochs, the
assignor, and every member's subscription (names and regex), current assignment and target
assignment with topic names; GROUP_ID_NOT_FOUND for unknown groups and for classic groups (admin
clients then fall back to DescribeGroups), INVALID_GROUP_ID for an empty id.
"""

from __future__ import annotations

from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode
from protocol.generated.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from protocol.generated.messages.consumer_group_describe_response import DescribedGroup

API_KEY = 69
VERSIONS = (0, 0)


async def handle(ctx, req: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    groups = ctx.groups
    out = []
    for gid in req.group_ids:
        if not gid:
            out.append(DescribedGroup(group_id=gid, error_code=ErrorCode.INVALID_GROUP_ID, members=[]))
            continue
        try:
            _, shard = await groups.shard_for(gid)
            d = shard.consumer_group_describe([gid])[0]
        except GroupError as exc:
            d = DescribedGroup(group_id=gid, error_code=exc.code, members=[])
        if req.include_authorized_operations:
            d.authorized_operations = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE (no authorizer)
        out.append(d)
    return ConsumerGroupDescribeResponse(groups=out)
