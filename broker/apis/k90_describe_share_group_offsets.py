"""DescribeShareGroupOffsets: v0-1 (KIP-932; v1's Lag: KIP-1226, Kafka 4.2).

Behaviour (GroupCoordinatorService.describeShareGroupOffsets / describeShareGroupAllOffsets): each partition's
share-partition start offset (SPSO) and leader epoch, read from the share coordinators (ReadShareGroupStateSummary
through the persister), and from v1 its lag (end offset - SPSO - delivery complete count; -1 while unknown); null
topics describe every initialized partition of the group, an empty list nothing; a topic the image lacks answers
start offset -1. The group itself is not looked up (an unknown group has no state: -1). Answered in
``broker/groups/group_service.py``; UNSUPPORTED_VERSION per group while ``share.version`` is 0 (share_gate.py).
Authorization (KafkaApis.handleDescribeShareGroupOffsetsRequest): GROUP DESCRIBE per group, else
GROUP_AUTHORIZATION_FAILED; named topics without TOPIC DESCRIBE answer TOPIC_AUTHORIZATION_FAILED per partition
(start offset -1, after the others); with null topics, topics without DESCRIBE are left out.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse
from protocol.generated.messages import describe_share_group_offsets_response as dsgo

API_KEY = 90
VERSIONS = (0, 1)


def _group_error(gid: str, code: int, message: str | None = None):
    return dsgo.DescribeShareGroupOffsetsResponseGroup(group_id=gid, error_code=code, error_message=message,
                                                       topics=[])


async def _describe(ctx, g):
    gid = g.group_id
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, gid):
        return _group_error(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if g.topics is not None and not g.topics:
        return dsgo.DescribeShareGroupOffsetsResponseGroup(group_id=gid, topics=[])
    denied = []
    topics = None
    if g.topics is not None:
        allowed = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [t.topic_name for t in g.topics])
        topics = [(t.topic_name, list(t.partitions)) for t in g.topics if t.topic_name in allowed]
        denied = [t for t in g.topics if t.topic_name not in allowed]
    try:
        out = await ctx.park(ctx.groups.describe_share_group_offsets(gid, topics))
    except GroupError as exc:
        return _group_error(gid, exc.code, exc.message or MESSAGES.get(ErrorCode(exc.code)))
    if g.topics is None:
        allowed = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [t.topic_name for t in out.topics])
        out.topics = [t for t in out.topics if t.topic_name in allowed]
    for t in denied:
        out.topics.append(dsgo.DescribeShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=bytes(16), partitions=[
            dsgo.DescribeShareGroupOffsetsResponsePartition(
                partition_index=p, start_offset=-1, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=MESSAGES.get(ErrorCode.TOPIC_AUTHORIZATION_FAILED)) for p in t.partitions]))
    return out


async def handle(ctx, req: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(groups=[await _describe(ctx, g) for g in req.groups])
