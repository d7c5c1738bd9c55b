"""DescribeProducers: v0.

Behaviour (Partition.activeProducerState): per partition, the producers the log's producer state
knows: id, epoch, last sequence, last timestamp, coordinator epoch, current transaction start offset
(-1 when none); UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER per partition.
Per topic first (KafkaApis.handleDescribeProducersRequest): an illegal name INVALID_TOPIC_EXCEPTION, then READ on the
topic (with an authorizer) else TOPIC_AUTHORIZATION_FAILED, then an unknown topic UNKNOWN_TOPIC_OR_PARTITION, each
with its message (ApiError) on every partition asked for.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from cluster.controller import validate_topic_name
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import DescribeProducersRequest, DescribeProducersResponse
from protocol.generated.messages.describe_producers_response import PartitionResponse, ProducerState, TopicResponse

API_KEY = 61
VERSIONS = (0, 0)


async def handle(ctx, req: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = []
    image = ctx.image
    for t in req.topics:
        tr = TopicResponse(name=t.name)
        topics.append(tr)
        invalid = validate_topic_name(t.name)
        if invalid is not None:
            error = (ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
        elif not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name):
            error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED])
        elif image.topic(t.name) is None:
            error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, MESSAGES[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
        else:
            error = None
        for index in t.partition_indexes:
            pr = PartitionResponse(partition_index=index, error_code=0)
            tr.partitions.append(pr)
            if error is not None:
                pr.error_code, pr.error_message = error
                continue
            part, pr.error_code = ctx.replicas.leader_partition(t.name, index)
            if pr.error_code:
                continue
            for pid, e in sorted(part.log.producer_state.producers.items()):
                pr.active_producers.append(ProducerState(
                    producer_id=pid, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.current_txn_first_offset
                    if e.current_txn_first_offset is not None else -1))
    return DescribeProducersResponse(topics=topics)
