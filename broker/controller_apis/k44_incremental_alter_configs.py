"""IncrementalAlterConfigs on the controller (ConfigurationControlManager.incrementalAlterConfigs): TOPIC
configs SET/DELETE/APPEND/SUBTRACT (APPEND and SUBTRACT only on list configs), validated against the topic
config definitions (unknown key, bad type or range: INVALID_CONFIG), committed as ConfigRecords;
validate_only checks without records. Dynamic BROKER configs are not implemented (INVALID_CONFIG)."""

from __future__ import annotations

from broker.alter_configs import alter_resources, incremental_topic_overrides
from broker.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.generated.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from protocol.generated.messages.incremental_alter_configs_response import AlterConfigsResourceResponse

API_KEY = 44
VERSIONS = (0, 1)


def _apply_ops(resource, current: dict[str, str]) -> dict[str, str]:
    return incremental_topic_overrides(current, [(c.name, c.config_operation, c.value) for c in resource.configs])


def handle(cctx: ControllerContext, req: IncrementalAlterConfigsRequest) -> ControllerResult:
    return alter_resources(cctx, req, IncrementalAlterConfigsResponse, AlterConfigsResourceResponse, _apply_ops)
