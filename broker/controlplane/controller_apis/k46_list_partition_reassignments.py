"""ListPartitionReassignments on the controller (ReplicationControlManager.listPartitionReassignments): the
ongoing reassignments (replicas, adding, removing) of the named partitions, or of every partition for a null
topic list, from the latest committed image; unknown topics and partitions, and those not moving, are left out."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.generated.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
from protocol.generated.messages.list_partition_reassignments_response import (
    OngoingPartitionReassignment, OngoingTopicReassignment,
)

API_KEY = 46
VERSIONS = (0, 0)


def handle(cctx: ControllerContext, req: ListPartitionReassignmentsRequest) -> ControllerResult:
    topics = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
    res = cctx.controller.list_partition_reassignments(cctx.image, topics)
    return ControllerResult([], ListPartitionReassignmentsResponse(error_code=0, error_message=None, topics=[
        OngoingTopicReassignment(name=name, partitions=[OngoingPartitionReassignment(
            partition_index=p.partition, replicas=list(p.replicas), adding_replicas=list(p.adding_replicas),
            removing_replicas=list(p.removing_replicas)) for p in parts]) for name, parts in res.response]))
