"""Followers pull their partitions from the leaders (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

One fetcher task per source broker carries every partition this broker follows from it, over one
connection to the leader's inter-broker listener. Each round is one Fetch (``replica_state``: our node id
and broker epoch; per partition the fetch offset = our log end, the last fetched epoch and the leader epoch
we know). Batches are appended as the leader wrote them (``append_as_follower``: no re-stamping, no
decoding), then the follower takes the leader's high watermark (up to its own log end) and log start
offset. A ``diverging_epoch`` in the answer truncates the divergent tail first (AbstractFetcherThread's
truncation on fetch response, KIP-320); a fetch offset below the leader's log start restarts the log
there. A partition whose leader answers NOT_LEADER_OR_FOLLOWER or an epoch error waits for the next
metadata image. The set of partitions per source changes with the images: each one moves only the partitions whose
leader or epoch it changed, and restarts a fetcher only when its leader's endpoint changed.

Each fetcher keeps an incremental fetch session (KIP-227) with its leader, as Kafka's FetchSessionHandler
(broker/replication/fetch_session/handler.py): the first fetch is full (session 0, epoch 0) and the leader answers with
a session id; later fetches carry that id and the next epoch and name only the partitions added or whose fetch position
(offset, log start, leader epoch, last fetched epoch) changed, with ``forgotten_topics_data`` for the ones no
longer fetched; the leader answers only partitions with something new, so a partition missing from an
incremental answer had nothing new. A session error (FETCH_SESSION_ID_NOT_FOUND after a leader restart,
INVALID_FETCH_SESSION_EPOCH), a malformed answer or a failed request (timeout, lost connection) makes the next
fetch full again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Generator

from broker.clock import Clock
from broker.loop_turns import ITEMS_PER_TURN, at_once, in_turns, turn_after
from broker.replication.fetch_session.handler import FetchRequestData, FetchSessionHandler
from broker.replication.fetch_session.metadata import PartitionFetch
from broker.network.node_client import BadResponse
from broker.network.peer_links import DIRECT, PeerLinks
from broker.replication.replica_manager import Partition, ReplicaChanges, ReplicaManager
from broker.timeouts import wait_for
from cluster.image_diff import TopicPartition
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from protocol.generated.messages import FetchRequest, ListOffsetsRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic, ReplicaState
from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.records import iter_batch_positions

log = logging.getLogger("odradek.replica_fetcher")

FETCH_VERSION = 17  # topic ids and replica_state (v15+), diverging epochs (v12+)
LIST_OFFSETS_VERSION = 9  # current_leader_epoch (v4+); a replica's LATEST is the leader's log end
LATEST = -1
RECHECK_S = 5.0  # the longest a fetcher reuses its last fetch positions without looking at them (``_build``)
UNDEFINED_EPOCH = -1
# answers after which the next fetch is full at once (FetchSessionHandler.handleResponse); other top-level
# errors back off first
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)


class ReplicaFetcherManager:
    """Which partitions this broker follows, from which leader; one ``ReplicaFetcher`` per leader."""

    def __init__(self, node_id: int, replicas: ReplicaManager, clock: Clock, listener: str,
                 broker_epoch: Callable[[], int], config: dict, links: PeerLinks = DIRECT) -> None:
        self.node_id = node_id
        self.links = links
        self.replicas = replicas
        self.clock = clock
        self.listener = listener
        self.broker_epoch = broker_epoch
        self.max_wait_ms = int(config.get("replica.fetch.wait.max.ms", 500))
        self.min_bytes = int(config.get("replica.fetch.min.bytes", 1))
        self.max_bytes = int(config.get("replica.fetch.response.max.bytes", 10485760))
        self.partition_max_bytes = int(config.get("replica.fetch.max.bytes", 1048576))
        self.backoff_s = int(config.get("replica.fetch.backoff.ms", 1000)) / 1000
        self.request_timeout_s = int(config.get("replica.socket.timeout.ms", 30000)) / 1000
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # what to follow from each leader, as of the last update (also for a leader without an endpoint yet, whose
        # fetcher starts once an image gives it one), and the leader each partition is followed from
        self._wanted: dict[int, dict[TopicPartition, Partition]] = {}
        self._leader_of: dict[TopicPartition, int] = {}

    def update(self, image: MetadataImage, changes: ReplicaChanges | None = None) -> None:
        """Follow what ``image`` says (called on the event loop after the replica manager applied it, and after it
        stopped partitions). ``changes``: only its partitions (those whose hosting, leader or epoch may have moved)
        and the leaders among its brokers (a new endpoint, or one that appeared) are looked at; None: all."""
        at_once(self._update(image, changes))

    async def update_in_turns(self, image: MetadataImage, changes: ReplicaChanges | None = None) -> None:
        """``update`` giving the event loop a turn every ``ITEMS_PER_TURN`` partitions."""
        await in_turns(self._update(image, changes))

    def _update(self, image: MetadataImage, changes: ReplicaChanges | None) -> Generator[None, None, None]:
        if changes is None:
            tps = set(self._leader_of) | set(self.replicas.partitions)
            leaders = set(self.fetchers) | set(self._wanted)
        else:
            tps, leaders = changes.partitions, set(changes.brokers)
        moved: dict[int, dict[TopicPartition, Partition | None]] = {}
        for n, tp in enumerate(sorted(tps)):
            if n and n % ITEMS_PER_TURN == 0:
                yield
            part = self.replicas.partitions.get(tp)
            leader = part.info.leader if part is not None else -1
            if leader == self.node_id:
                leader = -1
            old = self._leader_of.get(tp)
            if old is not None and old != leader:
                parts = self._wanted[old]
                del parts[tp]
                if not parts:
                    del self._wanted[old]
                del self._leader_of[tp]
                moved.setdefault(old, {})[tp] = None
            if leader >= 0:
                self._wanted.setdefault(leader, {})[tp] = part
                self._leader_of[tp] = leader
                moved.setdefault(leader, {})[tp] = part
        for leader in sorted(leaders | moved.keys()):
            self._follow(image, leader, moved.get(leader, {}))

    def _follow(self, image: MetadataImage, leader: int, changed: dict[TopicPartition, Partition | None]) -> None:
        """The fetcher for ``leader``: stopped when nothing is followed from it, started (or restarted, at the
        leader's current endpoint) as needed; ``changed`` are its partitions that moved (None: no longer)."""
        parts = self._wanted.get(leader)
        fetcher = self.fetchers.get(leader)
        if not parts:
            if fetcher is not None:
                self.fetchers.pop(leader).stop()
            return
        broker = image.brokers.get(leader)
        endpoint = broker.endpoint(self.listener) if broker is not None else None
        if fetcher is not None and endpoint is not None and (fetcher.host, fetcher.port) != (endpoint.host,
                                                                                              endpoint.port):
            self.fetchers.pop(leader).stop()
            fetcher = None
        if fetcher is None:
            if endpoint is None:
                log.warning("node %d: leader %d has no %s endpoint; not fetching %d partitions from it",
                            self.node_id, leader, self.listener, len(parts))
                return
            fetcher = self.fetchers[leader] = ReplicaFetcher(self, leader, endpoint.host, endpoint.port)
            fetcher.set_partitions(parts)
        elif changed:
            fetcher.change_partitions(changed)

    async def stop(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for f in fetchers:
            f.stop()
        await asyncio.gather(*(f.task for f in fetchers), return_exceptions=True)


class ReplicaFetcher:
    """The fetch loop for the partitions led by one broker."""

    def __init__(self, manager: ReplicaFetcherManager, leader: int, host: str, port: int) -> None:
        self.manager = manager
        self.leader = leader
        self.host, self.port = host, port
        self.partitions: dict[tuple[str, int], Partition] = {}
        # partition -> (the leader epoch it failed at, when to retry: None = when an image moves the epoch)
        self.delayed: dict[tuple[str, int], tuple[int, float | None]] = {}
        self.out_of_range: set[tuple[str, int]] = set()  # answered OFFSET_OUT_OF_RANGE: ask the leader's log end
        # per partition, what it was last asked with and what that was built from (log end, log start, partition
        # info): an idle partition's request is not rebuilt (its last fetched epoch moves only with its log end)
        self._asked: dict[tuple[str, int], tuple[int, int, object, PartitionFetch]] = {}
        # whether a partition's position may have moved since the last build: this fetcher moves them (appends,
        # truncation, a log start from the leader), images move the partitions; retention may move a log start
        # on its own, so positions are looked at again every RECHECK_S whatever happened
        self._stale = True
        self._built: tuple[dict, float] = ({}, 0.0)  # the partitions of the last full look, and when
        self._changed = asyncio.Event()
        self.session = FetchSessionHandler(leader)
        self.client = manager.links.client(host, port, f"replica-fetcher-{manager.node_id}-{leader}", peer=leader)
        self.task = asyncio.ensure_future(self._run())

    def set_partitions(self, parts: dict[tuple[str, int], Partition]) -> None:
        self._stale = True
        self.partitions = dict(parts)
        self._asked = {tp: a for tp, a in self._asked.items() if tp in parts}
        self.delayed = {tp: d for tp, d in self.delayed.items() if tp in parts and parts[tp].leader_epoch == d[0]}
        self._changed.set()

    def change_partitions(self, changed: dict[tuple[str, int], Partition | None]) -> None:
        """``set_partitions`` for the partitions in ``changed`` only (None: no longer fetched from this leader);
        a delayed one waits no more once its leader epoch moved."""
        self._stale = True
        for tp, part in changed.items():
            if part is None:
                self.partitions.pop(tp, None)
                self.delayed.pop(tp, None)
                self._asked.pop(tp, None)
                continue
            self.partitions[tp] = part
            d = self.delayed.get(tp)
            if d is not None and d[0] != part.leader_epoch:
                del self.delayed[tp]
        self._changed.set()

    def stop(self) -> None:
        self.task.cancel()
        asyncio.ensure_future(self.client.close())

    def _fetchable(self) -> tuple[dict[tuple[str, int], Partition], float | None]:
        """The partitions to fetch now, and when the next delayed one is due (None: none is)."""
        now = self.manager.clock.monotonic()
        for tp, (_, retry_at) in list(self.delayed.items()):
            if retry_at is not None and retry_at <= now:
                del self.delayed[tp]
        if not self.delayed:
            return dict(self.partitions), None
        due = [r for _, r in self.delayed.values() if r is not None]
        return {tp: p for tp, p in self.partitions.items() if tp not in self.delayed}, (min(due) if due else None)

    async def _run(self) -> None:
        m = self.manager
        while True:
            self._changed.clear()  # before reading the partitions: a change while they are read wakes the wait below
            parts, next_due = self._fetchable()
            data = await in_turns(self._build(parts))
            if not data.session_partitions and not data.to_forget:
                timeout = None if next_due is None else max(0.0, next_due - m.clock.monotonic())
                try:
                    await wait_for(self._changed.wait(), timeout)
                except asyncio.TimeoutError:
                    pass
                continue
            await turn_after(len(data.to_send))  # the session's diff over thousands: a turn before the next step
            request = self._request(data)
            await turn_after(len(data.to_send))
            try:
                response = await self.client.request(request, FETCH_VERSION, m.request_timeout_s + m.max_wait_ms / 1000)
            except (ConnectionError, OSError, asyncio.TimeoutError, BadResponse) as exc:
                self.session.handle_error(exc)
                log.info("node %d: fetch from leader %d failed: %r; retrying", m.node_id, self.leader, exc)
                await asyncio.sleep(m.backoff_s)
                continue
            if not self.session.handle_response(response, FETCH_VERSION):
                if response.error_code in SESSION_ERRORS:
                    continue  # the session is gone or out of step: a full fetch at once
                if response.error_code:
                    log.warning("node %d: fetch from leader %d answered error %d", m.node_id, self.leader,
                                response.error_code)
                await asyncio.sleep(m.backoff_s)  # else a response the session could not use: a full fetch next
                continue
            if response.responses:
                self._stale = True  # an answered partition may move (records, a truncation, a log start, an error)
            try:
                await turn_after(len(data.to_send))  # after decoding thousands of partitions (in the client)
                backoff = await in_turns(self._process(parts, data.session_partitions, response))
            except Exception:
                log.exception("node %d: processing a fetch response from leader %d failed", m.node_id, self.leader)
                backoff = True
            if self.out_of_range:
                backoff = await self._truncate_out_of_range() or backoff
            if backoff:
                await asyncio.sleep(m.backoff_s)

    def _build(self, parts: dict[tuple[str, int], Partition]) -> Generator[None, None, FetchRequestData]:
        """The next request: from every partition's position, or, in an open session where nothing can have
        moved since the last look (the same partitions, no answer that carried any, within RECHECK_S), the last
        positions again without looking at thousands of partitions."""
        now = self.manager.clock.monotonic()
        last_parts, last_at = self._built
        if self._stale or self.session.is_full or now - last_at >= RECHECK_S or parts.keys() != last_parts.keys():
            self._stale = False
            self._built = (parts, now)
            fetches = yield from self._partition_fetches(parts)
            return self.session.build(fetches)
        return self.session.build_unchanged()

    async def _truncate_out_of_range(self) -> bool:
        """``fetchOffsetAndTruncate``: ListOffsets LATEST as this replica gives the leader's log end; a log that
        ends past it is cut there (the leader's log start is handled with the fetch answer). True to back off."""
        m = self.manager
        tps = [tp for tp in self.out_of_range if self.partitions.get(tp) is not None]
        self.out_of_range.clear()
        self._stale = True
        if not tps:
            return False
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp[0], []).append(ListOffsetsPartition(
                partition_index=tp[1], current_leader_epoch=self.partitions[tp].leader_epoch, timestamp=LATEST))
        request = ListOffsetsRequest(replica_id=m.node_id, isolation_level=0, topics=[
            ListOffsetsTopic(name=name, partitions=ps) for name, ps in by_topic.items()])
        try:
            response = await self.client.request(request, LIST_OFFSETS_VERSION, m.request_timeout_s)
        except (ConnectionError, OSError, asyncio.TimeoutError, BadResponse) as exc:
            log.info("node %d: ListOffsets to leader %d failed: %r", m.node_id, self.leader, exc)
            self.out_of_range.update(tps)
            return True
        now = m.clock.now_ms()
        backoff = False
        for tr in response.topics:
            for pr in tr.partitions:
                tp = (tr.name, pr.partition_index)
                part = self.partitions.get(tp)
                if part is None or tp not in tps:
                    continue
                lg = part.log
                if pr.error_code:
                    log.info("node %d: %s-%d: leader %d answered ListOffsets with error %d; retrying", m.node_id,
                             *tp, self.leader, pr.error_code)
                    self.out_of_range.add(tp)
                    backoff = True
                elif pr.offset < lg.log_end_offset:
                    log.info("node %d: %s-%d: the leader's log ends at %d, ours at %d: truncating", m.node_id, *tp,
                             pr.offset, lg.log_end_offset)
                    lg.truncate_to(max(pr.offset, 0), now)
        return backoff

    def _partition_fetches(self, parts: dict[tuple[str, int], Partition]
                           ) -> Generator[None, None, dict[tuple[str, int], PartitionFetch]]:
        """What to ask of each partition now: our log end, log start, leader epoch and last fetched epoch (the
        request last built for a partition whose log end, log start and metadata have not moved), pausing every
        ``ITEMS_PER_TURN`` partitions (a position read before a pause that moves after it is only fetched
        again: ``_process`` checks each answer against the log end it was asked at)."""
        max_bytes = self.manager.partition_max_bytes
        asked = self._asked
        out = {}
        for n, (tp, part) in enumerate(parts.items()):
            if n and n % ITEMS_PER_TURN == 0:
                yield
            lg = part.log
            end, start, info = lg.log_end_offset, lg.log_start_offset, part.info
            last = asked.get(tp)
            if last is None or last[0] != end or last[1] != start or last[2] is not info:
                last_epoch = lg.latest_epoch
                last = asked[tp] = (end, start, info, PartitionFetch(
                    part.topic_id, end, start, max_bytes, info.leader_epoch,
                    last_epoch if last_epoch is not None else UNDEFINED_EPOCH))
            out[tp] = last[3]
        return out

    def _request(self, data: FetchRequestData) -> FetchRequest:
        m = self.manager
        by_topic: dict[bytes, FetchTopic] = {}
        for (topic, index), pf in data.to_send.items():
            ft = by_topic.get(pf.topic_id)
            if ft is None:
                ft = by_topic[pf.topic_id] = FetchTopic(topic=topic, topic_id=pf.topic_id, partitions=[])
            ft.partitions.append(FetchPartition(
                partition=index, current_leader_epoch=pf.current_leader_epoch, fetch_offset=pf.fetch_offset,
                last_fetched_epoch=pf.last_fetched_epoch, log_start_offset=pf.log_start_offset,
                partition_max_bytes=pf.max_bytes))
        forgotten: dict[bytes, ForgottenTopic] = {}
        for topic_id, topic, index in [*data.to_forget, *data.to_replace]:  # v13+: replaced ones are forgotten
            forgotten.setdefault(topic_id, ForgottenTopic(topic=topic, topic_id=topic_id, partitions=[])
                                 ).partitions.append(index)
        return FetchRequest(replica_id=-1, replica_state=ReplicaState(replica_id=m.node_id,
                                                                      replica_epoch=m.broker_epoch()),
                            max_wait_ms=m.max_wait_ms, min_bytes=m.min_bytes, max_bytes=m.max_bytes,
                            isolation_level=0, session_id=data.session_id, session_epoch=data.epoch,
                            topics=list(by_topic.values()), forgotten_topics_data=list(forgotten.values()),
                            rack_id="")

    def _process(self, parts: dict[tuple[str, int], Partition], sent: dict[tuple[str, int], PartitionFetch],
                 response) -> Generator[None, None, bool]:
        """Apply one Fetch response (for an incremental one, the partitions it carries: the others had nothing
        new), pausing every ``ITEMS_PER_TURN`` partitions; True when the fetcher should back off before the next
        round. A partition's state is read again after each pause (``update`` may have moved it meanwhile)."""
        m = self.manager
        now = m.clock.now_ms()
        by_id = self.session.session_topic_names
        errors: dict[int, list[tuple[str, int]]] = {}
        n = 0
        for tr in response.responses:
            topic = by_id.get(tr.topic_id)
            for pd in tr.partitions:
                n += 1
                if n % ITEMS_PER_TURN == 0:
                    yield
                    now = m.clock.now_ms()
                tp = (topic, pd.partition_index)
                part = parts.get(tp) if topic is not None else None
                if part is None or self.partitions.get(tp) is not part or tp in self.delayed:
                    continue  # no longer followed from this leader
                request = sent.get(tp)
                if request is None or request.fetch_offset != part.log.log_end_offset:
                    continue  # our log moved since the request (AbstractFetcherThread.processFetchRequest)
                self._apply(part, tp, pd, now, errors)
        self._log_partition_errors(errors)
        return False

    def _apply(self, part: Partition, tp: tuple[str, int], pd, now: int,
               errors: dict[int, list[tuple[str, int]]]) -> None:
        """One partition's answer, for the log it was asked for."""
        m = self.manager
        lg = part.log
        if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and pd.log_start_offset > lg.log_end_offset:
            log.info("node %d: %s-%d: fetch offset %d below the leader's log start %d: restarting there",
                     m.node_id, part.topic, part.index, lg.log_end_offset, pd.log_start_offset)
            lg.truncate_fully_and_start_at(pd.log_start_offset, now)
            return
        if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            # the leader cannot place our tail (past its end, or no end for our last epoch): ask it where
            # its log ends before the next fetch (AbstractFetcherThread.handleOutOfRangeError)
            self.out_of_range.add(tp)
            return
        if pd.error_code:
            # AbstractFetcherThread: a fenced epoch waits for an image with a newer one; anything else
            # (the leader has not applied the image yet, an unknown epoch, ...) is retried after a backoff
            fenced = pd.error_code == ErrorCode.FENCED_LEADER_EPOCH
            errors.setdefault(pd.error_code, []).append(tp)
            self.delayed[tp] = (part.leader_epoch, None if fenced else m.clock.monotonic() + m.backoff_s)
            return
        diverging = pd.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            self._truncate_on_diverging(part, diverging.epoch, diverging.end_offset, now)
            return
        records = pd.records
        if records is not None and len(records):
            scan = iter_batch_positions(records)
            for _ in scan:
                pass
            complete = scan.position  # a budget-cut tail batch is fetched again next round
            if complete:
                info = lg.append_as_follower(memoryview(records)[:complete], now)
                if info.last_offset >= 0:
                    m.replicas.fetch_waiters.wake(tp)
        part.follower_lag = max(0, pd.high_watermark - lg.log_end_offset)
        hw = min(pd.high_watermark, lg.log_end_offset)
        if hw > lg.high_watermark:
            lg.update_high_watermark(hw)
            # consumers long-polling on this follower (KIP-392) read up to its high watermark
            m.replicas.fetch_waiters.wake(tp)
        if lg.log_start_offset < pd.log_start_offset <= lg.high_watermark:
            lg.maybe_increment_log_start_offset(pd.log_start_offset, reason="leader")

    def _log_partition_errors(self, errors: dict[int, list[tuple[str, int]]]) -> None:
        """One line per error code of a response: thousands of partitions answer alike while they are created."""
        for code, tps in errors.items():
            log.info("node %d: leader %d answered error %d for %d partition(s) (%s); %s", self.manager.node_id,
                     self.leader, code, len(tps),
                     ", ".join(f"{t}-{i}" for t, i in tps[:5]) + (", ..." if len(tps) > 5 else ""),
                     "waiting for new metadata" if code == ErrorCode.FENCED_LEADER_EPOCH else "retrying")

    def _truncate_on_diverging(self, part: Partition, leader_epoch: int, leader_end_offset: int, now: int) -> None:
        """``AbstractFetcherThread.getOffsetTruncationState``: cut to where our log and the leader's agree for
        the leader's epoch; when we have no such epoch, to our end for the epoch below it (the next fetch
        names that epoch and the leader checks again)."""
        lg = part.log
        end = lg.log_end_offset
        ours = lg.end_offset_for_epoch(leader_epoch)
        if ours is None:
            target = min(leader_end_offset, end)
        elif ours[0] == leader_epoch:
            target = min(leader_end_offset, ours[1])
        else:
            target = min(ours[1], end)
        if target < end:
            log.info("node %d: %s-%d: truncating the divergent tail [%d, %d) (leader epoch %d ends at %d)",
                     self.manager.node_id, part.topic, part.index, target, end, leader_epoch, leader_end_offset)
        # also at our end: an epoch we led without writing starts there and must go from the epoch cache
        # (UnifiedLog.truncateTo), and the next fetch must name the epoch we have now: the request last built
        # for this log end and log start names the old one, and would be answered with the same divergence
        lg.truncate_to(target, now)
        self._asked.pop((part.topic, part.index), None)
