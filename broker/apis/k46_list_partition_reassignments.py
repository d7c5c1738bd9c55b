"""ListPartitionReassignments: v0 (KIP-455).

Behaviour: forwarded whole to the controller (broker/controller_apis/k46_list_partition_reassignments.py), as
Kafka's brokers do: the ongoing reassignments as of the controller's latest committed metadata.
"""

from __future__ import annotations

from protocol.generated.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

API_KEY = 46
VERSIONS = (0, 0)


async def handle(ctx, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    return await ctx.controller.forward(ctx, req)
