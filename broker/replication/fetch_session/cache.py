"""The broker's fetch session cache (Kafka's ``FetchSessionCache`` in FetchSession.scala): sessions, their
cached partitions, the shards and eviction (see the package docstring for the rules)."""

from __future__ import annotations

import logging
import random
from typing import Callable, Iterable

from broker.replication.fetch_session.metadata import (
    DEFAULT_CACHE_SLOTS, INITIAL_EPOCH, INT32_MAX, INVALID_SESSION_ID, MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    NUM_FETCH_SESSION_CACHE_SHARDS, PartitionFetch, TopicIdPartition, next_epoch,
)
from protocol.message import ZERO_UUID

log = logging.getLogger("odradek.fetch_session")


def _records_size(pd) -> int:
    records = pd.records
    return 0 if records is None else len(records)


class CachedPartition:
    """One partition of a session: the request parameters last sent, and the high watermark and log start
    offset last answered (-1: never answered, or answered with an error).

    ``quiet``: set by the reader when the last read found nothing to send at the end of the log (what it read
    against, opaque here); an incremental fetch skips the partition while the reader finds it unchanged, so an
    idle session costs little per partition. New request parameters clear it."""

    __slots__ = ("topic", "topic_id", "partition", "max_bytes", "fetch_offset", "high_watermark", "leader_epoch",
                 "fetcher_log_start_offset", "local_log_start_offset", "last_fetched_epoch", "quiet")

    def __init__(self, tp: TopicIdPartition, req: PartitionFetch, resp=None, quiet: object = None) -> None:
        self.topic, self.topic_id, self.partition = tp.topic, tp.topic_id, tp.partition
        self.high_watermark = -1 if resp is None else resp.high_watermark
        self.local_log_start_offset = -1 if resp is None else resp.log_start_offset
        self.update_request_params(req)
        self.quiet = quiet

    @property
    def cache_key(self) -> tuple:
        return (self.topic_id if self.topic_id != ZERO_UUID else self.topic, self.partition)

    def update_request_params(self, req: PartitionFetch) -> None:
        self.max_bytes = req.max_bytes
        self.fetch_offset = req.fetch_offset
        self.fetcher_log_start_offset = req.log_start_offset
        self.leader_epoch = req.current_leader_epoch
        self.last_fetched_epoch = req.last_fetched_epoch
        self.quiet = None

    def request(self) -> PartitionFetch:
        return PartitionFetch(self.topic_id, self.fetch_offset, self.fetcher_log_start_offset, self.max_bytes,
                              self.leader_epoch, self.last_fetched_epoch)

    def maybe_resolve_unknown_name(self, topic_names: Callable[[bytes], str | None]) -> None:
        if self.topic is None:
            self.topic = topic_names(self.topic_id)

    def maybe_update_response_data(self, resp, update: bool) -> bool:
        """``CachedPartition.maybeUpdateResponseData``: whether an incremental response must carry this
        partition (records, a changed high watermark or log start offset, a preferred read replica, an error,
        a diverging epoch); with ``update`` the cached high watermark and log start offset follow ``resp``."""
        must = _records_size(resp) > 0
        if self.high_watermark != resp.high_watermark:
            must = True
            if update:
                self.high_watermark = resp.high_watermark
        if self.local_log_start_offset != resp.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = resp.log_start_offset
        if resp.preferred_read_replica != -1:
            must = True
        if resp.error_code:
            if update:
                self.high_watermark = -1  # answered again once the error is gone
            must = True
        diverging = resp.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            must = True
        return must

    def __repr__(self) -> str:
        return (f"CachedPartition(topic={self.topic}, partition={self.partition}, maxBytes={self.max_bytes}, "
                f"fetchOffset={self.fetch_offset}, highWatermark={self.high_watermark}, "
                f"fetcherLogStartOffset={self.fetcher_log_start_offset}, "
                f"localLogStartOffset={self.local_log_start_offset})")


class FetchSession:
    """One incremental fetch session: its partitions in order (read in that order), and its epoch."""

    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms", "last_used_ms", "epoch",
                 "cached_size", "evictable_by_all", "evictable_by_privileged", "wait_keys")

    def __init__(self, session_id: int, privileged: bool, partitions: dict[tuple, CachedPartition],
                 uses_topic_ids: bool, creation_ms: int, last_used_ms: int, epoch: int) -> None:
        self.id = session_id
        self.privileged = privileged  # a follower's session
        self.partitions = partitions  # cache key -> CachedPartition, in read order
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = creation_ms
        self.last_used_ms = last_used_ms  # set by FetchSessionCacheShard.touch only
        self.epoch = epoch  # the epoch the next incremental request must carry
        # what the cache knew at the last touch: the size, and which evictable sets it is in
        self.cached_size = -1
        self.evictable_by_all = False
        self.evictable_by_privileged = False
        self.wait_keys: tuple[object, list] | None = None  # the reader's long-poll keys and what they were for

    @property
    def size(self) -> int:
        return len(self.partitions)

    @property
    def evictable_key(self) -> tuple[bool, int, int]:
        """``EvictableKey``: less privileged, smaller, then lower id are evicted first."""
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch_data: dict[TopicIdPartition, PartitionFetch], to_forget: Iterable[TopicIdPartition]
               ) -> tuple[list[TopicIdPartition], list[TopicIdPartition], list[TopicIdPartition]]:
        """Apply an incremental request: named partitions are added or take the new parameters, forgotten ones
        leave. Returns (added, updated, removed)."""
        added, updated, removed = [], [], []
        for tp, req in fetch_data.items():
            cached = self.partitions.get(tp.cache_key)
            if cached is None:
                self.partitions[tp.cache_key] = CachedPartition(tp, req)
                added.append(tp)
            else:
                cached.update_request_params(req)
                updated.append(tp)
        for tp in to_forget:
            if self.partitions.pop(tp.cache_key, None) is not None:
                removed.append(tp)
        if added or removed:
            self.wait_keys = None
        return added, updated, removed

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, privileged={self.privileged}, partitionMap.size={self.size}, "
                f"usesTopicIds={self.uses_topic_ids}, creationMs={self.creation_ms}, lastUsedMs={self.last_used_ms}, "
                f"epoch={self.epoch})")


class FetchSessionCacheShard:
    """One shard of the session cache (``FetchSessionCacheShard``): at most ``max_entries`` sessions, with ids in
    ``[max(1, shard_num * id_range), (shard_num + 1) * id_range)``."""

    def __init__(self, max_entries: int, eviction_ms: int, rng: random.Random, session_id_range: int = INT32_MAX,
                 shard_num: int = 0) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.rng = rng
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0  # the sum of the sessions' sizes at their last touch
        self.evictions = 0  # IncrementalFetchSessionEvictionsPerSec

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    @property
    def size(self) -> int:
        return len(self.sessions)

    def new_session_id(self) -> int:
        """A random id of this shard's range that no session here has (never 0)."""
        low = max(1, self.shard_num * self.session_id_range)
        high = (self.shard_num + 1) * self.session_id_range  # exclusive
        for _ in range(64):
            sid = self.rng.randrange(low, high)
            if sid not in self.sessions and sid != INVALID_SESSION_ID:
                return sid
        # a shard holds far fewer sessions than its range has ids: a scan from a random start ends quickly
        start = self.rng.randrange(low, high)
        for i in range(high - low):
            sid = low + (start - low + i) % (high - low)
            if sid not in self.sessions:
                return sid
        raise RuntimeError("no free fetch session id")  # unreachable: max_entries < the range

    def maybe_create_session(self, now_ms: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create_partitions: Callable[[], dict[tuple, CachedPartition]]) -> int:
        """A new session when there is room or one can be evicted: its id, else INVALID_SESSION_ID."""
        if len(self.sessions) < self.max_entries or self._try_evict(privileged, (privileged, size, 0), now_ms):
            session = FetchSession(self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now_ms,
                                   now_ms, next_epoch(INITIAL_EPOCH))
            log.debug("Created fetch session %r", session)
            self.sessions[session.id] = session
            self.touch(session, now_ms)
            return session.id
        log.debug("No fetch session created for privileged=%s, size=%d.", privileged, size)
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """``tryEvict``: the least recently used session when it is stale; else the first evictable session
        (of those a privileged or an unprivileged newcomer may evict) when ``key`` does not rank below it."""
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            log.debug("Evicting stale FetchSession %d.", lru.id)
            self.remove(lru)
            self.evictions += 1
            return True
        evictable = [s for s in self.sessions.values()
                     if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not evictable:
            return False
        victim = min(evictable, key=lambda s: s.evictable_key)
        if key < victim.evictable_key:
            log.debug("Can't evict %s with %s", victim.evictable_key, key)
            return False
        log.debug("Evicting %s with %s.", victim.evictable_key, key)
        self.remove(victim)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        if isinstance(session, int):
            session = self.sessions.get(session)
            if session is None:
                return None
        removed = self.sessions.pop(session.id, None)
        if removed is not None:
            self.num_partitions -= removed.cached_size
        return removed

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Mark ``session`` used now: its LRU position, its size and which newcomers may evict it."""
        session.last_used_ms = now_ms
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = session.size
        old_enough = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old_enough
        session.evictable_by_all = old_enough
        self.num_partitions += session.cached_size


class FetchSessionCache:
    """The broker's sessions, in ``num_shards`` shards of ``max_entries // num_shards`` slots each (Kafka's
    FetchSessionCache over FetchSessionCacheShards); new sessions go to the shards in turn."""

    def __init__(self, max_entries: int = DEFAULT_CACHE_SLOTS,
                 eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, rng: random.Random | None = None,
                 num_shards: int = NUM_FETCH_SESSION_CACHE_SHARDS) -> None:
        rng = rng if rng is not None else random.Random(0)
        id_range = INT32_MAX // num_shards
        self.shards = [FetchSessionCacheShard(max_entries // num_shards, eviction_ms, rng, id_range, n)
                       for n in range(num_shards)]
        self._counter = 0

    def shard_for(self, session_id: int) -> FetchSessionCacheShard | None:
        """The shard whose id range holds ``session_id`` (None: no shard's)."""
        n = int(session_id / self.shards[0].session_id_range)  # Java's int division truncates toward zero
        return self.shards[n] if 0 <= n < len(self.shards) else None

    def next_shard(self) -> FetchSessionCacheShard:
        shard = self.shards[self._counter % len(self.shards)]
        self._counter += 1
        return shard

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_for(session_id)
        return shard.get(session_id) if shard is not None else None

    @property
    def size(self) -> int:
        """NumIncrementalFetchSessions."""
        return sum(s.size for s in self.shards)

    @property
    def total_partitions(self) -> int:
        """NumIncrementalFetchPartitionsCached."""
        return sum(s.num_partitions for s in self.shards)

    @property
    def evictions(self) -> int:
        return sum(s.evictions for s in self.shards)


# ---- fetch contexts ---------------------------------------------------------------------------------------------
