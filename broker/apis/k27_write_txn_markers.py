"""WriteTxnMarkers: v1-2 (v0 was removed in Kafka 4.0), the leader's side of ending a transaction.

Behaviour (KafkaApis.handleWriteTxnMarkersRequest, ReplicaManager.appendRecords with AppendOrigin.COORDINATOR):
* each marker (producer id, epoch, commit or abort, coordinator epoch) becomes one COMMIT or ABORT control batch
  appended to every partition it names, internal topics included, in the partition's append order (behind the
  Produce requests that arrived first);
* acks=all: NOT_ENOUGH_REPLICAS before the append when the ISR is below ``min.insync.replicas``, and the answer
  waits until the ISR has the marker (REQUEST_TIMED_OUT after ``request.timeout.ms``);
* per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown one, NOT_LEADER_OR_FOLLOWER where this broker does not
  lead; the log's checks give INVALID_PRODUCER_EPOCH (an epoch older than the producer's) and
  TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch); a marker without an open transaction is appended,
  as Kafka does.
* ``__consumer_offsets`` partitions are not appended here: the group coordinator writes the marker in order with
  its own writes and applies it to its pending transactional offsets (KIP-447; GroupCoordinatorService
  .completeTransaction); its COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR answer
  NOT_LEADER_OR_FOLLOWER, so the transaction coordinator retries.
* ``transaction_version`` (v2, KIP-1228; 0 below v2): from 2 on the log takes a marker only with a producer epoch
  strictly above the transaction's (TV2 bumps the epoch at every EndTxn, so an equal epoch is a stale marker of an
  earlier transaction), INVALID_PRODUCER_EPOCH otherwise; an equal epoch with no transaction open is the
  coordinator's retry of a marker already written and succeeds (KAFKA-19999).
Sent by transaction coordinators and by admin clients aborting a hanging transaction (kafka-python's
``abort_transaction``).

Authorization (KafkaApis.handleWriteTxnMarkersRequest, with an authorizer): ALTER on the cluster (an admin's abort;
a denial not logged), else CLUSTER_ACTION (a broker), else every partition of every marker answers
CLUSTER_AUTHORIZATION_FAILED (WriteTxnMarkersRequest.getErrorResponse) and nothing is written.
"""

from __future__ import annotations

import asyncio
import logging

from broker.timeouts import wait_for
from cluster.acls import CLUSTER_NAME, AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from protocol.generated.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from protocol.record_codec import build_end_txn_marker_batch
from protocol.topics import GROUP_METADATA_TOPIC
from storage.log import ORIGIN_COORDINATOR

API_KEY = 27
VERSIONS = (1, 2)

log = logging.getLogger("odradek.txn_markers")


async def handle(ctx, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not (ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False)
            or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)):
        return WriteTxnMarkersResponse(markers=[WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=i, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                for i in t.partition_indexes]) for t in m.topics]) for m in req.markers])
    ctx.request_quota_done = True  # sendResponseExemptThrottle: the transaction coordinator's, not a client's
    deadline = ctx.clock.monotonic() + int(ctx.config.get("request.timeout.ms")) / 1000
    answers = [_append_marker(ctx, marker, deadline) for marker in req.markers]
    return WriteTxnMarkersResponse(markers=list(await asyncio.gather(*answers)))


async def _append_marker(ctx, marker, deadline: float) -> WritableTxnMarkerResult:
    batch = build_end_txn_marker_batch(commit=marker.transaction_result, producer_id=marker.producer_id,
                                       producer_epoch=marker.producer_epoch,
                                       coordinator_epoch=marker.coordinator_epoch, timestamp=ctx.now_ms)
    topics = []
    waits = []
    for t in marker.topics:
        out = WritableTxnMarkerTopicResult(name=t.name, partitions=[])
        topics.append(out)
        for index in t.partition_indexes:
            slot = WritableTxnMarkerPartitionResult(partition_index=index, error_code=0)
            out.partitions.append(slot)
            if t.name == GROUP_METADATA_TOPIC:
                waits.append(_complete_in_group_coordinator(ctx, marker, index, slot, deadline))
            else:
                waits.append(_append_to_partition(ctx, t.name, index, batch, slot, deadline,
                                                  marker.transaction_version if ctx.version >= 2 else 0))
    await asyncio.gather(*waits)
    return WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics)


async def _append_to_partition(ctx, topic: str, index: int, batch: bytes, slot, deadline: float,
                               transaction_version: int) -> None:
    part, code = ctx.replicas.leader_partition(topic, index)
    if code:
        slot.error_code = code
        return
    if len(part.info.isr) < part.log.config.min_insync_replicas:
        slot.error_code = ErrorCode.NOT_ENOUGH_REPLICAS
        return
    prev, me = part.appends.ticket()  # behind the appends that arrived before it
    try:
        if prev is not None:
            await prev
        _, committed = ctx.replicas.append(part, bytearray(batch), ctx.now_ms, origin=ORIGIN_COORDINATOR,
                                           transaction_version=transaction_version)
    except KafkaError as exc:
        slot.error_code = int(exc.code)
        return
    except Exception:
        log.exception("appending a transaction marker to %s-%d failed", topic, index)
        slot.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
        return
    finally:
        if not me.done():
            me.set_result(None)
    if committed is None:
        return
    try:
        await wait_for(asyncio.shield(committed), max(0.0, deadline - ctx.clock.monotonic()))
    except asyncio.TimeoutError:
        slot.error_code = ErrorCode.REQUEST_TIMED_OUT
    except KafkaError as exc:
        slot.error_code = int(exc.code)


_NOT_READY = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)


async def _complete_in_group_coordinator(ctx, marker, index: int, slot, deadline: float) -> None:
    """KafkaApis: with the new group coordinator the marker is fully delegated to it."""
    if ctx.replicas.get(GROUP_METADATA_TOPIC, index) is None:
        slot.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # not hosted here (KafkaApis' getMagic)
        return
    try:
        await ctx.groups.complete_transaction(index, marker.producer_id, marker.producer_epoch,
                                              marker.coordinator_epoch, marker.transaction_result,
                                              max(0.0, deadline - ctx.clock.monotonic()),
                                              marker.transaction_version if ctx.version >= 2 else 0)
    except asyncio.TimeoutError:
        slot.error_code = ErrorCode.REQUEST_TIMED_OUT
    except (GroupError, KafkaError) as exc:
        code = int(exc.code)
        slot.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER if code in _NOT_READY else code
    except Exception:
        log.exception("completing a transaction on %s-%d failed", GROUP_METADATA_TOPIC, index)
        slot.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
