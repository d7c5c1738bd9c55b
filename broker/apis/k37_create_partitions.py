"""CreatePartitions: v0-3.

Behaviour (ReplicationControlManager.createPartitions): per topic, independently: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_PARTITIONS when the count does not grow, INVALID_REPLICA_ASSIGNMENT for a bad manual
assignment, INVALID_REQUEST for a topic named twice; validate_only changes nothing. New partitions
are PartitionRecords in the metadata log; producers see them on their next metadata refresh.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.generated.messages import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.generated.messages.create_partitions_response import CreatePartitionsTopicResult

API_KEY = 37
VERSIONS = (0, 3)


async def handle(ctx, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    names = [t.name for t in req.topics]
    results = []
    for t in req.topics:
        if names.count(t.name) > 1:
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                                       error_message="Duplicate topic name."))
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        res = await broker.decide(lambda image, t=t, a=assignments: broker.controller.create_partitions(
            image, t.name, t.count, a, req.validate_only))
        code, message = res.response
        results.append(CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(results=results)
