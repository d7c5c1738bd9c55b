"""TxnOffsetCommit: v0-5 (KIP-98, KIP-447), a transactional producer's ``send_offsets_to_transaction``.

Behaviour (KafkaApis.handleTxnOffsetCommitRequest, GroupCoordinatorService.commitTransactionalOffsets,
OffsetMetadataManager.commitTransactionalOffset): partitions of unknown topics answer
UNKNOWN_TOPIC_OR_PARTITION and the rest go to the group's coordinator, which writes them to the group's
``__consumer_offsets`` partition as the producer's transactional batch; they stay pending (invisible to
OffsetFetch, UNSTABLE_OFFSET_COMMIT with require_stable) until the transaction's COMMIT marker makes them
the committed offsets (ABORT drops them). v3+ (KIP-447) check the member: ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (a consumer-protocol member's stale epoch answers ILLEGAL_GENERATION);
v0-2 carry no member and are not checked. A fenced producer gets the log's INVALID_PRODUCER_EPOCH; metadata
longer than ``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE; an empty group id INVALID_GROUP_ID;
coordinator errors as OffsetCommit's (COORDINATOR_LOAD_IN_PROGRESS is COORDINATOR_NOT_AVAILABLE below v2).

v5 (transactions V2, KIP-890 part 2; TransactionSupportedOperation ADD_PARTITION): the client sent no
AddOffsetsToTxn, so the group's ``__consumer_offsets`` partition is first added to the transaction by its
coordinator (the verifier's add, recording TV2, CONCURRENT_TRANSACTIONS retried on the server side as for
Produce); its refusal is every partition's answer (PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH, the retriable ones as COORDINATOR_NOT_AVAILABLE, as GroupCoordinatorService normalizes
them). Only at a finalized ``transaction.version`` of 2 or more; below, UNSUPPORTED_VERSION for every partition (as
a transactional Produce v12 is answered).

Authorization (KafkaApis.handleTxnOffsetCommitRequest), before anything else: WRITE on the transactional id, else
every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else every partition
GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions TOPIC_AUTHORIZATION_FAILED (before the topic's
existence is looked at).
"""

from __future__ import annotations

from broker.groups.group_service import req_ctx
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode
from protocol.topics import GROUP_METADATA_TOPIC
from protocol.generated.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from protocol.generated.messages.txn_offset_commit_request import TxnOffsetCommitRequestTopic
from protocol.generated.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

API_KEY = 28
VERSIONS = (0, 5)


def _answer(name: str, partitions, code: int) -> TxnOffsetCommitResponseTopic:
    return TxnOffsetCommitResponseTopic(name=name, partitions=[
        TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in partitions])


async def handle(ctx, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    out = TxnOffsetCommitResponse(topics=await _commit(ctx, req))
    if ctx.version < 2:
        # clients before 2.0 (KAFKA-7296) do not retry COORDINATOR_LOAD_IN_PROGRESS
        for t in out.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    p.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return out


async def _commit(ctx, req: TxnOffsetCommitRequest) -> list[TxnOffsetCommitResponseTopic]:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return [_answer(t.name, t.partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t in req.topics]
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return [_answer(t.name, t.partitions, ErrorCode.GROUP_AUTHORIZATION_FAILED) for t in req.topics]
    if not req.group_id:
        return [_answer(t.name, t.partitions, ErrorCode.INVALID_GROUP_ID) for t in req.topics]
    image = ctx.image
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, req.topics, lambda t: t.name)
    answered: dict[int, TxnOffsetCommitResponseTopic] = {}
    valid: list[tuple[int, TxnOffsetCommitRequestTopic]] = []
    for i, t in enumerate(req.topics):
        if t.name not in readable:
            answered[i] = _answer(t.name, t.partitions, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        topic = image.topic(t.name)
        if topic is None:
            answered[i] = _answer(t.name, t.partitions, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        good = [p for p in t.partitions if p.partition_index in topic.partitions]
        bad = [p for p in t.partitions if p.partition_index not in topic.partitions]
        if bad:
            answered[i] = _answer(t.name, bad, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if good:
            valid.append((i, TxnOffsetCommitRequestTopic(name=t.name, partitions=good)))
    committed = await _to_coordinator(ctx, req, valid) if valid else {}
    topics = []
    for i in range(len(req.topics)):
        a, c = answered.get(i), committed.get(i)
        if a is not None and c is not None:
            a.partitions.extend(c.partitions)
            topics.append(a)
        elif a is not None or c is not None:
            topics.append(a or c)
    return topics


async def _to_coordinator(ctx, req: TxnOffsetCommitRequest, valid: list[tuple[int, TxnOffsetCommitRequestTopic]]
                          ) -> dict[int, TxnOffsetCommitResponseTopic]:
    """The answers of the group coordinator for the topics of known partitions (by their index in the request)."""
    committed: dict[int, TxnOffsetCommitResponseTopic] = {}
    if ctx.version >= 5:
        code = await _add_offsets_partition(ctx, req)
        if code:
            return {i: _answer(t.name, t.partitions, code) for i, t in valid}
    sub = TxnOffsetCommitRequest(transactional_id=req.transactional_id, group_id=req.group_id,
                                 producer_id=req.producer_id, producer_epoch=req.producer_epoch,
                                 generation_id=req.generation_id if ctx.version >= 3 else -1,
                                 member_id=req.member_id if ctx.version >= 3 else "",
                                 group_instance_id=req.group_instance_id if ctx.version >= 3 else None,
                                 topics=[t for _, t in valid])
    try:
        res = await ctx.park(ctx.groups.commit_transactional_offsets(req_ctx(ctx), sub))
        if res.error is not None:
            raise res.error
        for (i, _), rt in zip(valid, res.response.topics):
            committed[i] = rt
    except GroupError as exc:
        for i, t in valid:
            committed[i] = _answer(t.name, t.partitions, exc.code)
    return committed


# the verifier's errors that mean "try again" (its NETWORK_EXCEPTION, a coordinator moving or loading, a previous
# transaction's markers still being written): the coordinator-not-available TxnOffsetCommit clients retry
_RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_ENOUGH_REPLICAS,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT})


async def _add_offsets_partition(ctx, req: TxnOffsetCommitRequest) -> int:
    """TV2: the group's ``__consumer_offsets`` partition joins the transaction (an error code, 0 when added)."""
    if ctx.txns.transaction_version < 2:
        return ErrorCode.UNSUPPORTED_VERSION
    try:  # this broker must be the group's coordinator first (it creates __consumer_offsets on first use)
        await ctx.park(ctx.groups.shard_for(req.group_id))
    except GroupError as exc:
        return int(exc.code)
    tp = (GROUP_METADATA_TOPIC, ctx.groups.partition_for(req.group_id))
    errors = await ctx.txns.verifier.add_or_verify(req.transactional_id, req.producer_id, req.producer_epoch, [tp],
                                                   True, True, ctx.config, ctx.clock.monotonic)
    code = int(errors.get(tp, ErrorCode.NONE))
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if code in _RETRIABLE else code
