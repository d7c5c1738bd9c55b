"""Fetch: v4-18.

Behaviour (KafkaApis.handleFetchRequest, ReplicaManager.fetchMessages/readFromLog):
* reads return file slices sent with sendfile; only the first partition that returns data may
  exceed ``max_bytes`` (one whole batch), later ones are cut at the remaining budget and the client
  drops a partial tail; an offset inside a batch returns the whole batch;
* long poll: with fewer than ``min_bytes`` available the request parks until an append to one of
  its partitions wakes it (the delayed-fetch purgatory) or ``max_wait_ms`` passes; no polling;
* OFFSET_OUT_OF_RANGE below the log start or past the log end; FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH against ``current_leader_epoch``; UNKNOWN_TOPIC_ID (v13+ ids) and
  UNKNOWN_TOPIC_OR_PARTITION; read_committed reads up to the last stable offset with an empty
  aborted-transactions list; ``preferred_read_replica`` is -1;
* fetch sessions (KIP-227): full requests are answered with session id 0 (no session is created,
  which the protocol allows); an incremental request names a session that does not exist:
  FETCH_SESSION_ID_NOT_FOUND.
* replica fetches (``replica_id``, or ``replica_state`` from v15; Partition.fetchRecords): only from a
  replica of the partition (else UNKNOWN_LEADER_EPOCH with a leader epoch, NOT_LEADER_OR_FOLLOWER without),
  read up to the log end, a ``last_fetched_epoch`` that the leader's epochs do not end where the follower
  thinks answers ``diverging_epoch`` (the follower truncates), and the fetch records the follower's position
  (the high watermark may move).
Not implemented: fetch from a follower (KIP-392), fetch sessions for replica fetchers.
"""

from __future__ import annotations

import asyncio

from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import FetchRequest, FetchResponse
from protocol.generated.messages.fetch_response import (
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
)
from storage.errors import OffsetOutOfRangeError
from storage.log import FetchIsolation

API_KEY = 1
VERSIONS = (4, 18)

READ_COMMITTED = 1


async def handle(ctx, req: FetchRequest) -> FetchResponse:
    version = ctx.version
    if req.session_id != 0 or req.session_epoch not in (0, -1):
        code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND if req.session_id != 0 else ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return FetchResponse(error_code=code, session_id=0, responses=[])
    deadline = ctx.clock.monotonic() + max(0, req.max_wait_ms) / 1000.0
    keys = _partition_keys(ctx, req, version)
    while True:
        responses, total, errors = _read_all(ctx, req, version)
        remaining = deadline - ctx.clock.monotonic()
        if total >= req.min_bytes or errors or remaining <= 0 or not keys:
            metrics = ctx.metrics
            for tr, ft in zip(responses, req.topics):
                served = sum(len(pd.records) for pd in tr.partitions)
                if served:
                    t = _topic_of(ctx.image, ft, version)
                    metrics.fetched(t.name if t is not None else ft.topic, served)
            return FetchResponse(error_code=0, session_id=0, responses=responses)
        waiter = ctx.replicas.fetch_waiters.register(keys)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), remaining)
        except asyncio.TimeoutError:
            pass
        finally:
            ctx.replicas.fetch_waiters.unregister(keys, waiter)


def _topic_of(image, ft, version):
    return image.topics_by_id.get(ft.topic_id) if version >= 13 else image.topic(ft.topic)


def _partition_keys(ctx, req: FetchRequest, version: int) -> list[tuple[str, int]]:
    keys = []
    for ft in req.topics:
        t = _topic_of(ctx.image, ft, version)
        if t is not None:
            keys.extend((t.name, p.partition) for p in ft.partitions)
    return keys


def _replica(req: FetchRequest, version: int) -> tuple[int, int]:
    """(replica id, broker epoch) of a follower's fetch; replica id -1 for a consumer."""
    if version >= 15:
        return req.replica_state.replica_id, req.replica_state.replica_epoch
    return req.replica_id, -1


def _read_all(ctx, req: FetchRequest, version: int) -> tuple[list[FetchableTopicResponse], int, bool]:
    image = ctx.image
    replica_id, replica_epoch = _replica(req, version)
    from_follower = replica_id >= 0
    isolation = FetchIsolation.TXN_COMMITTED if req.isolation_level == READ_COMMITTED else FetchIsolation.HIGH_WATERMARK
    if from_follower:
        isolation = FetchIsolation.LOG_END
    limit = req.max_bytes
    min_one = True
    total = 0
    errors = False
    out = []
    for ft in req.topics:
        topic = _topic_of(image, ft, version)
        tr = FetchableTopicResponse(topic=ft.topic if version < 13 else "", topic_id=ft.topic_id)
        out.append(tr)
        for fp in ft.partitions:
            pd = PartitionData(partition_index=fp.partition, error_code=0, high_watermark=-1, last_stable_offset=-1,
                               log_start_offset=-1, preferred_read_replica=-1, records=b"",
                               aborted_transactions=[] if req.isolation_level == READ_COMMITTED else None)
            tr.partitions.append(pd)
            if topic is None:
                pd.error_code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                errors = True
                continue
            part, pd.error_code = ctx.replicas.leader_partition(topic.name, fp.partition, fp.current_leader_epoch)
            if pd.error_code:
                if pd.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and part is not None:
                    pd.current_leader = LeaderIdAndEpoch(part.info.leader, part.info.leader_epoch)
                errors = True
                continue
            lg = part.log
            if from_follower and replica_id not in part.followers:
                pd.error_code = (ErrorCode.UNKNOWN_LEADER_EPOCH if fp.current_leader_epoch >= 0
                                 else ErrorCode.NOT_LEADER_OR_FOLLOWER)
                errors = True
                continue
            leader_end = lg.log_end_offset  # before the read: appends after it do not keep a follower out
            try:
                if from_follower and fp.last_fetched_epoch >= 0:
                    diverging = _diverging_epoch(lg, fp)
                    if diverging is not None:
                        pd.diverging_epoch = diverging
                        errors = True  # answered now: the follower truncates before it fetches again
                        pd.high_watermark, pd.log_start_offset = lg.high_watermark, lg.log_start_offset
                        pd.last_stable_offset = lg.last_stable_offset
                        continue
                info = lg.read(fp.fetch_offset, min(fp.partition_max_bytes, limit), isolation, min_one)
            except OffsetOutOfRangeError:
                pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                errors = True
            except KafkaError as exc:
                pd.error_code = int(exc.code)
                errors = True
            else:
                size = info.records.length
                if size:
                    pd.records = info.records
                    min_one = False
                    limit = max(0, limit - size)
                    total += size
                if from_follower:
                    ctx.replicas.record_follower_fetch(part, replica_id, fp.fetch_offset, fp.log_start_offset,
                                                       leader_end, replica_epoch)
            pd.high_watermark = lg.high_watermark
            pd.last_stable_offset = lg.last_stable_offset
            pd.log_start_offset = lg.log_start_offset
    return out, total, errors


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
