"""DeleteGroups: v0-2.

Behaviour (GroupCoordinatorShard.deleteGroups): a group can be deleted when it is empty (classic:
Empty; consumer: no members), else NON_EMPTY_GROUP; unknown groups GROUP_ID_NOT_FOUND; deleting
writes tombstones for every committed offset and for the group's records, so compaction removes
them from __consumer_offsets. A share group's share state is deleted first, through the share coordinators
(DeleteShareGroupState); the group is deleted only if that succeeded, else its error is the group's
(GroupCoordinatorService.deleteGroups' share step).
Authorization (KafkaApis.handleDeleteGroupsRequest): the distinct group ids are split by GROUP DELETE; the
coordinator's results for the authorized ones come first, then GROUP_AUTHORIZATION_FAILED for the others.
"""

from __future__ import annotations

import logging

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode
from protocol.generated.messages import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.generated.messages.delete_groups_response import DeletableGroupResult

API_KEY = 42
VERSIONS = (0, 2)

log = logging.getLogger("odradek.groups")


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
            deleted = await ctx.park(groups.delete_group(gid))
            out.extend(DeletableGroupResult(group_id=g, error_code=code) for g, code in deleted)
        except GroupError as exc:
            out.append(DeletableGroupResult(group_id=gid, error_code=exc.code))
    out += [DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            for g in names if g is not None and g not in deletable]
    for r in out:
        if r.error_code:  # one line per group not deleted; it is left as it was
            log.info("DeleteGroups of group %r from %s refused: %s", r.group_id, ctx.client_id,
                     ErrorCode(r.error_code).name)
    return DeleteGroupsResponse(results=out)
