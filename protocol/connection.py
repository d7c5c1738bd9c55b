"""The server side of a Kafka connection, sans-IO: bytes in, requests out; responses in, bytes out.

The driver (broker/network/server.py) owns the socket and the clock. This object owns the receive buffer,
the frame size limit and the header rules: which header version each (api key, version) uses,
ClientId never being compact, and ApiVersions responses always taking header v0 (KIP-511).
"""

from __future__ import annotations

import dataclasses
from struct import Struct, pack_into

from protocol.errors import DecodeError, UnknownApiKeyError
from protocol.framing import DEFAULT_MAX_FRAME, FrameReader
from protocol.generated.api_keys import APIS, ApiSpec
from protocol.generated.messages import RequestHeader
from protocol.message import Message

_HEAD = Struct(">hhi")
_I32 = Struct(">i")


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA = _Sentinel("NEED_DATA")
CONNECTION_CLOSED = _Sentinel("CONNECTION_CLOSED")


@dataclasses.dataclass(slots=True)
class Request:
    """One request frame: header decoded, body kept as bytes until the handler asks for it."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    spec: ApiSpec | None  # None: an API key this codec does not know
    body: memoryview
    size: int  # frame size, for metrics

    def decode_body(self) -> Message:
        """The request message; raises UnknownApiKeyError, UnsupportedVersionError or DecodeError."""
        if self.spec is None:
            raise UnknownApiKeyError(self.api_key)
        return self.spec.request.decode(self.body, self.api_version)

    @property
    def version_known(self) -> bool:
        return self.spec is not None and self.spec.min_version <= self.api_version <= self.spec.max_version


def parse_request(frame: bytes) -> Request:
    """Split a request frame into header fields and body. Raises DecodeError on a bad header."""
    mv = memoryview(frame)
    if len(mv) < 8:
        raise DecodeError("request frame shorter than its header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(mv, 0)
    spec = APIS.get(api_key)
    if spec is not None:
        header_version = spec.request_header_version(api_version)
    else:
        header_version = 1
    header, pos = RequestHeader.decode_from(mv, 0, header_version)
    return Request(api_key, api_version, correlation_id, header.client_id, header_version, spec, mv[pos:], len(mv))


class ServerConnection:
    """Buffers received bytes, yields Requests, and frames responses."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self._reader = FrameReader(max_frame_size)
        self._closed = False

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the socket; ``b""`` means the peer closed."""
        if not data:
            self._closed = True
            return
        self._reader.feed(data)

    def get_buffer(self) -> memoryview:
        """Receive-into (asyncio's BufferedProtocol): a writable view for the socket to fill."""
        return self._reader.get_buffer()

    def buffer_updated(self, n: int) -> None:
        self._reader.buffer_updated(n)

    def receive_eof(self) -> None:
        self._closed = True

    def next_event(self) -> Request | _Sentinel:
        """The next request, NEED_DATA, or CONNECTION_CLOSED. Raises DecodeError on a bad frame."""
        frame = self._reader.next_frame()
        if frame is None:
            return CONNECTION_CLOSED if self._closed else NEED_DATA
        return parse_request(frame)

    def next_frame(self) -> bytearray | _Sentinel:
        """The next frame unparsed (a SASL exchange: raw tokens after SaslHandshake v0), NEED_DATA, or
        CONNECTION_CLOSED. Raises DecodeError on a bad frame size."""
        frame = self._reader.next_frame()
        if frame is None:
            return CONNECTION_CLOSED if self._closed else NEED_DATA
        return frame

    @property
    def max_frame_size(self) -> int:
        return self._reader.max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        """The limit for frames not yet begun (``sasl.server.max.receive.size`` until a connection authenticates)."""
        self._reader.max_frame_size = size

    @property
    def buffered(self) -> int:
        return self._reader.buffered


def encode_response(request: Request, response: Message, version: int | None = None) -> list:
    """Frame ``response`` for ``request``: [bytes | FileSlice, ...] with the size prefix in front.

    The header version follows the request's API and version; ApiVersions always uses v0.
    """
    if version is None:
        version = request.api_version
    spec = request.spec
    header_version = spec.response_header_version(version) if spec is not None else 0
    buf = bytearray(8)
    pack_into(">i", buf, 4, request.correlation_id)
    if header_version >= 1:
        buf.append(0)  # empty tagged-field section of response header v1
    parts: list = []
    response.encode_into(buf, version, parts)
    if not parts:
        _I32.pack_into(buf, 0, len(buf) - 4)
        return [bytes(buf)]
    parts.append(bytes(buf))
    total = sum(len(p) for p in parts) - 4
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, total)
    parts[0] = bytes(first)
    return [p for p in parts if len(p)]
