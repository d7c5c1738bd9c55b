"""AlterConfigs on the controller (ConfigurationControlManager.legacyAlterConfigs): a TOPIC resource's
overrides are replaced by exactly the given set, validated as IncrementalAlterConfigs; per-resource
errors; validate_only. Dynamic BROKER configs are not implemented (INVALID_CONFIG)."""

from __future__ import annotations

from broker.alter_configs import BROKER, TOPIC, ResourceError, check_duplicates, topic_config_records
from broker.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterConfigsRequest, AlterConfigsResponse
from protocol.generated.messages.alter_configs_response import AlterConfigsResourceResponse

API_KEY = 33
VERSIONS = (0, 2)


def handle(cctx: ControllerContext, req: AlterConfigsRequest) -> ControllerResult:
    records: list = []
    out = []
    for r in req.resources:
        resp = AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=r.resource_type,
                                            resource_name=r.resource_name)
        out.append(resp)
        try:
            check_duplicates([c.name for c in r.configs])
            if r.resource_type == TOPIC:
                if cctx.image.topic(r.resource_name) is None:
                    raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"The topic '{r.resource_name}' does not exist.")
                if any(c.value is None for c in r.configs):
                    raise ResourceError(ErrorCode.INVALID_REQUEST, "Null value not supported")
                records += topic_config_records(cctx, r.resource_name, {c.name: c.value for c in r.configs},
                                                req.validate_only)
            elif r.resource_type == BROKER:
                raise ResourceError(ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: "
                                    + ", ".join(sorted(c.name for c in r.configs)))
            else:
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}")
        except ResourceError as exc:
            resp.error_code, resp.error_message = exc.code, exc.message
    return ControllerResult(records, AlterConfigsResponse(responses=out))
