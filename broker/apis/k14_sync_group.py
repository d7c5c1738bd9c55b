"""SyncGroup: v0-5.

Behaviour (GroupMetadataManager.classicGroupSync): the leader's assignments are stored in
__consumer_offsets (GroupMetadataValue) and every member's SyncGroup is answered with its own
assignment bytes, unchanged (the broker never parses classic assignments, so eager, cooperative and
custom assignors all work); followers that sync before the leader wait; REBALANCE_IN_PROGRESS while
a new rebalance is preparing; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
INCONSISTENT_GROUP_PROTOCOL (v5 protocol type/name) where Kafka returns them; members that do not
sync within the rebalance timeout are removed and the group rebalances.
Authorization (KafkaApis.handleSyncGroupRequest): after the v5+ check that protocol type and name are present
(INCONSISTENT_GROUP_PROTOCOL), GROUP READ, else GROUP_AUTHORIZATION_FAILED with an empty assignment.
"""

from __future__ import annotations

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import SyncGroupRequest, SyncGroupResponse

API_KEY = 14
VERSIONS = (0, 5)


async def handle(ctx, req: SyncGroupRequest) -> SyncGroupResponse:
    if ctx.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        # SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent, checked before authorization
        return SyncGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
    if req.group_id is not None and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    if not req.group_id:
        return SyncGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    try:
        resp = await ctx.park(ctx.groups.run_delayed(req.group_id, GroupCoordinatorShard.sync_group, req_ctx(ctx), req))
    except GroupError as exc:
        resp = SyncGroupResponse(error_code=exc.code)
    if resp.assignment is None:
        resp.assignment = b""
    return resp
