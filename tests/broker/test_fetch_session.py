"""Incremental fetch sessions (KIP-227, broker/replication/fetch_session/): the broker's cache and fetch contexts as
Kafka's FetchSessionTest exercises them, the client-side FetchSessionHandler, and the replica fetcher's session with a
leader (a scripted leader in place of the connection)."""

from __future__ import annotations

import asyncio
import random

import pytest

from broker.clock import ManualClock
from broker.config import BrokerConfig, ConfigException
from broker.replication.fetch_session.cache import FetchSessionCache
from broker.replication.fetch_session.contexts import (
    FetchManager, FullFetchContext, IncrementalFetchContext, SessionErrorContext, SessionlessFetchContext,
)
from broker.replication.fetch_session.handler import FetchSessionHandler
from broker.replication.fetch_session.metadata import (
    FINAL_EPOCH, INITIAL_EPOCH, INT32_MAX, MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, PartitionFetch,
    TopicIdPartition, next_epoch,
)
from broker.replication.fetch_session.metrics import FetchSessionCacheCollector
from broker.replication.replica_fetcher import RECHECK_S, ReplicaFetcher, ReplicaFetcherManager
from broker.replication.replica_manager import FetchWaiters, Partition
from cluster.metadata_image import PartitionInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import FetchResponse
from protocol.generated.messages.fetch_response import EpochEndOffset, FetchableTopicResponse, PartitionData
from protocol.message import ZERO_UUID
from protocol.record_codec import Record, build_batch
from storage.config import LogConfig
from storage.log import Log

NOW = 1_700_000_000_000
FOO = b"\x01" * 16
BAR = b"\x02" * 16
NAMES = {FOO: "foo", BAR: "bar"}
EVICT = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS


def names(topic_id: bytes) -> str | None:
    return NAMES.get(topic_id)


def tp(topic_id: bytes, partition: int) -> TopicIdPartition:
    return TopicIdPartition(topic_id, NAMES.get(topic_id), partition)


def req(topic_id: bytes, offset: int, max_bytes: int = 100, log_start: int = 0) -> PartitionFetch:
    return PartitionFetch(topic_id, offset, log_start, max_bytes, -1, -1)


def resp(hw: int, log_start: int = 0, records: bytes = b"", error: int = 0, diverging: EpochEndOffset | None = None
         ) -> PartitionData:
    return PartitionData(error_code=error, high_watermark=hw, last_stable_offset=hw, log_start_offset=log_start,
                         records=records, diverging_epoch=diverging if diverging is not None else EpochEndOffset())


def manager(slots: int = 1000, shards: int = 1, seed: int = 7) -> FetchManager:
    return FetchManager(FetchSessionCache(slots, EVICT, random.Random(seed), num_shards=shards))


def create(m: FetchManager, parts: dict, now: int = NOW, follower: bool = False, version: int = 17,
           session_id: int = 0) -> tuple[int, list]:
    """A full fetch (epoch 0) answered with every partition at high watermark 10: (session id, partitions)."""
    ctx = m.new_context(version, session_id, INITIAL_EPOCH, follower, dict(parts), [], names, now)
    assert isinstance(ctx, FullFetchContext)
    result = ctx.update_and_generate_response_data({t: resp(10) for t in parts}, now)
    assert result.error_code == 0
    return result.session_id, result.partitions


def incremental(m: FetchManager, session_id: int, epoch: int, parts: dict | None = None, forget=(),
                now: int = NOW, version: int = 17, follower: bool = False):
    return m.new_context(version, session_id, epoch, follower, dict(parts or {}), list(forget), names, now)


# ---- the broker's side ---------------------------------------------------------------------------------------

def test_full_fetch_creates_a_session_and_incremental_fetches_answer_only_what_changed():
    m = manager()
    parts = {tp(FOO, 0): req(FOO, 0), tp(FOO, 1): req(FOO, 10), tp(BAR, 0): req(BAR, 5)}
    sid, answered = create(m, parts)
    assert 0 < sid <= INT32_MAX and [t for t, _ in answered] == list(parts)  # a full fetch answers everything
    session = m.cache.get(sid)
    assert session.epoch == 1 and session.privileged is False and session.uses_topic_ids

    # epoch 1 names nothing: every partition of the session is read, at the offsets the session holds
    ctx = incremental(m, sid, 1)
    assert isinstance(ctx, IncrementalFetchContext)
    assert ctx.partitions() == list(parts.items())
    # nothing new for foo-0 and bar-0; foo-1's high watermark moved
    result = ctx.update_and_generate_response_data(
        {tp(FOO, 0): resp(10), tp(FOO, 1): resp(11), tp(BAR, 0): resp(10)}, NOW)
    assert (result.error_code, result.session_id) == (0, sid)
    assert [t for t, _ in result.partitions] == [tp(FOO, 1)]

    # epoch 2: foo-0 has records, bar-0's log start moved, foo-1 unchanged since the last answer
    ctx = incremental(m, sid, 2, {tp(FOO, 0): req(FOO, 3)})
    assert dict(ctx.partitions())[tp(FOO, 0)].fetch_offset == 3  # the new parameters are the session's
    result = ctx.update_and_generate_response_data(
        {tp(FOO, 0): resp(10, records=b"x" * 20), tp(FOO, 1): resp(11), tp(BAR, 0): resp(10, log_start=2)}, NOW)
    assert [t for t, _ in result.partitions] == [tp(FOO, 0), tp(BAR, 0)]
    # a partition that returned records is read last next time
    assert [t for t, _ in incremental(m, sid, 3).partitions()] == [tp(FOO, 1), tp(BAR, 0), tp(FOO, 0)]
    assert m.cache.get(sid).epoch == 4


def test_errors_and_diverging_epochs_are_always_answered_and_the_partition_again_once_the_error_is_gone():
    m = manager()
    parts = {tp(FOO, 0): req(FOO, 0), tp(FOO, 1): req(FOO, 0)}
    sid, _ = create(m, parts)
    error = incremental(m, sid, 1).update_and_generate_response_data(
        {tp(FOO, 0): resp(10, error=ErrorCode.NOT_LEADER_OR_FOLLOWER), tp(FOO, 1): resp(10)}, NOW)
    assert [t for t, _ in error.partitions] == [tp(FOO, 0)]
    # the error is gone, the high watermark is the one answered before it: answered again all the same
    again = incremental(m, sid, 2).update_and_generate_response_data({tp(FOO, 0): resp(10), tp(FOO, 1): resp(10)},
                                                                     NOW)
    assert [t for t, _ in again.partitions] == [tp(FOO, 0)]
    diverging = incremental(m, sid, 3).update_and_generate_response_data(
        {tp(FOO, 0): resp(10), tp(FOO, 1): resp(10, diverging=EpochEndOffset(epoch=2, end_offset=7))}, NOW)
    assert [t for t, _ in diverging.partitions] == [tp(FOO, 1)]


def test_added_updated_and_forgotten_partitions_and_forgetting_all_closes_the_session():
    m = manager()
    sid, _ = create(m, {tp(FOO, 0): req(FOO, 0), tp(FOO, 1): req(FOO, 0)})
    ctx = incremental(m, sid, 1, {tp(BAR, 0): req(BAR, 4), tp(FOO, 1): req(FOO, 9)}, forget=[tp(FOO, 0)])
    assert ctx.partitions() == [(tp(FOO, 1), req(FOO, 9)), (tp(BAR, 0), req(BAR, 4))]
    result = ctx.update_and_generate_response_data({tp(FOO, 1): resp(10), tp(BAR, 0): resp(10)}, NOW)
    assert [t for t, _ in result.partitions] == [tp(BAR, 0)]  # a new partition of the session is always answered
    assert m.cache.total_partitions == 2

    # forgetting the last partitions ends the session: served sessionless, answered with session id 0
    ctx = incremental(m, sid, 2, forget=[tp(FOO, 1), tp(BAR, 0)])
    assert isinstance(ctx, SessionlessFetchContext)
    assert ctx.update_and_generate_response_data({}, NOW).session_id == 0
    assert m.cache.get(sid) is None and m.cache.size == 0 and m.cache.total_partitions == 0


def test_quiet_partitions_are_skipped_while_the_reader_finds_them_unchanged_and_new_parameters_clear_the_mark():
    """``CachedPartition.quiet``: the reader marks partitions it read empty at the log's end; an incremental fetch
    leaves them out while ``still_quiet`` holds, so an idle session is not read partition by partition."""
    m = manager()
    parts = {tp(FOO, 0): req(FOO, 10), tp(FOO, 1): req(FOO, 10), tp(BAR, 0): req(BAR, 10)}
    ctx = m.new_context(17, 0, INITIAL_EPOCH, True, dict(parts), [], names, NOW)
    sid = ctx.update_and_generate_response_data({t: resp(10) for t in parts}, NOW,
                                                {tp(FOO, 0): "m0", tp(FOO, 1): "m1"}).session_id
    changed = {"m1"}  # the reader's verdict: foo-1 moved since its mark
    asked = []

    def still_quiet(mark) -> bool:
        asked.append(mark)
        return mark not in changed

    ctx = incremental(m, sid, 1)
    assert ctx.partitions(still_quiet) == [(tp(FOO, 1), req(FOO, 10)), (tp(BAR, 0), req(BAR, 10))]
    assert asked == ["m0", "m1"]  # bar-0 has no mark: read without asking
    assert ctx.partitions() == list(parts.items())  # no check: everything is read
    # foo-1 read again, quiet again with a new mark; bar-0 had records: no mark
    ctx.update_and_generate_response_data({tp(FOO, 1): resp(10), tp(BAR, 0): resp(12, records=b"x" * 9)}, NOW,
                                          {tp(FOO, 1): "m1b"})
    session = m.cache.get(sid)
    assert [c.quiet for c in session.partitions.values()] == ["m0", "m1b", None]

    # a request naming foo-0 with new parameters clears its mark: it is read
    ctx = incremental(m, sid, 2, {tp(FOO, 0): req(FOO, 11)})
    assert [t for t, _ in ctx.partitions(still_quiet)] == [tp(FOO, 0), tp(BAR, 0)]
    assert session.partitions[tp(FOO, 0).cache_key].quiet is None


def test_an_incremental_fetch_keeps_its_long_poll_keys_until_the_session_or_the_token_changes():
    m = manager()
    sid, _ = create(m, {tp(FOO, 0): req(FOO, 0), tp(BAR, 0): req(BAR, 0)})
    computed = []

    def keys_of(tps):
        computed.append(list(tps))
        return [(t.topic, t.partition) for t in tps]

    image = object()
    assert incremental(m, sid, 1).long_poll_keys(image, keys_of) == [("foo", 0), ("bar", 0)]
    assert incremental(m, sid, 2).long_poll_keys(image, keys_of) == [("foo", 0), ("bar", 0)]
    assert len(computed) == 1
    assert incremental(m, sid, 3, {tp(FOO, 0): req(FOO, 5)}).long_poll_keys(image, keys_of)  # updated: kept
    assert len(computed) == 1
    assert incremental(m, sid, 4, {tp(FOO, 1): req(FOO, 0)}).long_poll_keys(image, keys_of) == [
        ("foo", 0), ("bar", 0), ("foo", 1)]  # added
    assert incremental(m, sid, 5, forget=[tp(BAR, 0)]).long_poll_keys(image, keys_of) == [("foo", 0), ("foo", 1)]
    assert incremental(m, sid, 6).long_poll_keys(object(), keys_of) == [("foo", 0), ("foo", 1)]  # a new image
    assert len(computed) == 4


def test_session_errors():
    m = manager()
    sid, _ = create(m, {tp(FOO, 0): req(FOO, 0)})
    for session_id, epoch, version, error in (
            (sid, 5, 17, ErrorCode.INVALID_FETCH_SESSION_EPOCH),  # the session expects epoch 1
            (sid + 1, 1, 17, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            (0, 1, 17, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            (-5, 1, 17, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            (sid, 1, 12, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)):  # created with topic ids, used without
        ctx = incremental(m, session_id, epoch, version=version)
        assert isinstance(ctx, SessionErrorContext) and ctx.partitions() == []
        assert ctx.update_and_generate_response_data({}, NOW) == (error, 0, [])
    assert m.cache.get(sid).epoch == 1  # an error changes nothing
    assert isinstance(incremental(m, sid, 1), IncrementalFetchContext)


def test_a_name_based_session_below_v13():
    m = manager()
    foo0 = TopicIdPartition(ZERO_UUID, "foo", 0)
    sid, _ = create(m, {foo0: req(ZERO_UUID, 0)}, version=12)
    assert not m.cache.get(sid).uses_topic_ids
    assert isinstance(incremental(m, sid, 1, version=17), SessionErrorContext)
    ctx = incremental(m, sid, 1, version=12, forget=[foo0])
    assert isinstance(ctx, SessionlessFetchContext)


def test_a_duplicate_incremental_request_is_answered_with_invalid_epoch():
    """Two requests of one epoch: the second fails at once; if the first is answered after a later epoch was
    served, its answer is INVALID_FETCH_SESSION_EPOCH (Kafka's check at response time)."""
    m = manager()
    sid, _ = create(m, {tp(FOO, 0): req(FOO, 0)})
    first = incremental(m, sid, 1)
    assert isinstance(incremental(m, sid, 1), SessionErrorContext)
    second = incremental(m, sid, 2)
    assert second.update_and_generate_response_data({tp(FOO, 0): resp(10)}, NOW).error_code == 0
    late = first.update_and_generate_response_data({tp(FOO, 0): resp(10)}, NOW)
    assert (late.error_code, late.session_id, late.partitions) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid, [])


def test_close_with_final_epoch_and_restart_with_initial_epoch():
    m = manager()
    parts = {tp(FOO, 0): req(FOO, 0)}
    sid, _ = create(m, parts)
    ctx = m.new_context(17, sid, FINAL_EPOCH, False, dict(parts), [], names, NOW)  # close, no new session
    assert isinstance(ctx, SessionlessFetchContext) and m.cache.get(sid) is None
    assert ctx.update_and_generate_response_data({tp(FOO, 0): resp(10)}, NOW).session_id == 0
    assert m.cache.size == 0

    sid, _ = create(m, parts)
    new_sid, _ = create(m, parts, session_id=sid)  # epoch 0 naming a session: closes it, creates another
    assert new_sid not in (0, sid) and m.cache.get(sid) is None and m.cache.size == 1

    sessionless = m.new_context(17, 0, FINAL_EPOCH, False, dict(parts), [], names, NOW)
    assert isinstance(sessionless, SessionlessFetchContext)
    assert sessionless.update_and_generate_response_data({tp(FOO, 0): resp(10)}, NOW).session_id == 0
    assert m.cache.size == 1


def test_a_full_cache_answers_session_id_zero():
    m = manager(slots=2)
    a, _ = create(m, {tp(FOO, 0): req(FOO, 0)})
    b, _ = create(m, {tp(FOO, 1): req(FOO, 0)})
    assert a and b
    # neither session is old enough to be evicted by a consumer, nor stale: no room
    assert create(m, {tp(BAR, 0): req(BAR, 0), tp(BAR, 1): req(BAR, 0)}, now=NOW + 10)[0] == 0
    assert m.cache.size == 2 and m.cache.evictions == 0
    assert create(manager(slots=0), {tp(FOO, 0): req(FOO, 0)})[0] == 0  # slots 0: never a session


def test_eviction_prefers_consumers_over_followers():
    m = manager(slots=2)
    follower, _ = create(m, {tp(FOO, 0): req(FOO, 0)}, follower=True)
    consumer, _ = create(m, {tp(FOO, 1): req(FOO, 0), tp(BAR, 0): req(BAR, 0)})
    # a consumer may not evict a follower, nor a fresh consumer session
    assert create(m, {tp(BAR, 1): req(BAR, 0)}, now=NOW + 1)[0] == 0
    # a follower evicts a consumer's session at once, however large
    newcomer, _ = create(m, {tp(BAR, 1): req(BAR, 0)}, now=NOW + 2, follower=True)
    assert newcomer and m.cache.get(consumer) is None and m.cache.get(follower) is not None
    assert m.cache.evictions == 1
    # two follower sessions: a follower may evict another only once that one is older than the eviction age
    # (as of its last use) and smaller
    assert create(m, {tp(FOO, 0): req(FOO, 0), tp(FOO, 1): req(FOO, 0)}, now=NOW + 3, follower=True)[0] == 0
    later = NOW + EVICT + 10
    incremental(m, follower, 1, now=later, follower=True)  # used again: now old enough to be evictable
    incremental(m, newcomer, 1, now=later, follower=True)
    assert create(m, {tp(BAR, 0): req(BAR, 0)}, now=later + 1)[0] == 0  # a consumer never evicts a follower ...
    big, _ = create(m, {tp(FOO, 0): req(FOO, 0), tp(FOO, 1): req(FOO, 0)}, now=later + 2, follower=True)
    assert big and m.cache.evictions == 2  # ... a larger follower session does
    low, high = sorted((follower, newcomer))
    assert m.cache.get(low) is None and m.cache.get(high) is not None  # of two equal sizes, the lower id goes


def test_a_consumer_evicts_an_old_smaller_consumer_session_and_anyone_a_stale_one():
    m = manager(slots=1)
    small, _ = create(m, {tp(FOO, 0): req(FOO, 0)})
    incremental(m, small, 1, now=NOW + EVICT + 1)  # old enough (and used: not stale)
    # the same size does not rank above it; a larger one does
    assert create(m, {tp(FOO, 1): req(FOO, 0)}, now=NOW + EVICT + 2)[0] == 0
    large, _ = create(m, {tp(FOO, 1): req(FOO, 0), tp(BAR, 0): req(BAR, 0)}, now=NOW + EVICT + 3)
    assert large and m.cache.get(small) is None

    m = manager(slots=1)
    follower, _ = create(m, {tp(FOO, 0): req(FOO, 0), tp(FOO, 1): req(FOO, 0)}, follower=True)
    # unused for longer than the eviction age: stale, evicted by any newcomer
    assert create(m, {tp(BAR, 0): req(BAR, 0)}, now=NOW + EVICT)[0] == 0
    consumer, _ = create(m, {tp(BAR, 0): req(BAR, 0)}, now=NOW + EVICT + 1)
    assert consumer and m.cache.get(follower) is None and m.cache.evictions == 1


def test_shards_split_the_slots_and_own_id_ranges():
    m = FetchManager(FetchSessionCache(16, EVICT, random.Random(3)))  # 8 shards of 2 slots
    ids = [create(m, {tp(FOO, i): req(FOO, 0)})[0] for i in range(16)]
    assert all(ids) and len(set(ids)) == 16
    id_range = INT32_MAX // 8
    assert sorted(i // id_range for i in ids) == sorted(list(range(8)) * 2)  # round-robin, two per shard
    assert create(m, {tp(BAR, 0): req(BAR, 0)})[0] == 0  # every shard full
    for sid in ids:
        assert m.cache.get(sid) is not None
    assert FetchSessionCache(7, EVICT, random.Random(1)).shards[0].max_entries == 0  # 7 // 8: Kafka's sharding


def test_session_ids_come_from_the_given_random():
    def ids(seed):
        m = manager(seed=seed)
        return [create(m, {tp(FOO, 0): req(FOO, 0)})[0] for _ in range(3)]

    assert ids(11) == ids(11) and ids(11) != ids(12)


def test_epochs_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(INT32_MAX) == 1 and next_epoch(-1) == -1


def test_cache_metrics():
    m = manager(slots=1)
    collector = FetchSessionCacheCollector(m)
    sid, _ = create(m, {tp(FOO, 0): req(FOO, 0), tp(FOO, 1): req(FOO, 0)})
    create(m, {tp(BAR, 0): req(BAR, 0)}, follower=True)  # evicts the consumer's
    values = {s.name: s.value for fam in collector.collect() for s in fam.samples}
    assert values == {"kafka_server_fetchsessioncache_numincrementalfetchsessions": 1,
                      "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached": 1,
                      "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total": 1}


# ---- the client's side -----------------------------------------------------------------------------------------

def _response(session_id: int, parts: dict, error: int = 0) -> FetchResponse:
    topics: dict[bytes, FetchableTopicResponse] = {}
    for (topic, index), pf in parts.items():
        topics.setdefault(pf.topic_id, FetchableTopicResponse(topic_id=pf.topic_id)).partitions.append(
            PartitionData(partition_index=index, high_watermark=0))
    return FetchResponse(error_code=error, session_id=session_id, responses=list(topics.values()))


def test_handler_full_then_incremental_naming_only_changes():
    h = FetchSessionHandler(1)
    parts = {("foo", 0): req(FOO, 0), ("foo", 1): req(FOO, 0), ("bar", 0): req(BAR, 0)}
    data = h.build(parts)
    assert (data.session_id, data.epoch, data.is_full) == (0, INITIAL_EPOCH, True)
    assert data.to_send == parts and data.to_forget == []
    assert h.handle_response(_response(77, parts), 17)
    assert (h.session_id, h.epoch) == (77, 1)

    data = h.build(dict(parts))  # nothing changed: an empty incremental fetch
    assert (data.session_id, data.epoch, data.to_send, data.to_forget) == (77, 1, {}, [])
    assert data.session_partitions == parts
    assert h.handle_response(_response(77, {}), 17) and h.epoch == 2

    moved = {("foo", 0): req(FOO, 0), ("foo", 1): req(FOO, 5), ("baz", 0): req(b"\x03" * 16, 0)}
    data = h.build(moved)  # foo-1 moved, baz-0 added, bar-0 gone
    assert list(data.to_send) == [("baz", 0), ("foo", 1)]  # added first, then the altered ones
    assert data.to_forget == [(BAR, "bar", 0)]
    assert data.session_partitions == moved
    # an incremental answer may carry a subset of the session's partitions
    assert h.handle_response(_response(77, {("foo", 1): moved[("foo", 1)]}), 17) and h.epoch == 3


def test_handler_starts_over_after_errors():
    h = FetchSessionHandler(1)
    parts = {("foo", 0): req(FOO, 0)}
    h.build(parts)
    h.handle_response(_response(77, parts), 17)
    h.build(parts)
    assert not h.handle_response(_response(0, {}, ErrorCode.INVALID_FETCH_SESSION_EPOCH), 17)
    assert (h.session_id, h.epoch) == (77, INITIAL_EPOCH)  # full, closing session 77
    data = h.build(parts)
    assert data.is_full and data.to_send == parts and data.session_id == 77
    assert h.handle_response(_response(78, parts), 17) and (h.session_id, h.epoch) == (78, 1)

    h.build(parts)
    assert not h.handle_response(_response(0, {}, ErrorCode.FETCH_SESSION_ID_NOT_FOUND), 17)
    assert (h.session_id, h.epoch) == (0, INITIAL_EPOCH)  # the session is gone: a fresh full fetch
    h.build(parts)
    h.handle_response(_response(79, parts), 17)
    h.build(parts)
    h.handle_error(ConnectionError("reset"))
    assert (h.session_id, h.epoch) == (79, INITIAL_EPOCH)

    # a full answer that omits a partition, an incremental one with a partition not in the session: unusable
    data = h.build({("foo", 0): req(FOO, 0), ("foo", 1): req(FOO, 0)})
    assert not h.handle_response(_response(80, {("foo", 0): req(FOO, 0)}), 17)
    assert (h.session_id, h.epoch) == (0, INITIAL_EPOCH)
    h.build(parts)
    h.handle_response(_response(81, parts), 17)
    h.build(parts)
    assert not h.handle_response(_response(81, {("foo", 9): req(FOO, 0)}), 17)
    assert (h.session_id, h.epoch) == (81, INITIAL_EPOCH)
    # a server that answers a full fetch without a session: full fetches go on
    h.build(parts)
    assert h.handle_response(_response(0, parts), 17) and (h.session_id, h.epoch) == (0, INITIAL_EPOCH)


# ---- the replica fetcher's session with a leader ---------------------------------------------------------------

class _Replicas:
    def __init__(self) -> None:
        self.partitions = {}
        self.fetch_waiters = FetchWaiters()


class _ScriptedLeader:
    """Stands in for the fetcher's connection: records each request, answers from ``answer``."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.requests = []

    async def request(self, body, version, timeout_s):
        self.requests.append(body)
        await asyncio.sleep(0.001)
        result = self.answer(body, len(self.requests))
        if isinstance(result, BaseException):
            raise result
        return result

    async def close(self):
        pass


def _named(request) -> dict:
    return {(ft.topic, fp.partition): fp.fetch_offset for ft in request.topics for fp in ft.partitions}


def test_replica_fetcher_uses_a_session_and_starts_over_after_a_session_error_or_a_failed_request(tmp_path):
    async def scenario():
        clock = ManualClock(NOW)
        logs = [Log.open(str(tmp_path / f"foo-{i}"), LogConfig.from_props({}), now_ms=NOW) for i in range(3)]
        parts = {("foo", i): Partition("foo", i, FOO, lg, PartitionInfo(i, (1, 2), (1, 2), 1, 0, 0))
                 for i, lg in enumerate(logs)}
        manager = ReplicaFetcherManager(2, _Replicas(), clock, "PLAINTEXT", lambda: 5,
                                        {"replica.fetch.backoff.ms": 1})
        batch = bytes(build_batch([Record(value=b"v")], base_offset=0, partition_leader_epoch=0))

        def answer(request, n):
            if n == 4:
                return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
            if n == 6:
                return ConnectionError("reset by the leader")
            sid = 1000 + n if request.session_epoch == INITIAL_EPOCH else request.session_id
            pds = [PartitionData(partition_index=i, high_watermark=1 if i == 1 and n >= 2 else 0,
                                 records=batch if (i == 1 and n == 2) else b"")
                   for i in range(3) if request.session_epoch == INITIAL_EPOCH or (i == 1 and n in (2, 3))]
            return FetchResponse(session_id=sid, responses=[FetchableTopicResponse(topic_id=FOO, partitions=pds)])

        fetcher = ReplicaFetcher(manager, 1, "127.0.0.1", 1)
        fetcher.client = leader = _ScriptedLeader(answer)
        fetcher.set_partitions(parts)
        try:
            for _ in range(400):
                if len(leader.requests) >= 9:
                    break
                await asyncio.sleep(0.005)
        finally:
            fetcher.task.cancel()
        r = leader.requests
        assert len(r) >= 9
        meta = [(q.session_id, q.session_epoch) for q in r[:9]]
        assert meta == [(0, 0), (1001, 1), (1001, 2), (1001, 3),  # full, then incremental
                        (0, 0), (1005, 1),  # FETCH_SESSION_ID_NOT_FOUND: a fresh full fetch
                        (1005, 0),  # the request failed: full, closing the session it had
                        (1007, 1), (1007, 2)]
        assert _named(r[0]) == {("foo", 0): 0, ("foo", 1): 0, ("foo", 2): 0}
        assert _named(r[1]) == {}  # nothing moved
        assert _named(r[2]) == {("foo", 1): 1}  # foo-1 took a record from answer 2: only it is named
        assert _named(r[3]) == {}
        assert _named(r[4]) == _named(r[6]) == {("foo", 0): 0, ("foo", 1): 1, ("foo", 2): 0}
        assert all(not q.forgotten_topics_data for q in r[:9])
        assert r[0].replica_state.replica_id == 2 and r[0].replica_state.replica_epoch == 5
        assert logs[1].log_end_offset == 1 and logs[1].high_watermark == 1

        # a partition no longer followed is forgotten; the others are not named
        fetcher2 = ReplicaFetcher(manager, 1, "127.0.0.1", 1)
        fetcher2.client = leader2 = _ScriptedLeader(
            lambda request, n: FetchResponse(session_id=55, responses=[FetchableTopicResponse(
                topic_id=FOO, partitions=[PartitionData(partition_index=fp.partition) for ft in request.topics
                                          for fp in ft.partitions])]))
        fetcher2.set_partitions(parts)
        try:
            for _ in range(400):
                if len(leader2.requests) >= 2:
                    break
                await asyncio.sleep(0.005)
            fetcher2.set_partitions({tp_: p for tp_, p in parts.items() if tp_ != ("foo", 2)})
            seen = len(leader2.requests)
            for _ in range(400):
                if len(leader2.requests) >= seen + 2:
                    break
                await asyncio.sleep(0.005)
        finally:
            fetcher2.task.cancel()
        forgets = [[(f.topic_id, f.partitions) for f in q.forgotten_topics_data] for q in leader2.requests]
        assert [(FOO, [2])] in forgets
        assert all(_named(q) == {} for q in leader2.requests[1:])
        await asyncio.gather(fetcher.task, fetcher2.task, return_exceptions=True)
        for lg in logs:
            lg.close()

    asyncio.run(scenario())


def test_an_idle_fetcher_reuses_its_positions_until_an_answer_moves_one_or_the_recheck_is_due(tmp_path):
    """ReplicaFetcher._build: with nothing answered and nothing changed, the next request is built without looking
    at every partition; a log start moved by retention (not by the fetcher) is sent within RECHECK_S."""
    async def scenario():
        clock = ManualClock(NOW)
        logs = [Log.open(str(tmp_path / f"foo-{i}"), LogConfig.from_props({}), now_ms=NOW) for i in range(3)]
        for lg in logs:
            lg.append_as_follower(bytes(build_batch([Record(value=b"v")], base_offset=0,
                                                    partition_leader_epoch=0)), NOW)
        parts = {("foo", i): Partition("foo", i, FOO, lg, PartitionInfo(i, (1, 2), (1, 2), 1, 0, 0))
                 for i, lg in enumerate(logs)}
        manager = ReplicaFetcherManager(2, _Replicas(), clock, "PLAINTEXT", lambda: 5,
                                        {"replica.fetch.backoff.ms": 1})

        def answer(request, n):
            pds = [PartitionData(partition_index=i, high_watermark=1) for i in range(3)] \
                if request.session_epoch == INITIAL_EPOCH else []
            return FetchResponse(session_id=77, responses=[FetchableTopicResponse(topic_id=FOO, partitions=pds)]
                                 if pds else [])

        fetcher = ReplicaFetcher(manager, 1, "127.0.0.1", 1)
        looked = []
        partition_fetches = fetcher._partition_fetches
        fetcher._partition_fetches = lambda ps: (looked.append(len(ps)), partition_fetches(ps))[1]
        fetcher.client = leader = _ScriptedLeader(answer)
        fetcher.set_partitions(parts)

        async def requests(n):
            for _ in range(400):
                if len(leader.requests) >= n:
                    return
                await asyncio.sleep(0.005)
            raise AssertionError(f"{len(leader.requests)} requests, not {n}")

        try:
            await requests(6)
            # the full fetch and the one after its answer (it carried partitions) looked; the idle ones did not
            assert looked == [3, 3]
            assert all(_named(q) == {} for q in leader.requests[1:6])
            logs[2].update_high_watermark(1)
            logs[2].maybe_increment_log_start_offset(1, reason="retention")  # not the fetcher's doing
            clock.advance(int(RECHECK_S * 1000))
            seen = len(leader.requests)
            await requests(seen + 2)
            assert looked[2:] == [3]  # looked again once, when the recheck was due
            assert {("foo", 2): 1} in [_named(q) for q in leader.requests[seen:]]
            assert [fp.log_start_offset for q in leader.requests[seen:] for ft in q.topics
                    for fp in ft.partitions] == [1]
        finally:
            fetcher.task.cancel()
        await asyncio.gather(fetcher.task, return_exceptions=True)
        for lg in logs:
            lg.close()

    asyncio.run(scenario())


def test_the_cache_slots_config():
    assert BrokerConfig()["max.incremental.fetch.session.cache.slots"] == 1000
    with pytest.raises(ConfigException, match="max.incremental.fetch.session.cache.slots: Value must be at least 0"):
        BrokerConfig({"max.incremental.fetch.session.cache.slots": -1}).validate()
