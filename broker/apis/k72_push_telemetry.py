"""PushTelemetry: v0 (KIP-714).

Behaviour (ClientMetricsManager.processPushTelemetryRequest), checks in Kafka's order: a zero or reserved
client instance id INVALID_REQUEST; a push after a terminating one INVALID_REQUEST; before the push interval
(except right after GetTelemetrySubscriptions, or a terminating push) THROTTLING_QUOTA_EXCEEDED; a stale
subscription id UNKNOWN_SUBSCRIPTION_ID; an unknown compression type UNSUPPORTED_COMPRESSION_TYPE; metrics
over ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE. The payload (OTLP MetricsData, possibly compressed) is
then decoded and exported on the Prometheus endpoint (broker/observability/telemetry.py); one that does not decompress
or decode is INVALID_RECORD (Kafka's answer when its receiver plugin fails), one that decompresses beyond
``telemetry.max.bytes`` TELEMETRY_TOO_LARGE.
"""

from __future__ import annotations

from protocol.generated.messages import PushTelemetryRequest, PushTelemetryResponse

API_KEY = 72
VERSIONS = (0, 0)


async def handle(ctx, req: PushTelemetryRequest) -> PushTelemetryResponse:
    code = ctx.telemetry.push(req.client_instance_id, req.subscription_id, req.terminating, req.compression_type,
                              bytes(req.metrics or b""), ctx.client_instance_metadata, ctx.connection_id,
                              ctx.now_ms)
    return PushTelemetryResponse(error_code=code)
