"""Route one request to its handler the way Kafka's RequestChannel/KafkaApis do.

* unknown API key, or a version outside what we serve for a non-ApiVersions request: close the
  connection (Kafka raises InvalidRequestException while parsing);
* ApiVersions at an unknown version: UNSUPPORTED_VERSION in a v0 body (KIP-511);
* a body that does not decode: close the connection;
* a share API while ``share.version`` is 0: UNSUPPORTED_VERSION in its error shape (``broker.apis.share_gate``);
* a handler exception: one log line, close that connection; the broker keeps running.
"""

from __future__ import annotations

import logging

from broker.apis import HANDLERS, k18_api_versions, share_gate
from broker.apis.context import EncodedResponse, RequestContext
from broker.controlplane.controller_listener import CONTROLLER_LISTENER_HANDLERS
from broker.errors import CloseConnection
from protocol.connection import Request, encode_response
from protocol.errors import DecodeError, ProtocolError

log = logging.getLogger("odradek.dispatch")


async def dispatch(ctx: RequestContext) -> list | None:
    """Response parts for ``ctx.request`` (None: no response, e.g. acks=0); raises CloseConnection."""
    req: Request = ctx.request
    gate = ctx.gate
    while gate is not None and not gate.is_set():  # a quota's throttle time runs: nothing is handled meanwhile
        await gate.wait()
    table = CONTROLLER_LISTENER_HANDLERS if ctx.listener in ctx.handles.controller_listeners else HANDLERS
    handler = table.get(req.api_key)
    if handler is None:
        raise CloseConnection(f"unsupported api key {req.api_key}")
    lo, hi = handler.versions
    if not lo <= req.api_version <= hi:
        if req.api_key == k18_api_versions.API_KEY and req.api_version > hi:
            return encode_response(req, k18_api_versions.unsupported_version_response(), version=0)
        raise CloseConnection(f"unsupported version {req.api_version} of api key {req.api_key}")
    try:
        body = req.decode_body()
    except (DecodeError, ProtocolError) as exc:
        raise CloseConnection(f"malformed {handler.spec.name} v{req.api_version}: {exc}") from None
    started = ctx.started = ctx.clock.monotonic()
    if req.api_key in share_gate.GATED_KEYS and not share_gate.share_groups_enabled(ctx.image.features):
        response = share_gate.unsupported_version(body)
    else:
        response = await handler.handle(ctx, body)
    finished = ctx.clock.monotonic()
    ctx.metrics.request_done(handler.spec.name, req.api_version, ctx.received or started, started,
                             finished, getattr(response, "error_code", 0) or 0)
    if ctx.local_complete is None:  # KafkaRequestHandler: apiLocalCompleteTimeNanos once handle() returns
        ctx.local_complete = finished
    if not ctx.request_quota_done:
        # sendResponseMaybeThrottle: request_percentage from the handler's time (ClientRequestQuotaManager); a
        # handler that recorded it itself (Fetch, ShareFetch, Produce) or is exempt (a follower's fetch,
        # WriteTxnMarkers, acks=0) is not counted twice
        request_ms = ctx.record_request_quota()
        if request_ms:
            ctx.apply_throttle("request", request_ms)
    if response is None:
        return None
    if ctx.throttle_ms and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms or 0, ctx.throttle_ms)
    if isinstance(response, EncodedResponse):
        return response.parts
    return encode_response(req, response)
