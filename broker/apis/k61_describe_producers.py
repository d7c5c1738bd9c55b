"""DescribeProducers: v0.

Behaviour (Partition.activeProducerState): per partition, the producers the log's producer state
knows: id, epoch, last sequence, last timestamp, coordinator epoch, current transaction start offset
(-1 when none); UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER per partition.
"""

from __future__ import annotations

from protocol.generated.messages import DescribeProducersRequest, DescribeProducersResponse
from protocol.generated.messages.describe_producers_response import PartitionResponse, ProducerState, TopicResponse

API_KEY = 61
VERSIONS = (0, 0)


async def handle(ctx, req: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = []
    for t in req.topics:
        tr = TopicResponse(name=t.name)
        topics.append(tr)
        for index in t.partition_indexes:
            pr = PartitionResponse(partition_index=index, error_code=0)
            tr.partitions.append(pr)
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
