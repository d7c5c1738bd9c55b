"""ElectLeaders on the controller (ReplicationControlManager.electLeaders): PREFERRED moves leadership back to
the first replica when it is alive and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise, ELECTION_NOT_NEEDED
when it already leads); UNCLEAN gives a leaderless partition any live replica (the topic's ISR is lost);
a null partition list means every partition, reporting only those that needed an election."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.generated.messages import ElectLeadersRequest, ElectLeadersResponse
from protocol.generated.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult

API_KEY = 43
VERSIONS = (0, 2)


def handle(cctx: ControllerContext, req: ElectLeadersRequest) -> ControllerResult:
    election_type = req.election_type if cctx.version >= 1 else 0
    partitions = None if req.topic_partitions is None else [
        (t.topic, p) for t in req.topic_partitions for p in t.partitions]
    res = cctx.controller.elect_leaders(cctx.image, election_type, partitions)
    by_topic: dict[str, list[PartitionResult]] = {}
    for topic, pid, code, message in res.response:
        by_topic.setdefault(topic, []).append(PartitionResult(partition_id=pid, error_code=code,
                                                              error_message=message))
    return ControllerResult(res.records, ElectLeadersResponse(
        error_code=0, replica_election_results=[ReplicaElectionResult(topic=t, partition_result=ps)
                                                for t, ps in by_topic.items()]))
