"""One connection from this node to another (Kafka's NetworkClient for a single destination).

Requests are pipelined and matched to responses by correlation id; a connection that fails fails every
request in flight on it with ``ConnectionError`` and is opened again by the next request. A request that
times out closes its connection, as Kafka's NetworkClient disconnects on a request timeout: the peer may be
hung, and whatever else was in flight on it fails at once instead of waiting out its own timeout. A response
that does not decode is ``BadResponse`` (the peer speaks the protocol wrongly: not a network failure), and
closes the connection too. Used for the KRaft RPCs, a broker's requests to the active controller and
replication.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct

from broker.network.fault_injection import FaultRules
from broker.network.tcp_nodelay import set_nodelay
from broker.timeouts import wait_for
from protocol.framing import FrameReader
from protocol.generated.api_keys import APIS
from protocol.generated.messages import RequestHeader, ResponseHeader
from protocol.message import Message

log = logging.getLogger("odradek.node_client")

MAX_RESPONSE_BYTES = 128 * 1024 * 1024


class BadResponse(Exception):
    """A response that does not decode as the answer to its request."""


class NodeClient:
    def __init__(self, host: str, port: int, client_id: str, connect_timeout_s: float = 2.0,
                 peer: int | None = None, faults: FaultRules | None = None) -> None:
        self.host, self.port = host, port
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
        spec = APIS[body.API_KEY]
        conn = await self._connect()
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
            try:
                _, conn = await wait_for(
                    loop.create_connection(lambda: _Connection(self), self.host, self.port),
                    self.connect_timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
            if self._closed:
                conn.close()
                raise ConnectionError(f"{self} is closed")
            self._conn = conn
            return conn

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
