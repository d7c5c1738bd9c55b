"""Fetch session metadata (Kafka's ``FetchMetadata``) and the keys both sides use: session ids and epochs,
``TopicIdPartition`` and ``PartitionFetch`` (what a fetch asks of one partition)."""

from __future__ import annotations

from typing import NamedTuple

from protocol.message import ZERO_UUID


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
