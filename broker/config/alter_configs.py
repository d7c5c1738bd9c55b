"""What AlterConfigs and IncrementalAlterConfigs share: per-resource validation and commit.

Topic configs become ConfigRecords in the metadata log (so they survive restarts and reach every
log through the image); logger levels change in place, as Kafka's BROKER_LOGGER does.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from cluster.controller import ControllerResult
from protocol.errors import MESSAGES, ErrorCode
from storage.config import TOPIC_CONFIGS

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = {d.name for d in TOPIC_CONFIGS if d.type == "list"}
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


class ResourceError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def incremental_overrides(current: dict[str, str], ops: list[tuple[str, int, str | None]],
                          list_configs: frozenset[str] | set[str], defaults: dict[str, str]) -> dict[str, str]:
    """Apply SET/DELETE/APPEND/SUBTRACT to a resource's configs (Kafka's ConfigurationControlManager);
    APPEND and SUBTRACT only on list configs, starting from the default when unset."""
    new = dict(current)
    for name, op, value in ops:
        if op == SET:
            if value is None:
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
            new[name] = value
        elif op == DELETE:
            new.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name not in list_configs:
                verb = "append" if op == APPEND else "subtract"
                raise ResourceError(ErrorCode.INVALID_CONFIG,
                                    f"Config value {verb} is not allowed for config key: {name}")
            base = [v for v in new.get(name, defaults.get(name, "")).split(",") if v]
            items = [v for v in (value or "").split(",") if v]
            if op == APPEND:
                base += [v for v in items if v not in base]
            else:
                base = [v for v in base if v not in items]
            new[name] = ",".join(base)
        else:
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return new


def incremental_topic_overrides(current: dict[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """A topic's overrides after SET/DELETE/APPEND/SUBTRACT."""
    from storage.config import LogConfig

    return incremental_overrides(current, ops, LIST_CONFIGS, LogConfig.from_props({}).to_topic_props())


def check_duplicates(names: list[str]) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys : {dup}")


def topic_config_records(cctx, name: str, overrides: dict[str, str], validate_only: bool) -> list:
    """The controller's ConfigRecords for a topic's new overrides; raises ResourceError when invalid."""
    res = cctx.controller.alter_topic_configs(cctx.image, name, overrides)
    code, message = res.response
    if code:
        raise ResourceError(code, message)
    return [] if validate_only else res.records


def authorize_alter_resource(cctx, resource_type: int, name: str) -> None:
    """ControllerApis.authorizeAlterResource: ALTER_CONFIGS on the cluster for BROKER and CLIENT_METRICS
    resources, on the topic for a TOPIC, on the group for a GROUP (each refused with its own error), of the
    request's principal; raises ResourceError when refused."""
    from cluster.acls import AclOperation, ResourceType

    if resource_type in (BROKER, CLIENT_METRICS):
        if not cctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
            raise ResourceError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
    elif resource_type == TOPIC:
        if not cctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name):
            raise ResourceError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED])
    elif resource_type == GROUP:
        if not cctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.GROUP, name):
            raise ResourceError(ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                MESSAGES[ErrorCode.GROUP_AUTHORIZATION_FAILED])


def alter_resources(cctx, req, response_type, item_type, new_configs) -> ControllerResult:
    """The controller's per-resource loop of AlterConfigs and IncrementalAlterConfigs (each resource on its
    own, ConfigurationControlManager), each resource authorized first (authorize_alter_resource):
    ``new_configs(resource, current)`` is the API's rule for a TOPIC's, CLIENT_METRICS subscription's, BROKER's
    or GROUP's new configs."""
    records: list = []
    out = []
    for r in req.resources:
        resp = item_type(error_code=0, error_message=None, resource_type=r.resource_type,
                         resource_name=r.resource_name)
        out.append(resp)
        try:
            authorize_alter_resource(cctx, r.resource_type, r.resource_name)
            check_duplicates([c.name for c in r.configs])
            if r.resource_type == TOPIC:
                if cctx.image.topic(r.resource_name) is None:
                    raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"The topic '{r.resource_name}' does not exist.")
                overrides = new_configs(r, dict(cctx.image.topic_config(r.resource_name)))
                records += topic_config_records(cctx, r.resource_name, overrides, req.validate_only)
            elif r.resource_type == CLIENT_METRICS:
                current = dict(cctx.image.configs.get((CLIENT_METRICS, r.resource_name), {}))
                res = cctx.controller.alter_client_metrics_configs(cctx.image, r.resource_name,
                                                                   new_configs(r, current))
                code, message = res.response
                if code:
                    raise ResourceError(code, message)
                records += [] if req.validate_only else res.records
            elif r.resource_type == BROKER:
                records += broker_resource_records(cctx, r, new_configs, req.validate_only)
            elif r.resource_type == GROUP:  # settable before the group exists (GroupConfig)
                current = dict(cctx.image.configs.get((GROUP, r.resource_name), {}))
                res = cctx.controller.alter_group_configs(cctx.image, r.resource_name, new_configs(r, current))
                code, message = res.response
                if code:
                    raise ResourceError(code, message)
                records += [] if req.validate_only else res.records
            else:
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}")
        except ResourceError as exc:
            resp.error_code, resp.error_message = exc.code, exc.message
    return ControllerResult(records, response_type(responses=out))


def broker_resource_records(cctx, r, new_configs, validate_only: bool) -> list:
    """A BROKER resource on the controller (cluster/dynamic_broker_config.py): its name checked
    (ControllerConfigurationValidator), its keys checked again (the broker that forwarded it validated the stores),
    and its ConfigRecords."""
    from cluster.dynamic_broker_config import (
        DynamicConfigError, broker_config_records, check_broker_name, check_keys,
    )

    try:
        check_broker_name(r.resource_name)
        current = dict(cctx.image.configs.get((BROKER, r.resource_name), {}))
        new = new_configs(r, current)
        check_keys([c.name for c in r.configs], per_broker=r.resource_name != "")
    except DynamicConfigError as exc:
        raise ResourceError(exc.code, exc.message) from None
    if validate_only:
        return []
    return broker_config_records(r.resource_name, current, new, [c.name for c in r.configs])


def validate_broker_resource(ctx, resource, configs_after) -> None:
    """ConfigAdminManager.preprocess of a BROKER resource on the broker that received it, before it goes to the
    controller: the name is empty (cluster default) or this broker's id, the keys can be dynamic at that level, and
    the TLS stores they name load and keep the certificate's subject and SANs (DynamicBrokerConfig.validate, whose
    failure Kafka answers INVALID_REQUEST "Invalid dynamic configuration", the cause in the broker's log).
    ``configs_after(current)`` is the API's rule for the resource's new configs; raises ResourceError."""
    from broker.config.config_types import ConfigException
    from cluster.dynamic_broker_config import DynamicConfigError, applicable, check_keys

    name = resource.resource_name
    check_duplicates([c.name for c in resource.configs])
    if name != "":
        try:
            node_id = int(name)
        except ValueError:
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
        if node_id != ctx.node_id:
            raise ResourceError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {ctx.node_id}, but received {name}")
    new = configs_after(dict(ctx.image.configs.get((BROKER, name), {})))
    try:
        check_keys([c.name for c in resource.configs], per_broker=name != "", refuse_unsupported=False)
    except DynamicConfigError as exc:
        raise ResourceError(exc.code, exc.message) from None
    check_connection_quotas(ctx, name, new, [c.name for c in resource.configs])
    authentication = ctx.handles.authentication
    if name != "" and authentication is not None:
        try:
            authentication.validate_dynamic(applicable(new, per_broker=True))
        except ConfigException as exc:
            logging.getLogger("odradek.config").error("validation of the dynamic configs of broker %s failed: %s",
                                                      name, exc)
            raise ResourceError(ErrorCode.INVALID_REQUEST, "Invalid dynamic configuration") from None


def check_connection_quotas(ctx, name: str, new: dict, named: list[str]) -> None:
    """DynamicBrokerConfig.validate of the connection quota settings (broker/network/connection_quotas.py): a bad
    value is INVALID_REQUEST with Kafka's message (the new KafkaConfig fails), limits a listener refuses
    (ListenerConnectionQuota.validateReconfiguration) are INVALID_REQUEST "Invalid dynamic configuration"."""
    from broker.config.connection_quotas import check_settings, quota_settings
    from cluster.connection_quotas import InvalidReconfiguration
    from cluster.dynamic_broker_config import connection_quota_configs, is_connection_quota_key

    if not any(is_connection_quota_key(n) for n in named):
        return
    static = quota_settings(ctx.config.values)
    default = ctx.image.configs.get((BROKER, ""), {})
    own = ctx.image.configs.get((BROKER, str(ctx.node_id)), {})
    current = {**static, **connection_quota_configs(default, own)}
    values = {**static, **connection_quota_configs(new if name == "" else default, new if name != "" else own)}
    try:
        check_settings(values, [lst.name for lst in ctx.config.listeners], current)
    except InvalidReconfiguration as exc:
        logging.getLogger("odradek.config").error("validation of the dynamic configs of broker %r failed: %s",
                                                  name, exc)
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Invalid dynamic configuration") from None
    except ValueError as exc:
        raise ResourceError(ErrorCode.INVALID_REQUEST, str(exc)) from None


async def forward_remaining(ctx, req, local: dict[int, Any], response_type) -> Any:
    """Kafka's ConfigAdminManager split: resources answered on this broker are in ``local`` (by position),
    the rest go to the controller in a copy of the request; the answers are merged in request order."""
    resources = req.resources
    remaining = [r for i, r in enumerate(resources) if i not in local]
    forwarded: list = []
    if remaining:
        subset = copy.copy(req)
        subset.resources = remaining
        forwarded = list((await ctx.park(ctx.controller.forward(ctx, subset))).responses)
    it = iter(forwarded)
    return response_type(responses=[local[i] if i in local else next(it) for i in range(len(resources))])


def set_logger_levels(ops: list[tuple[str, int, str | None]], validate_only: bool) -> None:
    for name, op, value in ops:
        if op == SET and (value or "").upper() not in LEVELS:
            raise ResourceError(ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {name} to {value} as it is "
                                f"not a supported log level. Valid log levels are {', '.join(LEVELS)}")
        if op not in (SET, DELETE):
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Operation {op} is not allowed for the BROKER_LOGGER "
                                "resource")
    if validate_only:
        return
    for name, op, value in ops:
        lg = logging.getLogger() if name == "root" else logging.getLogger(name)
        lg.setLevel(LEVELS[value.upper()] if op == SET else logging.NOTSET)
