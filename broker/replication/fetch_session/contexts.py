"""The broker's fetch contexts and ``FetchManager.newContext`` (Kafka's FetchSession.scala): which kind of fetch
a request is (sessionless, full, incremental, a session error) and what its response carries."""

from __future__ import annotations

import logging
from typing import Any, Callable, NamedTuple

from broker.replication.fetch_session.cache import CachedPartition, FetchSession, FetchSessionCache, _records_size
from broker.replication.fetch_session.metadata import (
    FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, PartitionFetch, TopicIdPartition, next_epoch,
)
from protocol.errors import ErrorCode

log = logging.getLogger("odradek.fetch_session")


class FetchResult(NamedTuple):
    """What a fetch answers: the top-level error, the session id, the partitions to send in order."""

    error_code: int
    session_id: int
    partitions: list  # [(TopicIdPartition, fetch_response.PartitionData)]


class FetchContext:
    """How one fetch request is served: which partitions it reads (``partitions``) and what its response
    carries (``update_and_generate_response_data``, called once with every partition read).

    ``quiet`` marks (see ``CachedPartition.quiet``) come from the reader with the partitions it read; a
    session keeps them, and ``partitions(still_quiet)`` of an incremental fetch leaves out those the reader
    finds unchanged."""

    def partitions(self, still_quiet: Callable[[Any], bool] | None = None
                   ) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        raise NotImplementedError

    def update_and_generate_response_data(self, updates: dict, now_ms: int, quiet: dict | None = None
                                          ) -> FetchResult:
        raise NotImplementedError

    def long_poll_keys(self, token: object, keys_of: Callable[[list[TopicIdPartition]], list]) -> list:
        """``keys_of`` every partition the fetch waits on (for an incremental fetch, the whole session; kept
        with the session while its partitions and ``token`` stay the same)."""
        return keys_of([tp for tp, _ in self.partitions()])

    def response_partitions(self, updates: dict) -> list:
        """The partitions ``update_and_generate_response_data`` would answer, changing nothing (Kafka's
        ``getResponseSize``: a fetch's size is weighed against its client's quota before the context is updated)."""
        return list(updates.items())

    def throttled_response(self) -> FetchResult:
        """``getThrottledResponse``: a fetch over its client's quota is answered with no partitions and the
        context is left as it was (no session is created; an incremental session's partitions keep their state)."""
        return FetchResult(0, INVALID_SESSION_ID, [])


class SessionErrorContext(FetchContext):
    """A session error: nothing is read; the response has the error and no partitions."""

    def __init__(self, error: int) -> None:
        self.error = error

    def partitions(self, still_quiet: Callable[[Any], bool] | None = None
                   ) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return []

    def response_partitions(self, updates: dict) -> list:
        return []

    def update_and_generate_response_data(self, updates: dict, now_ms: int, quiet: dict | None = None
                                          ) -> FetchResult:
        log.debug("Session error fetch context returning %s", ErrorCode(self.error).name)
        return FetchResult(self.error, INVALID_SESSION_ID, [])


class SessionlessFetchContext(FetchContext):
    def __init__(self, fetch_data: dict[TopicIdPartition, PartitionFetch]) -> None:
        self.fetch_data = fetch_data

    def partitions(self, still_quiet: Callable[[Any], bool] | None = None
                   ) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return list(self.fetch_data.items())

    def update_and_generate_response_data(self, updates: dict, now_ms: int, quiet: dict | None = None
                                          ) -> FetchResult:
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

    def partitions(self, still_quiet: Callable[[Any], bool] | None = None
                   ) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return list(self.fetch_data.items())

    def update_and_generate_response_data(self, updates: dict, now_ms: int, quiet: dict | None = None
                                          ) -> FetchResult:
        marks = quiet or {}

        def create_partitions() -> dict[tuple, CachedPartition]:
            cached = {}
            for tp, resp in updates.items():
                cached[tp.cache_key] = CachedPartition(tp, self.fetch_data[tp], resp, marks.get(tp))
            return cached

        session_id = self.cache.next_shard().maybe_create_session(now_ms, self.is_from_follower, len(updates),
                                                                  self.uses_topic_ids, create_partitions)
        log.debug("Full fetch context with session id %d returning %d partition(s)", session_id, len(updates))
        return FetchResult(0, session_id, list(updates.items()))


class IncrementalFetchContext(FetchContext):
    """An incremental fetch: reads every partition of the session (but those still quiet), answers only those
    that changed."""

    def __init__(self, request_epoch: int, session: FetchSession,
                 topic_names: Callable[[bytes], str | None]) -> None:
        self.request_epoch = request_epoch
        self.session = session
        self.topic_names = topic_names

    def partitions(self, still_quiet: Callable[[Any], bool] | None = None
                   ) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        out = []
        uses_topic_ids = self.session.uses_topic_ids
        for cached in self.session.partitions.values():
            if still_quiet is not None and cached.quiet is not None and still_quiet(cached.quiet):
                continue
            if uses_topic_ids:
                cached.maybe_resolve_unknown_name(self.topic_names)
            out.append((TopicIdPartition(cached.topic_id, cached.topic, cached.partition), cached.request()))
        return out

    def long_poll_keys(self, token: object, keys_of: Callable[[list[TopicIdPartition]], list]) -> list:
        session = self.session
        kept = session.wait_keys
        if kept is None or kept[0] is not token:
            tps = []
            for cached in session.partitions.values():
                if session.uses_topic_ids:
                    cached.maybe_resolve_unknown_name(self.topic_names)
                tps.append(TopicIdPartition(cached.topic_id, cached.topic, cached.partition))
            kept = session.wait_keys = (token, keys_of(tps))
        return kept[1]

    def response_partitions(self, updates: dict) -> list:
        session = self.session
        if session.epoch != next_epoch(self.request_epoch):
            return []
        out = []
        for tp, resp in updates.items():
            cached = session.partitions.get(tp.cache_key)
            if cached is None or cached.maybe_update_response_data(resp, False):
                out.append((tp, resp))
        return out

    def throttled_response(self) -> FetchResult:
        session = self.session
        expected = next_epoch(self.request_epoch)
        if session.epoch != expected:
            log.info("Incremental fetch session %d expected epoch %d, but got %d.  Possible duplicate request.",
                     session.id, expected, session.epoch)
            return FetchResult(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, [])
        return FetchResult(0, session.id, [])

    def update_and_generate_response_data(self, updates: dict, now_ms: int, quiet: dict | None = None
                                          ) -> FetchResult:
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
            cached.quiet = None if quiet is None else quiet.get(tp)
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
