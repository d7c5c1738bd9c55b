"""AddPartitionsToTxn: v0-5 (KafkaApis.handleAddPartitionsToTxnRequest, TransactionCoordinator.handleAddPartitions).

v0-3 come from transactional producers (one transaction), v4+ from brokers (a batch of transactions, each maybe
``verify_only``: KIP-890's check of a transactional produce, answered from the coordinator's state without a
write). Per transaction: partitions of topics unknown here UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED; else the coordinator's answer (NOT_COORDINATOR, CONCURRENT_TRANSACTIONS,
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH below v2, ...), once the transaction's new
partitions are committed to ``__transaction_state``. A v5 transaction without ``verify_only`` is a broker's implicit
add for a Produce v12+ / TxnOffsetCommit v5 (transactions V2): the coordinator records the client's TV2 with it
(KafkaApis: version > 4).

Authorization (KafkaApis.handleAddPartitionsToTxnRequest): v4+ come from brokers and need CLUSTER_ACTION on the
cluster, else the whole request answers CLUSTER_AUTHORIZATION_FAILED (top-level, no results). v0-3 come from
producers: WRITE on the transactional id, else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then WRITE on
each topic, internal topics never (a client may not add them, authorizer or not), else TOPIC_AUTHORIZATION_FAILED,
checked before the topic's existence; any failed partition fails the transaction (the others
OPERATION_NOT_ATTEMPTED).
"""

from __future__ import annotations

import asyncio

from broker.transactions.txn_service import TxnServiceError
from cluster.acls import AclOperation, ResourceType
from cluster.txn import txn_api
from cluster.txn.txn_coordinator import TxnCoordinatorShard
from cluster.txn.txn_metadata import TransactionVersion, TxnError
from protocol.errors import ErrorCode
from protocol.generated.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.topics import INTERNAL_TOPICS

API_KEY = 24
VERSIONS = (0, 5)


async def handle(ctx, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    version = ctx.version
    if version >= 4 and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        # authorizeClusterOperation throws: AddPartitionsToTxnRequest.getErrorResponse
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = await asyncio.gather(*[_one(ctx, version, *txn)
                                     for txn in txn_api.add_partitions_transactions(req, version)])
    return txn_api.add_partitions_response(list(results), version)


async def _one(ctx, version: int, txn_id: str, producer_id: int, producer_epoch: int, verify_only: bool,
               partitions: list[tuple[str, int]]):
    image = ctx.image
    if version < 4:  # from a producer: its transactional id and topics (KafkaApis)
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return txn_api.add_partitions_result(
                txn_id, dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        writable = ctx.filter_authorized(AclOperation.WRITE, ResourceType.TOPIC,
                                         [tp for tp in partitions if tp[0] not in INTERNAL_TOPICS], lambda tp: tp[0])
    else:
        writable = None
    errors = {}
    for tp in partitions:
        if writable is not None and tp[0] not in writable:
            errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif image.topic(tp[0]) is None or tp[1] not in image.topic(tp[0]).partitions:
            errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if errors:
        return txn_api.add_partitions_result(txn_id, {
            tp: errors.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions})
    try:
        if verify_only:
            errors = await ctx.park(ctx.txns.on_shard(txn_id, lambda shard: shard.verify_partitions_in_txn(
                txn_id, producer_id, producer_epoch, partitions)))
            return txn_api.add_partitions_result(txn_id, errors)
        tv = TransactionVersion.TV_2 if version > 4 else TransactionVersion.TV_0

        def add(shard: TxnCoordinatorShard, *args, **kwargs):
            return shard.add_partitions_to_txn(*args, **kwargs, client_transaction_version=tv)
        code = await ctx.park(ctx.txns.run(txn_id, add, txn_id, producer_id, producer_epoch, partitions))
    except (TxnServiceError, TxnError) as exc:
        code = exc.code
    return txn_api.add_partitions_error_result(txn_id, partitions, code, version)
