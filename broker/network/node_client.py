"""One connection from this node to another (Kafka's NetworkClient for a single destination).

Requests are pipelined and matched to responses by correlation id; a connection that fails fails every
request in flight on it with ``ConnectionError`` and is opened again by the next request. A request that
times out closes its connection, as Kafka's NetworkClient disconnects on a request timeout: the peer may be
hung, and whatever else was in flight on it fails at once instead of waiting out its own timeout. A response
that does not decode is ``BadResponse`` (the peer speaks the protocol wrongly: not a network failure), and
closes the connection too. Used for the KRaft RPCs, a broker's requests to the active controller and
replication.

A link to a TLS or SASL listener (``security``, broker/security/node_links.py) is set up before any request goes
out: the TLS handshake (the peer's certificate and host name verified), then SaslHandshake v1 and SaslAuthenticate
v2 (PLAIN, or SCRAM with the server's signature checked). A session with a lifetime (KIP-368) is re-authenticated
on the same connection once 85 % of it has passed, when the requests in flight on it are answered; one that
expired unnoticed is reconnected rather than used (the peer would close it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import struct

from typing import TYPE_CHECKING

from broker.clock import SYSTEM_CLOCK
from broker.network.fault_injection import FaultRules
from broker.network.tcp_nodelay import set_nodelay
from broker.timeouts import wait_for
from protocol.framing import FrameReader
from protocol.generated.api_keys import APIS
from protocol.generated.messages import RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest
from protocol.message import Message
from protocol.scram import SaslFailure, ScramClient, ScramMechanism

if TYPE_CHECKING:
    from broker.security.node_links import LinkSecurity

log = logging.getLogger("odradek.node_client")

MAX_RESPONSE_BYTES = 128 * 1024 * 1024


class BadResponse(Exception):
    """A response that does not decode as the answer to its request."""


class NodeClient:
    def __init__(self, host: str, port: int, client_id: str, connect_timeout_s: float = 2.0,
                 peer: int | None = None, faults: FaultRules | None = None,
                 security: "LinkSecurity | None" = None) -> None:
        self.host, self.port = host, port
        self.security = security
        self.client_id = client_id
        self.peer, self.faults = peer, faults  # the node at the other end; the test-only fault hook
        self.connect_timeout_s = connect_timeout_s
        self._conn: _Connection | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._corr = itertools.count(1)
        self._connecting: asyncio.Lock | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"NodeClient({self.host}:{self.port})"

    async def request(self, body: Message, version: int, timeout_s: float) -> Message:
        """Send ``body`` at ``version`` and return the decoded response; ConnectionError or TimeoutError."""
        if self.faults is not None:
            await asyncio.sleep(self.faults.delay_s(self.peer))
            if self.faults.blocks(self.peer, body.API_KEY):  # lost on a cut link: the caller's timeout is what it sees
                await asyncio.sleep(timeout_s)
                raise asyncio.TimeoutError(f"request to node {self.peer} dropped by the fault hook")
        conn = await self._connect()
        if conn.reauth_at is not None and SYSTEM_CLOCK.monotonic() >= conn.reauth_at:
            conn = await self._reauthenticate(conn, timeout_s)
        return await self._send(conn, body, version, timeout_s)

    async def _send(self, conn: "_Connection", body: Message, version: int, timeout_s: float) -> Message:
        spec = APIS[body.API_KEY]
        corr = next(self._corr) & 0x7FFFFFFF
        header = RequestHeader(body.API_KEY, version, corr, self.client_id)
        payload = header.encode(spec.request_header_version(version)) + body.encode(version)
        fut = asyncio.get_running_loop().create_future()
        self._pending[corr] = (fut, body.API_KEY, version)
        try:
            conn.write(struct.pack(">i", len(payload)) + payload)
            return await wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            log.debug("%s: %s timed out after %.1f s: disconnecting", self, spec.name, timeout_s)
            conn.fail(ConnectionError(f"connection to {self.host}:{self.port} closed: a request timed out"))
            raise
        finally:
            self._pending.pop(corr, None)

    async def _connect(self) -> "_Connection":
        if self._closed:
            raise ConnectionError(f"{self} is closed")
        conn = self._conn
        if conn is not None and not conn.lost:
            return conn
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            conn = self._conn
            if conn is not None and not conn.lost:
                return conn
            loop = asyncio.get_running_loop()
            tls = self.security.ssl if self.security is not None else None
            extra = {"ssl": tls, "server_hostname": self.host} if tls is not None else {}
            try:
                _, conn = await wait_for(
                    loop.create_connection(lambda: _Connection(self), self.host, self.port, **extra),
                    self.connect_timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:  # ssl.SSLError is an OSError
                raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
            if self._closed:
                conn.close()
                raise ConnectionError(f"{self} is closed")
            if self.security is not None and self.security.mechanism:
                try:
                    await self._authenticate(conn, max(self.connect_timeout_s, 5.0))
                except BaseException:
                    conn.close()
                    raise
            self._conn = conn
            return conn

    async def _authenticate(self, conn: "_Connection", timeout_s: float) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 exchanges; ConnectionError when the peer refuses."""
        sec = self.security
        handshake = await self._send(conn, SaslHandshakeRequest(mechanism=sec.mechanism), 1, timeout_s)
        if handshake.error_code:
            raise ConnectionError(f"{self}: SASL mechanism {sec.mechanism} refused (error {handshake.error_code})")
        try:
            if sec.mechanism == "PLAIN":
                last = await self._sasl_token(conn, f"\0{sec.username}\0{sec.password}".encode(), timeout_s)
            else:
                scram = ScramClient(ScramMechanism.for_name(sec.mechanism), sec.username, sec.password,
                                    secrets.token_urlsafe(18))
                first = await self._sasl_token(conn, scram.first(), timeout_s)
                last = await self._sasl_token(conn, scram.final(bytes(first.auth_bytes)), timeout_s)
                scram.verify(bytes(last.auth_bytes))
        except SaslFailure as exc:
            raise ConnectionError(f"{self}: SASL authentication failed: {exc}") from None
        lifetime_s = (last.session_lifetime_ms or 0) / 1000.0
        now = SYSTEM_CLOCK.monotonic()
        conn.reauth_at = now + 0.85 * lifetime_s if lifetime_s > 0 else None
        conn.expires_at = now + lifetime_s if lifetime_s > 0 else None

    async def _sasl_token(self, conn: "_Connection", token: bytes, timeout_s: float):
        response = await self._send(conn, SaslAuthenticateRequest(auth_bytes=token), 2, timeout_s)
        if response.error_code:
            raise ConnectionError(f"{self}: SASL authentication failed: {response.error_message}")
        return response

    async def _reauthenticate(self, conn: "_Connection", timeout_s: float) -> "_Connection":
        """KIP-368 on this connection, once what is in flight on it is answered; a session already expired is
        dropped and the next connection authenticates afresh."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if conn is self._conn and not conn.lost and conn.reauth_at is not None and \
                    SYSTEM_CLOCK.monotonic() >= conn.reauth_at:
                waiting = [fut for fut, _, _ in self._pending.values() if not fut.done()]
                if waiting:
                    await asyncio.wait(waiting, timeout=timeout_s)
                if conn.expires_at is not None and SYSTEM_CLOCK.monotonic() >= conn.expires_at:
                    conn.close()
                else:
                    try:
                        await self._authenticate(conn, timeout_s)
                    except (ConnectionError, asyncio.TimeoutError) as exc:
                        log.info("%s: re-authentication failed: %s; reconnecting", self, exc)
                        conn.close()
        return await self._connect()  # the same connection when it is still good


    def _connection_lost(self, conn: "_Connection", error: BaseException) -> None:
        if self._conn is conn:
            self._conn = None
        for fut, _, _ in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(error)

    def _complete(self, frame) -> None:
        mv = memoryview(frame)
        (corr,) = struct.unpack_from(">i", mv, 0)
        entry = self._pending.get(corr)
        if entry is None:
            return  # answers a request that timed out
        fut, api_key, version = entry
        if self.faults is not None and self.faults.blocks(self.peer, api_key):
            return  # the link was cut while this request was out: its answer never arrives
        spec = APIS[api_key]
        try:
            _, pos = ResponseHeader.decode_from(mv, 0, spec.response_header_version(version))
            response = spec.response.decode(mv[pos:], version)
        except Exception as exc:  # noqa: BLE001 - any decoding failure: the peer's answer is unusable
            log.warning("%s: undecodable %s v%d response: %s", self, spec.name, version, exc)
            if not fut.done():
                fut.set_exception(BadResponse(f"undecodable {spec.name} v{version} response: {exc}"))
            conn = self._conn
            if conn is not None:
                conn.fail(ConnectionError(f"connection to {self.host}:{self.port} closed after an undecodable "
                                          f"response"))
            return
        if not fut.done():
            fut.set_result(response)

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            try:
                await wait_for(asyncio.shield(conn.closed), 5)
            except asyncio.TimeoutError:
                pass


class _Connection(asyncio.BufferedProtocol):
    """The socket's bytes go straight into the frame reader's buffers (asyncio's receive-into): a large
    response (a follower's fetch of a megabyte of records) is copied once, by the kernel, into the buffer its
    records are decoded and appended from, as the server receives requests (broker/network/server.py)."""

    def __init__(self, client: NodeClient) -> None:
        self.client = client
        self.frames = FrameReader(MAX_RESPONSE_BYTES)
        self.transport = None
        self.lost = False
        self.closed = asyncio.get_running_loop().create_future()
        self.reauth_at: float | None = None  # monotonic time to re-authenticate (a SASL session's lifetime)
        self.expires_at: float | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        set_nodelay(transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        frames = self.frames
        frames.buffer_updated(nbytes)
        try:
            while (frame := frames.next_frame()) is not None:
                self.client._complete(frame)
        except ValueError as exc:  # a bad frame size: the connection is unusable
            self.fail(ConnectionError(f"connection to {self.client.host}:{self.client.port} failed: {exc}"))

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost fails what is pending

    def write(self, data) -> None:
        if self.lost:
            raise ConnectionError(f"connection to {self.client.host}:{self.client.port} closed")
        self.transport.write(data)

    def fail(self, error: BaseException) -> None:
        """Close the connection, failing whatever is in flight on it with ``error``."""
        if not self.lost:
            self.lost = True
            self.client._connection_lost(self, error)
        if self.transport is not None:
            self.transport.close()

    def close(self) -> None:
        self.fail(ConnectionError(f"connection to {self.client.host}:{self.client.port} closed"))

    def connection_lost(self, exc: Exception | None) -> None:
        c = self.client
        self.fail(ConnectionError(f"connection to {c.host}:{c.port} {'failed: ' + str(exc) if exc else 'closed'}"))
        if not self.closed.done():
            self.closed.set_result(None)
