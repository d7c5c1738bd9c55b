"""IncrementalAlterConfigs on the controller (ConfigurationControlManager.incrementalAlterConfigs): TOPIC
configs SET/DELETE/APPEND/SUBTRACT (APPEND and SUBTRACT only on list configs), validated against the topic
config definitions (unknown key, bad type or range: INVALID_CONFIG), committed as ConfigRecords;
CLIENT_METRICS subscriptions (``metrics``, ``interval.ms``, ``match``; APPEND/SUBTRACT on the two lists)
validated as ClientMetricsConfigs; BROKER resources: the per-broker SSL store settings under a listener prefix
(cluster/dynamic_broker_config.py; any other key INVALID_CONFIG), a record for every key named (KAFKA-14136);
GROUP resources (KIP-848/KIP-932 group configs, cluster/groups/group_config.py) SET/DELETE, validated as
GroupConfig.validate against the group.* bounds (unknown key, bad value: INVALID_CONFIG), whether or not the group
exists; validate_only checks without records."""

from __future__ import annotations

from broker.config.alter_configs import (
    BROKER, CLIENT_METRICS, GROUP, alter_resources, incremental_overrides, incremental_topic_overrides,
)
from broker.controlplane.controller_apis.context import ControllerContext
from cluster import client_metrics
from cluster.controller import ControllerResult
from protocol.generated.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from protocol.generated.messages.incremental_alter_configs_response import AlterConfigsResourceResponse

API_KEY = 44
VERSIONS = (0, 1)


def _apply_ops(resource, current: dict[str, str]) -> dict[str, str]:
    ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
    if resource.resource_type == CLIENT_METRICS:
        return incremental_overrides(current, ops, client_metrics.LIST_CONFIGS, {})
    if resource.resource_type in (BROKER, GROUP):  # neither the dynamic broker keys (SSL stores) nor groups' are lists
        return incremental_overrides(current, ops, frozenset(), {})
    return incremental_topic_overrides(current, ops)


def handle(cctx: ControllerContext, req: IncrementalAlterConfigsRequest) -> ControllerResult:
    return alter_resources(cctx, req, IncrementalAlterConfigsResponse, AlterConfigsResourceResponse, _apply_ops)
