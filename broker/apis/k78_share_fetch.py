"""ShareFetch: v1-2 (KIP-932; v0 was the preview, gone since Kafka 4.1).

Behaviour (KafkaApis.handleShareFetchRequest, SharePartitionManager.newContext/fetchMessages, DelayedShareFetch;
the share partitions: broker/share/share_partition_manager.py):
* GROUP READ on the group, else GROUP_AUTHORIZATION_FAILED (top level); then the request's checks
  (``validate_share_fetch_request``: a final epoch with partitions to fetch or forget, an epoch below -1, v2's
  IsRenewAck with fetch parameters: INVALID_REQUEST) and the share session (``ShareSessionCache.new_context``:
  acknowledgements with epoch 0 INVALID_REQUEST, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
  SHARE_SESSION_LIMIT_REACHED), each answered at the top level with no partitions; when answering,
  INVALID_SHARE_SESSION_EPOCH at the top level (no fetched partitions, the acknowledgements' results still in it)
  if another connection's request moved the session on meanwhile (Kafka's "possible duplicate request" check,
  throttled or not);
* TOPIC READ per topic, else TOPIC_AUTHORIZATION_FAILED for its partitions; an unknown topic id UNKNOWN_TOPIC_ID
  (one log line for the request naming it);
* piggybacked acknowledgements first (per partition: bad batches INVALID_REQUEST, records not held by the member
  INVALID_RECORD_STATE, a share partition not cached here UNKNOWN_TOPIC_OR_PARTITION, a failed share-state write
  its error as ``fetchPersisterError`` maps it), each answered in ``acknowledge_error_code`` once its share-state
  write committed; a
  final request (-1) then closes the session and releases the member's records, fetching nothing;
* the fetch: every partition of the session (a new session: the request's), on its leader only
  (NOT_LEADER_OR_FOLLOWER with the current leader otherwise): the share partition's next records read with
  ``Log.read`` (up to the last stable offset with the group's ``share.isolation.level`` read_committed, aborted
  batches archived), whole batches acquired (v2 ShareAcquireMode 1, record_limit: at most MaxRecords), the
  records sent as the file slice of the acquired batches (sendfile) with their ``AcquiredRecords``;
  ``max_bytes`` over the whole answer with the first partition's first batch always whole, MaxRecords shared out;
* long poll (DelayedShareFetch): records are acquired once ``min_bytes`` are readable from the partitions' next
  fetch offsets (the log's bytes, as Kafka measures), else parked until an append, a release, an acknowledgement,
  a lock expiry or a lost leadership on one of the partitions, then measured again; when ``max_wait_ms`` ends,
  whatever can be acquired is. A share partition fenced by a write meanwhile is left out of the answer, without
  an error. A share partition used here for the first time has its state read first, within the same wait: one
  still being read when it ends is left out of the answer, without an error (Kafka skips LEADER_NOT_AVAILABLE), and
  a failed read answers its error as ``fetchPersisterError`` maps it.
* ShareFetch checks neither group membership nor assignment, as Kafka's.
* ``max_bytes`` is capped by the broker's ``fetch.max.bytes`` and what the client's ``consumer_byte_rate`` lets one
  fetch take (``getMaxValueInQuotaWindow``), ``min_bytes`` by that (handleFetchFromShareFetchRequest);
* client quotas (processShareFetchResponse): every answer past the share session's creation records the request's
  time (until it parked; the piggybacked acknowledgements' and share partitions' state writes and reads are not
  counted, Kafka's handler does not wait for them) against ``request_percentage`` and the answer's size against
  ``consumer_byte_rate``; over either it answers no records with the larger throttle time (the bytes taken back),
  the acknowledgements' results still in it. The records acquired for it stay acquired, as Kafka's, until their
  acquisition lock times out.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from broker.config import FETCH_MAX_BYTES_DEFAULT
from broker.security.throttling import user_of
from cluster.acls import AclOperation, ResourceType
from cluster.share.share_partition import AcknowledgementBatch, ShareError
from cluster.share.share_session import validate_acknowledgement_batches, validate_share_fetch_request
from cluster.share.share_session import ShareSessionKey, next_epoch, rotate_round_robin
from protocol.errors import ErrorCode
from protocol.generated.messages import ShareFetchRequest, ShareFetchResponse
from protocol.generated.messages.share_fetch_response import (
    AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
)

API_KEY = 78
VERSIONS = (1, 2)

DEFAULT_MAX_RECORDS = 500  # a v1 request without MaxRecords (ShareFetchRequest.DEFAULT max.poll.records)
RECORD_LIMIT = 1  # ShareAcquireMode: 0 batch_optimized, 1 record_limit (v2, KIP-1206)

log = logging.getLogger("odradek.share.fetch")


def ack_batches(batches) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches]


async def acknowledge_all(ctx, mgr, group_id: str, member_id: str, acks: dict, readable, is_renew: bool
                          ) -> dict[tuple, int]:
    """``handleAcknowledgements``: each partition's acknowledgements, answered once written; per partition code."""
    image = ctx.image

    async def one(tp, batches) -> int:
        topic = image.topics_by_id.get(tp[0])
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if readable is not None and topic.name not in readable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        code = validate_acknowledgement_batches(batches, is_renew)
        if code:
            return code
        # SharePartitionManager.acknowledge: only a share partition cached here (else UNKNOWN_TOPIC_OR_PARTITION)
        entry, _part, code = await mgr.share_partition(group_id, tp[0], topic.name, tp[1], create=False)
        if code:
            return code
        return await mgr.acknowledge(entry, member_id, batches)

    keys = list(acks)
    # one partition (a commit_sync's usual ShareAcknowledge): awaited here, no task in between
    codes = [await one(keys[0], acks[keys[0]])] if len(keys) == 1 else \
        await asyncio.gather(*(one(tp, acks[tp]) for tp in keys))
    out = dict(zip(keys, (int(c) for c in codes)))
    topics: dict[str, bool] = {}
    for tp, code in out.items():
        topic = image.topics_by_id.get(tp[0])
        if topic is not None:
            topics[topic.name] = topics.get(topic.name, False) or bool(code)
        if code:
            log.info("share acknowledgement of member %s of group %r on %s-%d refused: %s", member_id, group_id,
                     _topic_id_str(tp[0]), tp[1], ErrorCode(code).name)
    ctx.metrics.share_acknowledged(topics)
    return out


def readable_topics(ctx, names) -> set | None:
    """TOPIC READ per topic (one question per name); None without an authorizer."""
    if ctx.handles.authorizer is None:
        return None
    return ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, sorted(set(names)))


async def handle(ctx, req: ShareFetchRequest) -> ShareFetchResponse:
    mgr = ctx.handles.share_partitions
    group_id = req.group_id or ""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return ShareFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    version = ctx.version
    is_renew = bool(req.is_renew_ack) if version >= 2 else False
    record_limit = version >= 2 and req.share_acquire_mode == RECORD_LIMIT
    image = ctx.image
    fetch: list[tuple] = []
    acks: dict[tuple, list[AcknowledgementBatch]] = {}
    for t in req.topics:
        for p in t.partitions:
            tp = (t.topic_id, p.partition_index)
            fetch.append(tp)
            if p.acknowledgement_batches:
                acks.setdefault(tp, []).extend(ack_batches(p.acknowledgement_batches))
    forget = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    epoch = req.share_session_epoch
    member_id = req.member_id
    try:
        if req.share_acquire_mode not in (0, 1):
            raise ShareError(ErrorCode.INVALID_REQUEST, f"unknown share acquire mode {req.share_acquire_mode}")
        validate_share_fetch_request(epoch, sum(1 for tp in fetch if tp not in acks), len(forget), is_renew,
                                     req.max_wait_ms, req.min_bytes, req.max_bytes, req.max_records)
        context = mgr.sessions.new_context(group_id, fetch, forget, member_id, epoch, bool(acks),
                                           ctx.connection_id)
    except ShareError as exc:
        log.info("ShareFetch of member %s of group %r (epoch %d) from %s refused: %s %s", member_id, group_id,
                 epoch, ctx.client_id, ErrorCode(exc.code).name, exc)
        return ShareFetchResponse(error_code=exc.code, error_message=str(exc))
    lock_ms = mgr.lock_duration_ms(group_id)
    names = {}
    for tp in (*fetch, *context.partitions):
        topic = image.topics_by_id.get(tp[0])
        if topic is not None:
            names[tp[0]] = topic.name
    readable = readable_topics(ctx, names.values())
    # Kafka's handler starts the acknowledgements and goes on to fetch: their writes are not its request time
    ack_codes = await ctx.aside(acknowledge_all(ctx, mgr, group_id, member_id, acks, readable, is_renew)) \
        if acks else {}

    out: dict[tuple, PartitionData] = {}
    pd = partial(_partition_data, out)

    if context.final:
        session = mgr.sessions.get(ShareSessionKey(group_id, member_id))
        if session is not None:
            mgr.sessions.remove(session.key)
            await ctx.park(mgr.release_session(session))
        return _answer(ctx, out, ack_codes, lock_ms, [], context)
    if is_renew:
        return _answer(ctx, out, ack_codes, lock_ms, [], context)

    unknown = [tp for tp in fetch if tp[0] not in names]
    if unknown:
        # the request's own bad input, logged once: the session keeps the partitions and answers them again
        log.info("ShareFetch of member %s of group %r from %s: partitions %s refused: UNKNOWN_TOPIC_ID", member_id,
                 group_id, ctx.client_id, ", ".join(f"{_topic_id_str(t)}-{p}" for t, p in unknown))
    max_bytes, min_bytes = _fetch_bytes(ctx, req)
    deadline = ctx.clock.monotonic() + max(0, req.max_wait_ms) / 1000.0
    # a share partition's first use reads its state: Kafka's handler does not wait for it
    # read in an order moved on by the epoch, as SharePartitionManager.fetchMessages: no partition starved
    rotated = rotate_round_robin(context.partitions, epoch)
    entries = await ctx.aside(_share_partitions(ctx, mgr, group_id, rotated, names, readable, pd,
                                                deadline))
    started = ctx.clock.monotonic()
    sent: list[tuple[str, int]] = []
    await _fetch(ctx, mgr, req, group_id, member_id, entries, out, record_limit, deadline, max_bytes, min_bytes,
                 sent)
    mgr.share_fetch_done(group_id, len(context.partitions), sum(1 for d in out.values() if d.acquired_records),
                         (ctx.clock.monotonic() - started) * 1000)
    ctx.metrics.share_fetched(_fetched_topics(context.partitions, names, out))
    return _answer(ctx, out, ack_codes, lock_ms, sent, context)


def _partition_data(out: dict, tp: tuple) -> PartitionData:
    """The answer's entry of a (topic id, partition), made empty on first use."""
    got = out.get(tp)
    if got is None:
        got = out[tp] = PartitionData(partition_index=tp[1], current_leader=LeaderIdAndEpoch(-1, -1),
                                      records=b"", acquired_records=[])
    return got


def _fetch_bytes(ctx, req: ShareFetchRequest) -> tuple[int, int]:
    """handleFetchFromShareFetchRequest: (max bytes, min bytes) of the fetch, ``min(min(request.maxBytes,
    config.fetchMaxBytes), maxQuotaWindowBytes)`` and the request's min bytes at most that."""
    max_bytes = min(req.max_bytes, ctx.config.get("fetch.max.bytes", FETCH_MAX_BYTES_DEFAULT))
    quotas = ctx.handles.quotas
    if quotas is not None and quotas.fetch.enabled:
        cap = quotas.fetch.max_value_in_window(user_of(ctx.principal), ctx.client_id or "")
        if cap < max_bytes:
            max_bytes = int(cap)
    return max_bytes, min(req.min_bytes, max_bytes)


def _answer(ctx, out: dict, ack_codes: dict, lock_ms: int, sent: list, context) -> ShareFetchResponse:
    """processShareFetchResponse, then the acknowledgements' results merged in: the request's thread time is
    recorded against ``request_percentage`` and the answer's size (``ShareFetchContext.responseSize``, the
    fetched partitions) against ``consumer_byte_rate``, once (dispatch records nothing more). Over either, the
    answer has no fetched partitions (``throttleResponse``) and the larger throttle time, the size is taken back
    (``unrecordQuotaSensor``) and the connection throttled on the quota with the larger time; the leaders named
    by the fetch's NOT_LEADER_OR_FOLLOWER answers are still sent, as Kafka's. Throttled or not, a subsequent
    request whose share session another request moved on meanwhile answers INVALID_SHARE_SESSION_EPOCH without
    fetched partitions (``context.response_error``; its records stay acquired until their lock times out).
    ``sent``: (topic, bytes) read, the bytes out once answered."""
    fetched = out  # the fetch's partitions only: the acknowledgements' are merged in below
    now_ms = ctx.clock.now_ms()
    request_ms = ctx.record_request_quota(now_ms)
    quotas = ctx.handles.quotas
    fetch_on = quotas is not None and quotas.fetch.enabled
    user, client_id = user_of(ctx.principal), ctx.client_id or ""
    size = _response_size(fetched, ctx.version) if fetch_on else 0
    bandwidth_ms = quotas.fetch.record(user, client_id, size, now_ms) if fetch_on else 0
    throttle_ms = max(bandwidth_ms, request_ms)
    leaders = [d.current_leader.leader_id for d in fetched.values() if d.current_leader.leader_id >= 0]
    error = context.response_error()
    if error:
        session = context.session
        log.debug("Subsequent share session %s/%s expected epoch %d, but got %d. Possible duplicate request.",
                  session.key.group_id, session.key.member_id, next_epoch(context.epoch), session.epoch)
    if throttle_ms > 0:
        if fetch_on:
            quotas.fetch.unrecord(user, client_id, size, now_ms)
        ctx.apply_throttle("fetch" if bandwidth_ms > request_ms else "request", throttle_ms)
        out = {}
    elif error:
        out = {}
    else:
        for topic, n in sent:
            ctx.metrics.fetched(topic, n)

    _answer_acks(ctx, ack_codes, partial(_partition_data, out))
    response = _response(ctx, out, lock_ms, leaders)
    response.throttle_time_ms = throttle_ms
    response.error_code = error
    return response


def _response_size(partitions: dict, version: int) -> int:
    """``ShareFetchResponse.sizeOf``: 4 + the size of a response carrying ``partitions`` (records as sent)."""
    body = _response_body(partitions)
    buf = bytearray()
    parts: list = []
    ShareFetchResponse(error_code=0, responses=body).encode_into(buf, version, parts)
    return 4 + len(buf) + sum(len(p) for p in parts)


def _topic_id_str(topic_id) -> str:
    return topic_id.hex() if isinstance(topic_id, bytes) else str(topic_id)


def _fetched_topics(partitions, names: dict, out: dict) -> dict[str, bool]:
    """The topics a ShareFetch read, each failed if one of its partitions answered an error (BrokerTopicMetrics'
    TotalShareFetchRequestsPerSec and FailedShareFetchRequestsPerSec)."""
    topics: dict[str, bool] = {}
    for tp in partitions:
        name = names.get(tp[0])
        if name is not None:
            d = out.get(tp)
            topics[name] = topics.get(name, False) or bool(d is not None and d.error_code)
    return topics


def _answer_acks(ctx, ack_codes: dict, pd) -> None:
    for tp, code in ack_codes.items():
        d = pd(tp)
        d.acknowledge_error_code = code
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            d.current_leader = LeaderIdAndEpoch(*current_leader(ctx, tp[0], tp[1]))


def current_leader(ctx, topic_id: bytes, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition as this node's image has it; (-1, -1) if unknown."""
    topic = ctx.image.topics_by_id.get(topic_id)
    info = topic.partitions.get(index) if topic is not None else None
    return (info.leader, info.leader_epoch) if info is not None else (-1, -1)


def leader_endpoints(ctx, leaders, cls) -> list:
    """``NodeEndpoints``: where the current leaders named by NOT_LEADER_OR_FOLLOWER answers are, on this listener
    (the client moves there without a Metadata round trip)."""
    out = []
    image = ctx.image
    for node_id in sorted(set(leaders)):
        b = image.brokers.get(node_id)
        ep = b.endpoint(ctx.listener) if b is not None else None
        if ep is not None:
            out.append(cls(node_id=node_id, host=ep.host, port=ep.port, rack=b.rack))
    return out


def _response_body(out: dict) -> list[ShareFetchableTopicResponse]:
    responses: list[ShareFetchableTopicResponse] = []
    by_topic: dict[bytes, ShareFetchableTopicResponse] = {}
    for (tid, _p), d in out.items():
        t = by_topic.get(tid)
        if t is None:
            t = by_topic[tid] = ShareFetchableTopicResponse(topic_id=tid, partitions=[])
            responses.append(t)
        t.partitions.append(d)
    return responses


def _response(ctx, out: dict, lock_ms: int, leaders: list) -> ShareFetchResponse:
    leaders = [*leaders, *(d.current_leader.leader_id for d in out.values() if d.current_leader.leader_id >= 0)]
    return ShareFetchResponse(error_code=0, acquisition_lock_timeout_ms=lock_ms, responses=_response_body(out),
                              node_endpoints=leader_endpoints(ctx, leaders, NodeEndpoint))


async def _share_partitions(ctx, mgr, group_id: str, partitions, names: dict, readable, pd, deadline: float
                            ) -> list:
    """The session's partitions this request reads: ``(tp, entry)``; the others answer their error. The share
    partitions are created (their state read) together; one still initializing when the request's wait ends is
    left out without an error (``handleInitializationException`` skips LEADER_NOT_AVAILABLE: the fetch completes
    at its max wait without it)."""
    async def one(tp):
        name = names.get(tp[0])
        if name is None:
            return None, ErrorCode.UNKNOWN_TOPIC_ID
        if readable is not None and name not in readable:
            return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        entry, _part, code = await mgr.share_partition(group_id, tp[0], name, tp[1],
                                                       wait_s=max(0.0, deadline - ctx.clock.monotonic()))
        return entry, code

    cached = mgr.partitions
    if all((e := cached.get((group_id, tp[0], tp[1]))) is not None and e.sp.active for tp in partitions):
        # every share partition initialized (every fetch after the first): none waits, so each is looked up in
        # place, without a task per partition and the loop turns their gather costs
        found = [await one(tp) for tp in partitions]
    else:  # one or more still to be read: their initializations run together
        found = await asyncio.gather(*(one(tp) for tp in partitions))
    entries = []
    for tp, (entry, code) in zip(partitions, found):
        if code == ErrorCode.LEADER_NOT_AVAILABLE:
            continue  # still initializing
        if code:
            d = pd(tp)
            d.error_code = code
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                d.current_leader = LeaderIdAndEpoch(*current_leader(ctx, tp[0], tp[1]))
            continue
        entries.append((tp, entry))
    return entries


def _acquire_all(mgr, member_id: str, entries: list, pd, record_limit: bool, read_committed: bool,
                 max_records: int, batch_size: int, max_bytes: int, sent: list) -> int:
    """One pass over the partitions: acquire and attach records (``sent``: (topic, bytes) of each); the bytes
    acquired."""
    budget = max_bytes
    records_left = max_records
    min_one = True
    acquired = 0
    for tp, e in entries:
        if records_left <= 0:
            break
        got = mgr.acquire(e, member_id, budget, min_one, records_left, batch_size, record_limit, read_committed)
        if got is None:
            continue
        records, acq, size = got
        d = pd(tp)
        d.records = records
        d.acquired_records = [AcquiredRecords(r.first_offset, r.last_offset, r.delivery_count) for r in acq.records]
        budget = max(0, budget - size)
        min_one = False
        records_left -= acq.count
        acquired += size
        sent.append((e.topic, size))
    return acquired


async def _fetch(ctx, mgr, req, group_id: str, member_id: str, entries: list, out: dict, record_limit: bool,
                 deadline: float, max_bytes: int, min_bytes: int, sent: list) -> None:
    """DelayedShareFetch: acquire now, or park until something changes on a partition (or ``deadline``, the
    request's max wait) and acquire again; ``max_bytes``/``min_bytes``: the request's, capped (``_fetch_bytes``).

    A share partition dropped meanwhile for a lost leadership answers NOT_LEADER_OR_FOLLOWER at once. One fenced
    by a write (``fencedSharePartitionHandler``: a newer state epoch, GROUP_ID_NOT_FOUND, ...) is never acquirable
    again (``maybeAcquireFetchLock`` refuses a fenced share partition): it is left out of the answer, without an
    error, and the fetch goes on waiting for its other partitions or its max wait, as Kafka 4.2's."""
    pd = partial(_partition_data, out)
    read_committed = mgr.settings(group_id).share_isolation_level == "read_committed"
    max_records = req.max_records if req.max_records > 0 else DEFAULT_MAX_RECORDS
    batch_size = req.batch_size if req.batch_size > 0 else max_records
    if not entries:
        return
    keys = [(e.topic, tp[1]) for tp, e in entries]
    for tp, _ in entries:
        pd(tp)
    while True:
        dropped = [(tp, e) for tp, e in entries if mgr.partitions.get((group_id, tp[0], tp[1])) is not e]
        if dropped:
            lost = False
            for tp, e in dropped:
                if e.leadership_lost:  # answered now with its error and the leader the image knows
                    d = pd(tp)
                    d.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    d.current_leader = LeaderIdAndEpoch(*current_leader(ctx, tp[0], tp[1]))
                    lost = True
                else:  # fenced by a write: not acquirable, not answered
                    out.pop(tp, None)
            if lost:
                return
            entries = [(tp, e) for tp, e in entries if mgr.partitions.get((group_id, tp[0], tp[1])) is e]
            keys = [(e.topic, tp[1]) for tp, e in entries]
        remaining = deadline - ctx.clock.monotonic()
        # min_bytes above 1: records are acquired only once that much is readable, or when the wait ends
        ready = min_bytes <= 1 or remaining <= 0 or sum(
            mgr.readable_bytes(e, max_bytes, read_committed) for _, e in entries) >= min_bytes
        if ready and _acquire_all(mgr, member_id, entries, pd, record_limit, read_committed, max_records,
                                  batch_size, max_bytes, sent):
            return
        if remaining <= 0:
            return
        ctx.work_done()  # parked (DelayedShareFetch): the first pass was this request's own work
        await mgr.wait(keys, remaining)  # woken or timed out: measured (and at the end acquired) again
