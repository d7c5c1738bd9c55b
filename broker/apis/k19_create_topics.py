"""CreateTopics: v2-7 (KIP-896 removed v0-1).

Behaviour (ControllerApis.createTopics / ReplicationControlManager): per-topic errors
(TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST for duplicates); validate_only answers
without writing; v5+ return topic id, partitions, replication factor and the topic's configs.

Forwarded whole to the controller (broker/controller_apis/), as Kafka's ForwardingManager does.
"""

from __future__ import annotations

from protocol.generated.messages import CreateTopicsRequest, CreateTopicsResponse

API_KEY = 19
VERSIONS = (2, 7)


async def handle(ctx, req: CreateTopicsRequest) -> CreateTopicsResponse:
    return await ctx.controller.forward(ctx, req)
