"""ShareAcknowledge: v1-2 (KIP-932; v0 was the preview, gone since Kafka 4.1).

Behaviour (KafkaApis.handleShareAcknowledgeRequest, SharePartitionManager.acknowledgeSessionUpdate/acknowledge):
GROUP READ on the group, else GROUP_AUTHORIZATION_FAILED; the share session's epoch (0: INVALID_SHARE_SESSION_EPOCH,
unknown session SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH) at the top level; then per
partition: an unknown topic id UNKNOWN_TOPIC_ID, no TOPIC READ TOPIC_AUTHORIZATION_FAILED, bad batches
INVALID_REQUEST (types 0-3, 0-4 with v2's IsRenewAck), records not held by the member INVALID_RECORD_STATE, not the
leader NOT_LEADER_OR_FOLLOWER, no share partition cached here (never fetched here, or dropped after a failed
initialization or a fence) UNKNOWN_TOPIC_OR_PARTITION, a failed share-state write its error as Kafka's
``fetchPersisterError`` maps it (COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER for a fenced state epoch, ...);
each partition answered once its share-state write committed. Epoch -1 closes the
session after the acknowledgements and releases the member's other records. v2 answers the group's acquisition
lock duration.
"""

from __future__ import annotations

import logging

from broker.apis.k78_share_fetch import (
    ack_batches, acknowledge_all, current_leader, leader_endpoints, readable_topics,
)
from cluster.acls import AclOperation, ResourceType
from cluster.share.share_partition import AcknowledgementBatch, ShareError
from cluster.share.share_session import FINAL_EPOCH
from protocol.errors import ErrorCode
from protocol.generated.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from protocol.generated.messages.share_acknowledge_response import (
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
)

API_KEY = 79
VERSIONS = (1, 2)

log = logging.getLogger("odradek.share.fetch")


async def handle(ctx, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    mgr = ctx.handles.share_partitions
    group_id = req.group_id or ""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    is_renew = bool(req.is_renew_ack) if ctx.version >= 2 else False
    member_id = req.member_id
    epoch = req.share_session_epoch
    try:
        mgr.sessions.acknowledge_session_update(group_id, member_id, epoch, ctx.connection_id)
    except ShareError as exc:
        log.info("ShareAcknowledge of member %s of group %r (epoch %d) from %s refused: %s %s", member_id,
                 group_id, epoch, ctx.client_id, ErrorCode(exc.code).name, exc)
        return ShareAcknowledgeResponse(error_code=exc.code, error_message=str(exc))
    acks: dict[tuple, list[AcknowledgementBatch]] = {}
    for t in req.topics:
        for p in t.partitions:
            acks.setdefault((t.topic_id, p.partition_index), []).extend(ack_batches(p.acknowledgement_batches))
    image = ctx.image
    names = [topic.name for tid, _ in acks if (topic := image.topics_by_id.get(tid)) is not None]
    readable = readable_topics(ctx, names)
    codes = await ctx.park(acknowledge_all(ctx, mgr, group_id, member_id, acks, readable, is_renew))
    if epoch == FINAL_EPOCH:
        try:
            await mgr.release_session(mgr.sessions.close_session(group_id, member_id))
        except ShareError:
            pass  # closed meanwhile (its connection dropped): released then
    responses: list[ShareAcknowledgeTopicResponse] = []
    by_topic: dict = {}
    for (tid, p), code in codes.items():
        t = by_topic.get(tid)
        if t is None:
            t = by_topic[tid] = ShareAcknowledgeTopicResponse(topic_id=tid, partitions=[])
            responses.append(t)
        leader = current_leader(ctx, tid, p) if code == ErrorCode.NOT_LEADER_OR_FOLLOWER else (-1, -1)
        t.partitions.append(PartitionData(partition_index=p, error_code=code, current_leader=LeaderIdAndEpoch(*leader)))
    leaders = [d.current_leader.leader_id for t in responses for d in t.partitions if d.current_leader.leader_id >= 0]
    return ShareAcknowledgeResponse(error_code=0, acquisition_lock_timeout_ms=mgr.lock_duration_ms(group_id),
                                    responses=responses, node_endpoints=leader_endpoints(ctx, leaders, NodeEndpoint))
