"""The network server: listeners, one reader task per connection, requests answered in order, bounded frames.

The socket work is here; everything about bytes lives in protocol.connection (sans-IO), and what a
request means lives in the handlers behind broker.network.dispatch. The node (broker/node.py) owns this server.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import weakref
from typing import TYPE_CHECKING

from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import Listener
from broker.apis.context import BrokerHandles, ClientInformation, RequestContext
from broker.network.dispatch import dispatch
from broker.network.tcp_nodelay import set_nodelay
from broker.errors import CloseConnection
from broker.network.sendfile import PartWriter, SendStats
from protocol.connection import CONNECTION_CLOSED, NEED_DATA, ServerConnection
from protocol.errors import DecodeError
from protocol.sasl_server import SASL_HANDSHAKE, SaslServerAuthenticator, Step

MIN_REAUTH_INTERVAL_MS = 1000  # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
FAILED_AUTHENTICATION_LINGER_S = 0.05  # between a failed authentication's answer and the close

if TYPE_CHECKING:
    from broker.observability.metrics import BrokerMetrics
    from broker.security.authentication import ListenerAuthentication

log = logging.getLogger("odradek.server")

MAX_IN_FLIGHT = 16  # requests read ahead per connection (clients pipeline up to 5)


class NetworkServer:
    """Kafka's SocketServer: accepts on every listener and feeds each connection's requests to dispatch."""

    def __init__(self, listeners: list[Listener], max_frame: int, idle_ms: int, metrics: "BrokerMetrics",
                 send_stats: SendStats, clock: Clock = SYSTEM_CLOCK) -> None:
        self.listeners = listeners
        self.max_frame = max_frame
        self.idle_ms = idle_ms
        self.metrics = metrics
        self.send_stats = send_stats
        self.clock = clock
        self.zero_copy = True
        self.handles: BrokerHandles | None = None  # set by the node before serving starts
        self.authentication: "ListenerAuthentication | None" = None  # SASL listeners (set by the node)
        self.bound: dict[str, Listener] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._conn_ids = itertools.count()
        self.connections: set[KafkaConnection] = set()
        self._stopping = False
        self._sweeper: asyncio.Task | None = None

    async def bind(self) -> None:
        """Bind every listener (ports known from here on), without accepting yet."""
        loop = asyncio.get_running_loop()
        tls = self.authentication.tls if self.authentication is not None else {}
        for lst in self.listeners:
            context = tls.get(lst.name)
            # a TLS connection exists for the protocol only after its handshake: one that never completes is not
            # seen by the idle sweeper, so the handshake has its own bound (connections.max.idle.ms, at most 10 s)
            extra = {"ssl": context, "ssl_handshake_timeout": min(self.idle_ms / 1000.0, 10.0)} if context else {}
            server = await loop.create_server(
                lambda name=lst.name: self._new_connection(name, tls=context is not None),
                host=lst.host or None, port=lst.port, reuse_address=True, start_serving=False, **extra,
            )
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self.bound[lst.name] = Listener(lst.name, lst.host, port)

    async def reload_tls(self, contexts: dict) -> list[str]:
        """New SSLContexts for TLS listeners (keystores and truststores read again: SIGHUP): each such listener
        stops accepting and is bound again at its port with its new context; connections already open keep
        theirs. Returns the listeners reloaded."""
        loop = asyncio.get_running_loop()
        done = []
        for i, lst in enumerate(self.listeners):
            context = contexts.get(lst.name)
            old = self._servers[i] if i < len(self._servers) else None
            if context is None or old is None:
                continue
            serving = old.is_serving()
            old.close()
            await old.wait_closed()
            bound = self.bound[lst.name]
            self._servers[i] = await loop.create_server(
                lambda name=lst.name: self._new_connection(name, tls=True), host=lst.host or None, port=bound.port,
                reuse_address=True, start_serving=serving, ssl=context,
                ssl_handshake_timeout=min(self.idle_ms / 1000.0, 10.0))
            done.append(lst.name)
        return done

    def _new_connection(self, listener: str, tls: bool) -> "KafkaConnection":
        """The protocol of an accepted socket. On TLS it hears of the connection only once the handshake is done:
        one that fails or times out (plaintext on a TLS port, no or half a ClientHello, a foreign CA) never
        reaches ``connection_made``, so it is counted and logged when its protocol object goes (at once on uvloop;
        on the asyncio loop its exception's reference cycle waits for the garbage collector)."""
        connection = KafkaConnection(self, listener)
        if tls:
            weakref.finalize(connection, self._tls_connection_gone, listener, connection.made)
        return connection

    def _tls_connection_gone(self, listener: str, made: list) -> None:
        if not made[0]:
            # Kafka counts a failed SSL handshake as a failed authentication (Selector, SslAuthenticationException)
            self.metrics.auth_failures.labels(listener).inc()
            log.info("a TLS handshake on listener %s failed or timed out; the connection is closed", listener)

    async def start_serving(self, only: frozenset[str] | None = None) -> None:
        """Accept on every bound listener (``only``: just those names; a later call starts the others)."""
        handles = self.handles
        assert handles is not None, "the node sets the handlers' handles before serving"
        for lst, server in zip(self.listeners, self._servers):
            if (only is None or lst.name in only) and not server.is_serving():
                await server.start_serving()
        if only is not None:
            return
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._close_idle_connections())
        log.info("odradek node %s listening on %s; data in %s; cluster id %s", handles.node_id,
                 ", ".join(f"{b.name}://{b.host}:{b.port}" for b in self.bound.values()),
                 ", ".join(map(str, handles.config.log_dirs)), handles.cluster_id)

    async def stop(self, grace_s: float) -> None:
        """Stop accepting and reading, answer the requests already read, then close every connection."""
        self._stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        for s in self._servers:
            s.close()
        writers = [c.finish() for c in list(self.connections)]
        if writers:
            _, pending = await asyncio.wait(writers, timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        for c in list(self.connections):
            c.transport.abort()
        for s in self._servers:
            await s.wait_closed()
        self._servers.clear()

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: a connection with nothing read, written or in flight that long is closed."""
        idle_s = self.idle_ms / 1000.0
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.01), 30.0))
            now = self.clock.monotonic()
            for c in list(self.connections):
                if not c.in_flight and now - c.last_active > idle_s:
                    log.info("closing idle connection %s", c.conn_id)
                    c.transport.close()


class _FlowControl:
    """The transport's write-side backpressure as an awaitable ``drain`` (what StreamWriter offers)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self._paused = False
        self._waiters: list[asyncio.Future] = []
        self._lost = False

    def get_extra_info(self, name: str, default=None):
        return self.transport.get_extra_info(name, default)

    def write(self, data) -> None:
        self.transport.write(data)

    async def drain(self) -> None:
        if self._lost:
            raise ConnectionResetError("connection lost")
        if not self._paused:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        await fut

    def pause(self) -> None:
        self._paused = True

    def resume(self, exc: BaseException | None = None) -> None:
        self._paused = False
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if fut.done():
                continue
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(None)

    def lost(self) -> None:
        self._lost = True
        self.resume(ConnectionResetError("connection lost"))


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection: bytes are received straight into frame buffers (protocol.connection,
    sans-IO), each request runs as its own task, and one writer task answers them strictly in order.

    At most MAX_IN_FLIGHT requests are outstanding: past that reading pauses (backpressure), as it
    does when the peer does not read its responses (the writer awaits the transport's drain).
    """

    def __init__(self, server: NetworkServer, listener: str) -> None:
        self.server = server
        self.listener = listener
        self.conn = ServerConnection(server.max_frame)
        self.conn_id = f"{listener}-{next(server._conn_ids)}"
        self.made = [False]  # set by connection_made; on TLS, read when the object goes (a failed handshake)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.peer = None
        self.peer_host = "unknown"
        self.peer_port: int | None = None
        self.client_information = ClientInformation()
        self.pending: asyncio.Queue = asyncio.Queue()
        self.in_flight = 0
        self.last_active = 0.0
        self._reading_paused = False
        self._closing = False
        self._writer_task: asyncio.Task | None = None
        self._flow: _FlowControl | None = None
        self._part_writer: PartWriter | None = None
        self.principal = "User:ANONYMOUS"
        auth = server.authentication
        self.sasl: SaslServerAuthenticator | None = auth.authenticator(listener) if auth is not None else None
        self._reauthenticating = False
        self._last_reauth_ms = 0
        self._gate = asyncio.Event()  # clear while a quota's throttle time runs
        self._gate.set()
        self._throttle_handle: asyncio.TimerHandle | None = None
        self._throttle_until = 0.0
        if self.sasl is not None:  # frames stay small until the connection authenticates
            self.conn.max_frame_size = min(server.max_frame, auth.max_receive_size)

    # ---- asyncio protocol callbacks ------------------------------------------------------------

    def connection_made(self, transport) -> None:  # uvloop transports are not asyncio.Transport subclasses
        server = self.server
        self.made[0] = True
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        if isinstance(self.peer, tuple) and len(self.peer) >= 2:
            self.peer_host, self.peer_port = self.peer[0], self.peer[1]
        set_nodelay(transport)
        if server.authentication is not None and transport.get_extra_info("sslcontext") is not None:
            try:
                self.principal = server.authentication.tls_principal(self.listener,
                                                                     transport.get_extra_info("ssl_object"))
            except ValueError as exc:  # no ssl.principal.mapping.rules rule matches: Kafka fails the connection
                log.info("closing connection from %s: %s", self.peer, exc)
                server.metrics.auth_failures.labels(self.listener).inc()
                transport.abort()
                return
            if self.sasl is None:  # an SSL listener: the handshake was the authentication (Kafka's Selector counts it)
                server.metrics.auth_successes.labels(self.listener).inc()
        self.last_active = server.clock.monotonic()
        self._flow = _FlowControl(transport)
        self._part_writer = PartWriter(self._flow, server.send_stats, zero_copy=server.zero_copy)
        server.connections.add(self)
        server.metrics.connections.labels(self.listener).inc()
        self._writer_task = asyncio.ensure_future(self._write_responses())
        if server._stopping:
            self.finish()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.conn.buffer_updated(nbytes)
        self.last_active = self.server.clock.monotonic()
        self._dispatch_ready()

    def eof_received(self) -> bool:
        self.conn.receive_eof()
        self._dispatch_ready()
        # keep the transport open to answer what was read; the writer closes it. A TLS transport closes at the
        # peer's EOF whatever this returns, and asyncio and uvloop log a warning for True: one per TLS client gone
        return self.transport.get_extra_info("sslcontext") is None

    def pause_writing(self) -> None:
        if self._flow is not None:
            self._flow.pause()

    def resume_writing(self) -> None:
        if self._flow is not None:
            self._flow.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        server = self.server
        if self in server.connections:
            server.connections.discard(self)
            server.metrics.connections.labels(self.listener).dec()
        if self._flow is not None:
            self._flow.lost()
        if self._writer_task is not None and not self._writer_task.done():
            self._writer_task.cancel()
        while not self.pending.empty():
            entry = self.pending.get_nowait()
            if entry is not None and not entry[0].done():
                entry[0].cancel()
        if self._part_writer is not None:
            self._part_writer.close()
        telemetry = server.handles.telemetry if server.handles is not None else None
        if telemetry is not None:  # a controller-only node has no client telemetry
            telemetry.connection_closed(self.conn_id)

    # ---- requests in, responses out ------------------------------------------------------------

    def _dispatch_ready(self) -> None:
        if self._closing:
            return
        handles = self.server.handles
        clock = handles.clock
        while not self._closing:
            sasl = self.sasl
            try:
                if sasl is not None and sasl.authenticating:
                    event = self.conn.next_frame()
                    if event is not NEED_DATA and event is not CONNECTION_CLOSED:
                        self._authenticate(sasl.receive(event, clock.now_ms()))
                        continue
                else:
                    event = self.conn.next_event()
            except DecodeError as exc:
                log.warning("closing connection %s from %s: bad frame: %s", self.conn_id, self.peer, exc)
                self._abort()
                return
            if event is NEED_DATA:
                return
            if event is CONNECTION_CLOSED:
                self.finish()
                return
            if sasl is not None and self._session_checks(sasl, event, clock.now_ms()):
                continue
            self._dispatch(event)

    def _dispatch(self, request) -> None:
        handles = self.server.handles
        clock = handles.clock
        ctx = RequestContext(handles, request, self.conn_id, self.listener, self.peer_host, clock.now_ms(),
                             clock.monotonic(), self.peer_port, self.client_information, self.principal,
                             gate=self._gate, on_throttle=self._throttle)
        # the task starts running handlers in arrival order; side effects that must stay ordered
        # (appends) happen before a handler's first await
        self._queue(asyncio.ensure_future(dispatch(ctx)), ctx)

    def _queue(self, task: asyncio.Future, ctx: RequestContext | None = None) -> None:
        self.pending.put_nowait((task, ctx))
        self.in_flight += 1
        if self.in_flight >= MAX_IN_FLIGHT and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _send(self, parts: list) -> None:
        """Answer in order with bytes already made (an authenticator's responses)."""
        done = asyncio.get_running_loop().create_future()
        done.set_result(parts)
        self._queue(done)

    # ---- authentication (SASL listeners) ---------------------------------------------------------

    def _authenticate(self, step: Step) -> None:
        """One frame's outcome from the authenticator (SaslServerAuthenticator), in the connection's order."""
        metrics = self.server.metrics
        if step.dispatch is not None:
            self._dispatch(step.dispatch)
        if step.send and not step.failed:
            self._send(step.send)
        if step.authenticated:
            self.principal = self.sasl.principal or self.principal
            self.conn.max_frame_size = self.server.max_frame
            (metrics.reauth_successes if self._reauthenticating else metrics.auth_successes).labels(
                self.listener).inc()
            log.debug("connection %s from %s authenticated as %s (%s)", self.conn_id, self.peer, self.principal,
                      self.sasl.mechanism_name)
            self._reauthenticating = False
        elif step.failed or step.close:
            (metrics.reauth_failures if self._reauthenticating else metrics.auth_failures).labels(
                self.listener).inc()
            log.info("closing connection %s from %s: %s failed: %s", self.conn_id, self.peer,
                     "re-authentication" if self._reauthenticating else "authentication", step.reason)
            if step.close:
                self._abort()
                return
            # Kafka delays the failure's answer and the close (connection.failed.authentication.delay.ms), so a
            # client guessing passwords gets one answer per delay: read nothing more meanwhile
            self._closing = True
            if not self._reading_paused:
                self._reading_paused = True
                self.transport.pause_reading()
            asyncio.get_running_loop().call_later(self.server.authentication.failed_delay_s,
                                                  self._close_after_failure, step.send)

    def _throttle(self, throttle_ms: int) -> None:
        """A quota's throttle time (KIP-219; Kafka mutes the channel): requests already read wait at the gate in
        their order, nothing more is read, until it has passed."""
        until = self.server.clock.monotonic() + throttle_ms / 1000.0
        if self._throttle_handle is not None:
            if self._throttle_until >= until:
                return
            self._throttle_handle.cancel()
        self._gate.clear()
        if not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._throttle_until = until
        self._throttle_handle = asyncio.get_running_loop().call_later(throttle_ms / 1000.0, self._unthrottle)

    def _unthrottle(self) -> None:
        self._throttle_handle = None
        self._gate.set()
        if self._reading_paused and not self._closing and self.in_flight < MAX_IN_FLIGHT and \
                not self.transport.is_closing():
            self._reading_paused = False
            self.transport.resume_reading()

    def _close_after_failure(self, parts: list) -> None:
        if self.transport.is_closing():
            return
        if parts:
            self._send(parts)
        # the answer goes out alone before the close: a client reading the answer and the end of the stream in one
        # read may drop the answer (kafka-python 3 does), and would report a lost connection instead of the failure
        asyncio.get_running_loop().call_later(FAILED_AUTHENTICATION_LINGER_S, self._finish_after_failure)

    def _finish_after_failure(self) -> None:
        self._closing = False
        self.finish()

    def _session_checks(self, sasl: SaslServerAuthenticator, request, now_ms: int) -> bool:
        """An authenticated connection's request: closed if its session expired (anything but SaslHandshake);
        a SaslHandshake from a client that can re-authenticate begins re-authentication. True: handled here."""
        expires = sasl.session_expires_ms
        if expires is not None and now_ms > expires and request.api_key != SASL_HANDSHAKE:
            log.info("closing connection %s from %s: its SASL session expired", self.conn_id, self.peer)
            self.server.metrics.expired_killed.labels(self.listener).inc()
            self._abort()
            return True
        if request.api_key == SASL_HANDSHAKE and sasl.client_supports_reauthentication and \
                now_ms - self._last_reauth_ms >= MIN_REAUTH_INTERVAL_MS:
            self._last_reauth_ms = now_ms
            self._reauthenticating = True
            self._authenticate(sasl.begin_reauthentication(request, now_ms))
            return True
        return False

    def finish(self) -> asyncio.Task:
        """Read nothing more; answer what was read, then close (the writer task, to await)."""
        assert self._writer_task is not None
        if not self._closing:
            self._closing = True
            if not self._reading_paused:
                self._reading_paused = True
                try:
                    self.transport.pause_reading()
                except RuntimeError:  # already closing
                    pass
            self.pending.put_nowait(None)
        return self._writer_task

    def _abort(self) -> None:
        self._closing = True
        self.transport.abort()

    async def _write_responses(self) -> None:
        assert self._part_writer is not None
        part_writer = self._part_writer
        try:
            while True:
                entry = await self.pending.get()
                if entry is None:
                    self.transport.close()
                    return
                task, ctx = entry
                try:
                    parts = await task
                finally:
                    self.in_flight -= 1
                if parts is not None:
                    await part_writer.write(parts)
                self.last_active = self.server.clock.monotonic()
                if (self._reading_paused and not self._closing and self._gate.is_set()
                        and self.in_flight < MAX_IN_FLIGHT):
                    self._reading_paused = False
                    self.transport.resume_reading()
        except asyncio.CancelledError:
            raise
        except ConnectionError:
            self._abort()
        except CloseConnection as exc:
            log.warning("closing connection %s from %s: %s", self.conn_id, self.peer, exc)
            self._abort()
        except Exception:
            log.exception("closing connection %s from %s after an internal error", self.conn_id, self.peer)
            self._abort()
