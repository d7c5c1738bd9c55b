"""AlterPartition on the controller (ReplicationControlManager.alterPartition): a partition leader's ISR
change, checked in Kafka's order (stale broker epoch, unknown topic, leader/partition epochs, the ISR's
members: in the replica set, including the leader, registered, unfenced, not shutting down, with matching
broker epochs (v3) else INELIGIBLE_REPLICA); the answer carries the partition as committed. An ISR that
completes a reassignment (KIP-455) also removes the leaving replicas; when that moves the leader away the
answer is NEW_LEADER_ELECTED. A partition named twice in one request gets INVALID_REQUEST for the repeats (Kafka
would decide both against the same state and commit two records); the first is decided as usual."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from cluster.controller.replication_control import alter_partition
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterPartitionRequest, AlterPartitionResponse
from protocol.generated.messages.alter_partition_response import PartitionData, TopicData

API_KEY = 56
VERSIONS = (2, 3)  # topic ids (v2+); v0-1 name topics and predate KRaft's AlterPartition senders


def handle(cctx: ControllerContext, req: AlterPartitionRequest) -> ControllerResult:
    image = cctx.image
    broker = image.brokers.get(req.broker_id)
    if broker is None or broker.broker_epoch != req.broker_epoch:
        return ControllerResult([], AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH, topics=[]))
    records = []
    topics = []
    seen: set[tuple[bytes, int]] = set()
    for t in req.topics:
        out = TopicData(topic_id=t.topic_id, partitions=[])
        topics.append(out)
        for p in t.partitions:
            if (t.topic_id, p.partition_index) in seen:
                out.partitions.append(PartitionData(partition_index=p.partition_index,
                                                    error_code=ErrorCode.INVALID_REQUEST))
                continue
            seen.add((t.topic_id, p.partition_index))
            if cctx.version >= 3:
                isr = [s.broker_id for s in p.new_isr_with_epochs]
                epochs = {s.broker_id: s.broker_epoch for s in p.new_isr_with_epochs}
            else:
                isr, epochs = list(p.new_isr), {}
            code, record, before = alter_partition(
                image, req.broker_id, req.broker_epoch, t.topic_id, p.partition_index, p.leader_epoch,
                p.partition_epoch, isr, lambda r: epochs.get(r, -1), p.leader_recovery_state)
            if code == ErrorCode.UNKNOWN_TOPIC_ID or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                out.partitions.append(PartitionData(partition_index=p.partition_index, error_code=code))
                continue
            if code == ErrorCode.INELIGIBLE_REPLICA and cctx.version < 2:
                code = ErrorCode.OPERATION_NOT_ATTEMPTED
            if code:
                out.partitions.append(PartitionData(partition_index=p.partition_index, error_code=code))
                continue
            if record is not None:
                records.append(record)
            after = image.topics_by_id[t.topic_id].partitions[p.partition_index]
            leader_changes = record is not None and record.leader != -2
            if leader_changes and record.leader != req.broker_id:
                # the change completed a reassignment that moved the leader off this broker: it must learn the
                # new metadata before anything else (Kafka answers NEW_LEADER_ELECTED and commits the record)
                out.partitions.append(PartitionData(partition_index=p.partition_index,
                                                    error_code=ErrorCode.NEW_LEADER_ELECTED))
                continue
            if record is not None and record.isr is not None:
                isr = list(record.isr)  # a completed reassignment took the removed replicas out
            out.partitions.append(PartitionData(
                partition_index=p.partition_index, error_code=0, leader_id=after.leader,
                leader_epoch=after.leader_epoch + (1 if leader_changes else 0), isr=isr,
                leader_recovery_state=p.leader_recovery_state,
                partition_epoch=after.partition_epoch + (1 if record is not None else 0)))
    return ControllerResult(records, AlterPartitionResponse(error_code=0, topics=topics))
