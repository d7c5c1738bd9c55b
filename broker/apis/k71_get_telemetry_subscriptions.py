"""GetTelemetrySubscriptions: v0 (KIP-714).

Behaviour (ClientMetricsManager.processGetTelemetrySubscriptionRequest): a zero client instance id gets a
new one; the answer is the union of the CLIENT_METRICS subscriptions matching the client (metric prefixes,
``*`` for all), the smallest of their push intervals (5 minutes without one), the subscription id, the
compression types accepted for pushes (zstd, lz4, gzip, snappy), ``telemetry.max.bytes`` and delta
temporality. Asking again before the push interval has passed: THROTTLING_QUOTA_EXCEEDED.
"""

from __future__ import annotations

import logging

from cluster.client_metrics import SUPPORTED_COMPRESSION_TYPES, ClientMetricsError, uuid_string
from protocol.generated.messages import GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse

API_KEY = 71
VERSIONS = (0, 0)

log = logging.getLogger("odradek.telemetry")


async def handle(ctx, req: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    telemetry = ctx.telemetry
    telemetry.expire(ctx.now_ms)
    try:
        answer = telemetry.manager.get_subscriptions(req.client_instance_id, ctx.client_instance_metadata,
                                                     ctx.connection_id, ctx.now_ms)
    except ClientMetricsError as exc:
        log.debug("get telemetry subscriptions from %s: %s", uuid_string(req.client_instance_id), exc.message)
        return GetTelemetrySubscriptionsResponse(error_code=exc.code)
    return GetTelemetrySubscriptionsResponse(
        error_code=0, client_instance_id=answer.instance_id, subscription_id=answer.subscription_id,
        accepted_compression_types=list(SUPPORTED_COMPRESSION_TYPES), push_interval_ms=answer.push_interval_ms,
        telemetry_max_bytes=telemetry.manager.telemetry_max_bytes, delta_temporality=True,
        requested_metrics=list(answer.metrics))
