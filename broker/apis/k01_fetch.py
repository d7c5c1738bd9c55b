"""Fetch: v4-18.

Behaviour (KafkaApis.handleFetchRequest, ReplicaManager.fetchMessages/readFromLog):
* reads return file slices sent with sendfile; only the first partition that returns data may
  exceed ``max_bytes`` (one whole batch), later ones are cut at the remaining budget and the client
  drops a partial tail; an offset inside a batch returns the whole batch;
* long poll: with fewer than ``min_bytes`` available the request parks until an append to one of
  its partitions (or a high watermark that moves) wakes it, then reads again (the delayed-fetch purgatory), or
  until ``max_wait_ms`` passes, when the read it parked after is answered; no polling;
* OFFSET_OUT_OF_RANGE below the log start or past the log end; FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH against ``current_leader_epoch``; UNKNOWN_TOPIC_ID (v13+ ids) and
  UNKNOWN_TOPIC_OR_PARTITION; read_committed reads up to the last stable offset and answers the transactions
  aborted in the range read (the log's transaction indexes, ``FetchDataInfo.abortedTransactions``); the list is null
  for read_uncommitted and followers, and, as Kafka's, for a partition answered with an error or without a read;
* ``max_bytes`` is capped by the broker's ``fetch.max.bytes`` (static, 55 MiB by default) and, for a consumer, by what
  its ``consumer_byte_rate`` allows one fetch (``getMaxValueInQuotaWindow``); the first batch read is whole however
  large (``minOneMessage``);
* client quotas (KafkaApis' response callback): a consumer's fetch is weighed against its ``request_percentage``
  (the handler's time until it answered or parked, not the long-poll wait) and its ``consumer_byte_rate`` (the
  answer's size); over either it is answered with no partitions and the larger throttle time, leaving the fetch
  context as it was (no session created). A follower's fetch is exempt from both;
* fetch from the closest replica (KIP-392, broker/replication/replica_selector.py): a consumer's fetch from v11 on
  (Kafka's ``clientMetadata``) is served by any replica of the partition, a follower reading its own log up to its own
  high watermark (an offset past it answers no records, one past its log end OFFSET_OUT_OF_RANGE), with the
  leader epoch checked against the follower's; older versions and replica fetches need the leader
  (NOT_LEADER_OR_FOLLOWER). With ``replica.selector.class`` set, the leader picks the consumer's preferred read
  replica from its ``rack_id``; when that is another broker the partition answers at once with
  ``preferred_read_replica`` set, no records, and the leader's high watermark, last stable offset and log start
  (``findPreferredReadReplica`` in ``readFromLog``); otherwise ``preferred_read_replica`` is -1;
* fetch sessions (KIP-227, broker/replication/fetch_session/, ``FetchManager.newContext``): session id 0 with epoch -1
  is sessionless; epoch 0 is a full fetch that creates a session when the cache has room (session id 0 in the
  answer otherwise) and closes the session it names; an id with epoch -1 closes that session and is served
  sessionless; an id with an epoch above 0 is incremental: the request names only added or changed
  partitions (``forgotten_topics_data`` drops some), every partition of the session is long-polled on and
  read, but for those read empty at their end whose leadership and offsets have not moved since (quiet: a read
  would find the same nothing; an in-sync follower is recorded as caught up as the read would), and the answer
  carries only the partitions with records, a new high watermark or log start offset, or an error.
  FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH and FETCH_SESSION_TOPIC_ID_ERROR answer at once with
  no partitions. Followers' sessions are privileged in the cache's eviction;
* replica fetches (``replica_id``, or ``replica_state`` from v15; Partition.fetchRecords): only from a
  replica of the partition (else UNKNOWN_LEADER_EPOCH with a leader epoch, NOT_LEADER_OR_FOLLOWER without),
  read up to the log end, a ``last_fetched_epoch`` that the leader's epochs do not end where the follower
  thinks answers ``diverging_epoch`` (the follower truncates), and the fetch records the follower's position
  for every partition it reads (the high watermark may move): in an incremental fetch, every partition of
  the session, at the offset the session holds.
* authorization (KafkaApis.handleFetchRequest, with an authorizer; asked once per request over every partition the
  fetch context reads, a session's included): a follower's fetch needs CLUSTER_ACTION on the cluster, else every
  partition answers TOPIC_AUTHORIZATION_FAILED; a consumer's needs READ on each topic (one question per topic,
  its partitions as the reference count), else TOPIC_AUTHORIZATION_FAILED for its partitions, after an unknown
  v13+ topic id (UNKNOWN_TOPIC_ID) and before the topic's existence is looked at. A denied partition is never
  skipped as quiet in an incremental fetch.
"""

from __future__ import annotations

import asyncio
from typing import Generator

from broker.config import FETCH_MAX_BYTES_DEFAULT
from broker.security.throttling import user_of
from cluster.acls import AclOperation, ResourceType
from broker.loop_turns import ITEMS_PER_TURN, in_turns, turn_after
from broker.replication.fetch_session.contexts import NO_SESSIONS
from broker.replication.fetch_session.metadata import PartitionFetch, TopicIdPartition
from broker.replication.replica_selector import replica_selector
from broker.timeouts import wait_for
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import FetchRequest, FetchResponse
from protocol.generated.messages.fetch_response import (
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
)
from protocol.message import ZERO_UUID
from storage.errors import OffsetOutOfRangeError
from storage.log import FetchIsolation

API_KEY = 1
VERSIONS = (4, 18)

READ_COMMITTED = 1


async def handle(ctx, req: FetchRequest) -> FetchResponse:
    version = ctx.version
    image = ctx.image
    replica_id, replica_epoch = _replica(req, version)
    uses_ids = version >= 13

    def topic_name(topic_id: bytes) -> str | None:
        t = image.topics_by_id.get(topic_id)
        return t.name if t is not None else None

    def partition(topic_id: bytes, topic: str, index: int) -> TopicIdPartition:
        if uses_ids:
            return TopicIdPartition(topic_id, topic_name(topic_id), index)
        return TopicIdPartition(ZERO_UUID, topic, index)

    # KafkaApis: min(min(request.maxBytes, config.fetchMaxBytes), maxQuotaWindowBytes); one whole batch may still
    # exceed it (minOneMessage in _read_all)
    max_bytes = min(req.max_bytes, ctx.config.get("fetch.max.bytes", FETCH_MAX_BYTES_DEFAULT))
    if replica_id < 0 and _fetch_quota_on(ctx):
        # a consumer's fetch is capped at what its quota lets one fetch take when its windows are empty
        # (getMaxValueInQuotaWindow), else a large fetch would be throttled every time (KAFKA-9677)
        cap = ctx.handles.quotas.fetch.max_value_in_window(user_of(ctx.principal), ctx.client_id or "")
        if cap < max_bytes:
            max_bytes = int(cap)
    min_bytes = min(req.min_bytes, max_bytes)
    fetch_data: dict[TopicIdPartition, PartitionFetch] = {}
    for ft in req.topics:
        for fp in ft.partitions:
            tp = partition(ft.topic_id, ft.topic, fp.partition)
            fetch_data[tp] = PartitionFetch(tp.topic_id, fp.fetch_offset, fp.log_start_offset,
                                            fp.partition_max_bytes, fp.current_leader_epoch, fp.last_fetched_epoch)
    to_forget = [partition(ft.topic_id, ft.topic, p) for ft in req.forgotten_topics_data for p in ft.partitions]
    sessions = ctx.fetch_sessions or NO_SESSIONS
    fetch_context = sessions.new_context(version, req.session_id, req.session_epoch, replica_id >= 0, fetch_data,
                                         to_forget, topic_name, ctx.clock.now_ms())
    deadline = ctx.clock.monotonic() + max(0, req.max_wait_ms) / 1000.0
    # a session of thousands of partitions: each step over all of them is followed by a turn of the loop
    await turn_after(len(fetch_data) + len(to_forget))
    denied = _denied(ctx, fetch_context, replica_id >= 0)
    keys = fetch_context.long_poll_keys(image, lambda tps: _partition_keys(image, tps, version))
    await turn_after(len(keys))
    while True:
        parts = fetch_context.partitions(_still_quiet(ctx.replicas, replica_id, replica_epoch, ctx.clock.now_ms(),
                                                      denied))
        await turn_after(len(parts))
        updates, total, errors, served, quiet = await in_turns(
            _read_all(ctx, req, version, parts, replica_id, replica_epoch, denied, max_bytes))
        remaining = deadline - ctx.clock.monotonic()
        if total < min_bytes and not errors and remaining > 0 and keys:
            ctx.work_done()  # parked: the first pass was this request's own work (delayed fetch)
            if await _woken(ctx.replicas.fetch_waiters, keys, remaining):
                continue  # read again
            # the wait ran out with no append to these partitions and no high watermark moved: the read stands
            # (Kafka reads again at expiry; what else could move, a log start or a leadership, the next fetch sees)
        if replica_id >= 0:
            ctx.request_quota_done = True  # sendResponseExemptThrottle: a follower's fetch is not the client's
        elif ctx.handles.quotas is not None:
            throttled = _throttled(ctx, fetch_context, updates, version)
            if throttled is not None:
                return throttled
        result = fetch_context.update_and_generate_response_data(updates, ctx.clock.now_ms(), quiet)
        await turn_after(len(updates))
        if not result.error_code:  # every partition that returned records is in the response
            metrics = ctx.metrics
            for name, size in served.items():
                metrics.fetched(name, size)
        return FetchResponse(error_code=result.error_code, session_id=result.session_id,
                             responses=_topic_responses(result.partitions, version))


def _fetch_quota_on(ctx) -> bool:
    quotas = ctx.handles.quotas
    return quotas is not None and quotas.fetch.enabled


def _throttled(ctx, fetch_context, updates: dict, version: int) -> FetchResponse | None:
    """KafkaApis.handleFetchRequest's response callback for a consumer: the request's thread time is recorded
    against its client's ``request_percentage`` (once: dispatch records nothing more) and the response's size
    (``getResponseSize``, before the context is updated) against its ``consumer_byte_rate``. Over either, the fetch
    is answered empty with the larger throttle time (``getThrottledResponse``), the size is taken back
    (``unrecordQuotaSensor``, whichever quota was broken) and the connection is throttled on the quota with the
    larger time: the consumer asks again from the same offsets once that time has passed. None: within both."""
    now_ms = ctx.clock.now_ms()
    request_ms = ctx.record_request_quota(now_ms)
    fetch_on = _fetch_quota_on(ctx)  # else its record is 0 (quotasEnabled): the size is not worth encoding
    size = _response_size(fetch_context.response_partitions(updates), version) if fetch_on else 0
    bandwidth_ms = ctx.record_quota("fetch", size, now_ms) if fetch_on else 0
    throttle_ms = max(bandwidth_ms, request_ms)
    if throttle_ms <= 0:
        return None
    if fetch_on:
        ctx.handles.quotas.fetch.unrecord(user_of(ctx.principal), ctx.client_id or "", size, now_ms)
    ctx.apply_throttle("fetch" if bandwidth_ms > request_ms else "request", throttle_ms)
    result = fetch_context.throttled_response()
    return FetchResponse(throttle_time_ms=throttle_ms, error_code=result.error_code, session_id=result.session_id,
                         responses=[])


def _response_size(partitions: list, version: int) -> int:
    """``FetchResponse.sizeOf``: 4 + the size of a response carrying ``partitions`` (records as sent)."""
    body = FetchResponse(error_code=0, session_id=0, responses=_topic_responses(partitions, version))
    buf = bytearray()
    parts: list = []
    body.encode_into(buf, version, parts)
    return 4 + len(buf) + sum(len(p) for p in parts)


class _Everything:
    """Every topic: a follower's fetch without CLUSTER_ACTION."""

    def __contains__(self, name) -> bool:
        return True


def _denied(ctx, fetch_context, from_follower: bool):
    """The topic names this fetch may not read (KafkaApis: CLUSTER_ACTION for a follower, READ per topic for a
    consumer), asked once over every partition the context reads; None without an authorizer (nothing asked)."""
    if ctx.handles.authorizer is None:
        return None
    if from_follower:
        return None if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else _Everything()
    names = [tp.topic for tp, _ in fetch_context.partitions() if tp.topic is not None]
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, names)
    return frozenset(names) - readable or None


async def _woken(waiters, keys: list[tuple[str, int]], timeout: float) -> bool:
    """Park until an append to one of ``keys`` (True) or ``timeout`` seconds (False)."""
    waiter = waiters.register(keys)
    try:
        await wait_for(asyncio.shield(waiter), timeout)
        return True
    except asyncio.TimeoutError:
        return False
    finally:
        waiters.unregister(keys, waiter)


def _still_quiet(replicas, replica_id: int, replica_epoch: int, now_ms: int, denied=None):
    """A session's check of a partition marked quiet (``CachedPartition.quiet``): the same partition, leadership
    and stamp, so reading it would answer nothing new; a follower's fetch of it is recorded as caught up, as
    the read would have. A partition this fetch may not read is not quiet: it answers its error."""
    hosted = replicas.partitions

    def still_quiet(mark) -> bool:
        part, info, stamp = mark
        if hosted.get((part.topic, part.index)) is not part or part.info is not info or part.log.end_state() != stamp:
            return False
        if denied is not None and part.topic in denied:
            return False
        return replica_id < 0 or replicas.record_quiet_follower_fetch(part, replica_id, replica_epoch, stamp[0], now_ms)
    return still_quiet


def _topic_of(image, tp: TopicIdPartition, version: int):
    return image.topics_by_id.get(tp.topic_id) if version >= 13 else image.topic(tp.topic)


def _partition_keys(image, tps: list[TopicIdPartition], version: int) -> list[tuple[str, int]]:
    """The long-poll keys: every partition the fetch reads (for an incremental fetch, the whole session)."""
    keys = []
    for tp in tps:
        t = _topic_of(image, tp, version)
        if t is not None:
            keys.append((t.name, tp.partition))
    return keys


def _topic_responses(partitions: list, version: int) -> list[FetchableTopicResponse]:
    """``FetchResponse.of``: consecutive partitions of one topic share a topic entry, in order."""
    out: list[FetchableTopicResponse] = []
    last = None
    for tp, pd in partitions:
        pd.partition_index = tp.partition
        ident = tp.topic_id if version >= 13 else tp.topic
        if not out or ident != last:
            out.append(FetchableTopicResponse(topic=tp.topic if version < 13 else "", topic_id=tp.topic_id))
            last = ident
        out[-1].partitions.append(pd)
    return out


def _replica(req: FetchRequest, version: int) -> tuple[int, int]:
    """(replica id, broker epoch) of a follower's fetch; replica id -1 for a consumer."""
    if version >= 15:
        return req.replica_state.replica_id, req.replica_state.replica_epoch
    return req.replica_id, -1


def _read_all(ctx, req: FetchRequest, version: int, parts: list[tuple[TopicIdPartition, PartitionFetch]],
              replica_id: int, replica_epoch: int, denied=None, max_bytes: int | None = None
              ) -> Generator[None, None, tuple[dict, int, bool, dict, dict]]:
    """Read every partition, in turns (broker/loop_turns.py): returns (response data per
    partition in order, bytes read, whether an error or a preferred read replica answers at once, bytes per topic
    name, quiet marks of the partitions read empty at the end). ``denied``: topic names answered
    TOPIC_AUTHORIZATION_FAILED (None: none); ``max_bytes``: the request's, capped by ``fetch.max.bytes`` and its
    client's fetch quota."""
    image = ctx.image
    from_follower = replica_id >= 0
    # Kafka's clientMetadata: a consumer from v11 on may read from a follower and be sent to one
    client_metadata = version >= 11 and not from_follower
    selector = replica_selector(ctx.config.get("replica.selector.class")) if client_metadata else None
    isolation = FetchIsolation.TXN_COMMITTED if req.isolation_level == READ_COMMITTED else FetchIsolation.HIGH_WATERMARK
    if from_follower:
        isolation = FetchIsolation.LOG_END
    limit = req.max_bytes if max_bytes is None else max_bytes
    min_one = True
    total = 0
    errors = False
    out: dict[TopicIdPartition, PartitionData] = {}
    served: dict[str, int] = {}
    quiet: dict[TopicIdPartition, tuple] = {}
    # where a read ends: the log end for a follower, else the high watermark or the last stable offset
    txn = isolation == FetchIsolation.TXN_COMMITTED
    for n, (tp, fp) in enumerate(parts):
        if n and n % ITEMS_PER_TURN == 0:
            yield  # a full fetch of thousands of partitions (a follower's new session): the loop gets a turn
        topic = _topic_of(image, tp, version)
        pd = PartitionData(partition_index=tp.partition, error_code=0, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1, preferred_read_replica=-1, records=b"",
                           aborted_transactions=None)
        out[tp] = pd
        if denied is not None and (tp.topic in denied if tp.topic is not None else from_follower):
            pd.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # a follower's denial names every partition
            errors = True
            continue
        if topic is None:
            pd.error_code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            errors = True
            continue
        part, pd.error_code = ctx.replicas.leader_partition(topic.name, tp.partition, fp.current_leader_epoch,
                                                            require_leader=not client_metadata)
        if pd.error_code:
            if pd.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and part is not None:
                pd.current_leader = LeaderIdAndEpoch(part.info.leader, part.info.leader_epoch)
            errors = True
            continue
        lg = part.log
        if selector is not None and part.is_leader(ctx.node_id):
            preferred = ctx.replicas.preferred_read_replica(part, selector, req.rack_id, fp.fetch_offset, ctx.listener)
            if preferred is not None:  # no read: the client goes there
                pd.preferred_read_replica = preferred
                pd.high_watermark, pd.log_start_offset = lg.high_watermark, lg.log_start_offset
                pd.last_stable_offset = lg.last_stable_offset
                errors = True
                continue
        if from_follower and replica_id not in part.followers:
            pd.error_code = (ErrorCode.UNKNOWN_LEADER_EPOCH if fp.current_leader_epoch >= 0
                             else ErrorCode.NOT_LEADER_OR_FOLLOWER)
            errors = True
            continue
        stamp = lg.end_state()  # before the read: a change during it shows next time
        leader_end = stamp[0]  # before the read: appends after it do not keep a follower out
        try:
            if from_follower and fp.last_fetched_epoch >= 0:
                diverging = _diverging_epoch(lg, fp)
                if diverging is not None:
                    pd.diverging_epoch = diverging
                    errors = True  # answered now: the follower truncates before it fetches again
                    pd.high_watermark, pd.log_start_offset = lg.high_watermark, lg.log_start_offset
                    pd.last_stable_offset = lg.last_stable_offset
                    continue
            info = lg.read(fp.fetch_offset, min(fp.max_bytes, limit), isolation, min_one)
        except OffsetOutOfRangeError:
            pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            errors = True
        except KafkaError as exc:
            pd.error_code = int(exc.code)
            errors = True
        else:
            pd.aborted_transactions = info.aborted_transactions  # None unless read_committed
            size = info.records.length
            if size:
                pd.records = info.records
                min_one = False
                limit = max(0, limit - size)
                total += size
                served[topic.name] = served.get(topic.name, 0) + size
            elif fp.fetch_offset == (leader_end if from_follower else lg.last_stable_offset if txn
                                     else stamp[1]):
                quiet[tp] = (part, part.info, stamp)
            if from_follower:
                ctx.replicas.record_follower_fetch(part, replica_id, fp.fetch_offset, fp.log_start_offset,
                                                   leader_end, replica_epoch)
        pd.high_watermark = lg.high_watermark
        pd.last_stable_offset = lg.last_stable_offset
        pd.log_start_offset = lg.log_start_offset
    return out, total, errors, served, quiet


def _diverging_epoch(lg, fp) -> EpochEndOffset | None:
    """``Partition.readRecords``: where the leader's log ends for the follower's last fetched epoch, when
    that is not where the follower's log says (OFFSET_OUT_OF_RANGE when the leader cannot tell)."""
    found = lg.end_offset_for_epoch(fp.last_fetched_epoch)
    if found is None or found[0] < 0:
        raise OffsetOutOfRangeError(f"no end offset for the last fetched epoch {fp.last_fetched_epoch}")
    if fp.fetch_offset < lg.log_start_offset:
        raise OffsetOutOfRangeError(f"fetch offset {fp.fetch_offset} is below the log start {lg.log_start_offset}")
    epoch, end_offset = found
    if epoch < fp.last_fetched_epoch or end_offset < fp.fetch_offset:
        return EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return None
