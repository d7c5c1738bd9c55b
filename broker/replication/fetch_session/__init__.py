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
the cache. The request handler is broker/apis/k01_fetch.py; the replica fetcher broker/replication/replica_fetcher.py.

Modules, one job each: ``metadata`` (session ids and epochs, the partition keys), ``cache`` (sessions and the
sharded cache with its eviction), ``contexts`` (the fetch contexts and ``FetchManager``), ``metrics`` (the
cache's Prometheus collector), ``handler`` (the fetching side, ``FetchSessionHandler``). The names below are
re-exported for callers that want the whole API from one place.
"""

from broker.replication.fetch_session.cache import (
    CachedPartition, FetchSession, FetchSessionCache, FetchSessionCacheShard,
)
from broker.replication.fetch_session.contexts import (
    NO_SESSIONS, FetchContext, FetchManager, FetchResult, FullFetchContext, IncrementalFetchContext,
    SessionErrorContext, SessionlessFetchContext,
)
from broker.replication.fetch_session.handler import FetchRequestData, FetchSessionHandler
from broker.replication.fetch_session.metadata import (
    DEFAULT_CACHE_SLOTS, FINAL_EPOCH, INITIAL_EPOCH, INT32_MAX, INVALID_SESSION_ID,
    MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, NUM_FETCH_SESSION_CACHE_SHARDS, PartitionFetch, TopicIdPartition,
    metadata_string, next_epoch,
)
from broker.replication.fetch_session.metrics import FetchSessionCacheCollector

__all__ = [
    "CachedPartition", "DEFAULT_CACHE_SLOTS", "FINAL_EPOCH", "FetchContext", "FetchManager", "FetchRequestData",
    "FetchResult", "FetchSession", "FetchSessionCache", "FetchSessionCacheCollector", "FetchSessionCacheShard",
    "FetchSessionHandler", "FullFetchContext", "INITIAL_EPOCH", "INT32_MAX", "INVALID_SESSION_ID",
    "IncrementalFetchContext", "MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS", "NO_SESSIONS",
    "NUM_FETCH_SESSION_CACHE_SHARDS", "PartitionFetch", "SessionErrorContext", "SessionlessFetchContext",
    "TopicIdPartition", "metadata_string", "next_epoch",
]
