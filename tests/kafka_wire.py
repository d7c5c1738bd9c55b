"""The tests' one raw Kafka client: size-prefixed frames over a blocking socket, requests encoded and responses
decoded with the project's own codec. For what real clients never send: exact versions, malformed frames,
stale generations, requests that must close the connection."""

from __future__ import annotations

import socket
import struct

from protocol.generated.api_keys import APIS
from protocol.generated.messages import RequestHeader


class KafkaWire:
    def __init__(self, port: int, client_id: str = "test", timeout: float = 20.0, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._corr = 0
        self._pending: dict[int, tuple[int, int]] = {}

    # ---- frames ---------------------------------------------------------------------------------------------

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes | None:
        """One response frame, or None once the broker has closed the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    # ---- requests -------------------------------------------------------------------------------------------

    def send(self, api_key: int, version: int, body, corr: int | None = None, client_id: str | None = None) -> int:
        """Send a request (``body`` a message, or raw bytes for malformed ones); returns its correlation id."""
        spec = APIS[api_key]
        if corr is None:
            self._corr += 1
            corr = self._corr
        header = RequestHeader(api_key, version, corr, self.client_id if client_id is None else client_id)
        payload = header.encode(spec.request_header_version(version))
        payload += body if isinstance(body, (bytes, bytearray)) else body.encode(version)
        self.send_frame(payload)
        self._pending[corr] = (api_key, version)
        return corr

    def recv(self, api_key: int | None = None, version: int | None = None, corr: int | None = None):
        """The next response, decoded (None if the connection closed); checks its correlation id when given."""
        frame = self.recv_frame()
        if frame is None:
            return None
        (got,) = struct.unpack_from(">i", frame)
        if corr is not None:
            assert got == corr, (got, corr)
        pending = self._pending.pop(got, None)
        if api_key is None:
            assert pending is not None, f"a response to correlation id {got}, which was never sent"
            api_key, version = pending
        spec = APIS[api_key]
        skip = 4 + (1 if spec.response_header_version(version) == 1 else 0)
        return spec.response.decode(frame[skip:], version)

    def call(self, api_key: int, version: int, body, corr: int | None = None, client_id: str | None = None):
        """Send and return the decoded response; fails if the broker closes the connection instead."""
        corr = self.send(api_key, version, body, corr, client_id)
        response = self.recv(api_key, version, corr)
        assert response is not None, "the broker closed the connection"
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "KafkaWire":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
