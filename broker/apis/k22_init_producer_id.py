"""InitProducerId: v0-5 (v6, unstable in 4.1, is not advertised).

Behaviour (TransactionCoordinator.handleInitProducerId): with a null transactional id (an idempotent producer)
every call returns a fresh producer id with epoch 0, taken from a block the controller committed to the metadata
log (ProducerIdsRecord), so ids are never reused, even after a restart. With a transactional id, the coordinator
of its ``__transaction_state`` partition answers (a new id, or the id's epoch bumped and an ongoing transaction
aborted first: CONCURRENT_TRANSACTIONS meanwhile; KIP-360's recovery with the v3+ producer id and epoch), once the
id's new state is committed; an empty id INVALID_REQUEST, a timeout above ``transaction.max.timeout.ms``
INVALID_TRANSACTION_TIMEOUT, a stale producer PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v4).

Authorization (KafkaApis.handleInitProducerIdRequest, KIP-679; with an authorizer): a transactional id needs WRITE on
it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an idempotent producer needs IDEMPOTENT_WRITE on the cluster (a
denial not logged) or WRITE on some topic (authorizeByResourceType), else CLUSTER_AUTHORIZATION_FAILED. Either error
with producer id -1 and epoch -1 (the request's error response).
"""

from __future__ import annotations

from broker.transactions.txn_service import TxnServiceError
from cluster.acls import CLUSTER_NAME, AclOperation, ResourceType
from cluster.txn import txn_api
from cluster.txn.txn_coordinator import InitProducerIdOutcome, TxnCoordinatorShard
from cluster.txn.txn_metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnError
from protocol.errors import ErrorCode
from protocol.generated.messages import InitProducerIdRequest, InitProducerIdResponse

API_KEY = 22
VERSIONS = (0, 5)


async def handle(ctx, req: InitProducerIdRequest) -> InitProducerIdResponse:
    txn_id = req.transactional_id
    if txn_id is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not (ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, True, False)
              or ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC)):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if txn_id is None:
        pid = await ctx.park(ctx.handles.next_producer_id())
        return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)
    try:
        if not txn_id:
            raise TxnError(ErrorCode.INVALID_REQUEST)
        expected = txn_api.init_producer_id_expected(req)
        outcome = await ctx.park(ctx.txns.run(txn_id, TxnCoordinatorShard.init_producer_id, txn_id,
                                              req.transaction_timeout_ms, expected))
    except (TxnServiceError, TxnError) as exc:
        outcome = InitProducerIdOutcome(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, exc.code)
    return txn_api.init_producer_id_response(outcome, ctx.version)


def _error(code: int) -> InitProducerIdResponse:
    """InitProducerIdRequest.getErrorResponse."""
    return InitProducerIdResponse(error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)
