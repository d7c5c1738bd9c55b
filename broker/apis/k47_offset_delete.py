"""OffsetDelete: v0.

Behaviour (OffsetMetadataManager.deleteOffsets, KafkaApis.handleOffsetDeleteRequest): the group must
exist (GROUP_ID_NOT_FOUND) and, when it is a classic group with members that does not use the
consumer protocol, be empty (NON_EMPTY_GROUP); a partition of a topic the group is subscribed to
answers GROUP_SUBSCRIBED_TO_TOPIC; partitions of unknown topics UNKNOWN_TOPIC_OR_PARTITION; other
offsets get tombstones.
Authorization (KafkaApis.handleOffsetDeleteRequest): GROUP DELETE, else a top-level GROUP_AUTHORIZATION_FAILED;
then TOPIC READ per topic, before the unknown-topic check: TOPIC_AUTHORIZATION_FAILED for each partition of a
topic without it.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.generated.messages.offset_delete_request import OffsetDeleteRequestTopic
from protocol.generated.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

API_KEY = 47
VERSIONS = (0, 0)


async def handle(ctx, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if req.group_id is not None and not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
    if not req.group_id:
        return OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID, topics=[])
    image = ctx.image
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, req.topics, lambda t: t.name)
    unknown, known = [], []
    for t in req.topics:
        if t.name not in readable:
            unknown.append(OffsetDeleteResponseTopic(name=t.name, partitions=[
                OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                              error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]))
            continue
        topic = image.topic(t.name)
        good = [p for p in t.partitions if topic is not None and p.partition_index in topic.partitions]
        bad = [p for p in t.partitions if topic is None or p.partition_index not in topic.partitions]
        if bad:
            unknown.append(OffsetDeleteResponseTopic(name=t.name, partitions=[
                OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                              error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in bad]))
        if good:
            known.append(OffsetDeleteRequestTopic(name=t.name, partitions=good))
    try:
        res = await ctx.park(ctx.groups.run(req.group_id, GroupCoordinatorShard.delete_offsets,
                                                   OffsetDeleteRequest(group_id=req.group_id, topics=known)))
        if res.error is not None:
            raise res.error
    except GroupError as exc:
        return OffsetDeleteResponse(error_code=exc.code, topics=[])
    topics = {t.name: t for t in res.response.topics}
    for u in unknown:
        if u.name in topics:
            topics[u.name].partitions.extend(u.partitions)
        else:
            topics[u.name] = u
    return OffsetDeleteResponse(error_code=0, topics=list(topics.values()))
