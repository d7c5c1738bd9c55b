"""EndTxn: v0-5 (TransactionCoordinator.handleEndTransaction). Answered once the PrepareCommit / PrepareAbort
record is committed to ``__transaction_state``; the markers are written after (the transaction's partitions stay
unstable to read_committed consumers until then), then CompleteCommit / CompleteAbort. Errors: NOT_COORDINATOR,
CONCURRENT_TRANSACTIONS (a previous end still writing its markers), INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE
(an end on Empty, a commit after an abort), PRODUCER_FENCED / INVALID_PRODUCER_EPOCH below v2.

v5 (transactions V2, KIP-890 part 2; clients send it when the finalized ``transaction.version`` is 2): the
coordinator bumps the epoch in the Prepare* record and answers the producer id and epoch the producer continues
with (a new producer id at epoch 0 once the epochs are used up); the markers carry the bumped epoch and TV2
(WriteTxnMarkers v2). A delayed EndTxn of an earlier transaction then carries a stale epoch: PRODUCER_FENCED
(KAFKA-17754); a retry of the finished one (the epoch before the bump) gets the same answer again. As in Kafka, v5
is served whatever the finalized level: the client chose it from the ApiVersions it was given.

Authorization (KafkaApis.handleEndTxnRequest): WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
(producer id -1, epoch -1: the response's defaults)."""

from __future__ import annotations

from broker.transactions.txn_service import TxnServiceError
from cluster.acls import AclOperation, ResourceType
from cluster.txn import txn_api
from cluster.txn.txn_coordinator import EndTxnOutcome, TxnCoordinatorShard
from cluster.txn.txn_metadata import TxnError
from protocol.errors import ErrorCode
from protocol.generated.messages import EndTxnRequest, EndTxnResponse

API_KEY = 26
VERSIONS = (0, 5)


async def handle(ctx, req: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    try:
        outcome = await ctx.park(ctx.txns.run(req.transactional_id, TxnCoordinatorShard.end_txn, req.transactional_id,
                                              req.producer_id, req.producer_epoch, req.committed,
                                              txn_api.end_txn_client_version(ctx.version)))
    except (TxnServiceError, TxnError) as exc:
        outcome = EndTxnOutcome(exc.code)
    return txn_api.end_txn_response(outcome, ctx.version)
