"""The network server: listeners, one reader task per connection, requests answered in order, bounded frames.

Each listener has its own acceptor (Kafka's Acceptor): it takes a socket from the kernel, asks the connection
quotas (broker/network/connection_quotas.py) whether to wait, serve, close at once or hold-then-close it, and only
then hands it to its protocol (after the TLS handshake on a TLS listener).

The socket work is here; everything about bytes lives in protocol.connection (sans-IO), and what a
request means lives in the handlers behind broker.network.dispatch. The node (broker/node.py) owns this server.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import ssl
from typing import TYPE_CHECKING, Callable

from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import Listener
from broker.apis.context import BrokerHandles, ClientInformation, RequestContext
from broker.network.dispatch import dispatch
from broker.network.tcp_nodelay import set_nodelay
from broker.errors import CloseConnection
from broker.network.sendfile import PartWriter, SendStats
from cluster.connection_quotas import ConnectionThrottled, TooManyConnections, normalise_ip
from protocol.connection import CONNECTION_CLOSED, NEED_DATA, ServerConnection
from protocol.errors import DecodeError
from protocol.sasl_server import SASL_HANDSHAKE, SaslServerAuthenticator, Step

MIN_REAUTH_INTERVAL_MS = 1000  # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
FAILED_AUTHENTICATION_LINGER_S = 0.05  # between a failed authentication's answer and the close

if TYPE_CHECKING:
    from broker.network.connection_quotas import NodeConnectionQuotas
    from broker.observability.metrics import BrokerMetrics
    from broker.security.authentication import ListenerAuthentication

log = logging.getLogger("odradek.server")

MAX_IN_FLIGHT = 16  # requests read ahead per connection (clients pipeline up to 5)


class NetworkServer:
    """Kafka's SocketServer: an acceptor per listener, which applies the connection quotas
    (broker/network/connection_quotas.py) before a connection is served, and feeds each connection's requests to
    dispatch."""

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
        self.quotas: "NodeConnectionQuotas | None" = None  # connection quotas (set by the node; None: no limits)
        self.bound: dict[str, Listener] = {}
        self._sockets: dict[str, list[socket.socket]] = {}
        self._tls: dict = {}  # listener -> SSLContext of its new connections
        self._acceptors: list[asyncio.Task] = []
        self._serving: set[str] = set()
        self._accept_locks: dict[str, asyncio.Lock] = {}
        self._slot_waiters: set[asyncio.Future] = set()
        self._throttled: set[socket.socket] = set()  # per-IP throttled sockets awaiting their delayed close
        self._handing: set[asyncio.Task] = set()  # sockets being handed to their protocol (TLS handshakes)
        self._conn_ids = itertools.count()
        self.connections: set[KafkaConnection] = set()
        self._stopping = False
        self._sweeper: asyncio.Task | None = None

    async def bind(self) -> None:
        """Bind every listener (ports known from here on), without accepting yet."""
        self._tls = dict(self.authentication.tls) if self.authentication is not None else {}
        for lst in self.listeners:
            socks = _bind(lst.host or None, lst.port)
            self._sockets[lst.name] = socks
            self._accept_locks[lst.name] = asyncio.Lock()
            self.bound[lst.name] = Listener(lst.name, lst.host, socks[0].getsockname()[1])

    async def reload_tls(self, contexts: dict) -> list[str]:
        """New SSLContexts for TLS listeners (keystores and truststores read again: SIGHUP, dynamic configs): new
        connections get them, connections already open keep theirs. Returns the listeners reloaded."""
        done = []
        for lst in self.listeners:
            if lst.name in contexts and lst.name in self._tls:
                self._tls[lst.name] = contexts[lst.name]
                done.append(lst.name)
        return done

    async def start_serving(self, only: frozenset[str] | None = None) -> None:
        """Accept on every bound listener (``only``: just those names; a later call starts the others)."""
        handles = self.handles
        assert handles is not None, "the node sets the handlers' handles before serving"
        for lst in self.listeners:
            if (only is None or lst.name in only) and lst.name not in self._serving and not self._stopping:
                self._serving.add(lst.name)
                for sock in self._sockets[lst.name]:
                    sock.listen(LISTEN_BACKLOG)
                    self._acceptors.append(asyncio.ensure_future(self._accept_loop(lst.name, sock)))
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
        for t in self._acceptors:
            t.cancel()
        if self._acceptors:
            await asyncio.wait(self._acceptors, timeout=5)
        self._acceptors.clear()
        for t in list(self._handing):
            t.cancel()
        if self._handing:
            await asyncio.wait(list(self._handing), timeout=5)
        for socks in self._sockets.values():
            for sock in socks:
                sock.close()
        for sock in list(self._throttled):
            sock.close()
        self._throttled.clear()
        writers = [c.finish() for c in list(self.connections)]
        if writers:
            _, pending = await asyncio.wait(writers, timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        for c in list(self.connections):
            c.transport.abort()

    # ---- the acceptor (Kafka's Acceptor and ConnectionQuotas.inc) -------------------------------------------

    async def _accept_loop(self, listener: str, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            try:
                conn, addr = await loop.sock_accept(sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # EMFILE and the like: Kafka's acceptor logs and goes on
                log.error("error accepting a connection on listener %s: %s", listener, exc)
                await asyncio.sleep(0.1)
                continue
            try:
                async with self._accept_locks[listener]:  # one acceptor per listener, as Kafka's
                    ip = _peer_ip(addr)
                    if not await self._admit(listener, ip, conn):
                        continue
            except BaseException:
                conn.close()
                raise
            connection = KafkaConnection(self, listener)
            connection.quota_ip = ip
            task = asyncio.ensure_future(self._serve(listener, conn, connection))
            self._handing.add(task)
            task.add_done_callback(self._handing.discard)

    async def _admit(self, listener: str, ip: str, conn: socket.socket) -> bool:
        """ConnectionQuotas.inc for an accepted socket: wait for the creation rates and a free slot (the listener
        accepts nothing meanwhile), then the IP's rate (over it: kept open, unread, then closed) and count (at its
        maximum: closed at once). True: the connection is counted and is to be served."""
        quotas = self.quotas.plane(listener) if self.quotas is not None else None
        if quotas is None:
            return True
        clock = self.clock
        lock = self.quotas.lock
        with lock:
            throttle_ms = quotas.record_connection(listener, clock.now_ms())
        if throttle_ms > 0 or not quotas.slot_available(listener):
            started = clock.monotonic()
            end_ms = clock.now_ms() + throttle_ms
            loop = asyncio.get_running_loop()
            while True:  # as long as the limit holds: ends when the delay has passed and a slot is free
                remaining_ms = end_ms - clock.now_ms()
                if remaining_ms <= 0 and quotas.slot_available(listener):
                    break
                waiter = loop.create_future()
                self._slot_waiters.add(waiter)
                try:
                    await asyncio.wait([waiter], timeout=remaining_ms / 1000.0 if remaining_ms > 0 else None)
                finally:
                    self._slot_waiters.discard(waiter)
            self.quotas.acceptor_blocked(listener, clock.monotonic() - started)
        try:
            with lock:
                quotas.inc(listener, ip, clock.now_ms())
        except ConnectionThrottled as exc:
            log.debug("delaying closing of connection from %s for %d ms", ip, exc.throttle_ms)
            self._throttled.add(conn)
            delay_s = max(0, exc.start_ms + exc.throttle_ms - clock.now_ms()) / 1000.0
            asyncio.get_running_loop().call_later(delay_s, self._close_throttled, conn)
            return False
        except TooManyConnections as exc:
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     exc.ip, exc.count)
            conn.close()
            return False
        if quotas.protected(listener):
            self.close_excess_connections()
        return True

    def _close_throttled(self, conn: socket.socket) -> None:
        self._throttled.discard(conn)
        conn.close()

    async def _serve(self, listener: str, conn: socket.socket, connection: "KafkaConnection") -> None:
        """Hand a counted socket to its protocol (a TLS handshake first, bounded by ``connections.max.idle.ms``, at
        most 10 s). A connection that never reaches the protocol is released here; a TLS handshake that fails or
        times out (plaintext on a TLS port, half a ClientHello, a foreign CA) counts as a failed authentication,
        as Kafka's Selector counts an SslAuthenticationException, but a peer gone before it (a port probe) does not
        (Kafka's EOFException during the handshake is no authentication failure)."""
        context = self._tls.get(listener)
        extra = {"ssl": context, "ssl_handshake_timeout": min(self.idle_ms / 1000.0, 10.0)} if context else {}
        failure: BaseException | None = None
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: connection, conn, **extra)
        except asyncio.CancelledError:
            if not connection.made[0]:
                conn.close()
                self.release(connection)
            raise
        except (OSError, asyncio.TimeoutError, RuntimeError) as exc:
            failure = exc
        if connection.made[0]:  # the protocol has it: its connection_lost releases it
            return
        conn.close()
        self.release(connection)
        if context is not None and isinstance(failure, (ssl.SSLError, asyncio.TimeoutError, ConnectionAbortedError)):
            self.metrics.auth_failures.labels(listener).inc()
            log.info("a TLS handshake on listener %s failed or timed out; the connection is closed (%r)", listener,
                     failure)

    def release(self, connection: "KafkaConnection") -> None:
        """A counted connection has gone (ConnectionQuotas.dec): once, whichever way it went."""
        if connection.quota_ip is None:
            return
        ip, connection.quota_ip = connection.quota_ip, None
        if self.quotas is not None:
            quotas = self.quotas.plane(connection.listener)
            if quotas is not None:
                with self.quotas.lock:
                    quotas.dec(connection.listener, ip)
        self.notify_slots()

    def notify_slots(self) -> None:
        """Wake the acceptors waiting for a slot (counts.notifyAll): a connection went or a limit changed."""
        waiters, self._slot_waiters = self._slot_waiters, set()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def close_excess_connections(self) -> None:
        """Over the broker-wide ``max.connections`` (inter-broker connections past it, or a lowered limit), each
        other listener closes its least recently used connections (Processor.closeExcessConnections)."""
        if self.quotas is None:
            return
        for quotas, listeners in self.quotas.planes():
            excess = quotas.total - quotas.max_connections
            candidates = [c for c in self.connections if c.listener in listeners and c.quota_ip is not None
                          and quotas.max_connections_exceeded(c.listener)]
            excess -= sum(1 for c in candidates if c.evicted)
            for c in sorted((c for c in candidates if not c.evicted), key=lambda c: c.last_active)[:max(excess, 0)]:
                log.info("closing connection %s: the broker has more than max.connections", c.conn_id)
                c.evicted = True
                c.transport.close()

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: a connection with nothing read, written or in flight that long is closed."""
        idle_s = self.idle_ms / 1000.0
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.01), 30.0))
            if self.quotas is not None:
                self.quotas.expire(self.clock.now_ms())
            now = self.clock.monotonic()
            for c in list(self.connections):
                if not c.in_flight and now - c.last_active > idle_s:
                    log.info("closing idle connection %s", c.conn_id)
                    c.transport.close()


LISTEN_BACKLOG = 100  # asyncio's default backlog


def _bind(host: str | None, port: int) -> list[socket.socket]:
    """Listening sockets for a listener, as asyncio's create_server binds them (every address of ``host``, all
    interfaces when empty); with port 0 the later ones take the first's port."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    seen = set()
    try:
        for family, type_, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, type_, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if socks and port == 0:
                address = (address[0], socks[0].getsockname()[1], *address[2:])
            try:
                sock.bind(address)
            except OSError:
                sock.close()
                if socks and port == 0:  # that port is taken in the other family: serve the first
                    continue
                raise
            sock.setblocking(False)
            socks.append(sock)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def _peer_ip(addr) -> str:
    """The peer's IP as the quotas key it (IPv4-mapped IPv6 as IPv4)."""
    host = addr[0] if isinstance(addr, tuple) and addr else str(addr)
    try:
        return normalise_ip(host)
    except ValueError:
        return host


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
        self.made = [False]  # set by connection_made: a TLS handshake that fails never reaches it
        self.quota_ip: str | None = None  # counted in the connection quotas under this IP until released
        self.evicted = False  # closed for the broker-wide max.connections
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
        self._gate = asyncio.Event()  # clear while a quota's throttle time runs or a request holds the connection
        self._gate.set()
        self._throttle_handle: asyncio.TimerHandle | None = None
        self._holds = 0  # requests handled alone, as Kafka handles every request (``_hold``)
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
        server.metrics.connection_creations.labels(self.listener).inc()
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
        server.release(self)
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
        shares = server.handles.share_partitions if server.handles is not None else None
        if shares is not None:  # the connection's share session goes, releasing its records
            shares.on_disconnect(self.conn_id)

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
                             gate=self._gate, on_throttle=self._throttle, hold=self._hold)
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

    def _hold(self) -> Callable[[], None]:
        """Handle none of the requests read after this one until the returned ``release`` is called: Kafka's
        Processor mutes a channel from a request's receipt to its response, so a quota recorded in a response
        callback holds the requests the client pipelined behind it; the read-ahead ones wait at the gate here.
        Reading pauses meanwhile, as the mute does: a request read in the turn that releases the hold would have
        its first step run before the wake-ups of those waiting, and pass the gate ahead of them (two produces to
        one partition appended out of order)."""
        self._holds += 1
        self._gate.clear()
        if not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._holds -= 1
                self._unthrottle(timer=False)
        return release

    def _unthrottle(self, timer: bool = True) -> None:
        if timer:
            self._throttle_handle = None
        if self._holds or self._throttle_handle is not None:  # still held, or a throttle time still runs
            return
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
