"""DeleteGroups: v0-2.

Behaviour (GroupCoordinatorShard.deleteGroups): a group can be deleted when it is empty (classic:
Empty; consumer: no members), else NON_EMPTY_GROUP; unknown groups GROUP_ID_NOT_FOUND; deleting
writes tombstones for every committed offset and for the group's records, so compaction removes
them from __consumer_offsets.
"""

from __future__ import annotations

from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.generated.messages.delete_groups_response import DeletableGroupResult

API_KEY = 42
VERSIONS = (0, 2)


async def handle(ctx, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    groups = ctx.groups
    out = []
    for gid in req.groups_names:
        if gid is None:
            out.append(DeletableGroupResult(group_id=gid, error_code=ErrorCode.INVALID_GROUP_ID))
            continue
        try:
            res = await groups.run(gid, GroupCoordinatorShard.delete_groups, [gid])
            if res.error is not None:
                raise res.error
            out.extend(DeletableGroupResult(group_id=g, error_code=code) for g, code in res.response)
        except GroupError as exc:
            out.append(DeletableGroupResult(group_id=gid, error_code=exc.code))
    return DeleteGroupsResponse(results=out)
