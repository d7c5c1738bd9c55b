"""OffsetCommit: v2-10 (KIP-896 removed v0-1).

Behaviour (KafkaApis.handleOffsetCommitRequest, OffsetMetadataManager.commitOffset): partitions of
unknown topics (v10: unknown topic ids) answer UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID) and the
rest is committed; generation -1 without a member commits to an empty or unknown group ("simple"
group, manual assignment), otherwise the member and generation are checked (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS while the group completes a rebalance;
v9+ GROUP_ID_NOT_FOUND for an unknown group, STALE_MEMBER_EPOCH for consumer-protocol members);
metadata longer than offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE; the metadata string and
leader epoch are stored and returned by OffsetFetch unchanged; v2-4 retention_time_ms sets an
explicit expiry (OffsetCommitValue v1), otherwise offsets.retention.minutes applies once the group
is empty. A commit from a classic member keeps its session alive.
Authorization (KafkaApis.handleOffsetCommitRequest): GROUP READ on the group, else every partition answers
GROUP_AUTHORIZATION_FAILED; then TOPIC READ per topic (after v10 ids are resolved to names, before the
unknown-topic check): TOPIC_AUTHORIZATION_FAILED for each partition of a topic without it.
"""

from __future__ import annotations

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from cluster.groups.group_coordinator import GroupCoordinatorShard
from protocol.errors import ErrorCode
from protocol.generated.messages import OffsetCommitRequest, OffsetCommitResponse
from protocol.generated.messages.offset_commit_request import OffsetCommitRequestTopic
from protocol.generated.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

API_KEY = 8
VERSIONS = (2, 10)


def _error_response(req: OffsetCommitRequest, code: int) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[
        OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])


def _split(ctx, req: OffsetCommitRequest) -> tuple[dict[int, OffsetCommitResponseTopic], list]:
    """The topics answered here (by position: not authorized, unknown, unknown partitions) and the rest to commit,
    as (position, topic named by its name)."""
    image = ctx.image
    found = [image.topics_by_id.get(t.topic_id) if ctx.version >= 10 else image.topic(t.name) for t in req.topics]
    names = [t.name if ctx.version >= 10 and t is not None else r.name for t, r in zip(found, req.topics)]
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC,
                                     [n for t, n in zip(found, names) if ctx.version < 10 or t is not None])
    answered: dict[int, OffsetCommitResponseTopic] = {}
    valid = []
    for i, t in enumerate(req.topics):
        topic = found[i]
        if (ctx.version < 10 or topic is not None) and names[i] not in readable:
            answered[i] = OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
                OffsetCommitResponsePartition(partition_index=p.partition_index,
                                              error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions])
            continue
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID if ctx.version >= 10 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            answered[i] = OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
                OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                for p in t.partitions])
            continue
        good = [p for p in t.partitions if p.partition_index in topic.partitions]
        bad = [p for p in t.partitions if p.partition_index not in topic.partitions]
        if bad:
            answered[i] = OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
                OffsetCommitResponsePartition(partition_index=p.partition_index,
                                              error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in bad])
        if good:
            valid.append((i, OffsetCommitRequestTopic(name=topic.name, topic_id=t.topic_id, partitions=good)))
    return answered, valid


async def handle(ctx, req: OffsetCommitRequest) -> OffsetCommitResponse:
    if ctx.version >= 5:
        req.retention_time_ms = -1  # only v2-4 carry retention_time_ms; later versions use offsets.retention.minutes
    if req.group_id is None:
        return _error_response(req, ErrorCode.INVALID_GROUP_ID)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _error_response(req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    answered, valid = _split(ctx, req)
    out = OffsetCommitResponse(topics=[])
    committed: dict[int, OffsetCommitResponseTopic] = {}
    if valid or not req.topics:
        sub = OffsetCommitRequest(group_id=req.group_id,
                                  generation_id_or_member_epoch=req.generation_id_or_member_epoch,
                                  member_id=req.member_id, group_instance_id=req.group_instance_id,
                                  retention_time_ms=req.retention_time_ms, topics=[t for _, t in valid])
        try:
            res = await ctx.park(ctx.groups.run(req.group_id, GroupCoordinatorShard.commit_offsets, req_ctx(ctx), sub))
            if res.error is not None:
                raise res.error
            for (i, t), rt in zip(valid, res.response.topics):
                rt.name, rt.topic_id = req.topics[i].name, t.topic_id
                committed[i] = rt
        except GroupError as exc:
            for i, t in valid:
                committed[i] = OffsetCommitResponseTopic(name=req.topics[i].name, topic_id=t.topic_id, partitions=[
                    OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=exc.code)
                    for p in t.partitions])
    for i, t in enumerate(req.topics):
        a, c = answered.get(i), committed.get(i)
        if a is not None and c is not None:
            a.partitions.extend(c.partitions)
            out.topics.append(a)
        elif a is not None or c is not None:
            out.topics.append(a or c)
    return out
