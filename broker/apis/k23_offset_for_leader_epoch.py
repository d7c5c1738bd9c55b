"""OffsetForLeaderEpoch: v2-4 (v0-1 removed by KIP-896).

Behaviour (Partition.lastOffsetForLeaderEpoch): the end offset of the requested epoch from the leader
epoch cache (the start of the next larger epoch, or the log end for the latest), with the largest
epoch <= the requested one; UNDEFINED (-1, -1) when no such epoch; FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH against current_leader_epoch; consumers send replica id -1 (v3+).
Authorization (KafkaApis.handleOffsetForLeaderEpochRequest, with an authorizer): CLUSTER_ACTION on the cluster (a
follower; a denial not logged) allows every topic, else DESCRIBE on each topic (KIP-320's consumers), else its
partitions answer TOPIC_AUTHORIZATION_FAILED (epoch and offset -1), after the authorized topics.
"""

from __future__ import annotations

from cluster.acls import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.generated.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from protocol.generated.messages.offset_for_leader_epoch_response import EpochEndOffset, OffsetForLeaderTopicResult

API_KEY = 23
VERSIONS = (2, 4)


async def handle(ctx, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
    denied = []
    allowed = None  # every topic
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        allowed = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, req.topics, lambda t: t.topic)
    for t in req.topics:
        tr = OffsetForLeaderTopicResult(topic=t.topic)
        if allowed is not None and t.topic not in allowed:
            tr.partitions = [EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition,
                                            leader_epoch=-1, end_offset=-1) for p in t.partitions]
            denied.append(tr)
            continue
        topics.append(tr)
        for p in t.partitions:
            r = EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            tr.partitions.append(r)
            part, r.error_code = ctx.replicas.leader_partition(t.topic, p.partition, p.current_leader_epoch)
            if r.error_code:
                continue
            found = part.log.end_offset_for_epoch(p.leader_epoch)
            if found is not None:
                r.leader_epoch, r.end_offset = found
    return OffsetForLeaderEpochResponse(topics=topics + denied)
