"""ReadShareGroupStateSummary: v0-1 (KIP-932, an inter-broker RPC to the share coordinator): a share-partition's start
offset and epochs (DescribeShareGroupOffsets; v1: the delivery-complete count).

Behaviour (KafkaApis.handleReadShareGroupStateSummaryRequest, ShareCoordinatorService): split by share-partition,
each answered by the leader of its ``__share_group_state`` partition (NOT_COORDINATOR elsewhere, so the persister
finds the coordinator again), its records committed before the answer; see
broker/share/share_coordinator_service.py.

Authorization: CLUSTER_ACTION on the cluster (brokers only), else every partition CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.share.share_coordinator_service import error_response
from cluster.acls import AclOperation
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse

API_KEY = 87
VERSIONS = (0, 1)


async def handle(ctx, req: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response("summary", req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
    return await ctx.park(ctx.share_coordinator.read_state_summary(req))
