"""One Kafka request over a fresh blocking connection, its response decoded: for health checks and tools that
ask a node one question (the container's health check, the test clusters' probes), not for the node's own
traffic (broker/network/node_client.py). With ``security`` (broker/security/node_links.py) the connection speaks
the listener's protocol first: TLS with the peer verified, then SaslHandshake v1 and SaslAuthenticate v2 (PLAIN,
or SCRAM with the server's signature checked)."""

from __future__ import annotations

import secrets
import socket
import struct

from protocol.generated.api_keys import APIS
from protocol.generated.messages import RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest
from protocol.scram import SaslFailure, ScramClient, ScramMechanism


def request(port: int, body, version: int, timeout: float = 5.0, host: str = "127.0.0.1",
            client_id: str = "odradek-probe", security=None):
    """``body`` at ``version`` to ``host:port``; the decoded response (OSError / TimeoutError / ConnectionError)."""
    with socket.create_connection((host, port), timeout=timeout) as raw:
        s = raw
        if security is not None and security.ssl is not None:
            s = security.ssl.wrap_socket(raw, server_hostname=host)
        if security is not None and security.mechanism:
            authenticate(s, security, client_id)
        return _call(s, body, version, client_id, f"{host}:{port}")


def _call(s, body, version: int, client_id: str, where: str):
    spec = APIS[body.API_KEY]
    header = RequestHeader(body.API_KEY, version, 1, client_id)
    payload = header.encode(spec.request_header_version(version)) + body.encode(version)
    s.sendall(struct.pack(">i", len(payload)) + payload)

    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"{where} closed the connection")
            buf += chunk
        return bytes(buf)

    frame = memoryview(exact(struct.unpack(">i", exact(4))[0]))
    _, pos = ResponseHeader.decode_from(frame, 0, spec.response_header_version(version))
    return spec.response.decode(frame[pos:], version)


def authenticate(s, security, client_id: str) -> None:
    """SaslHandshake v1 and SaslAuthenticate v2 on the connected socket ``s`` (ConnectionError when refused)."""
    where = "SASL"
    if _call(s, SaslHandshakeRequest(mechanism=security.mechanism), 1, client_id, where).error_code:
        raise ConnectionError(f"SASL mechanism {security.mechanism} refused")

    def token(data: bytes):
        r = _call(s, SaslAuthenticateRequest(auth_bytes=data), 2, client_id, where)
        if r.error_code:
            raise ConnectionError(f"SASL authentication failed: {r.error_message}")
        return bytes(r.auth_bytes)

    if security.mechanism == "PLAIN":
        token(f"\0{security.username}\0{security.password}".encode())
        return
    scram = ScramClient(ScramMechanism.for_name(security.mechanism), security.username, security.password,
                        secrets.token_urlsafe(18))
    try:
        scram.verify(token(scram.final(token(scram.first()))))
    except SaslFailure as exc:
        raise ConnectionError(f"SASL authentication failed: {exc}") from None
