"""DescribeTransactions: v0 (KIP-664; TransactionCoordinator.handleDescribeTransactions): each id's state, producer
id and epoch, timeout, start time and partitions, from the coordinator's memory; TRANSACTIONAL_ID_NOT_FOUND for an
id it does not know, NOT_COORDINATOR for one whose partition is led elsewhere, COORDINATOR_LOAD_IN_PROGRESS while
it loads. Authorization (KafkaApis.handleDescribeTransactionsRequest, with an authorizer): DESCRIBE on each
transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it; an answered transaction lists only the topics
the principal may DESCRIBE."""

from __future__ import annotations

from broker.transactions.txn_service import TxnServiceError
from cluster.acls import AclOperation, ResourceType
from cluster.txn import txn_api
from cluster.txn.txn_metadata import TxnError
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

API_KEY = 65
VERSIONS = (0, 0)


async def handle(ctx, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    states = []
    for txn_id in req.transactional_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            states.append(txn_api.describe_error(txn_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        try:
            state = await ctx.txns.on_shard(txn_id, lambda shard, i=txn_id: shard.describe_transaction(i))
        except (TxnServiceError, TxnError) as exc:
            state = txn_api.describe_error(txn_id, exc.code)
        if ctx.handles.authorizer is not None:  # only the topics the principal may describe
            state.topics = [t for t in state.topics
                            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)]
        states.append(state)
    return DescribeTransactionsResponse(transaction_states=states)
