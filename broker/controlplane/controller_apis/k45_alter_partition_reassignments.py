"""AlterPartitionReassignments on the controller (ReplicationControlManager.alterPartitionReassignments, KIP-455):
per partition, a target replica list starts a reassignment (the new replicas are added to the replica set and
join the ISR as they catch up; AlterPartition completes it, taking the removed ones out), or a null list cancels
the ongoing one. Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, repeated
or unregistered brokers; a cancel needing an unclean election), NO_REASSIGNMENT_IN_PROGRESS (cancel of none),
INVALID_REPLICATION_FACTOR (v1 with ``allow_replication_factor_change`` false, KIP-860). The accepted partitions'
records commit together; a failed partition changes nothing. Answered once committed (``timeout_ms`` unused)."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.generated.messages import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
from protocol.generated.messages.alter_partition_reassignments_response import (
    ReassignablePartitionResponse, ReassignableTopicResponse,
)

API_KEY = 45
VERSIONS = (0, 1)


def handle(cctx: ControllerContext, req: AlterPartitionReassignmentsRequest) -> ControllerResult:
    allow_rf_change = req.allow_replication_factor_change if cctx.version >= 1 else True
    targets = [(t.name, [(p.partition_index, p.replicas) for p in t.partitions]) for t in req.topics]
    res = cctx.controller.alter_partition_reassignments(cctx.image, targets, allow_rf_change)
    responses = [ReassignableTopicResponse(name=name, partitions=[
        ReassignablePartitionResponse(partition_index=pid, error_code=code, error_message=message)
        for pid, code, message in parts]) for name, parts in res.response]
    return ControllerResult(res.records, AlterPartitionReassignmentsResponse(
        allow_replication_factor_change=allow_rf_change, error_code=0, error_message=None, responses=responses))
