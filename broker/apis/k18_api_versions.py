"""ApiVersions: v0-4.

Behaviour (Kafka's ApiVersionsRequest / KafkaApis.handleApiVersionsRequest):
* the list is built from the handler table (``BrokerHandles.advertised_apis``, made by the node from
  ``broker.apis.HANDLERS``), so it advertises exactly what is implemented;
* a request version above the maximum is answered by dispatch with UNSUPPORTED_VERSION in a v0 body
  listing ApiVersions' own range (KIP-511), always with response header v0;
* v3+: ClientSoftwareName/Version must match Kafka's pattern, else INVALID_REQUEST; valid ones are kept
  for the connection (client telemetry subscriptions match on them).
* v3+: SupportedFeatures (what this software supports) and FinalizedFeatures (the FeatureLevelRecords
  of the metadata log) with the metadata offset as their epoch, as KRaft brokers report them.
"""

from __future__ import annotations

import re

from cluster.controller import SUPPORTED_FEATURES
from protocol.errors import ErrorCode
from protocol.generated.messages import ApiVersionsRequest, ApiVersionsResponse
from protocol.generated.messages.api_versions_response import ApiVersion, FinalizedFeatureKey, SupportedFeatureKey

API_KEY = 18
VERSIONS = (0, 4)

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


async def handle(ctx, req: ApiVersionsRequest) -> ApiVersionsResponse:
    handles = ctx.handles
    apis = handles.controller_advertised_apis if ctx.listener in handles.controller_listeners \
        else handles.advertised_apis
    if ctx.version >= 3 and not (
        _SOFTWARE.fullmatch(req.client_software_name or "") and _SOFTWARE.fullmatch(req.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=list(apis))
    resp = ApiVersionsResponse(error_code=0, api_keys=list(apis))
    if ctx.version >= 3:
        # the connection's client software, for client telemetry matching (SocketServer keeps it per connection)
        ctx.client_information.software_name = req.client_software_name
        ctx.client_information.software_version = req.client_software_version
        image = ctx.image
        resp.supported_features = [SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items())]
        resp.finalized_features_epoch = image.offset
        resp.finalized_features = [FinalizedFeatureKey(name=n, max_version_level=level, min_version_level=level)
                                   for n, level in sorted(image.features.items())]
    return resp


def unsupported_version_response() -> ApiVersionsResponse:
    """The v0 body Kafka sends for an ApiVersions version it does not know."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                               api_keys=[ApiVersion(API_KEY, VERSIONS[0], VERSIONS[1])])
