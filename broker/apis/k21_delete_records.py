"""DeleteRecords: v0-2.

Behaviour (ReplicaManager.deleteRecords): moves the log start offset to the requested offset (-1 = the
high watermark); OFFSET_OUT_OF_RANGE past the high watermark or for a negative offset other than -1;
the low watermark in the response is the new log start offset. Whole segments below it are deleted
by the next retention pass, as in Kafka.
"""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.generated.messages.delete_records_response import DeleteRecordsPartitionResult, DeleteRecordsTopicResult

API_KEY = 21
VERSIONS = (0, 2)
HIGH_WATERMARK = -1


async def handle(ctx, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for t in req.topics:
        tr = DeleteRecordsTopicResult(name=t.name)
        topics.append(tr)
        for p in t.partitions:
            pr = DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            tr.partitions.append(pr)
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
                pr.low_watermark = lg.log_start_offset
            except KafkaError as exc:
                pr.error_code = int(exc.code)
    return DeleteRecordsResponse(topics=topics)
