"""UnregisterBroker on the controller (ReplicationControlManager.unregisterBroker): the broker leaves every
ISR and its registration is removed; an unknown id is BROKER_ID_NOT_REGISTERED."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.generated.messages import UnregisterBrokerRequest, UnregisterBrokerResponse

API_KEY = 64
VERSIONS = (0, 0)


def handle(cctx: ControllerContext, req: UnregisterBrokerRequest) -> ControllerResult:
    res = cctx.controller.unregister_broker(cctx.image, req.broker_id)
    code, message = res.response
    return ControllerResult(res.records, UnregisterBrokerResponse(error_code=code, error_message=message))
