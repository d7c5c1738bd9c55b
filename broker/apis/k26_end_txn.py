"""EndTxn: v0-4 (TransactionCoordinator.handleEndTransaction). Answered once the PrepareCommit / PrepareAbort
record is committed to ``__transaction_state``; the markers are written after (the transaction's partitions stay
unstable to read_committed consumers until then), then CompleteCommit / CompleteAbort. Errors: NOT_COORDINATOR,
CONCURRENT_TRANSACTIONS (a previous end still writing its markers), INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE
(an end on Empty, a commit after an abort), PRODUCER_FENCED / INVALID_PRODUCER_EPOCH below v2. v5 (transactions V2,
KIP-890 part 2: an epoch bump per transaction) is not advertised: ``transaction.version`` 2 is not built."""

from __future__ import annotations

from broker.transactions.txn_service import TxnServiceError
from cluster.txn import txn_api
from cluster.txn.txn_coordinator import EndTxnOutcome, TxnCoordinatorShard
from cluster.txn.txn_metadata import TxnError
from protocol.generated.messages import EndTxnRequest, EndTxnResponse

API_KEY = 26
VERSIONS = (0, 4)


async def handle(ctx, req: EndTxnRequest) -> EndTxnResponse:
    try:
        outcome = await ctx.txns.run(req.transactional_id, TxnCoordinatorShard.end_txn, req.transactional_id,
                                     req.producer_id, req.producer_epoch, req.committed,
                                     txn_api.end_txn_client_version(ctx.version))
    except (TxnServiceError, TxnError) as exc:
        outcome = EndTxnOutcome(exc.code)
    return txn_api.end_txn_response(outcome, ctx.version)
