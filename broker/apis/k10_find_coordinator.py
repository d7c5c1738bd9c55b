"""FindCoordinator: v0-6 (v4+ batches keys).

Behaviour: GROUP keys are coordinated by this node (its endpoint for the request's listener);
TRANSACTION keys answer COORDINATOR_NOT_AVAILABLE until transactions exist; other key types
(share groups) INVALID_REQUEST. Advertising this API matters beyond groups: librdkafka only
compresses with LZ4 when FindCoordinator is advertised.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.generated.messages import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.generated.messages.find_coordinator_response import Coordinator

API_KEY = 10
VERSIONS = (0, 6)

GROUP, TRANSACTION = 0, 1


def _coordinator(ctx, key: str, key_type: int) -> Coordinator:
    if key_type == GROUP:
        ep = ctx.handles.advertised_endpoint(ctx.listener)
        return Coordinator(key=key, node_id=ctx.node_id, host=ep.host, port=ep.port, error_code=0)
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE if key_type == TRANSACTION else ErrorCode.INVALID_REQUEST
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                       error_message="The coordinator is not available." if key_type == TRANSACTION else
                       f"Unsupported key type {key_type}")


async def handle(ctx, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.version >= 4:
        return FindCoordinatorResponse(coordinators=[_coordinator(ctx, k, req.key_type) for k in req.coordinator_keys])
    c = _coordinator(ctx, req.key, req.key_type)
    return FindCoordinatorResponse(error_code=c.error_code, error_message=c.error_message, node_id=c.node_id,
                                   host=c.host, port=c.port)
