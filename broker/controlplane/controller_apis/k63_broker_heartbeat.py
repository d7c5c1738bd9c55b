"""BrokerHeartbeat on the controller (QuorumController.processBrokerHeartbeat): keeps the broker's session,
unfences it once it has caught up with its own registration, fences it on request, and runs a controlled
shutdown (leaderships moved away first, then let go once every active broker has seen that). A heartbeat
from another incarnation (stale broker epoch) or an unregistered broker is STALE_BROKER_EPOCH."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.generated.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse

API_KEY = 63
VERSIONS = (0, 1)


def handle(cctx: ControllerContext, req: BrokerHeartbeatRequest) -> ControllerResult:
    res = cctx.controller.process_broker_heartbeat(
        cctx.image, req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
        req.want_shut_down, cctx.next_offset, cctx.now_ms)
    r = res.response
    return ControllerResult(res.records, BrokerHeartbeatResponse(
        error_code=r.error_code, is_caught_up=r.is_caught_up, is_fenced=r.is_fenced,
        should_shut_down=r.should_shut_down))
