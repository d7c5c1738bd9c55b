"""CreatePartitions on the controller (ReplicationControlManager.createPartitions): per topic,
independently: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS when the count does not grow,
INVALID_REPLICA_ASSIGNMENT for a bad manual assignment, INVALID_REQUEST for a topic named twice;
validate_only changes nothing."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.generated.messages.create_partitions_response import CreatePartitionsTopicResult

API_KEY = 37
VERSIONS = (0, 3)


def handle(cctx: ControllerContext, req: CreatePartitionsRequest) -> ControllerResult:
    names = [t.name for t in req.topics]
    records: list = []
    results = []
    for t in req.topics:
        if names.count(t.name) > 1:
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                                       error_message="Duplicate topic name."))
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        # topics are distinct here, so each decision against the same image is independent
        res = cctx.controller.create_partitions(cctx.image, t.name, t.count, assignments, req.validate_only)
        records += res.records
        code, message = res.response
        results.append(CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
    return ControllerResult(records, CreatePartitionsResponse(results=results))
