"""Incremental fetch sessions (KIP-227): Kafka's FetchSession.scala for the broker (``FetchManager``, the
``FetchSessionCache`` and the fetch contexts) and FetchSessionHandler.java for the replica fetcher's side.

A fetch names a session id and epoch (FetchMetadata): id 0 with epoch -1 is a sessionless fetch; epoch 0 is a
full fetch that asks for a new session (closing the one it names, if any), answered with the new session's id,
or 0 when the cache has no room; epoch -1 with an id closes that session and is served sessionless; an id with
an epoch above 0 is an incremental fetch. The broker keeps, per session partition, the fetch parameters last
sent and the high watermark and log start offset last answered (``CachedPartition``): an incremental request
names only partitions whose parameters changed (and ``forgotten_topics_data`` the ones to drop), is served over
every partition of the session, and its response carries only partitions with records, a changed high
watermark or log start offset, an error, a diverging epoch or a preferred read replica. A partition that
returned records moves to the end of the session, so the next reads start with the others.

Session errors: FETCH_SESSION_ID_NOT_FOUND (no such session), INVALID_FETCH_SESSION_EPOCH (an epoch other than
the session's next one), FETCH_SESSION_TOPIC_ID_ERROR (a v13+ request on a session created below v13, or the
reverse); the client starts over with a full fetch.

The cache (``max.incremental.fetch.session.cache.slots``, default 1000) is split into 8 shards with an equal
share of the slots each, sessions assigned round-robin, session ids drawn from each shard's own id range. When
a shard is full, a new session may evict (``FetchSessionCacheShard.try_evict``): the least recently used
session if it has not been used for 120 s (KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS); otherwise
the smallest evictable session (by privileged, partition count, id), if the new one ranks above it. Sessions of
followers are privileged: a follower's new session may evict any consumer's session, a consumer's only another
consumer's with fewer partitions; a session is evictable by a consumer's new one only once it is older than the
eviction age (and a follower's session only then at all). Evictability is decided when a session is used.

Everything here is synchronous and is given ``now_ms``; randomness comes from the ``random.Random`` given to
the cache. The request handler is broker/apis/k01_fetch.py; the replica fetcher broker/replica_fetcher.py.
"""

from __future__ import annotations

import logging
import random
from typing import Callable, Iterable, NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from protocol.errors import ErrorCode
from protocol.message import ZERO_UUID

log = logging.getLogger("odradek.fetch_session")

INVALID_SESSION_ID = 0  # FetchMetadata
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
NUM_FETCH_SESSION_CACHE_SHARDS = 8  # KafkaBroker.NumFetchSessionCacheShards
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000  # KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots


def next_epoch(prev: int) -> int:
    """``FetchMetadata.nextEpoch``: after FINAL stays FINAL; wraps from INT32_MAX to 1 (never back to 0)."""
    if prev < 0:
        return FINAL_EPOCH
    return 1 if prev == INT32_MAX else prev + 1


def metadata_string(session_id: int, epoch: int) -> str:
    """``FetchMetadata.toString``."""
    sid = "INVALID" if session_id == INVALID_SESSION_ID else str(session_id)
    ep = "INITIAL" if epoch == INITIAL_EPOCH else "FINAL" if epoch == FINAL_EPOCH else str(epoch)
    return f"(sessionId={sid}, epoch={ep})"


class TopicIdPartition(NamedTuple):
    """A partition of a fetch: the topic id (``ZERO_UUID`` below v13), the name (None: an id this broker does
    not know) and the index."""

    topic_id: bytes
    topic: str | None
    partition: int

    @property
    def cache_key(self) -> tuple:
        """``CachedPartition`` equality: by topic id when there is one (a known and an unknown name are the
        same partition), else by name."""
        return (self.topic_id if self.topic_id != ZERO_UUID else self.topic, self.partition)


class PartitionFetch(NamedTuple):
    """``FetchRequest.PartitionData``: what a fetch asks of one partition (compared as a whole by the client)."""

    topic_id: bytes
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


def _records_size(pd) -> int:
    records = pd.records
    return 0 if records is None else len(records)


class CachedPartition:
    """One partition of a session: the request parameters last sent, and the high watermark and log start
    offset last answered (-1: never answered, or answered with an error)."""

    __slots__ = ("topic", "topic_id", "partition", "max_bytes", "fetch_offset", "high_watermark", "leader_epoch",
                 "fetcher_log_start_offset", "local_log_start_offset", "last_fetched_epoch")

    def __init__(self, tp: TopicIdPartition, req: PartitionFetch, resp=None) -> None:
        self.topic, self.topic_id, self.partition = tp.topic, tp.topic_id, tp.partition
        self.high_watermark = -1 if resp is None else resp.high_watermark
        self.local_log_start_offset = -1 if resp is None else resp.log_start_offset
        self.update_request_params(req)

    @property
    def cache_key(self) -> tuple:
        return (self.topic_id if self.topic_id != ZERO_UUID else self.topic, self.partition)

    def update_request_params(self, req: PartitionFetch) -> None:
        self.max_bytes = req.max_bytes
        self.fetch_offset = req.fetch_offset
        self.fetcher_log_start_offset = req.log_start_offset
        self.leader_epoch = req.current_leader_epoch
        self.last_fetched_epoch = req.last_fetched_epoch

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
                 "cached_size", "evictable_by_all", "evictable_by_privileged")

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

class FetchResult(NamedTuple):
    """What a fetch answers: the top-level error, the session id, the partitions to send in order."""

    error_code: int
    session_id: int
    partitions: list  # [(TopicIdPartition, fetch_response.PartitionData)]


class FetchContext:
    """How one fetch request is served: which partitions it reads (``partitions``) and what its response
    carries (``update_and_generate_response_data``, called once with every partition read)."""

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        raise NotImplementedError

    def update_and_generate_response_data(self, updates: dict, now_ms: int) -> FetchResult:
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    """A session error: nothing is read; the response has the error and no partitions."""

    def __init__(self, error: int) -> None:
        self.error = error

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return []

    def update_and_generate_response_data(self, updates: dict, now_ms: int) -> FetchResult:
        log.debug("Session error fetch context returning %s", ErrorCode(self.error).name)
        return FetchResult(self.error, INVALID_SESSION_ID, [])


class SessionlessFetchContext(FetchContext):
    def __init__(self, fetch_data: dict[TopicIdPartition, PartitionFetch]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return list(self.fetch_data.items())

    def update_and_generate_response_data(self, updates: dict, now_ms: int) -> FetchResult:
        return FetchResult(0, INVALID_SESSION_ID, list(updates.items()))


class FullFetchContext(FetchContext):
    """A full fetch with epoch 0: every partition is answered, and a session is created from the response when
    the cache has (or can make) room."""

    def __init__(self, cache: FetchSessionCache, fetch_data: dict[TopicIdPartition, PartitionFetch],
                 uses_topic_ids: bool, is_from_follower: bool) -> None:
        self.cache = cache
        self.fetch_data = fetch_data
        self.uses_topic_ids = uses_topic_ids
        self.is_from_follower = is_from_follower

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return list(self.fetch_data.items())

    def update_and_generate_response_data(self, updates: dict, now_ms: int) -> FetchResult:
        def create_partitions() -> dict[tuple, CachedPartition]:
            cached = {}
            for tp, resp in updates.items():
                cached[tp.cache_key] = CachedPartition(tp, self.fetch_data[tp], resp)
            return cached

        session_id = self.cache.next_shard().maybe_create_session(now_ms, self.is_from_follower, len(updates),
                                                                  self.uses_topic_ids, create_partitions)
        log.debug("Full fetch context with session id %d returning %d partition(s)", session_id, len(updates))
        return FetchResult(0, session_id, list(updates.items()))


class IncrementalFetchContext(FetchContext):
    """An incremental fetch: reads every partition of the session, answers only those that changed."""

    def __init__(self, request_epoch: int, session: FetchSession,
                 topic_names: Callable[[bytes], str | None]) -> None:
        self.request_epoch = request_epoch
        self.session = session
        self.topic_names = topic_names

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        out = []
        for cached in self.session.partitions.values():
            if self.session.uses_topic_ids:
                cached.maybe_resolve_unknown_name(self.topic_names)
            out.append((TopicIdPartition(cached.topic_id, cached.topic, cached.partition), cached.request()))
        return out

    def update_and_generate_response_data(self, updates: dict, now_ms: int) -> FetchResult:
        session = self.session
        expected = next_epoch(self.request_epoch)
        if session.epoch != expected:  # another request of this session was served meanwhile
            log.info("Incremental fetch session %d expected epoch %d, but got %d.  Possible duplicate request.",
                     session.id, expected, session.epoch)
            return FetchResult(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, [])
        out = []
        for tp, resp in updates.items():
            cached = session.partitions.get(tp.cache_key)
            if cached is None:  # forgotten by a request served meanwhile (its epoch check failed above)
                out.append((tp, resp))
                continue
            if cached.maybe_update_response_data(resp, True):
                out.append((tp, resp))
                if _records_size(resp) > 0:  # served last next time
                    del session.partitions[tp.cache_key]
                    session.partitions[tp.cache_key] = cached
        log.debug("Incremental fetch context with session id %d returning %d partition(s)", session.id, len(out))
        return FetchResult(0, session.id, out)


class FetchManager:
    """``FetchManager.newContext``: which context a fetch gets from its session id and epoch."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def new_context(self, version: int, session_id: int, epoch: int, is_follower: bool,
                    fetch_data: dict[TopicIdPartition, PartitionFetch], to_forget: list[TopicIdPartition],
                    topic_names: Callable[[bytes], str | None], now_ms: int) -> FetchContext:
        cache = self.cache
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            removed = ""
            if session_id != INVALID_SESSION_ID:  # a full fetch closes the session it names
                shard = cache.shard_for(session_id)
                if shard is not None and shard.remove(session_id) is not None:
                    removed = f" Removed fetch session {session_id}."
            if epoch == FINAL_EPOCH:
                context: FetchContext = SessionlessFetchContext(fetch_data)
                suffix = " Will not try to create a new session."
            else:
                context = FullFetchContext(cache, fetch_data, version >= 13, is_follower)
                suffix = ""
            if log.isEnabledFor(logging.DEBUG):
                log.debug("Created a new full FetchContext with %d partition(s).%s%s", len(fetch_data), removed,
                          suffix)
            return context
        shard = cache.shard_for(session_id)
        session = shard.get(session_id) if shard is not None else None
        if session is None:
            log.debug("Session error for %d: no such session ID found.", session_id)
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            log.debug("Session error for %d: expected epoch %d, but got %d instead.", session_id, session.epoch,
                      epoch)
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            log.debug("Session error for %d: expected %s, but request version %d means that we can not.",
                      session_id, "to use topic IDs" if session.uses_topic_ids else "to not use topic IDs", version)
            return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        added, updated, removed_parts = session.update(fetch_data, to_forget)
        assert shard is not None
        if not session.partitions:
            log.debug("Created a new sessionless FetchContext and closing session id %d, epoch %d: after removing "
                      "%d partition(s), there are no more partitions left.", session.id, session.epoch,
                      len(removed_parts))
            shard.remove(session)
            return SessionlessFetchContext(fetch_data)
        shard.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Created a new incremental FetchContext for session id %d, epoch %d: added %d partition(s), "
                      "updated %d partition(s), removed %d partition(s) (privileged=%s, %d partition(s) in the "
                      "session)", session.id, session.epoch, len(added), len(updated), len(removed_parts),
                      session.privileged, session.size)
        return IncrementalFetchContext(epoch, session, topic_names)


NO_SESSIONS = FetchManager(FetchSessionCache(max_entries=0))  # for handles built without a cache: never a session


class FetchSessionCacheCollector:
    """kafka.server:type=FetchSessionCache (NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached,
    IncrementalFetchSessionEvictionsPerSec), named as broker/metrics.py names Kafka's metrics."""

    def __init__(self, manager: FetchManager) -> None:
        self.manager = manager

    def describe(self):
        return []

    def collect(self):
        cache = self.manager.cache
        sessions = GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                     "Incremental fetch sessions in the cache (NumIncrementalFetchSessions)")
        sessions.add_metric([], cache.size)
        yield sessions
        parts = GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                  "Partitions in incremental fetch sessions (NumIncrementalFetchPartitionsCached)")
        parts.add_metric([], cache.total_partitions)
        yield parts
        evictions = CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                                        "Fetch sessions evicted (IncrementalFetchSessionEvictionsPerSec)")
        evictions.add_metric([], cache.evictions)
        yield evictions


# ---- the client side (the replica fetcher) -----------------------------------------------------------------------

class FetchRequestData(NamedTuple):
    """``FetchSessionHandler.FetchRequestData``: what the next request sends."""

    to_send: dict  # (topic, partition) -> PartitionFetch: the partitions the request names
    to_forget: list  # [(topic_id, topic, partition)] to drop from the session
    to_replace: list  # [(topic_id, topic, partition)]: same partition, a new topic id (forgotten from v13)
    session_partitions: dict  # (topic, partition) -> PartitionFetch: every partition of the session
    session_id: int
    epoch: int
    can_use_topic_ids: bool

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """The fetch session with one broker, as a client keeps it (Kafka's FetchSessionHandler): the first fetch is
    full and asks for a session; once the broker created one, fetches are incremental and name only partitions
    that were added or whose ``PartitionFetch`` changed, and forget the ones no longer wanted. A session error, a
    malformed response or a failed request sends a full fetch next (FETCH_SESSION_ID_NOT_FOUND: without naming
    the session; otherwise closing it)."""

    def __init__(self, node: int) -> None:
        self.node = node
        self.session_id = INVALID_SESSION_ID  # nextMetadata
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[tuple[str, int], PartitionFetch] = {}
        self.session_topic_names: dict[bytes, str] = {}

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(self, next_parts: dict[tuple[str, int], PartitionFetch]) -> FetchRequestData:
        """The next request for the partitions wanted now, in order (``Builder.build``)."""
        nxt = dict(next_parts)
        topic_names: dict[bytes, str] = {}
        without_ids = 0
        for (topic, _), data in nxt.items():
            if data.topic_id == ZERO_UUID:
                without_ids += 1
            else:
                topic_names.setdefault(data.topic_id, topic)
        can_use_ids = without_ids == 0
        if self.is_full:
            log.debug("Built full fetch %s for node %d with %d partition(s).",
                      metadata_string(self.session_id, self.epoch), self.node, len(nxt))
            self.session_partitions = nxt
            self.session_topic_names = topic_names if can_use_ids else {}
            return FetchRequestData(dict(nxt), [], [], dict(nxt), self.session_id, self.epoch, can_use_ids)
        added, removed, altered, replaced = [], [], [], []
        for tp, prev in list(self.session_partitions.items()):
            data = nxt.pop(tp, None)
            if data is not None:
                if prev.topic_id != data.topic_id and prev.topic_id != ZERO_UUID and data.topic_id != ZERO_UUID:
                    nxt[tp] = data  # to the end of the partitions to send
                    self.session_partitions[tp] = data
                    replaced.append((prev.topic_id, *tp))
                elif prev != data:
                    nxt[tp] = data
                    self.session_partitions[tp] = data
                    altered.append((data.topic_id, *tp))
            else:
                del self.session_partitions[tp]
                removed.append((prev.topic_id, *tp))
                if can_use_ids and prev.topic_id == ZERO_UUID:
                    can_use_ids = False
        for tp, data in nxt.items():
            if tp in self.session_partitions:
                break  # the altered and replaced ones, moved to the end: nothing new after them
            self.session_partitions[tp] = data
            added.append((data.topic_id, *tp))
        self.session_topic_names = topic_names if can_use_ids else {}
        log.debug("Built incremental fetch %s for node %d. Added %d partition(s), altered %d partition(s), "
                  "removed %d partition(s), replaced %d partition(s) out of %d partition(s)",
                  metadata_string(self.session_id, self.epoch), self.node, len(added), len(altered), len(removed),
                  len(replaced), len(self.session_partitions))
        return FetchRequestData(nxt, removed, replaced, dict(self.session_partitions), self.session_id, self.epoch,
                                can_use_ids)

    def _response_partitions(self, response, version: int) -> tuple[set[tuple[str, int]], set[bytes]]:
        """(partitions whose topic the session knows, every topic id of the response)."""
        parts, ids = set(), set()
        for tr in response.responses:
            if version >= 13:
                ids.add(tr.topic_id)
                name = self.session_topic_names.get(tr.topic_id)
                if name is None:
                    continue
            else:
                name = tr.topic
            parts.update((name, pd.partition_index) for pd in tr.partitions)
        return parts, ids

    def handle_response(self, response, version: int) -> bool:
        """Move the session on from ``response`` (``handleResponse``); False when the response cannot be used
        (a session error or a malformed response: the next fetch is full)."""
        if response.error_code:
            log.info("Node %d was unable to process the fetch request with %s: %s.", self.node,
                     metadata_string(self.session_id, self.epoch), _error_name(response.error_code))
            if response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH  # close the session, ask for a new one
            return False
        parts, ids = self._response_partitions(response, version)
        extra_ids = ids - set(self.session_topic_names) if version >= 13 else set()
        extra = parts - set(self.session_partitions)
        if self.is_full:
            if not parts and response.throttle_time_ms > 0:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            omitted = set(self.session_partitions) - parts
            if omitted or extra or extra_ids:
                log.info("Node %d sent an invalid full fetch response with omitted %s, extra %s, extra ids %d",
                         self.node, sorted(omitted), sorted(extra), len(extra_ids))
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            if response.session_id == INVALID_SESSION_ID:
                log.debug("Node %d sent a full fetch response with %d response partition(s)", self.node, len(parts))
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return True
            log.debug("Node %d sent a full fetch response that created a new incremental fetch session %d with %d "
                      "response partition(s)", self.node, response.session_id, len(parts))
            self.session_id, self.epoch = response.session_id, next_epoch(INITIAL_EPOCH)
            return True
        if extra or extra_ids:
            log.info("Node %d sent an invalid incremental fetch response with extra %s, extra ids %d", self.node,
                     sorted(extra), len(extra_ids))
            self.epoch = INITIAL_EPOCH
            return False
        if response.session_id == INVALID_SESSION_ID:
            log.debug("Node %d sent an incremental fetch response closing session %d with %d response "
                      "partition(s)", self.node, self.session_id, len(parts))
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return True
        log.debug("Node %d sent an incremental fetch response for session %d with %d response partition(s), %d "
                  "implied partition(s)", self.node, response.session_id, len(parts),
                  len(self.session_partitions) - len(parts))
        self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self, exc: BaseException) -> None:
        """A request that failed (connection lost, timeout): close the session and ask for a new one."""
        log.info("Error sending fetch request %s to node %d: %r", metadata_string(self.session_id, self.epoch),
                 self.node, exc)
        self.epoch = INITIAL_EPOCH


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
