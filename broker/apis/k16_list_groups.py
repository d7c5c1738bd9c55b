"""ListGroups: v0-5.

Behaviour (GroupMetadataManager.listGroups over every __consumer_offsets partition this broker
leads): group id and protocol type; v4+ the state, filtered case-insensitively by states_filter;
v5+ the group type ("classic", "consumer"), filtered by types_filter. Groups of both protocols are
listed, including the "simple" groups that only hold committed offsets.
"""

from __future__ import annotations

from protocol.generated.messages import ListGroupsRequest, ListGroupsResponse

API_KEY = 16
VERSIONS = (0, 5)


async def handle(ctx, req: ListGroupsRequest) -> ListGroupsResponse:
    groups = ctx.groups
    states = set(req.states_filter or []) if ctx.version >= 4 else set()
    types = set(req.types_filter or []) if ctx.version >= 5 else set()
    out = []
    for _, shard in groups.all_shards():
        out.extend(shard.list_groups(states, types))
    out.sort(key=lambda g: g.group_id)
    return ListGroupsResponse(error_code=0, groups=out)
