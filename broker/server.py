"""The network server: listeners, one reader task per connection, requests answered in order, bounded frames.

The socket work is here; everything about bytes lives in protocol.connection (sans-IO), and what a
request means lives in the handlers behind broker.dispatch. The node (broker/node.py) owns this server.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from typing import TYPE_CHECKING

from broker.config import Listener
from broker.context import BrokerHandles, RequestContext
from broker.dispatch import dispatch
from broker.errors import CloseConnection
from broker.sendfile import PartWriter, SendStats
from protocol.connection import CONNECTION_CLOSED, NEED_DATA, ServerConnection
from protocol.errors import DecodeError

if TYPE_CHECKING:
    from broker.metrics import BrokerMetrics

log = logging.getLogger("odradek.server")

READ_CHUNK = 256 * 1024
MAX_IN_FLIGHT = 16  # requests read ahead per connection (clients pipeline up to 5)


class NetworkServer:
    """Kafka's SocketServer: accepts on every listener and feeds each connection's requests to dispatch."""

    def __init__(self, listeners: list[Listener], max_frame: int, idle_ms: int, metrics: "BrokerMetrics",
                 send_stats: SendStats) -> None:
        self.listeners = listeners
        self.max_frame = max_frame
        self.idle_ms = idle_ms
        self.metrics = metrics
        self.send_stats = send_stats
        self.zero_copy = True
        self.handles: BrokerHandles | None = None  # set by the node before serving starts
        self.bound: dict[str, Listener] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._conn_ids = itertools.count()
        self._connections: set[asyncio.Task] = set()
        self._stopping = asyncio.Event()

    async def bind(self) -> None:
        """Bind every listener (ports known from here on), without accepting yet."""
        for lst in self.listeners:
            server = await asyncio.start_server(
                lambda r, w, name=lst.name: self._on_connection(r, w, name),
                host=lst.host or None, port=lst.port, reuse_address=True, limit=READ_CHUNK, start_serving=False,
            )
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self.bound[lst.name] = Listener(lst.name, lst.host, port)

    async def start_serving(self) -> None:
        handles = self.handles
        assert handles is not None, "the node sets the handlers' handles before serving"
        for server in self._servers:
            await server.start_serving()
        log.info("odradek node %s listening on %s; data in %s; cluster id %s", handles.node_id,
                 ", ".join(f"{b.name}://{b.host}:{b.port}" for b in self.bound.values()),
                 ", ".join(map(str, handles.config.log_dirs)), handles.cluster_id)

    async def stop(self, grace_s: float) -> None:
        """Stop accepting, answer the requests already read, then close every connection."""
        self._stopping.set()
        for s in self._servers:
            s.close()
        if self._connections:
            _, pending = await asyncio.wait(list(self._connections), timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        for s in self._servers:
            await s.wait_closed()
        self._servers.clear()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        conn_id = f"{listener}-{next(self._conn_ids)}"
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        conn = ServerConnection(self.max_frame)
        self.metrics.connections.labels(listener).inc()
        try:
            await self._serve(conn, reader, writer, conn_id, listener, peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except CloseConnection as exc:
            log.warning("closing connection %s from %s: %s", conn_id, peer, exc)
        except DecodeError as exc:
            log.warning("closing connection %s from %s: bad frame: %s", conn_id, peer, exc)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("closing connection %s from %s after an internal error", conn_id, peer)
        finally:
            self.metrics.connections.labels(listener).dec()
            self._connections.discard(task)
            writer.close()

    async def _serve(self, conn: ServerConnection, reader, writer, conn_id: str, listener: str, peer) -> None:
        """Read and dispatch requests concurrently; a writer task answers them strictly in order.

        At most MAX_IN_FLIGHT requests per connection are outstanding: past that the reader stops
        reading (backpressure), as does a writer whose peer is not draining responses.
        """
        idle_s = self.idle_ms / 1000.0
        peer_host = peer[0] if isinstance(peer, tuple) and peer else "unknown"
        handles = self.handles
        clock = handles.clock
        pending: asyncio.Queue = asyncio.Queue(MAX_IN_FLIGHT)
        part_writer = PartWriter(writer, self.send_stats, zero_copy=self.zero_copy)
        writer_task = asyncio.ensure_future(self._write_responses(pending, part_writer))
        try:
            while not writer_task.done():
                data = await self._read_or_stop(reader, idle_s)
                if data is None:
                    if self._stopping.is_set():  # shutting down: answer what was read, then close
                        if not writer_task.done():
                            await pending.put(None)
                        await writer_task
                    else:
                        log.info("closing idle connection %s", conn_id)
                    return
                conn.receive_data(data)
                while True:
                    event = conn.next_event()
                    if event is NEED_DATA:
                        break
                    if event is CONNECTION_CLOSED:
                        if not writer_task.done():
                            await pending.put(None)
                        await writer_task
                        return
                    ctx = RequestContext(handles, event, conn_id, listener, peer_host, clock.now_ms(),
                                         clock.monotonic())
                    # the task starts running handlers in arrival order; side effects that must stay
                    # ordered (appends) happen before a handler's first await
                    task = asyncio.ensure_future(dispatch(ctx))
                    if writer_task.done():
                        task.cancel()
                        break
                    await pending.put(task)
            writer_task.result()  # re-raise CloseConnection and friends
        finally:
            if not writer_task.done():
                writer_task.cancel()
                try:
                    await writer_task
                except (asyncio.CancelledError, Exception):
                    pass
            while not pending.empty():
                t = pending.get_nowait()
                if t is not None and not t.done():
                    t.cancel()
            part_writer.close()

    async def _read_or_stop(self, reader: asyncio.StreamReader, idle_s: float) -> bytes | None:
        """The next chunk; None when idle for connections.max.idle.ms or the broker is stopping."""
        if self._stopping.is_set():
            return None
        read = asyncio.ensure_future(reader.read(READ_CHUNK))
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({read, stop}, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if read in done:
            return read.result()
        read.cancel()
        return None

    async def _write_responses(self, pending: asyncio.Queue, part_writer: PartWriter) -> None:
        try:
            while True:
                task = await pending.get()
                if task is None:
                    return
                parts = await task
                if parts is not None:
                    await part_writer.write(parts)
        except BaseException:
            part_writer.writer.transport.abort()  # wakes the reader; Kafka closes the connection
            raise


