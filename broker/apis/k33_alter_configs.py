"""AlterConfigs: v0-2 (deprecated by Kafka in favour of IncrementalAlterConfigs, still served).

BROKER_LOGGER is answered here (not allowed: INVALID_REQUEST); every other resource is forwarded to the
controller (broker/controlplane/controller_apis/k33_alter_configs.py), as Kafka's ConfigAdminManager splits it.
Behaviour there: a TOPIC resource's overrides are replaced by exactly the given set (keys not named are
removed), validated like IncrementalAlterConfigs; per-resource errors; validate_only.
A BROKER resource is checked here first as in
IncrementalAlterConfigs (broker/config/alter_configs.validate_broker_resource), its dynamic configs replaced.
Authorization: none on this broker (ConfigAdminManager.preprocess of an AlterConfigsRequest asks nothing); the
forwarded resources are authorized by the controller (ControllerApis.handleLegacyAlterConfigs).
"""

from __future__ import annotations

from broker.config.alter_configs import (
    BROKER, BROKER_LOGGER, ResourceError, forward_remaining, validate_broker_resource,
)
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterConfigsRequest, AlterConfigsResponse
from protocol.generated.messages.alter_configs_response import AlterConfigsResourceResponse

API_KEY = 33
VERSIONS = (0, 2)


def _replace_all(resource) -> dict[str, str]:
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    return {c.name: c.value for c in resource.configs}


async def handle(ctx, req: AlterConfigsRequest) -> AlterConfigsResponse:
    local = {i: AlterConfigsResourceResponse(error_code=ErrorCode.INVALID_REQUEST,
                                             error_message="AlterConfigs does not support BROKER_LOGGER",
                                             resource_type=r.resource_type, resource_name=r.resource_name)
             for i, r in enumerate(req.resources) if r.resource_type == BROKER_LOGGER}
    for i, r in enumerate(req.resources):
        if r.resource_type != BROKER:
            continue
        try:
            validate_broker_resource(ctx, r, lambda current, r=r: _replace_all(r))
        except ResourceError as exc:
            local[i] = AlterConfigsResourceResponse(error_code=exc.code, error_message=exc.message,
                                                    resource_type=r.resource_type, resource_name=r.resource_name)
    return await forward_remaining(ctx, req, local, AlterConfigsResponse)
