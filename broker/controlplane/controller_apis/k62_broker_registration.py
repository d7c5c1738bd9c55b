"""BrokerRegistration on the controller (ClusterControlManager.registerBroker): the broker's listeners,
rack, incarnation and log dirs become a RegisterBrokerRecord; its broker epoch is that record's offset.
Another cluster id is INCONSISTENT_CLUSTER_ID; a new incarnation while the old one's session is valid is
DUPLICATE_BROKER_REGISTRATION, except for this node's own broker registering through its own channel: the
previous incarnation was this node's previous process, gone (a combined node restarted after kill -9, or a
single node, does not wait out broker.session.timeout.ms for its own old session, as Kafka's would)."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import BrokerRegistrationRequest, BrokerRegistrationResponse

API_KEY = 62
VERSIONS = (0, 4)


def handle(cctx: ControllerContext, req: BrokerRegistrationRequest) -> ControllerResult:
    if req.cluster_id != cctx.cluster_id:
        return ControllerResult([], BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID))
    endpoints = [(lst.name, lst.host, lst.port, lst.security_protocol) for lst in req.listeners]
    res = cctx.controller.register_broker(
        cctx.image, req.broker_id, req.incarnation_id, endpoints,
        req.rack, cctx.next_offset, list(req.log_dirs), cctx.now_ms,
        previous_process_gone=cctx.from_this_node and req.broker_id == cctx.controller.node_id)
    if res.response:
        return ControllerResult([], BrokerRegistrationResponse(error_code=res.response))
    if res.records:
        epoch = cctx.next_offset
    else:  # the same registration again: the broker keeps its epoch
        epoch = cctx.image.brokers[req.broker_id].broker_epoch
    return ControllerResult(res.records, BrokerRegistrationResponse(error_code=0, broker_epoch=epoch))
