"""InitProducerId: v0-5 (v6, unstable in 4.1, is not advertised).

Behaviour (TransactionCoordinator.handleInitProducerId with a null transactional id): every call
returns a fresh producer id with epoch 0, taken from a block the controller committed to the
metadata log (ProducerIdsRecord), so ids are never reused, even after a restart.
Not implemented: transactional ids (COORDINATOR_NOT_AVAILABLE until the transaction coordinator exists).
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.generated.messages import InitProducerIdRequest, InitProducerIdResponse

API_KEY = 22
VERSIONS = (0, 5)


async def handle(ctx, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1,
                                      producer_epoch=-1)
    pid = await ctx.handles.next_producer_id()
    return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)
