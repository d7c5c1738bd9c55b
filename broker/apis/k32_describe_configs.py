"""DescribeConfigs: v1-4 (v0 removed by KIP-896).

Behaviour (ConfigHelper.describeConfigs): TOPIC resources list every topic config with its effective
value, source, synonyms (broker synonyms and Kafka defaults), type and (when asked) documentation;
unknown topic UNKNOWN_TOPIC_OR_PARTITION; illegal name INVALID_TOPIC_EXCEPTION. BROKER resources
(this node's id) list the broker's configs, its dynamic ones (the listeners' SSL store settings set by
IncrementalAlterConfigs) first as DYNAMIC_BROKER_CONFIG, passwords null and sensitive; the empty name (cluster-wide
dynamic defaults) is empty since none can be set; another broker id INVALID_REQUEST. BROKER_LOGGER lists logger levels.
CLIENT_METRICS resources list the subscription's configured entries (source CLIENT_METRICS_CONFIG, no
defaults or synonyms, as Kafka's ConfigHelper); an empty name is INVALID_REQUEST.
GROUP resources list every group config (consumer.*, share.*) at the group's value (source GROUP_CONFIG) or the
broker's (DEFAULT_CONFIG), whether or not the group exists; an empty name is INVALID_REQUEST.
Authorization (ConfigHelper.handleDescribeConfigsRequest): DESCRIBE_CONFIGS per resource, on the CLUSTER for
BROKER, BROKER_LOGGER and CLIENT_METRICS (else CLUSTER_AUTHORIZATION_FAILED), on the TOPIC (else
TOPIC_AUTHORIZATION_FAILED) and on the GROUP (else GROUP_AUTHORIZATION_FAILED); denied resources answer the
error with its message and no configs, after the described ones.
"""

from __future__ import annotations

from broker.config.config_describe import broker_entries, group_entries, logger_entries, topic_entries
from cluster.acls import AclOperation, ResourceType
from cluster.controller import validate_topic_name
from cluster.dynamic_broker_config import is_connection_quota_key, listener_ssl_key
from cluster.groups.group_config import GroupConfig
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import DescribeConfigsRequest, DescribeConfigsResponse
from protocol.generated.messages.describe_configs_response import (
    DescribeConfigsResourceResult, DescribeConfigsResult,
)

API_KEY = 32
VERSIONS = (1, 4)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
CLIENT_METRICS_CONFIG = 7  # DescribeConfigsResponse.ConfigSource.CLIENT_METRICS_CONFIG


def denied(ctx, resource_type: int, name: str) -> int:
    """The authorization error of describing one resource's configs (0: allowed)."""
    if resource_type in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        return 0 if ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if resource_type == TOPIC:
        return 0 if ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name) \
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == GROUP:
        return 0 if ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.GROUP, name) \
            else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return 0  # an unknown type: answered INVALID_REQUEST below


async def handle(ctx, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results, refused = [], []
    for r in req.resources:
        code = denied(ctx, r.resource_type, r.resource_name)
        if code:
            refused.append(DescribeConfigsResult(error_code=code, error_message=MESSAGES[ErrorCode(code)], configs=[],
                                                 resource_type=r.resource_type, resource_name=r.resource_name))
            continue
        res = DescribeConfigsResult(error_code=0, resource_type=r.resource_type, resource_name=r.resource_name)
        results.append(res)
        keys = r.configuration_keys or None
        if r.resource_type == TOPIC:
            err = validate_topic_name(r.resource_name)
            topic = ctx.image.topic(r.resource_name)
            if err:
                res.error_code, res.error_message = ErrorCode.INVALID_TOPIC_EXCEPTION, err
            elif topic is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                res.error_message = f"Topic {r.resource_name} does not exist"
            else:
                overrides = dict(ctx.image.topic_config(r.resource_name))
                cfg = ctx.replicas.topic_log_config(r.resource_name, overrides)
                res.configs = topic_entries(cfg, overrides, ctx.config.values, ctx.config.explicit, keys,
                                            req.include_synonyms, req.include_documentation)
        elif r.resource_type == BROKER:
            if r.resource_name == "":
                res.configs = []
            elif r.resource_name == str(ctx.node_id):
                own = dict(ctx.image.configs.get((BROKER, r.resource_name), {}))
                dynamic_keys = {k for k in ctx.config.values
                                if listener_ssl_key(k) or is_connection_quota_key(k)}
                res.configs = broker_entries(ctx.config.values, ctx.config.explicit, keys,
                                             req.include_synonyms, dynamic=dynamic_keys,
                                             include_documentation=req.include_documentation,
                                             dynamic_values=own)
            else:
                res.error_code = ErrorCode.INVALID_REQUEST
                res.error_message = (f"Unexpected broker id, expected {ctx.node_id} or empty string, but received "
                                     f"{r.resource_name}")
        elif r.resource_type == BROKER_LOGGER:
            if r.resource_name != str(ctx.node_id):
                res.error_code = ErrorCode.INVALID_REQUEST
                res.error_message = f"Unexpected broker id, expected {ctx.node_id}, but received {r.resource_name}"
            else:
                res.configs = logger_entries(keys)
        elif r.resource_type == CLIENT_METRICS:
            if not r.resource_name:
                res.error_code = ErrorCode.INVALID_REQUEST
                res.error_message = "Client metrics subscription name must not be empty"
            else:
                props = ctx.image.configs.get((CLIENT_METRICS, r.resource_name), {})
                res.configs = [DescribeConfigsResourceResult(name=k, value=v, read_only=False,
                                                             config_source=CLIENT_METRICS_CONFIG,
                                                             is_sensitive=False, synonyms=[], documentation=None)
                               for k, v in props.items() if keys is None or k in keys]
        elif r.resource_type == GROUP:
            if not r.resource_name:
                res.error_code = ErrorCode.INVALID_REQUEST
                res.error_message = "Group name must not be empty"
            else:
                overrides = dict(ctx.image.configs.get((GROUP, r.resource_name), {}))
                res.configs = group_entries(GroupConfig.from_props(ctx.config.values), overrides, keys,
                                            req.include_synonyms, req.include_documentation)
        else:
            res.error_code = ErrorCode.INVALID_REQUEST
            res.error_message = f"Unsupported resource type {r.resource_type}"
    return DescribeConfigsResponse(results=results + refused)
