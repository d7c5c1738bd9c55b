"""CreatePartitions: v0-3.

Behaviour (ReplicationControlManager.createPartitions): per topic, independently: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_PARTITIONS when the count does not grow, INVALID_REPLICA_ASSIGNMENT for a bad manual
assignment, INVALID_REQUEST for a topic named twice; validate_only changes nothing. New partitions
are PartitionRecords in the metadata log; producers see them on their next metadata refresh.

Forwarded whole to the controller (broker/controller_apis/), as Kafka's ForwardingManager does.
"""

from __future__ import annotations

from protocol.generated.messages import CreatePartitionsRequest, CreatePartitionsResponse

API_KEY = 37
VERSIONS = (0, 3)


async def handle(ctx, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    return await ctx.controller.forward(ctx, req)
