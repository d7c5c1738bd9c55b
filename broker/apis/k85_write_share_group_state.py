"""WriteShareGroupState: v0-1 (KIP-932, an inter-broker RPC to the share coordinator): a share-partition's new start
offset and state batches (v1: KIP-1226's delivery-complete count).

Behaviour (KafkaApis.handleWriteShareGroupStateRequest, ShareCoordinatorService): split by share-partition, each
answered by the leader of its ``__share_group_state`` partition (NOT_COORDINATOR elsewhere, so the persister finds
the coordinator again), its records committed before the answer; see broker/share/share_coordinator_service.py.

Authorization: CLUSTER_ACTION on the cluster (brokers only), else every partition CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.share.share_coordinator_service import error_response
from cluster.acls import AclOperation
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import WriteShareGroupStateRequest, WriteShareGroupStateResponse

API_KEY = 85
VERSIONS = (0, 1)


async def handle(ctx, req: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response("write", req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
    return await ctx.park(ctx.share_coordinator.write_state(req))
