"""ListConfigResources: v0-1 (KIP-714's ListClientMetricsResources, generalised by KIP-1142 in Kafka 4.1).

Behaviour (Kafka 4.1's KafkaApis.handleListConfigResources): v0 lists the CLIENT_METRICS resources; v1
lists the requested resource types (an empty list: every supported type): GROUP (the groups with dynamic
configs, whether or not the group exists), CLIENT_METRICS, BROKER_LOGGER and BROKER (the
registered brokers) and TOPIC (every topic). A type outside those: UNSUPPORTED_VERSION, as Kafka.
Authorization (KafkaApis.handleListConfigResources, as handleListClientMetricsResources before it): CLUSTER
DESCRIBE_CONFIGS, else CLUSTER_AUTHORIZATION_FAILED and no resources.
"""

from __future__ import annotations

from cluster.acls import AclOperation
from protocol.errors import ErrorCode
from protocol.generated.messages import ListConfigResourcesRequest, ListConfigResourcesResponse
from protocol.generated.messages.list_config_resources_response import ConfigResource

API_KEY = 74
VERSIONS = (0, 1)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_V0 = (CLIENT_METRICS,)
SUPPORTED = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)  # Kafka's listing order


async def handle(ctx, req: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, config_resources=[])
    supported = SUPPORTED_V0 if ctx.version == 0 else SUPPORTED
    requested = list(req.resource_types or ()) or list(supported)
    if any(t not in supported for t in requested):
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    image = ctx.image
    out: list[ConfigResource] = []
    for rtype in supported:
        if rtype not in requested:
            continue
        if rtype == CLIENT_METRICS:
            names = ctx.telemetry.manager.list_resources()
        elif rtype in (BROKER, BROKER_LOGGER):
            names = [str(b) for b in sorted(image.brokers)]
        elif rtype == TOPIC:
            names = sorted(image.topics_by_name)
        else:  # GROUP: the groups with dynamic configs
            names = sorted(name for (t, name) in image.configs if t == GROUP)
        out += [ConfigResource(resource_name=n, resource_type=rtype) for n in names]
    return ListConfigResourcesResponse(error_code=0, config_resources=out)
