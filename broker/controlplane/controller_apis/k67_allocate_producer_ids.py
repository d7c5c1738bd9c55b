"""AllocateProducerIds on the controller (ProducerIdControlManager): a block of ids, committed before it is
handed out, so a restart never hands out an id twice; a stale broker epoch is STALE_BROKER_EPOCH."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse

API_KEY = 67
VERSIONS = (0, 0)


def handle(cctx: ControllerContext, req: AllocateProducerIdsRequest) -> ControllerResult:
    broker = cctx.image.brokers.get(req.broker_id)
    if broker is None or broker.fenced or broker.broker_epoch != req.broker_epoch:
        code = ErrorCode.STALE_BROKER_EPOCH if broker is not None else ErrorCode.BROKER_ID_NOT_REGISTERED
        return ControllerResult([], AllocateProducerIdsResponse(error_code=code))
    res = cctx.controller.allocate_producer_ids(cctx.image, req.broker_id, req.broker_epoch)
    start, size = res.response
    return ControllerResult(res.records, AllocateProducerIdsResponse(error_code=0, producer_id_start=start,
                                                                     producer_id_len=size))
