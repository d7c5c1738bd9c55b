"""AlterConfigs on the controller (ConfigurationControlManager.legacyAlterConfigs): a TOPIC resource's
overrides are replaced by exactly the given set, validated as IncrementalAlterConfigs; per-resource
errors; validate_only. A BROKER resource's dynamic configs are replaced likewise (only the per-broker SSL store
settings under a listener prefix can be set: cluster/dynamic_broker_config.py)."""

from __future__ import annotations

from broker.config.alter_configs import ResourceError, alter_resources
from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterConfigsRequest, AlterConfigsResponse
from protocol.generated.messages.alter_configs_response import AlterConfigsResourceResponse

API_KEY = 33
VERSIONS = (0, 2)


def _replace_all(resource, current: dict[str, str]) -> dict[str, str]:
    if any(c.value is None for c in resource.configs):
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Null value not supported")
    return {c.name: c.value for c in resource.configs}


def handle(cctx: ControllerContext, req: AlterConfigsRequest) -> ControllerResult:
    return alter_resources(cctx, req, AlterConfigsResponse, AlterConfigsResourceResponse, _replace_all)
