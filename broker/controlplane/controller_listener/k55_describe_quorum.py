"""DescribeQuorum on the controller listener: any voter answers, the leader with its view of the quorum and
the others NOT_LEADER_OR_FOLLOWER for the partition (KafkaRaftClient.handleDescribeQuorumRequest); an
Envelope-forwarded one reaches the active controller through k58. DESCRIBE on the cluster is required of the
connection's principal (ControllerApis.handleDescribeQuorum), else CLUSTER_AUTHORIZATION_FAILED at the top level."""

from __future__ import annotations

from broker.controlplane.controller_apis.k55_describe_quorum import describe_quorum_response
from broker.controlplane.controller_listener.controller_rpc import refused

API_KEY = 55
VERSIONS = (0, 2)


async def handle(ctx, body):
    denied = refused(ctx, body)
    if denied is not None:
        return denied
    quorum = ctx.handles.quorum
    return describe_quorum_response(body, quorum.quorum_view(), ctx.controller.voter_endpoints)
