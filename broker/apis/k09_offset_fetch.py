"""OffsetFetch: v1-10 (KIP-896 removed v0).

Behaviour (KafkaApis.handleOffsetFetchRequest, OffsetMetadataManager.fetchOffsets): v1-7 one group
(v2+ null topics = all the group's offsets, with a top-level error), v8+ many groups each with its own
error; a partition without a committed offset answers offset -1, leader epoch -1, metadata ""; the
committed metadata string comes back byte-exact; v9+ consumer-protocol members are checked
(UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); v10 names topics by id (unknown ids: UNKNOWN_TOPIC_ID).
require_stable (v7+): a partition with a pending transactional offset (TxnOffsetCommit of an open
transaction) answers UNSTABLE_OFFSET_COMMIT, offset -1; without it the last committed offset comes back.
Authorization (KafkaApis.handleOffsetFetchRequest, per group): GROUP DESCRIBE, else the group answers
GROUP_AUTHORIZATION_FAILED; named topics without TOPIC DESCRIBE are not fetched and answer
TOPIC_AUTHORIZATION_FAILED (offset -1) after the fetched ones; asking for all topics leaves them out silently.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode
from protocol.generated.messages import OffsetFetchRequest, OffsetFetchResponse
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from protocol.generated.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

API_KEY = 9
VERSIONS = (1, 10)


def _error_topic(t: OffsetFetchRequestTopics, code: int, topic_id=None) -> OffsetFetchResponseTopics:
    return OffsetFetchResponseTopics(name=t.name, topic_id=t.topic_id if topic_id is None else topic_id, partitions=[
        OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                      metadata="", error_code=code) for p in t.partition_indexes])


async def fetch_group(ctx, g: OffsetFetchRequestGroup, require_stable: bool) -> OffsetFetchResponseGroup:
    groups = ctx.groups
    image = ctx.image
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
        return OffsetFetchResponseGroup(group_id=g.group_id, topics=[],
                                        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    errors: list[OffsetFetchResponseTopics] = []  # unknown topic ids and topics not authorized, in request order
    if g.topics is not None:
        resolved = []  # v10: the name of each id (None: unknown id)
        for t in g.topics:
            if ctx.version >= 10:
                topic = image.topics_by_id.get(t.topic_id)
                t = None if topic is None else OffsetFetchRequestTopics(
                    name=topic.name, topic_id=t.topic_id, partition_indexes=t.partition_indexes)
            resolved.append(t)
        describable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            [t for t in resolved if t is not None], lambda t: t.name)
        asked = []
        for t, r in zip(g.topics, resolved):
            if r is None:
                errors.append(_error_topic(t, ErrorCode.UNKNOWN_TOPIC_ID))
            elif r.name not in describable:
                errors.append(_error_topic(r, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            else:
                asked.append(r)
        g = OffsetFetchRequestGroup(group_id=g.group_id, member_id=g.member_id, member_epoch=g.member_epoch,
                                    topics=asked)
    try:
        p, shard = await ctx.park(groups.shard_for(g.group_id))
        out = shard.fetch_offsets(g, require_stable, ctx.now_ms)
    except GroupError as exc:
        return OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=exc.code)
    if out.error_code:
        return out
    if g.topics is None:  # all topics: the ones the principal may not describe are left out
        describable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, out.topics, lambda t: t.name)
        out.topics = [t for t in out.topics if t.name in describable]
    if ctx.version >= 10:
        kept = []
        for t in out.topics:
            topic = image.topic(t.name)
            if topic is None:
                continue  # deleted topic: no id to name it by
            t.topic_id = topic.topic_id
            kept.append(t)
        out.topics = kept
    out.topics += errors
    return out


async def handle(ctx, req: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.version >= 8:
        out = []
        for g in req.groups:
            if g.group_id is None:
                out.append(OffsetFetchResponseGroup(group_id=g.group_id, topics=[],
                                                    error_code=ErrorCode.INVALID_GROUP_ID))
                continue
            out.append(await fetch_group(ctx, g, req.require_stable))
        return OffsetFetchResponse(groups=out)
    topics = None if req.topics is None else [
        OffsetFetchRequestTopics(name=t.name, partition_indexes=t.partition_indexes) for t in req.topics]
    res = await fetch_group(ctx, OffsetFetchRequestGroup(group_id=req.group_id, topics=topics), req.require_stable)
    resp = OffsetFetchResponse(error_code=res.error_code if ctx.version >= 2 else 0, topics=[])
    if res.error_code and ctx.version < 2:
        # v1 has no top-level error: every requested partition carries it
        resp.topics = [OffsetFetchResponseTopic(name=t.name, partitions=[
            OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata="", error_code=res.error_code)
            for p in t.partition_indexes]) for t in (req.topics or [])]
        return resp
    for t in res.topics:
        resp.topics.append(OffsetFetchResponseTopic(name=t.name, partitions=[
            OffsetFetchResponsePartition(partition_index=p.partition_index, committed_offset=p.committed_offset,
                                         committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                                         error_code=p.error_code) for p in t.partitions]))
    return resp
