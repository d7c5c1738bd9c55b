"""ListTransactions: v0-2 (KIP-664, KIP-994's duration filter, KIP-1152's id pattern;
TransactionStateManager.listTransactionStates): the transactions of every ``__transaction_state`` partition this
broker coordinates, filtered by state, producer id, how long they have run and a transactional id pattern;
COORDINATOR_LOAD_IN_PROGRESS while one of them loads, COORDINATOR_NOT_AVAILABLE before the coordinator starts.
Authorization (KafkaApis.handleListTransactionsRequest, with an authorizer): only the transactional ids the principal
may DESCRIBE are listed."""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from cluster.txn import txn_api
from protocol.errors import ErrorCode
from protocol.generated.messages import ListTransactionsRequest, ListTransactionsResponse

API_KEY = 66
VERSIONS = (0, 2)


async def handle(ctx, req: ListTransactionsRequest) -> ListTransactionsResponse:
    txns = ctx.txns
    if not txns.active:
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, unknown_state_filters=[],
                                        transaction_states=[])
    response = txn_api.list_transactions_response(txns.loaded_shards(), req, ctx.version, ctx.clock.now_ms(),
                                                  any_loading=txns.any_loading())
    if ctx.handles.authorizer is not None:
        response.transaction_states = [
            s for s in response.transaction_states
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id)]
    return response
