"""DeleteShareGroupState: v0 (KIP-932, an inter-broker RPC to the share coordinator): a share group's share-
partitions' state deleted (DeleteGroups of a share group).

Behaviour (KafkaApis.handleDeleteShareGroupStateRequest, ShareCoordinatorService): split by share-partition, each
answered by the leader of its ``__share_group_state`` partition (NOT_COORDINATOR elsewhere, so the persister finds
the coordinator again), its records committed before the answer; see broker/share/share_coordinator_service.py.

Authorization: CLUSTER_ACTION on the cluster (brokers only), else every partition CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.share.share_coordinator_service import error_response
from cluster.acls import AclOperation
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import DeleteShareGroupStateRequest, DeleteShareGroupStateResponse

API_KEY = 86
VERSIONS = (0, 0)


async def handle(ctx, req: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response("delete", req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
    return await ctx.park(ctx.share_coordinator.delete_state(req))
