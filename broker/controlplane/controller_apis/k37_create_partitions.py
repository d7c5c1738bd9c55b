"""CreatePartitions on the controller (ReplicationControlManager.createPartitions): per topic,
independently: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS when the count does not grow,
INVALID_REPLICA_ASSIGNMENT for a bad manual assignment, INVALID_REQUEST for a topic named twice;
validate_only changes nothing. ALTER on each topic is required of the request's principal
(ControllerApis.createPartitions), else TOPIC_AUTHORIZATION_FAILED for it, whether it exists or not."""

from __future__ import annotations

from collections import Counter

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.acls import AclOperation, ResourceType
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.generated.messages.create_partitions_response import CreatePartitionsTopicResult

API_KEY = 37
VERSIONS = (0, 3)


def handle(cctx: ControllerContext, req: CreatePartitionsRequest) -> ControllerResult:
    counts = Counter(t.name for t in req.topics)
    alterable = cctx.filter_authorized(AclOperation.ALTER, ResourceType.TOPIC, [n for n, k in counts.items() if k == 1])
    records: list = []
    results = []
    for t in req.topics:
        if counts[t.name] > 1:
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                                       error_message="Duplicate topic name."))
            continue
        if t.name not in alterable:
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                       error_message=None))
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        # topics are distinct here, so each decision against the same image is independent
        res = cctx.controller.create_partitions(cctx.image, t.name, t.count, assignments, req.validate_only,
                                                cctx.apply_partition_change_quota)
        records += res.records
        code, message = res.response
        results.append(CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
    return ControllerResult(records, CreatePartitionsResponse(throttle_time_ms=cctx.mutation_throttle_ms,
                                                              results=results))
