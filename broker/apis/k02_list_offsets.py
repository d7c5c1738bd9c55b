"""ListOffsets: v1-11 (v0 removed by KIP-896).

Behaviour (Partition.fetchOffsetForTimestamp): -2 earliest (log start offset), -1 latest (high
watermark, or the last stable offset for read_committed; the log end offset when a replica asks,
``replica_id`` not -1, as a follower does after OFFSET_OUT_OF_RANGE), -3 max timestamp (v7+), -4 earliest local
(v8+), -5 latest tiered (v9+; no tiered storage: -1), otherwise the first offset whose timestamp is at
least the target, through the time index; none found (or only past the fetchable end): offset -1.
Leader-epoch fencing and the usual unknown-topic / not-leader errors per partition. A new leader whose high
watermark is still below the first offset of its epoch answers OFFSET_NOT_AVAILABLE for latest and for a
timestamp whose offset it cannot serve yet (the followers have not told it what is committed).
Authorization (KafkaApis.handleListOffsetRequestV1AndAbove, with an authorizer): DESCRIBE on each topic, else
its partitions answer TOPIC_AUTHORIZATION_FAILED (offset and timestamp -1), after the authorized topics.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import ListOffsetsRequest, ListOffsetsResponse
from protocol.generated.messages.list_offsets_response import ListOffsetsPartitionResponse, ListOffsetsTopicResponse

API_KEY = 2
VERSIONS = (1, 11)

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5


async def handle(ctx, req: ListOffsetsRequest) -> ListOffsetsResponse:
    image = ctx.image
    topics = []
    denied = []
    describable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, req.topics, lambda t: t.name)
    for t in req.topics:
        tr = ListOffsetsTopicResponse(name=t.name)
        if t.name not in describable:  # partitionSeqByAuthorized: answered after the authorized topics
            tr.partitions = [ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                offset=-1, leader_epoch=-1) for p in t.partitions]
            denied.append(tr)
            continue
        topics.append(tr)
        info = image.topic(t.name)
        for p in t.partitions:
            pr = ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0, timestamp=-1,
                                              offset=-1, leader_epoch=-1)
            tr.partitions.append(pr)
            if info is None:
                pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            part, pr.error_code = ctx.replicas.leader_partition(t.name, p.partition_index, p.current_leader_epoch)
            if pr.error_code:
                continue
            try:
                _lookup(part, p.timestamp, req.isolation_level if req.replica_id == -1 else None, pr)
            except KafkaError as exc:
                pr.error_code = int(exc.code)
    return ListOffsetsResponse(topics=topics + denied)


def _lookup(part, timestamp: int, isolation_level: int | None, pr: ListOffsetsPartitionResponse) -> None:
    """``isolation_level`` None: a replica asks (KafkaApis: not a client request), and the log end is fetchable."""
    lg = part.log
    fetchable = (lg.log_end_offset if isolation_level is None
                 else lg.last_stable_offset if isolation_level == 1 else lg.high_watermark)
    if timestamp == EARLIEST:
        pr.offset = lg.log_start_offset
        pr.leader_epoch = _epoch_at(lg, pr.offset)
        return
    # Partition.fetchOffsetForTimestamp's maybeOffsetsError (client requests only)
    lagging = isolation_level is not None and part.epoch_start_offset > lg.high_watermark
    if timestamp == LATEST:
        if lagging:
            raise KafkaError("the high watermark is behind this leader epoch's start", ErrorCode.OFFSET_NOT_AVAILABLE)
        pr.offset = fetchable
        pr.leader_epoch = _epoch_at(lg, pr.offset)
        return
    if timestamp == LATEST_TIERED:
        return
    found = lg.fetch_offset_by_timestamp(timestamp)
    if found is None or found.offset < 0 or (timestamp >= 0 and found.offset >= fetchable):
        if lagging:
            raise KafkaError("the high watermark is behind this leader epoch's start", ErrorCode.OFFSET_NOT_AVAILABLE)
        return
    pr.offset = found.offset
    pr.timestamp = found.timestamp
    pr.leader_epoch = found.leader_epoch if found.leader_epoch is not None else -1


def _epoch_at(lg, offset: int) -> int:
    epoch = lg.leader_epoch_cache.epoch_for_offset(offset)
    if epoch is None:
        epoch = lg.latest_epoch
    return epoch if epoch is not None else -1
