"""DescribeQuorum: v0-2, answered by the quorum leader from its own view of the voters and observers
(KafkaRaftClient.handleDescribeQuorumRequest, LeaderState.describeQuorum). Brokers forward it to the active
controller; a voter that does not lead answers NOT_LEADER_OR_FOLLOWER for the partition, and a request for
another topic or partition than ``__cluster_metadata-0`` answers UNKNOWN_TOPIC_OR_PARTITION for each."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from cluster.raft.node import QuorumView, ReplicaProgress
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeQuorumRequest, DescribeQuorumResponse
from protocol.generated.messages.describe_quorum_response import (
    Listener, Node, PartitionData, ReplicaState, TopicData,
)
from protocol.topics import METADATA_PARTITION, METADATA_TOPIC

API_KEY = 55
VERSIONS = (0, 2)


def _is_metadata_partition(req: DescribeQuorumRequest) -> bool:
    return (len(req.topics) == 1 and req.topics[0].topic_name == METADATA_TOPIC
            and [p.partition_index for p in req.topics[0].partitions] == [METADATA_PARTITION])


def _replica(replica_id: int, p: ReplicaProgress) -> ReplicaState:
    return ReplicaState(replica_id=replica_id, log_end_offset=p.end_offset, last_fetch_timestamp=p.last_fetch_ms,
                        last_caught_up_timestamp=p.last_caught_up_ms)


def describe_quorum_response(req: DescribeQuorumRequest, view: QuorumView | None,
                             voter_endpoints: dict[int, tuple[str, str, int]]) -> DescribeQuorumResponse:
    """The answer of a voter whose view is ``view`` (None: it does not lead)."""
    if not _is_metadata_partition(req):
        return DescribeQuorumResponse(error_code=0, error_message=None, topics=[
            TopicData(topic_name=t.topic_name, partitions=[
                PartitionData(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=None, current_voters=[], observers=[]) for p in t.partitions])
            for t in req.topics], nodes=[])
    if view is None:
        partition = PartitionData(partition_index=METADATA_PARTITION, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                  error_message=None, leader_id=-1, leader_epoch=-1, high_watermark=-1,
                                  current_voters=[], observers=[])
        nodes = []
    else:
        partition = PartitionData(
            partition_index=METADATA_PARTITION, error_code=0, error_message=None, leader_id=view.leader_id,
            leader_epoch=view.epoch, high_watermark=view.high_watermark,
            current_voters=[_replica(v, p) for v, p in view.voters.items()],
            observers=[_replica(o, p) for o, p in view.observers.items()])
        nodes = [Node(node_id=v, listeners=[Listener(name=name, host=host, port=port)])
                 for v, (name, host, port) in sorted(voter_endpoints.items())]
    return DescribeQuorumResponse(error_code=0, error_message=None,
                                  topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[partition])], nodes=nodes)


def handle(cctx: ControllerContext, req: DescribeQuorumRequest) -> ControllerResult:
    return ControllerResult([], describe_quorum_response(req, cctx.describe_quorum(), cctx.voter_endpoints))
