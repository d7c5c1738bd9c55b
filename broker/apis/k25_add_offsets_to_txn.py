"""AddOffsetsToTxn: v0-4 (TransactionCoordinator.handleAddPartitions with the group's ``__consumer_offsets``
partition): a transactional producer's offsets (TxnOffsetCommit) will go to that partition, which then gets the
transaction's marker. Errors as AddPartitionsToTxn's, PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below v2.
Authorization (KafkaApis.handleAddOffsetsToTxnRequest): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then READ on the group, else GROUP_AUTHORIZATION_FAILED."""

from __future__ import annotations

from broker.transactions.txn_service import TxnServiceError
from cluster.acls import AclOperation, ResourceType
from cluster.txn import txn_api
from cluster.txn.txn_coordinator import TxnCoordinatorShard
from cluster.txn.txn_metadata import TxnError
from protocol.errors import ErrorCode
from protocol.generated.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

API_KEY = 25
VERSIONS = (0, 4)


async def handle(ctx, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    partition = txn_api.offsets_partition(req.group_id, ctx.groups.num_partitions())
    try:
        code = await ctx.park(ctx.txns.run(req.transactional_id, TxnCoordinatorShard.add_partitions_to_txn,
                                           req.transactional_id, req.producer_id, req.producer_epoch, [partition]))
    except (TxnServiceError, TxnError) as exc:
        code = exc.code
    return txn_api.add_offsets_to_txn_response(code, ctx.version)
