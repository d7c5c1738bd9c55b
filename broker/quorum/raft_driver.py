"""Drives the pure Raft core (cluster/raft/node.py) with real time, disk and network (KafkaRaftClient's poll loop).

Everything that touches the core runs under one lock, one event at a time: a tick, an inbound request, a
response from a peer, a proposal. After each event the core's ``Ready`` is carried out in order: the
election state is written to the ``quorum-state`` file (fsynced), the log is fsynced, then messages go out
(requests to peers as KRaft RPCs; the answer to the inbound request is returned to its handler), then
committed entries and snapshots go to the application. So nothing that implies durability (a vote, a
fetch offset, a new epoch) is sent before what it depends on is on disk.

A leader parks a Fetch that would return nothing (Kafka's fetch purgatory) until the log or the high
watermark moves or ``max_wait_ms`` passes, so followers do not spin.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Awaitable, Callable

from broker.clock import Clock
from broker.network.node_client import BadResponse, NodeClient
from broker.network.peer_links import DIRECT, PeerLinks
from broker.quorum import wire
from broker.quorum.kraft_log import KRaftLog
from broker.quorum.metadata_snapshot import SnapshotError, validate_snapshot
from broker.quorum.state_store import QuorumStateStore
from broker.timeouts import wait_for
from cluster.raft import messages as m
from cluster.raft.election_state import NO_ID
from cluster.raft.log import Entry, Snapshot
from cluster.raft.node import RaftConfig, RaftNode, Ready, Role
from protocol.errors import ErrorCode

log = logging.getLogger("odradek.raft")

LOG_CLEAN_INTERVAL_S = 60.0  # metadata log retention also runs on this timer, as Kafka's does
# the timer loop sleeps until the core's next deadline (KafkaRaftClient.poll's timeout), woken early by any event;
# the bounds keep a late or skipped wake-up harmless
MIN_TICK_WAIT_S, MAX_TICK_WAIT_S = 0.002, 0.5
RESPONSE_TYPES = tuple(wire.RESPONSE_FOR.values())

Apply = Callable[[list[Entry], "Snapshot | None"], Awaitable[None]]


class NotLeaderError(Exception):
    """This node does not lead the quorum (now, or any more when the proposal would have committed)."""


class RaftDriver:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], cluster_id: str, raft_log: KRaftLog,
                 store: QuorumStateStore, clock: Clock, config: RaftConfig, apply: Apply,
                 rng: random.Random | None = None, links: PeerLinks = DIRECT) -> None:
        self.node_id = node_id
        self.links = links
        self.voter_addresses = voters
        self.voters = frozenset(voters)
        self.cluster_id = cluster_id
        self.log = raft_log
        self.store = store
        self.clock = clock
        self.config = config
        self.apply = apply
        self.rng = rng or random.Random()
        self.node: RaftNode | None = None
        self._lock = asyncio.Lock()
        self._clients: dict[int, NodeClient] = {}
        self._refused_by: set[int] = set()  # peers that answered CLUSTER_AUTHORIZATION_FAILED (said once each)
        self._tasks: set[asyncio.Task] = set()
        self._ticker: asyncio.Task | None = None
        self._changed = asyncio.Event()  # set (and replaced) whenever the log end or high watermark moves
        self._timers_moved = asyncio.Event()  # set after every event the core processed: the timer loop looks again
        # what parked fetches last heard: compared after every event, since a proposal appends before _process
        self._signalled: tuple[int, int] = (-1, -1)
        self._applied = asyncio.Condition()
        self.applied_offset = 0  # the application has everything below it
        self._commit_waiters: list[tuple[int, int, asyncio.Future]] = []  # (next offset, epoch, future)
        self.leader_listeners: list[Callable[[int, int], None]] = []  # (epoch, leader id) on every change
        self._leader_changed = asyncio.Event()  # set (and replaced) on every leader change
        self.fetch_snapshots_received = 0
        self._leader_unknown_since: float | None = None  # clock.monotonic() since when no leader is known
        self._stopped = False
        # the core raised (a broken invariant, a metadata log that cannot be written): the node cannot go on,
        # as Kafka's fatal fault handler ends the process; whoever runs the node waits on this and stops it
        self.failed = asyncio.Event()
        self.failure: BaseException | None = None

    # ---- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        state = await asyncio.to_thread(self.store.read)
        await asyncio.to_thread(self.log.open)
        self.node = RaftNode(self.node_id, self.voters, self.log, self.rng, self.config, self._now(), state)
        if self.node.leader_id == NO_ID:
            self._leader_unknown_since = self.clock.monotonic()
        if self.node.stored_epoch_below_log is not None:
            stored, in_log = self.node.stored_epoch_below_log
            log.warning("node %d: the epoch in %s (%d) is below the last epoch in the metadata log (%d): starting "
                        "unattached in epoch %d", self.node_id, self.store.path, stored, in_log, in_log)
        log.info("node %d: quorum of voters %s, epoch %d, leader %s, log [%d, %d)", self.node_id,
                 sorted(self.voters), self.node.epoch, self.node.leader_id if self.node.leader_id != NO_ID else "none",
                 self.log.start_offset, self.log.end_offset)
        async with self._lock:
            await self._process()
        self._ticker = asyncio.ensure_future(self._tick_loop())

    async def stop(self) -> None:
        self._stopped = True
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for c in self._clients.values():
            await c.close()
        for _, _, fut in self._commit_waiters:
            if not fut.done():
                fut.set_exception(NotLeaderError("shutting down"))
        await asyncio.to_thread(self.log.close)

    async def resign(self) -> None:
        """A leader steps down (EndQuorumEpoch to the others), as Kafka's controller does on shutdown."""
        async with self._lock:
            if self.node is not None and self.node.role is Role.LEADER:
                self.node.resign(self._now())
                await self._process()

    # ---- what the node and its handlers see ------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.node is not None and self.node.role is Role.LEADER

    @property
    def leader_id(self) -> int:
        return self.node.leader_id if self.node is not None else NO_ID

    @property
    def epoch(self) -> int:
        return self.node.epoch if self.node is not None else 0

    @property
    def high_watermark(self) -> int:
        return self.node.high_watermark if self.node is not None else 0

    def no_leader_known(self) -> str | None:
        """Why no leader can be asked, for an error message ("no quorum leader known for 3.2 s, epoch 4"), or
        None while one is known."""
        since = self._leader_unknown_since
        if self.leader_id != NO_ID or since is None:
            return None
        return f"no quorum leader known for {self.clock.monotonic() - since:.1f} s (epoch {self.epoch})"

    def leader_address(self) -> tuple[str, int] | None:
        leader = self.leader_id
        return self.voter_addresses.get(leader) if leader != NO_ID else None

    async def wait_for_leadership_caught_up(self) -> None:
        """As the leader, wait until everything before this epoch is applied (the LeaderChange entry of the
        epoch is committed): only then may the controller decide against the image. NotLeaderError if not."""
        node = self.node
        if node is None or node.role is not Role.LEADER:
            raise NotLeaderError(f"node {self.node_id} is not the quorum leader")
        epoch, target = node.epoch, node.epoch_start_offset + 1
        async with self._applied:
            await self._applied.wait_for(lambda: self.applied_offset >= target or self.epoch != epoch
                                         or not self.is_leader)
        if self.epoch != epoch or not self.is_leader:
            raise NotLeaderError(f"node {self.node_id} lost the leadership of epoch {epoch}")

    async def propose(self, batch: bytes, count: int) -> None:
        """Append ``batch`` (``count`` records) as the leader and return once it is committed and applied."""
        committed, _ = await self.append(batch, count)
        await committed

    async def append(self, batch: bytes, count: int) -> tuple[asyncio.Future, int]:
        """Append ``batch`` (``count`` records) to the leader's log: a future done once it is committed and
        applied (NotLeaderError if the leadership is lost first), and the offset of its last record. Later
        appends may go before this one commits (the controller pipelines its decisions)."""
        async with self._lock:
            node = self.node
            if node is None or self._stopped or node.role is not Role.LEADER:
                raise NotLeaderError(f"node {self.node_id} is not the quorum leader")
            offset = node.propose(batch, self._now(), count=count)
            if offset is None:
                raise NotLeaderError(f"node {self.node_id} is not the quorum leader")
            fut = asyncio.get_running_loop().create_future()
            self._commit_waiters.append((offset + count, node.epoch, fut))
            try:
                await self._process()
            except Exception as exc:  # noqa: BLE001 - the core or its log raised: fatal, as in Kafka
                self._fail(exc)
        return fut, offset + count - 1

    async def create_snapshot(self, end_offset: int, data: bytes) -> bool:
        """Keep ``data`` as the snapshot up to ``end_offset`` (committed and applied), then let the log's
        retention clean before older snapshots; False when the core refuses (not applied yet, or not past the
        latest snapshot)."""
        async with self._lock:
            if self.node is None or self._stopped:
                return False
            return await asyncio.to_thread(self._snapshot_and_clean, self.node, end_offset, data)

    def _snapshot_and_clean(self, node: RaftNode, end_offset: int, data: bytes) -> bool:
        if not node.snapshot_at(end_offset, data):
            return False
        if self.log.maybe_clean():
            log.info("metadata log retention: log start now %d", self.log.start_offset)
        return True

    # ---- inbound KRaft requests ---------------------------------------------------------------------------

    async def handle(self, request, max_wait_ms: int = 0):
        """The core's answer to an inbound request (None when it gives none)."""
        expected = wire.RESPONSE_FOR[type(request)]
        reply = await self._step_and_reply(request, expected)
        if isinstance(request, m.FetchRequest) and max_wait_ms > 0 and reply is not None and reply.may_wait:
            hw = reply.high_watermark
            deadline = self.clock.monotonic() + max_wait_ms / 1000
            while not self._stopped:
                changed = self._changed
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    break
                try:
                    await wait_for(changed.wait(), left)
                except asyncio.TimeoutError:
                    break
                if self.log.end_offset > request.fetch_offset or self.high_watermark != hw or not self.is_leader:
                    break
            reply = await self._step_and_reply(request, expected)
        return reply

    async def _step_and_reply(self, request, expected):
        async with self._lock:
            if self.node is None or self._stopped:
                return None
            try:
                self.node.step(request, self._now())
                replies = await self._process(reply_to=(request.src, expected))
            except Exception as exc:  # noqa: BLE001 - the core or its log raised: fatal, as in Kafka
                self._fail(exc)
                return None
        return replies[0] if replies else None

    def fail(self, exc: BaseException) -> None:
        """Something the quorum depends on failed (a publisher that cannot follow the metadata): stop."""
        self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            log.critical("node %d: the metadata quorum failed, this node stops: %r", self.node_id, exc,
                         exc_info=exc)
        self._stopped = True
        self.failed.set()
        for _, _, fut in self._commit_waiters:
            if not fut.done():
                fut.set_exception(NotLeaderError("the metadata quorum failed"))
        self._commit_waiters.clear()

    # ---- the loop -----------------------------------------------------------------------------------------

    def _now(self) -> int:
        return self.clock.now_ms()

    async def _tick_loop(self) -> None:
        next_clean = self.clock.monotonic() + LOG_CLEAN_INTERVAL_S
        while not self._stopped:
            wait = (self.node.next_deadline() - self._now()) / 1000
            self._timers_moved.clear()
            try:  # a message or proposal may bring the deadline forward: look again
                await wait_for(self._timers_moved.wait(), min(MAX_TICK_WAIT_S, max(MIN_TICK_WAIT_S, wait)))
                continue
            except asyncio.TimeoutError:
                pass
            async with self._lock:
                if self._stopped:
                    return
                try:
                    self.node.tick(self._now())
                    await self._process()
                    if self.clock.monotonic() >= next_clean:  # KafkaRaftClient's RaftMetadataLogCleanerManager
                        next_clean = self.clock.monotonic() + LOG_CLEAN_INTERVAL_S
                        if await asyncio.to_thread(self.log.maybe_clean):
                            log.info("metadata log retention: log start now %d", self.log.start_offset)
                except Exception as exc:  # noqa: BLE001 - the core or its log raised: fatal, as in Kafka
                    self._fail(exc)
                    return

    async def _process(self, reply_to: tuple[int, type] | None = None) -> list:
        """Carry out the core's Ready until it has nothing more (called with the lock held)."""
        node = self.node
        self._timers_moved.set()
        replies = []
        for _ in range(100):
            ready: Ready = node.ready()
            if ready.empty():
                break
            if ready.election_state is not None:
                state = ready.election_state
                await asyncio.to_thread(self.store.write, state)
            if ready.flush:
                await asyncio.to_thread(self.log.flush)
            for msg in ready.messages:
                if reply_to is not None and msg.dst == reply_to[0] and isinstance(msg, reply_to[1]):
                    replies.append(msg)
                elif isinstance(msg, RESPONSE_TYPES):
                    log.debug("node %d: dropping an unmatched %s", self.node_id, type(msg).__name__)
                else:
                    self._spawn(self._send(msg))
            if ready.leader_change is not None:
                self._on_leader_change(*ready.leader_change)
            if ready.load_snapshot is not None or ready.committed:
                await self.apply(ready.committed, ready.load_snapshot)
                new_applied = ready.committed[-1].next_offset if ready.committed else ready.load_snapshot.end_offset
                async with self._applied:
                    self.applied_offset = max(self.applied_offset, new_applied)
                    self._applied.notify_all()
                self._complete_commits()
            node.advance(self._now())
            self._wake_parked_fetches(force=ready.leader_change is not None)
        self._wake_parked_fetches()
        return replies

    def _wake_parked_fetches(self, force: bool = False) -> None:
        """Kafka's fetchPurgatory.maybeComplete: parked fetches re-check once the log end or the high watermark
        has moved since they were last told (a leader change wakes them too)."""
        now = (self.log.end_offset, self.node.high_watermark)
        if force or now != self._signalled:
            self._signalled = now
            self._changed.set()
            self._changed = asyncio.Event()

    def _on_leader_change(self, epoch: int, leader_id: int) -> None:
        log.info("node %d: epoch %d, leader %s", self.node_id, epoch, leader_id if leader_id != NO_ID else "unknown")
        if leader_id == NO_ID:
            if self._leader_unknown_since is None:
                self._leader_unknown_since = self.clock.monotonic()
        else:
            self._leader_unknown_since = None
        lost = [w for w in self._commit_waiters if w[1] != epoch or leader_id != self.node_id]
        for waiter in lost:
            self._commit_waiters.remove(waiter)
            if not waiter[2].done():
                waiter[2].set_exception(NotLeaderError(f"leadership of epoch {waiter[1]} lost before the commit"))
        for listener in self.leader_listeners:
            listener(epoch, leader_id)
        self._leader_changed.set()
        self._leader_changed = asyncio.Event()

    def leader_change(self) -> asyncio.Event:
        """An event set at the next change of epoch or leader (one wait for every request in flight)."""
        return self._leader_changed

    def _complete_commits(self) -> None:
        done = [w for w in self._commit_waiters if w[0] <= self.applied_offset]
        for w in done:
            self._commit_waiters.remove(w)
            if not w[2].done():
                w[2].set_result(None)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- outbound requests --------------------------------------------------------------------------------

    def _client(self, node_id: int) -> NodeClient | None:
        client = self._clients.get(node_id)
        if client is None:
            addr = self.voter_addresses.get(node_id)
            if addr is None:
                return None
            client = self._clients[node_id] = self.links.client(addr[0], addr[1], f"raft-client-{self.node_id}",
                                                                peer=node_id)
        return client

    async def _send(self, msg) -> None:
        """Send one request and step the core with its answer; a request that gets no usable answer (refused, lost,
        timed out, undecodable, an error) reaches the core as RequestFailed, as Kafka's driver hands its core an
        error response: nothing is dropped quietly."""
        client = self._client(msg.dst)
        if client is None:
            return await self._step_failed(msg)
        timeout = self.config.request_timeout_ms / 1000
        try:
            if isinstance(msg, m.FetchSnapshotRequest):
                response, data = await self._fetch_snapshot(client, msg, timeout)
            else:
                request = wire.to_request(msg, self.cluster_id)
                response = await client.request(request, wire.VERSIONS[type(request)], timeout)
                data = None
            self._note_authorization(msg, response)
            reply = wire.from_response(msg, response, data)
        except asyncio.CancelledError:
            raise
        except SnapshotError as exc:
            log.warning("node %d: the snapshot %s from %d is damaged: %s", self.node_id, msg.snapshot_id, msg.dst, exc)
            return await self._step_failed(msg)
        except (ConnectionError, asyncio.TimeoutError) as exc:
            log.debug("node %d: %s to %d failed: %r", self.node_id, type(msg).__name__, msg.dst, exc)
            return await self._step_failed(msg)
        except (BadResponse, wire.NotForThisPartition) as exc:
            log.warning("node %d: %s to %d: unusable answer: %s", self.node_id, type(msg).__name__, msg.dst, exc)
            return await self._step_failed(msg)
        except Exception as exc:  # a bug below the core: loud, and the core still hears of the failure
            log.error("node %d: %s to %d failed unexpectedly", self.node_id, type(msg).__name__, msg.dst,
                      exc_info=exc)
            return await self._step_failed(msg)
        if reply is None:
            top = getattr(response, "error_code", 0)
            log.warning("node %d: %s from %d answered error %d", self.node_id, type(msg).__name__, msg.dst, top)
            return await self._step_failed(msg)
        await self._step(reply)

    def _note_authorization(self, msg, response) -> None:
        """A peer whose authorizer refuses this node's KRaft requests (its principal lacks CLUSTER_ACTION on the
        cluster: not in ``super.users``, no ACL) keeps the quorum from forming; said once per peer, loudly."""
        if getattr(response, "error_code", 0) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            if msg.dst not in self._refused_by:
                self._refused_by.add(msg.dst)
                log.error("node %d: node %d refused our %s: CLUSTER_AUTHORIZATION_FAILED (this node's principal on "
                          "the controller listener needs CLUSTER_ACTION on the cluster: list it in super.users)",
                          self.node_id, msg.dst, type(msg).__name__)
        else:
            self._refused_by.discard(msg.dst)

    async def _step_failed(self, msg) -> None:
        await self._step(m.RequestFailed(msg.dst, self.node_id, type(msg).__name__))

    async def _step(self, message) -> None:
        """One message from the transport into the core, then its Ready."""
        async with self._lock:
            if self.node is None or self._stopped:
                return
            try:
                self.node.step(message, self._now())
                await self._process()
            except Exception as exc:  # noqa: BLE001 - the core or its log raised: fatal, as in Kafka
                self._fail(exc)

    async def _fetch_snapshot(self, client: NodeClient, msg: m.FetchSnapshotRequest, timeout: float):
        """The whole snapshot, chunk by chunk (FetchSnapshot's ``position``)."""
        data = bytearray()
        while True:
            request = wire.fetch_snapshot_chunk_request(msg, self.cluster_id, len(data))
            response = await client.request(request, wire.VERSIONS[type(request)], timeout)
            if response.error_code or not response.topics or not response.topics[0].partitions:
                return response, None
            p = response.topics[0].partitions[0]
            if p.error_code:
                return response, None
            data += p.unaligned_records or b""
            if len(data) >= p.size or not p.unaligned_records:
                validate_snapshot(bytes(data))  # SnapshotError: dropped, fetched again after the request timeout
                self.fetch_snapshots_received += 1
                log.info("node %d: fetched snapshot %s (%d bytes) from %d", self.node_id, msg.snapshot_id,
                         len(data), msg.dst)
                return response, bytes(data)
