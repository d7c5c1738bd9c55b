"""One Kafka request over a fresh blocking connection, its response decoded: for health checks and tools that
ask a node one question (the container's health check, the test clusters' probes), not for the node's own
traffic (broker/network/node_client.py)."""

from __future__ import annotations

import socket
import struct

from protocol.generated.api_keys import APIS
from protocol.generated.messages import RequestHeader, ResponseHeader


def request(port: int, body, version: int, timeout: float = 5.0, host: str = "127.0.0.1",
            client_id: str = "odradek-probe"):
    """``body`` at ``version`` to ``host:port``; the decoded response (OSError / TimeoutError / ConnectionError)."""
    spec = APIS[body.API_KEY]
    header = RequestHeader(body.API_KEY, version, 1, client_id)
    payload = header.encode(spec.request_header_version(version)) + body.encode(version)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)

        def exact(n: int) -> bytes:
            buf = bytearray()
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError(f"{host}:{port} closed the connection")
                buf += chunk
            return bytes(buf)

        frame = memoryview(exact(struct.unpack(">i", exact(4))[0]))
    _, pos = ResponseHeader.decode_from(frame, 0, spec.response_header_version(version))
    return spec.response.decode(frame[pos:], version)
