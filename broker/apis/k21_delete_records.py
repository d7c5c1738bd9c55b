"""DeleteRecords: v0-2.

Behaviour (ReplicaManager.deleteRecords): moves the log start offset to the requested offset (-1 = the
high watermark); OFFSET_OUT_OF_RANGE past the high watermark or for a negative offset other than -1;
the response waits until every replica on a live broker has moved its log start there too
(DelayedDeleteRecords; followers learn it from their fetches), REQUEST_TIMED_OUT once ``timeout_ms`` passes
first; its low watermark is the smallest log start offset of those replicas. Whole segments below it are
deleted by the next retention pass, as in Kafka. Authorization (KafkaApis.handleDeleteRecordsRequest, with an
authorizer): DELETE on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED (low watermark -1), before
the topic's existence is looked at.
"""

from __future__ import annotations

import asyncio

from broker.timeouts import wait_for
from cluster.acls import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.generated.messages.delete_records_response import DeleteRecordsPartitionResult, DeleteRecordsTopicResult

API_KEY = 21
VERSIONS = (0, 2)
HIGH_WATERMARK = -1


async def handle(ctx, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    waiting = []
    deletable = ctx.filter_authorized(AclOperation.DELETE, ResourceType.TOPIC, req.topics, lambda t: t.name)
    for t in req.topics:
        tr = DeleteRecordsTopicResult(name=t.name)
        topics.append(tr)
        for p in t.partitions:
            pr = DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            tr.partitions.append(pr)
            if t.name not in deletable:
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            part, pr.error_code = ctx.replicas.leader_partition(t.name, p.partition_index)
            if pr.error_code:
                continue
            lg = part.log
            offset = lg.high_watermark if p.offset == HIGH_WATERMARK else p.offset
            if offset < 0:
                pr.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            try:
                lg.maybe_increment_log_start_offset(offset, "client delete records request")
            except KafkaError as exc:
                pr.error_code = int(exc.code)
                continue
            waiting.append((part, pr, ctx.replicas.wait_for_low_watermark(part, offset)))
    deadline = ctx.clock.monotonic() + max(0, req.timeout_ms) / 1000
    for part, pr, moved in waiting:
        if moved is not None:
            try:
                await ctx.park(wait_for(asyncio.shield(moved), max(0.0, deadline - ctx.clock.monotonic())))
            except asyncio.TimeoutError:
                pr.error_code = ErrorCode.REQUEST_TIMED_OUT
                continue
        pr.low_watermark = ctx.replicas.low_watermark(part)
    return DeleteRecordsResponse(topics=topics)
