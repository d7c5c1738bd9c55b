"""DeleteGroups: v0-2.

Behaviour (GroupCoordinatorShard.deleteGroups): a group can be deleted when it is empty (classic:
Empty; consumer: no members), else NON_EMPTY_GROUP; unknown groups GROUP_ID_NOT_FOUND; deleting
writes tombstones for every committed offset and for the group's records, so compaction removes
them from __consumer_offsets.
Authorization (KafkaApis.handleDeleteGroupsRequest): the distinct group ids are split by GROUP DELETE; the
coordinator's results for the authorized ones come first, then GROUP_AUTHORIZATION_FAILED for the others.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
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
    names = list(dict.fromkeys(req.groups_names))  # distinct, in request order
    deletable = ctx.filter_authorized(AclOperation.DELETE, ResourceType.GROUP, [g for g in names if g is not None])
    for gid in names:
        if gid is not None and gid not in deletable:
            continue
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
    out += [DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            for g in names if g is not None and g not in deletable]
    return DeleteGroupsResponse(results=out)
