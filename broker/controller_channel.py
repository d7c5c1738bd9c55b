"""The one way a broker asks for a metadata change (Kafka's ForwardingManager and NodeToControllerChannel).

Two kinds of call, both answered only once their records are committed:

* ``forward(ctx, request)``: a client's admin request (CreateTopics, DeleteTopics, CreatePartitions,
  AlterConfigs, IncrementalAlterConfigs) sent whole in an EnvelopeRequest carrying the client's
  principal and address, answered with the controller's response;
* ``call(request)``: the broker's own controller RPCs (BrokerRegistration, AllocateProducerIds, and
  CreateTopics for auto-creation, as Kafka's AutoTopicCreationManager sends it).

``LocalControllerChannel`` runs the controller in this process over the local metadata quorum; the
Raft quorum makes the same calls remote without changing any caller.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any, Protocol

from broker.clock import Clock
from broker.controller_apis import CONTROLLER_HANDLERS
from broker.controller_apis.context import ControllerContext
from broker.errors import CloseConnection
from cluster.controller import Controller
from cluster.metadata_image import MetadataImage
from protocol.connection import encode_response, parse_request
from protocol.errors import ErrorCode
from protocol.generated.messages import DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse, RequestHeader
from protocol.generated.messages import ResponseHeader
from protocol.message import Message

log = logging.getLogger("odradek.controller_channel")

ANONYMOUS = DefaultPrincipalData(type="User", name="ANONYMOUS", token_authenticated=False)
PRINCIPAL_DATA_VERSION = 0


class MetadataQuorum(Protocol):
    """Commits records to the metadata log and publishes the image with them (one voter today)."""

    @property
    def end_offset(self) -> int: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def clock(self) -> Clock: ...

    async def commit(self, records: list[Message]) -> MetadataImage: ...


class ControllerChannel(Protocol):
    async def forward(self, ctx: Any, request: Message) -> Message: ...

    async def call(self, request: Message) -> Message: ...


def envelope_for(ctx: Any, request: Message) -> EnvelopeRequest:
    """The request as Kafka's ForwardingManager wraps it: header + body, principal, client address."""
    spec = ctx.request.spec
    header = RequestHeader(ctx.request.api_key, ctx.version, ctx.request.correlation_id, ctx.client_id)
    data = header.encode(spec.request_header_version(ctx.version)) + request.encode(ctx.version)
    try:
        address = ipaddress.ip_address(ctx.client_host).packed
    except ValueError:
        address = b""
    return EnvelopeRequest(request_data=data, request_principal=ANONYMOUS.encode(PRINCIPAL_DATA_VERSION),
                           client_host_address=address)


class LocalControllerChannel:
    """The controller in this process: decisions serialized against the latest image, then committed."""

    def __init__(self, controller: Controller, quorum: MetadataQuorum, config: dict[str, Any],
                 cluster_id: str) -> None:
        self.controller = controller
        self.quorum = quorum
        self.config = config
        self.cluster_id = cluster_id
        self._lock = asyncio.Lock()

    async def forward(self, ctx: Any, request: Message) -> Message:
        response = await self.handle_envelope(envelope_for(ctx, request))
        if response.error_code:
            raise CloseConnection(f"forwarding {ctx.request.spec.name} failed: error {response.error_code}")
        spec = ctx.request.spec
        mv = memoryview(response.response_data)
        _, pos = ResponseHeader.decode_from(mv, 0, spec.response_header_version(ctx.version))
        return spec.response.decode(mv[pos:], ctx.version)

    async def call(self, request: Message) -> Message:
        handler = CONTROLLER_HANDLERS[request.API_KEY]
        return await self._run(handler, request, handler.versions[1], None, None)

    async def handle_envelope(self, envelope: EnvelopeRequest) -> EnvelopeResponse:
        """The controller's side of an Envelope (ControllerApis.handleEnvelopeRequest)."""
        try:
            inner = parse_request(bytes(envelope.request_data))
            handler = CONTROLLER_HANDLERS.get(inner.api_key)
            if handler is None or not handler.versions[0] <= inner.api_version <= handler.versions[1]:
                return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
            body = inner.decode_body()
            principal = DefaultPrincipalData.decode(envelope.request_principal, PRINCIPAL_DATA_VERSION)
        except Exception as exc:  # noqa: BLE001 - a bad envelope is the sender's error, never ours
            log.warning("rejecting an envelope that does not decode: %s", exc)
            return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
        host = _address(envelope.client_host_address)
        response = await self._run(handler, body, inner.api_version, f"{principal.type}:{principal.name}", host)
        data = b"".join(encode_response(inner, response))[4:]
        return EnvelopeResponse(response_data=data, error_code=0)

    async def _run(self, handler, request: Message, version: int, principal: str | None,
                   client_host: str | None) -> Message:
        async with self._lock:
            cctx = ControllerContext(image=self.quorum.image, controller=self.controller, config=self.config,
                                     cluster_id=self.cluster_id, version=version,
                                     next_offset=self.quorum.end_offset, principal=principal, client_host=client_host,
                                     now_ms=self.quorum.clock.now_ms())
            result = handler.handle(cctx, request)
            if result.records:
                await self.quorum.commit(result.records)
            return result.response

    async def bootstrap(self) -> None:
        """A new cluster's first records (the finalized feature levels), as the active controller writes them."""
        async with self._lock:
            result = self.controller.bootstrap(self.quorum.image)
            if result.records:
                await self.quorum.commit(result.records)


def _address(raw: bytes) -> str | None:
    try:
        return str(ipaddress.ip_address(bytes(raw)))
    except ValueError:
        return None
