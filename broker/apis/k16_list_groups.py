"""ListGroups: v0-5.

Behaviour (GroupMetadataManager.listGroups over every __consumer_offsets partition this broker
leads): group id and protocol type; v4+ the state, filtered case-insensitively by states_filter;
v5+ the group type ("classic", "consumer", "share"), filtered by types_filter. Groups of every type are
listed, including the "simple" groups that only hold committed offsets; a share group's protocol type is "share".
Authorization (KafkaApis.handleListGroupsRequest): CLUSTER DESCRIBE lists every group; without it only the
groups the principal may DESCRIBE are listed (no error, denials not logged).
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from protocol.generated.messages import ListGroupsRequest, ListGroupsResponse

API_KEY = 16
VERSIONS = (0, 5)


async def handle(ctx, req: ListGroupsRequest) -> ListGroupsResponse:
    groups = ctx.groups
    cluster_describe = ctx.authorize_cluster(AclOperation.DESCRIBE, log_if_denied=False)
    states = set(req.states_filter or []) if ctx.version >= 4 else set()
    types = set(req.types_filter or []) if ctx.version >= 5 else set()
    out = []
    for _, shard in groups.all_shards():
        out.extend(shard.list_groups(states, types))
    if not cluster_describe:
        out = [g for g in out if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id,
                                               log_if_denied=False)]
    out.sort(key=lambda g: g.group_id)
    return ListGroupsResponse(error_code=0, groups=out)
