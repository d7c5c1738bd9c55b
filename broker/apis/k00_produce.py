"""Produce: v3-13 served; v0-13 advertised (librdkafka enables compressed produce only when v0 is
listed, KAFKA-18659), v0-2 answered UNSUPPORTED_VERSION per partition.

Behaviour (KafkaApis.handleProduceRequest, ReplicaManager.appendRecords, LogValidator):
* per partition, in Kafka's order: unknown topic; ProduceRequest.validateRecords (header-only: one
  magic-2 batch, CRC, lengths; zstd below v7 UNSUPPORTED_COMPRESSION_TYPE); acks not -1/0/1
  INVALID_REQUIRED_ACKS; not leader; then storage checks sizes (MESSAGE_TOO_LARGE), timestamps,
  idempotent sequences and epochs;
* compacted topics reject keyless records (INVALID_RECORD) and a topic ``compression.type`` other
  than ``producer`` recompresses: both need the records, and run off the event loop;
* appends to one partition happen in request-arrival order (AppendQueue), so pipelined idempotent
  produce requests keep their sequence order;
* acks=all (Partition.appendRecordsToLeader, DelayedProduce): NOT_ENOUGH_REPLICAS before the append when the
  ISR is below ``min.insync.replicas``; then the response waits until the high watermark (the ISR's log
  end) passes the batch, REQUEST_TIMED_OUT once the request's ``timeout_ms`` passes first, and
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below ``min.insync.replicas`` meanwhile;
* acks=0: no response; any error closes the connection, as Kafka does (the response callback's
  ``requestChannel.closeConnection`` on any partition error; the request-level ones,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED and INVALID_PRODUCER_ID_MAPPING, through ``sendErrorOrCloseConnection``:
  acks=0 has no error response);
* v8+: only LogValidator's record-level rejections (RecordValidationException: keyless records on a
  compacted topic, timestamps) carry record_errors and error_message; every other error is a bare
  code, as Kafka's ``new PartitionResponse(error)`` (``hasCustomErrorMessage`` is false for them).
* transactional batches (KafkaApis, ReplicaManager.appendRecords): without a ``transactional_id`` every partition
  answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, from more than one producer id and epoch
  INVALID_PRODUCER_ID_MAPPING; the log checks the rest (a plain batch inside an open transaction
  INVALID_TXN_STATE, an older epoch INVALID_PRODUCER_EPOCH).
* KIP-890 part 1 (``transaction.partition.verification.enable``, ReplicaManager.handleProduceAppend): a producer's
  first transactional batch of a transaction on a partition is appended only once the transactional id's coordinator
  says the partition is in the transaction (``broker/transactions/verifier.py``). The request's partitions take their
  append tickets first, wait for the requests before them, then ask (one question for all of them), then append in
  order with the verification's guard (the log refuses a stale one). Answers, as postVerificationCallback maps them:
  not in the transaction INVALID_TXN_STATE "Partition was not added to the transaction" up to v10 and
  TRANSACTION_ABORTABLE from v11; CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR as NOT_ENOUGH_REPLICAS (retried by every producer, no metadata
  refresh); PRODUCER_FENCED as INVALID_PRODUCER_EPOCH. Off: appended as before, unchecked.
* Transactions V2 (KIP-890 part 2, TransactionSupportedOperation ADD_PARTITION): a transactional Produce v12+ adds
  its partitions to the transaction itself (the client sends no AddPartitionsToTxn): the same question, as an add,
  whether or not verification is enabled. Only where the finalized ``transaction.version`` is 2 or more (clients
  choose v12 only then, TransactionManager#isTransactionV2Enabled); below, UNSUPPORTED_VERSION for every partition,
  as Kafka 4 answers (franz-go#1017). An add that meets CONCURRENT_TRANSACTIONS (the producer's previous transaction
  still writing its markers) is asked again every ``add.partitions.to.txn.retry.backoff.ms`` for up to
  ``add.partitions.to.txn.retry.backoff.max.ms`` before the producer is told (KAFKA-18654). A transactional batch
  with an epoch below the producer's at the partition (a delayed request of an ended transaction) is refused
  INVALID_PRODUCER_EPOCH before any question (KAFKA-18042).
* authorization (KafkaApis.handleProduceRequest, with an authorizer): transactional records need WRITE on the
  TRANSACTIONAL_ID, else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the
  request's error response: for acks=0 none, and the connection is closed); then per partition, after an unknown
  v13+ topic id (UNKNOWN_TOPIC_ID), WRITE on the TOPIC (one question per topic, its partitions as the reference
  count) or TOPIC_AUTHORIZATION_FAILED, before the topic's existence is looked at. Idempotent records need nothing
  more (KIP-679 moved IDEMPOTENT_WRITE to InitProducerId).
"""

from __future__ import annotations

import asyncio
import logging

from broker.errors import CloseConnection
from cluster.acls import AclOperation, ResourceType
from broker.replication.replica_manager import Partition
from broker.apis.log_validator import check_request_records, compression_level, needs_record_pass, record_pass
from broker.timeouts import wait_for
from protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from protocol.generated.messages import ProduceRequest, ProduceResponse
from protocol.records import BATCH_HEADER_SIZE, parse_header
from storage.producer_state import SENTINEL, VerificationGuard
from protocol.generated.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    TopicProduceResponse,
)

API_KEY = 0
VERSIONS = (0, 13)
ADVERTISED = (0, 13)
MIN_SERVED = 3

log = logging.getLogger("odradek.produce")


def _error(index: int, code: int, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                    log_start_offset=-1, error_message=message)


def _transactional_producers(req: ProduceRequest) -> set[tuple[int, int]]:
    """(producer id, epoch) of the request's transactional batches (one batch per partition: its header)."""
    out = set()
    for td in req.topic_data:
        for pd in td.partition_data:
            records = pd.records
            if records is not None and len(records) >= BATCH_HEADER_SIZE and records[16] == 2:
                h = parse_header(records, 0)
                if h.is_transactional and h.has_producer_id:
                    out.add((h.producer_id, h.producer_epoch))
    return out


def _every_partition(req: ProduceRequest, version: int, code: int) -> ProduceResponse:
    """One error for every partition of the request (KafkaApis' sendErrorResponseMaybeThrottle; no message: the
    error's default one is not sent, ApiError.fromThrowable)."""
    return ProduceResponse(responses=[
        TopicProduceResponse(name=td.name if version < 13 else "", topic_id=td.topic_id,
                             partition_responses=[_error(pd.index, code) for pd in td.partition_data])
        for td in req.topic_data])


async def handle(ctx, req: ProduceRequest) -> ProduceResponse | None:
    version = ctx.version
    txn_producers = _transactional_producers(req)
    if txn_producers and (req.transactional_id is None or not ctx.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)):
        if req.acks == 0:  # ProduceRequest.getErrorResponse is null: sendErrorOrCloseConnection closes
            raise CloseConnection("acks=0 produce without TRANSACTIONAL_ID authorization; closing the connection")
        return _every_partition(req, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if len(txn_producers) > 1:  # ReplicaManager.handleProduceAppend throws InvalidPidMappingException, which
        # KafkaApis.handle answers with the request's error response: none for acks=0, the connection is closed
        if req.acks == 0:
            raise CloseConnection("acks=0 produce with more than one transactional producer id; closing the connection")
        return _every_partition(req, version, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    release = _hold(ctx, req.acks)
    if release is None:
        return await _produce(ctx, req, version, txn_producers)
    try:
        return await _produce(ctx, req, version, txn_producers)
    finally:
        release()


def _hold(ctx, acks: int):
    """For a client under a produce quota (its byte rate, or its request time unless acks=0): hold the connection's
    later requests until this one's response callback has recorded it and muted the connection if it is over
    (``_throttle``). Kafka's Processor handles one request of a connection at a time, so the requests a producer
    pipelined behind this one wait out its throttle; odradek reads ahead and starts them at once, and one reaching
    the gate while this one awaits (its replication, a thread, its verification) would be appended unthrottled.
    The release, or None (no quota applies: nothing held)."""
    quotas = ctx.handles.quotas
    if ctx.hold is None or quotas is None or not (quotas.produce.enabled or (quotas.request.enabled and acks != 0)):
        return None
    from broker.security.throttling import user_of

    user, client_id = user_of(ctx.principal), ctx.client_id or ""
    if (quotas.produce.enabled and quotas.produce.bound(user, client_id) is not None) or \
            (acks != 0 and quotas.request.enabled and quotas.request.bound(user, client_id) is not None):
        return ctx.hold()
    return None


async def _produce(ctx, req: ProduceRequest, version: int,
                   txn_producers: set[tuple[int, int]]) -> ProduceResponse | None:
    add_partition = bool(txn_producers) and version >= 12
    if add_partition and ctx.txns.transaction_version < 2:
        _throttle(ctx, req.acks)  # KIP-890's answer comes through the response callback: the quotas recorded
        if req.acks == 0:  # the response callback's errorInResponse: closeConnection
            raise CloseConnection("acks=0 produce v12+ without transaction.version 2; closing the connection")
        return _every_partition(req, version, ErrorCode.UNSUPPORTED_VERSION)
    image = ctx.image
    replicas = ctx.replicas
    topics_out: list[TopicProduceResponse] = []
    if version >= 13:
        by_id = image.topics_by_id
        names = [(t.name if t is not None else None) for t in (by_id.get(td.topic_id) for td in req.topic_data)]
    else:
        names = [td.name for td in req.topic_data]
    # filterByAuthorized over the topic entries whose name is known (a v13 id unknown here is UNKNOWN_TOPIC_ID);
    # None: no authorizer, every topic writable (the hot path asks nothing)
    writable = None if ctx.handles.authorizer is None else ctx.filter_authorized(
        AclOperation.WRITE, ResourceType.TOPIC, [n for n in names if n is not None])
    # take every partition's append ticket before the first await: arrival order is append order
    work = []
    for td, name in zip(req.topic_data, names):
        topic = image.topic(name) if name is not None else None
        out = TopicProduceResponse(name=td.name if version < 13 else "", topic_id=td.topic_id)
        topics_out.append(out)
        for pd in td.partition_data:
            if version < MIN_SERVED:
                out.partition_responses.append(_error(pd.index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            if name is None:
                out.partition_responses.append(_error(pd.index, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            if writable is not None and name not in writable:
                out.partition_responses.append(_error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic is None:
                out.partition_responses.append(_error(pd.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            part = replicas.get(topic.name, pd.index)
            if part is None:
                out.partition_responses.append(_error(pd.index, replicas.missing_error(topic.name, pd.index)))
                continue
            try:
                check_request_records(pd.records, version)  # KafkaApis: before ReplicaManager sees the request
            except KafkaError as exc:
                out.partition_responses.append(_error(pd.index, int(exc.code)))
                continue
            if req.acks not in (-1, 0, 1):
                out.partition_responses.append(_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if not part.is_leader(ctx.node_id):
                resp = _error(pd.index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                resp.current_leader = LeaderIdAndEpoch(part.info.leader, part.info.leader_epoch)
                out.partition_responses.append(resp)
                continue
            if req.acks == -1 and len(part.info.isr) < part.log.config.min_insync_replicas:
                # Partition.appendRecordsToLeader: not even attempted with too few in-sync replicas
                out.partition_responses.append(_error(pd.index, ErrorCode.NOT_ENOUGH_REPLICAS))
                continue
            slot = _error(pd.index, 0)
            out.partition_responses.append(slot)
            work.append((part, pd.records, slot, part.appends.ticket()))
    errors = False
    waiting: list[tuple[Partition, PartitionProduceResponse, asyncio.Future]] = []  # acks=all: until committed
    txns = ctx.txns if txn_producers else None
    verify = txns is not None and (txns.verification_enabled or add_partition) and bool(work)
    guards: dict[int, VerificationGuard | int] = {}
    try:
        if verify:  # the appends run in the verification's callback in Kafka: not this request's time
            guards = await ctx.park(_verify(ctx, req, version, work, next(iter(txn_producers)), add_partition))
        for part, records, slot, (prev, me) in work:
            try:
                if prev is not None:
                    await prev
                guard = guards.get(id(slot), SENTINEL)
                if type(guard) is int:  # not verified: nothing appended
                    _verification_error(slot, guard, version)
                    errors = True
                    continue
                committed = await _append(ctx, part, records, slot, req, guard)
                if committed is not None and req.acks == -1:
                    waiting.append((part, slot, committed))
            except KafkaError as exc:
                _fill_error(slot, exc, version)
            except Exception:
                log.exception("append to %s-%d failed", part.topic, part.index)
                slot.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
            finally:
                if not me.done():
                    me.set_result(None)
            if slot.error_code:
                errors = True
    finally:
        for _, _, _, (_, me) in work:
            if not me.done():
                me.set_result(None)
    deadline = ctx.clock.monotonic() + max(0, req.timeout_ms) / 1000
    if waiting:
        ctx.work_done()  # DelayedProduce: the wait for replication is the purgatory's, not request time
    for part, slot, committed in waiting:  # Kafka's DelayedProduce: complete when every partition has, or
        try:                               # the request's timeout_ms passes
            await wait_for(asyncio.shield(committed), max(0.0, deadline - ctx.clock.monotonic()))
        except asyncio.TimeoutError:
            slot.error_code = ErrorCode.REQUEST_TIMED_OUT
        except KafkaError as exc:
            _fill_error(slot, exc, version)
        else:
            if len(part.maximal_isr) < part.log.config.min_insync_replicas:
                # checkEnoughReplicasReachOffset: appended, but the ISR shrank below min.insync.replicas meanwhile
                slot.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    _throttle(ctx, req.acks)
    if req.acks == 0:
        if errors or any(p.error_code for t in topics_out for p in t.partition_responses):
            raise CloseConnection("acks=0 produce failed; closing the connection as Kafka does")
        return None
    return ProduceResponse(responses=topics_out)


def _throttle(ctx, acks: int) -> None:
    """KafkaApis.handleProduceRequest's response callback: the request's size is recorded against
    producer_byte_rate and its time against request_percentage (not with acks=0: "the request quota is not enforced
    if acks == 0", nor by dispatch after); the answer carries the larger of the two throttle times, the connection
    throttled on the quota with the larger one only (before ``_hold``'s release: the requests behind stay held)."""
    bandwidth_ms = ctx.record_quota("produce", ctx.request.size)
    ctx.request_quota_done = True
    request_ms = 0 if acks == 0 else ctx.record_request_quota()
    if bandwidth_ms > request_ms:
        ctx.apply_throttle("produce", bandwidth_ms)
    elif request_ms > 0:
        ctx.apply_throttle("request", request_ms)


async def _verify(ctx, req: ProduceRequest, version: int, work: list, producer: tuple[int, int],
                  add_partition: bool = False) -> dict[int, VerificationGuard | int]:
    """KIP-890 (maybeStartTransactionVerificationForPartitions): per partition slot (``id(slot)``), the guard its
    append must carry, or the error it gets instead; partitions with the producer's transaction open already are
    not asked about. Waits for the earlier requests' appends to these partitions first, so a producer's pipelined
    requests see its first batch appended and are not verified again."""
    producer_id, producer_epoch = producer
    for _, _, _, (prev, _) in work:
        if prev is not None:
            await prev
    out: dict[int, VerificationGuard | int] = {}
    asked: dict[tuple[str, int], int] = {}
    now_ms = ctx.now_ms
    for part, records, slot, _ in work:
        h = parse_header(records, 0)
        if not (h.is_transactional and h.has_producer_id):
            continue
        try:
            guard = part.log.maybe_start_transaction_verification(producer_id, h.base_sequence, producer_epoch,
                                                                  now_ms)
        except KafkaError as exc:
            out[id(slot)] = int(exc.code)
            continue
        if guard is not SENTINEL:
            out[id(slot)] = guard
            asked[(part.topic, part.index)] = id(slot)
    if asked:
        errors = await ctx.txns.verifier.add_or_verify(req.transactional_id, producer_id, producer_epoch,
                                                       list(asked), version > 10, add_partition, ctx.config,
                                                       ctx.clock.monotonic)
        for tp, code in errors.items():
            if tp in asked:
                out[asked[tp]] = int(code)
    return out


_VERIFICATION_RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                     ErrorCode.NOT_COORDINATOR})


def _verification_error(slot: PartitionProduceResponse, code: int, version: int) -> None:
    """ReplicaManager's postVerificationCallback: the coordinator's answer as producers understand it."""
    message = None
    if code == ErrorCode.INVALID_TXN_STATE:
        message = "Partition was not added to the transaction"
    elif code in _VERIFICATION_RETRIABLE:
        # old clients may not retry these correctly; NOT_ENOUGH_REPLICAS is retried and refreshes no metadata
        message = ("Unable to verify the partition has been added to the transaction. Underlying error: "
                   f"{ErrorCode(code).name}")
        code = ErrorCode.NOT_ENOUGH_REPLICAS
    slot.error_code = int(code)
    slot.base_offset = -1
    if version >= 8:
        slot.error_message = message


async def _append(ctx, part, records, slot: PartitionProduceResponse, req: ProduceRequest,
                  guard: VerificationGuard = SENTINEL) -> asyncio.Future | None:
    """Append one partition's batch; the result is what acks=all waits on (None: committed already)."""
    cfg = part.log.config
    buf = records
    if needs_record_pass(records, cfg.compact, cfg.compression_type):
        try:
            buf = await asyncio.to_thread(record_pass, bytes(records), cfg.compact, cfg.compression_type,
                                          f"{part.topic}-{part.index}", compression_level(cfg, cfg.compression_type))
        except InvalidRecordError as exc:
            exc.record_level = True  # LogValidator's RecordValidationException
            raise
    elif isinstance(records, memoryview) and not records.readonly:
        buf = records  # a slice of the request frame: offsets are stamped in place, no copy
    else:
        buf = bytearray(records)
    info, committed = ctx.replicas.append(part, buf, ctx.now_ms, verification_guard=guard)
    slot.base_offset = info.first_offset
    slot.log_append_time_ms = info.log_append_time if info.log_append_time >= 0 else -1
    slot.log_start_offset = part.log.log_start_offset
    return committed


def _fill_error(slot: PartitionProduceResponse, exc: KafkaError, version: int) -> None:
    """Kafka's LogAppendResult: record errors and a message only for record-level validation failures
    (``exc.record_errors``, a list of (index, message), names the records when the validator knows them)."""
    slot.error_code = int(exc.code)
    slot.base_offset = -1
    if version >= 8 and (exc.code == ErrorCode.INVALID_TIMESTAMP or getattr(exc, "record_level", False)):
        errors = getattr(exc, "record_errors", None) or [(0, str(exc))]
        slot.record_errors = [BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                              for i, m in errors]
        slot.error_message = str(exc)
