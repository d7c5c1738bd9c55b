"""The TCP server: one reader task per connection, requests answered in order, bounded frames.

The socket work is here; everything about bytes lives in protocol.connection (sans-IO).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from pathlib import Path
from typing import Callable

from broker.config import BrokerConfig, Listener
from broker.clock import SYSTEM_CLOCK, Clock
from broker.context import BrokerHandles, RequestContext
from broker.dispatch import dispatch
from broker.errors import CloseConnection
from broker.log_dirs import ensure_meta_properties
from broker.group_service import GroupService
from broker.metrics import BrokerMetrics
from broker.metadata_log import MetadataLog, metadata_log_dir
from broker.replica_manager import ReplicaManager
from cluster.controller import Controller, ControllerResult
from cluster.metadata_image import MetadataImage
from storage.checkpoints import MetaProperties, random_uuid
from storage.config import ConfigError, LogConfig, LogManagerConfig
from storage.log_manager import LogManager
from broker.sendfile import PartWriter, SendStats
from protocol.connection import CONNECTION_CLOSED, NEED_DATA, ServerConnection
from protocol.errors import DecodeError

log = logging.getLogger("odradek.server")

READ_CHUNK = 256 * 1024
MAX_IN_FLIGHT = 16  # requests read ahead per connection (clients pipeline up to 5)


class Broker:
    """One broker process: listeners, the metadata log and image, the partitions it hosts."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        for warning in config.validate():  # raises ConfigException on an invalid value
            log.warning(warning)
        self.config = config
        self.clock = clock
        self.handles: BrokerHandles | None = None
        self.node_id = config.node_id
        self.log_dirs: list[Path] = config.log_dirs
        self.cluster_id: str | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._bound: dict[str, Listener] = {}
        self._conn_ids = itertools.count()
        self._connections: set[asyncio.Task] = set()
        self.max_frame = int(config["socket.request.max.bytes"])
        self.idle_ms = int(config["connections.max.idle.ms"])
        self.send_stats = SendStats()
        self.zero_copy = True
        self.metrics = BrokerMetrics(self)
        self.groups = GroupService(self)
        self.logs_loaded: asyncio.Future | None = None
        self._stopping = asyncio.Event()
        self.image = MetadataImage()
        self.metadata_log = MetadataLog(metadata_log_dir(self.log_dirs, config.get("metadata.log.dir")))
        self.controller = Controller(self.node_id, config.values, validate_topic_configs=self._validate_topic_configs)
        self.log_manager: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.producer_ids = ProducerIdBlock()
        self._metadata_lock = asyncio.Lock()
        self._producer_id_lock = asyncio.Lock()
        self.incarnation_id = random_uuid()

    # ---- lifecycle ---------------------------------------------------------------------------------

    async def start(self, wait_for_logs: bool = True) -> None:
        """Open the metadata log, start serving, and load the partition logs in the background.

        While logs load (slow after an unclean shutdown: recovery runs in worker threads, never on the
        event loop) the broker already answers: partitions it hosts are NOT_LEADER_OR_FOLLOWER /
        LEADER_NOT_AVAILABLE and groups COORDINATOR_LOAD_IN_PROGRESS, Kafka's retriable errors.
        ``wait_for_logs`` returns only once loading finished (the embedded broker's default).
        """
        self.cluster_id = ensure_meta_properties(self.log_dirs, self.node_id, self.config.get("cluster.id"))
        image = await asyncio.to_thread(self.metadata_log.open)
        lm_config = LogManagerConfig.from_props({**self.config.values, "log.dirs": ",".join(map(str, self.log_dirs)),
                                                 "cluster.id": self.cluster_id})
        topic_configs = {name: dict(image.topic_config(name)) for name in image.topics_by_name}
        self.log_manager = LogManager(lm_config, broker_props=self.config.values, topic_configs=topic_configs,
                                      broker_epoch=image.brokers[self.node_id].broker_epoch
                                      if self.node_id in image.brokers else -1)
        self.replicas = ReplicaManager(self.node_id, self.log_manager, now_ms)
        self.replicas.loading = True
        self.image = image
        self.handles = BrokerHandles(
            node_id=self.node_id, cluster_id=self.cluster_id, config=self.config, clock=self.clock, metadata=self,
            replicas=self.replicas, groups=self.groups, controller=None, metrics=self.metrics,
            advertised_endpoint=self.advertised_endpoint, next_producer_id=self.next_producer_id)
        for lst in self.config.listeners:
            server = await asyncio.start_server(
                lambda r, w, name=lst.name: self._on_connection(r, w, name),
                host=lst.host or None, port=lst.port, reuse_address=True, limit=READ_CHUNK, start_serving=False,
            )
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self._bound[lst.name] = Listener(lst.name, lst.host, port)
        await self.decide(self.controller.bootstrap)
        endpoints = [(name, ep.host, ep.port) for name, ep in
                     ((n, self.advertised_endpoint(n)) for n in self._bound)]
        dir_ids = [m.directory_id for m in (MetaProperties.read(str(d / "meta.properties")) for d in self.log_dirs)
                   if m.directory_id]
        await self.decide(lambda image: self.controller.register_broker(
            image, self.node_id, self.incarnation_id, endpoints, self.config.get("broker.rack"),
            self.metadata_log.end_offset, dir_ids))
        self.metrics.start(self.config.get("metrics.prometheus.listener"))
        for server in self._servers:
            await server.start_serving()
        log.info("odradek node %s listening on %s; data in %s; cluster id %s", self.node_id,
                 ", ".join(f"{l.name}://{l.host}:{l.port}" for l in self._bound.values()),
                 ", ".join(map(str, self.log_dirs)), self.cluster_id)
        self.logs_loaded = asyncio.ensure_future(self._load_partitions())
        if wait_for_logs:
            await self.logs_loaded

    @property
    def loading(self) -> bool:
        return self.replicas is None or self.replicas.loading

    async def _load_partitions(self) -> None:
        started = time.monotonic()
        assert self.log_manager is not None and self.replicas is not None
        await asyncio.to_thread(self.log_manager.startup, now_ms())
        for d, clean in self.log_manager._had_clean_shutdown.items():
            log.info("log dir %s: %s", d, "clean shutdown, recovery skipped" if clean
                     else "no clean-shutdown marker, logs recovered from their recovery points")
        async with self._metadata_lock:
            await asyncio.to_thread(self.replicas.apply_image, self.image)
            self.replicas.loading = False
        self.log_manager.start_background()
        await self.groups.start()
        log.info("loaded %d partitions in %.2f s", len(self.replicas.partitions), time.monotonic() - started)

    async def stop(self, grace_s: float = 10.0) -> None:
        """Graceful shutdown: stop accepting, answer requests already read, then flush and checkpoint
        (LogManager writes the clean-shutdown marker, so the next start skips recovery)."""
        log.info("shutting down: stop accepting, finishing in-flight requests")
        if getattr(self, "groups", None) is not None:  # group coordinator: answer parked JoinGroups first
            await self.groups.stop()
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
        self.metrics.stop()
        if self.logs_loaded is not None and not self.logs_loaded.done():
            await asyncio.wait([self.logs_loaded])  # recovery runs in threads: let it finish, then close
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.shutdown, now_ms())
            self.log_manager = None
        await asyncio.to_thread(self.metadata_log.close)

    # ---- metadata ----------------------------------------------------------------------------------

    async def decide(self, decision: Callable[[MetadataImage], ControllerResult]) -> ControllerResult:
        """Run a controller decision against the latest image and commit its records, atomically.

        Decisions are serialized, so two requests racing to create the same topic see each other
        (the second gets TOPIC_ALREADY_EXISTS), as in KRaft's single-threaded controller.
        """
        async with self._metadata_lock:
            result = decision(self.image)
            if result.records:
                await self._commit_locked(result.records)
            return result

    async def _commit_locked(self, records: list) -> MetadataImage:
        """Append to the metadata log, open/close partitions, publish the new image."""
        if not records:
            return self.image
        image = await asyncio.to_thread(self.metadata_log.append, records)
        assert self.replicas is not None
        if not self.replicas.loading:  # while loading, the loader applies the latest image when done
            await asyncio.to_thread(self.replicas.apply_image, image)
        self.image = image
        return image

    def _validate_topic_configs(self, configs: dict) -> str | None:
        try:
            LogConfig.from_props({k: v for k, v in configs.items() if v is not None}, self.config.values)
        except ConfigError as exc:
            return str(exc)
        return None

    async def next_producer_id(self) -> int:
        """A producer id from this broker's block; a new block is committed to the metadata log first."""
        pid = self.producer_ids.take()
        if pid is None:
            async with self._producer_id_lock:
                pid = self.producer_ids.take()
                if pid is None:
                    def allocate(image: MetadataImage) -> ControllerResult:
                        me = image.brokers.get(self.node_id)
                        return self.controller.allocate_producer_ids(image, self.node_id,
                                                                     me.broker_epoch if me else -1)

                    res = await self.decide(allocate)
                    self.producer_ids.refill(*res.response)
                    pid = self.producer_ids.take()
        assert pid is not None
        return pid

    def bound_port(self, listener: str | None = None) -> int:
        if listener is None:
            listener = next(iter(self._bound))
        return self._bound[listener].port

    def advertised_endpoint(self, listener: str) -> Listener:
        """The advertised host:port for a listener; port 0 in config means the port actually bound."""
        for adv in self.config.advertised_listeners:
            if adv.name == listener:
                port = adv.port or self._bound[listener].port
                host = adv.host or self._bound[listener].host or socket.getfqdn()
                return Listener(listener, host, port)
        b = self._bound[listener]
        return Listener(listener, b.host or socket.getfqdn(), b.port)

    # ---- connections -------------------------------------------------------------------------------

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
            await self._serve(conn, reader, writer, conn_id, listener)
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

    async def _serve(self, conn: ServerConnection, reader, writer, conn_id: str, listener: str) -> None:
        """Read and dispatch requests concurrently; a writer task answers them strictly in order.

        At most MAX_IN_FLIGHT requests per connection are outstanding: past that the reader stops
        reading (backpressure), as does a writer whose peer is not draining responses.
        """
        idle_s = self.idle_ms / 1000.0
        peer = writer.get_extra_info("peername")
        peer_host = peer[0] if isinstance(peer, tuple) and peer else "unknown"
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
                    ctx = RequestContext(self.handles, self, event, conn_id, listener, peer_host,
                                         self.clock.now_ms(), self.clock.monotonic())
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


def now_ms() -> int:
    return int(time.time() * 1000)


class ProducerIdBlock:
    """The range of producer ids this broker may hand out (Kafka's ProducerIdManager)."""

    def __init__(self) -> None:
        self.next = 0
        self.end = 0

    def take(self) -> int | None:
        if self.next >= self.end:
            return None
        pid = self.next
        self.next += 1
        return pid

    def refill(self, start: int, size: int) -> None:
        self.next, self.end = start, start + size


def new_event_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()
