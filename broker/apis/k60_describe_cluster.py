"""DescribeCluster: v0-2.

Behaviour: cluster id, controller id and the registered brokers (fenced ones only with
include_fenced_brokers, v2); endpoint_type 1 (brokers) is served on the broker listener; asking a
broker listener for controllers (2) is UNSUPPORTED_ENDPOINT_TYPE, as Kafka does.
Authorization (AuthHelper.computeDescribeClusterResponse): no check to answer; with
include_cluster_authorized_operations, cluster_authorized_operations is the CLUSTER operations the principal may
do when it may DESCRIBE the cluster, else 0 (-2147483648 when not asked).
"""

from __future__ import annotations

from broker.apis.k03_metadata import controller_id_for
from cluster.acls import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeClusterRequest, DescribeClusterResponse
from protocol.generated.messages.describe_cluster_response import DescribeClusterBroker

API_KEY = 60
VERSIONS = (0, 2)
BROKERS, CONTROLLERS = 1, 2


async def handle(ctx, req: DescribeClusterRequest) -> DescribeClusterResponse:
    if ctx.version >= 1 and req.endpoint_type != BROKERS:
        return DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                       error_message="The broker only handles broker endpoint types",
                                       endpoint_type=req.endpoint_type, cluster_id=ctx.cluster_id or "")
    operations = -2147483648  # the schema's default: not asked
    if req.include_cluster_authorized_operations:
        operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME) \
            if ctx.authorize_cluster(AclOperation.DESCRIBE) else 0
    brokers, live = [], []
    for b in ctx.image.brokers.values():
        ep = b.endpoint(ctx.listener)
        if ep is None or (b.fenced and not req.include_fenced_brokers):
            continue
        brokers.append(DescribeClusterBroker(broker_id=b.node_id, host=ep.host, port=ep.port, rack=b.rack,
                                             is_fenced=b.fenced))
        if not b.fenced:
            live.append(b)
    return DescribeClusterResponse(error_code=0, endpoint_type=BROKERS, cluster_id=ctx.cluster_id or "",
                                   controller_id=controller_id_for(live, ctx.node_id), brokers=brokers,
                                   cluster_authorized_operations=operations)
