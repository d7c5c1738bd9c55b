"""IncrementalAlterConfigs on the controller (ConfigurationControlManager.incrementalAlterConfigs): TOPIC
configs SET/DELETE/APPEND/SUBTRACT (APPEND and SUBTRACT only on list configs), validated against the topic
config definitions (unknown key, bad type or range: INVALID_CONFIG), committed as ConfigRecords;
validate_only checks without records. Dynamic BROKER configs are not implemented (INVALID_CONFIG)."""

from __future__ import annotations

from broker.alter_configs import (
    BROKER, TOPIC, ResourceError, check_duplicates, incremental_topic_overrides, topic_config_records,
)
from broker.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from protocol.generated.messages.incremental_alter_configs_response import AlterConfigsResourceResponse

API_KEY = 44
VERSIONS = (0, 1)


def handle(cctx: ControllerContext, req: IncrementalAlterConfigsRequest) -> ControllerResult:
    records: list = []
    out = []
    for r in req.resources:
        resp = AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=r.resource_type,
                                            resource_name=r.resource_name)
        out.append(resp)
        ops = [(c.name, c.config_operation, c.value) for c in r.configs]
        try:
            check_duplicates([c.name for c in r.configs])
            if r.resource_type == TOPIC:
                if cctx.image.topic(r.resource_name) is None:
                    raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"The topic '{r.resource_name}' does not exist.")
                current = dict(cctx.image.topic_config(r.resource_name))
                records += topic_config_records(cctx, r.resource_name, incremental_topic_overrides(current, ops),
                                                req.validate_only)
            elif r.resource_type == BROKER:
                raise ResourceError(ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: "
                                    + ", ".join(sorted(c.name for c in r.configs)))
            else:
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}")
        except ResourceError as exc:
            resp.error_code, resp.error_message = exc.code, exc.message
    return ControllerResult(records, IncrementalAlterConfigsResponse(responses=out))
