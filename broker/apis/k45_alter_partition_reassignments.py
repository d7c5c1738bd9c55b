"""AlterPartitionReassignments: v0-1 (KIP-455; v1's ``allow_replication_factor_change``, KIP-860).

Behaviour: forwarded whole to the controller (broker/controller_apis/k45_alter_partition_reassignments.py), as
Kafka's brokers do; answered once the reassignment's first step is committed. The brokers then act on the
metadata: an added replica creates its log and follows the leader, a removed one stops and deletes its log.
"""

from __future__ import annotations

from protocol.generated.messages import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

API_KEY = 45
VERSIONS = (0, 1)


async def handle(ctx, req: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    return await ctx.controller.forward(ctx, req)
