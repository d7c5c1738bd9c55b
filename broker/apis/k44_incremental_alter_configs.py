"""IncrementalAlterConfigs: v0-1.

Behaviour: per resource, independent of the others: TOPIC configs SET/DELETE/APPEND/SUBTRACT (APPEND
and SUBTRACT only on list configs), validated against the topic config definitions (unknown key, bad
type or range: INVALID_CONFIG), committed as ConfigRecords and applied to the topic's logs without a
restart; BROKER_LOGGER SET/DELETE changes log levels (Kafka's way to reload log levels at run time).
validate_only checks without changing anything. Not implemented: dynamic BROKER configs (INVALID_CONFIG).
"""

from __future__ import annotations

from broker.alter_configs import (
    BROKER, BROKER_LOGGER, TOPIC, ResourceError, check_duplicates, commit_topic, incremental_topic_overrides,
    set_logger_levels,
)
from protocol.errors import ErrorCode
from protocol.generated.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from protocol.generated.messages.incremental_alter_configs_response import AlterConfigsResourceResponse

API_KEY = 44
VERSIONS = (0, 1)


async def handle(ctx, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    broker = ctx.broker
    out = []
    for r in req.resources:
        resp = AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=r.resource_type,
                                            resource_name=r.resource_name)
        out.append(resp)
        ops = [(c.name, c.config_operation, c.value) for c in r.configs]
        try:
            check_duplicates([c.name for c in r.configs])
            if r.resource_type == TOPIC:
                if broker.image.topic(r.resource_name) is None:
                    raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"The topic '{r.resource_name}' does not exist.")
                current = dict(broker.image.topic_config(r.resource_name))
                await commit_topic(ctx, r.resource_name, incremental_topic_overrides(current, ops), req.validate_only)
            elif r.resource_type == BROKER_LOGGER:
                if r.resource_name != str(broker.node_id):
                    raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {r.resource_name}")
                set_logger_levels(ops, req.validate_only)
            elif r.resource_type == BROKER:
                raise ResourceError(ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: "
                                    + ", ".join(sorted(c.name for c in r.configs)))
            else:
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}")
        except ResourceError as exc:
            resp.error_code, resp.error_message = exc.code, exc.message
    return IncrementalAlterConfigsResponse(responses=out)
