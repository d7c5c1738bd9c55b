"""IncrementalAlterConfigs: v0-1.

Behaviour: per resource, independent of the others: TOPIC configs SET/DELETE/APPEND/SUBTRACT (APPEND
and SUBTRACT only on list configs), validated against the topic config definitions (unknown key, bad
type or range: INVALID_CONFIG), committed as ConfigRecords and applied to the topic's logs without a
restart; BROKER_LOGGER SET/DELETE changes log levels (Kafka's way to reload log levels at run time).
validate_only checks without changing anything. BROKER_LOGGER is answered on this broker; every other
resource is forwarded to the controller (broker/controlplane/controller_apis/k44_incremental_alter_configs.py), as
Kafka's ConfigAdminManager splits it. A BROKER resource is checked here first (ConfigAdminManager.preprocess:
this broker's id or empty; per-broker ``listener.name.<l>.ssl.*`` store settings, whose new stores must load and
keep the certificate's subject and SANs; the connection quotas, per broker or at the cluster default, whose values
must parse and pass the listeners' checks; broker/config/alter_configs.validate_broker_resource), then committed by
the controller as ConfigRecords and applied by the broker (new TLS contexts: broker/node.py; new connection limits:
broker/network/connection_quotas.py); any other BROKER key is INVALID_CONFIG (cluster/dynamic_broker_config.py).

Authorization (with an authorizer): a BROKER_LOGGER resource needs ALTER_CONFIGS on the cluster, else
CLUSTER_AUTHORIZATION_FAILED (RuntimeLoggerManager.applyChangesForResource, after the duplicate-key check); the
controller authorizes the forwarded resources as the client (controller_apis/k44_incremental_alter_configs.py).
"""

from __future__ import annotations

import logging

from broker.config.alter_configs import (
    BROKER, BROKER_LOGGER, ResourceError, check_duplicates, forward_remaining, incremental_overrides,
    set_logger_levels, validate_broker_resource,
)
from cluster.acls import AclOperation
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from protocol.generated.messages.incremental_alter_configs_response import AlterConfigsResourceResponse

API_KEY = 44
VERSIONS = (0, 1)

log = logging.getLogger("odradek.configs")


async def handle(ctx, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    local = {}
    for i, r in enumerate(req.resources):
        if r.resource_type == BROKER:
            try:
                validate_broker_resource(ctx, r, lambda current, r=r: incremental_overrides(
                    current, [(c.name, c.config_operation, c.value) for c in r.configs], frozenset(), {}))
            except ResourceError as exc:
                local[i] = AlterConfigsResourceResponse(error_code=exc.code, error_message=exc.message,
                                                        resource_type=r.resource_type, resource_name=r.resource_name)
            continue
        if r.resource_type != BROKER_LOGGER:
            continue
        resp = AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=r.resource_type,
                                            resource_name=r.resource_name)
        local[i] = resp
        try:
            check_duplicates([c.name for c in r.configs])
            if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
                raise ResourceError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
            if r.resource_name != str(ctx.node_id):
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {r.resource_name}")
            set_logger_levels([(c.name, c.config_operation, c.value) for c in r.configs], req.validate_only)
        except ResourceError as exc:
            resp.error_code, resp.error_message = exc.code, exc.message
    resp = await forward_remaining(ctx, req, local, IncrementalAlterConfigsResponse)
    for r in resp.responses:
        if r.error_code:  # bad input: one line per refused resource, nothing changed for it
            log.info("IncrementalAlterConfigs of resource %r (type %d) from %s refused: %s %s", r.resource_name,
                     r.resource_type, ctx.client_id, ErrorCode(r.error_code).name, r.error_message)
    return resp
