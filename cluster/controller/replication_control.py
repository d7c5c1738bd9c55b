"""The parts of Kafka's ReplicationControlManager that move leadership: when a broker is fenced, shuts down,
unregisters or comes back, and when an admin asks for an election (ElectLeaders) or moves replicas
(AlterPartitionReassignments, KIP-455).

Pure functions of the metadata image: they return PartitionChangeRecords (built by PartitionChangeBuilder)
and per-partition results; committing them is the quorum's job.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from cluster.controller.partition_change import NO_LEADER, Election, PartitionChangeBuilder
from cluster.controller.partition_reassignment import (
    InvalidReplicaAssignment, PartitionReassignmentReplicas, PartitionReassignmentRevert,
)
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode
from protocol.generated.metadata import PartitionChangeRecord

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
PREFERRED, UNCLEAN = 0, 1  # ElectLeadersRequest.ElectionType


def is_active(image: MetadataImage, broker_id: int) -> bool:
    b = image.brokers.get(broker_id)
    return b is not None and b.active


def partitions_with_broker_in_isr(image: MetadataImage, broker_id: int) -> Iterator[tuple[TopicInfo, PartitionInfo]]:
    for topic in image.topics_by_name.values():
        for p in topic.partitions.values():
            if broker_id in p.isr:
                yield topic, p


def partitions_with_no_leader(image: MetadataImage) -> Iterator[tuple[TopicInfo, PartitionInfo]]:
    for topic in image.topics_by_name.values():
        for p in topic.partitions.values():
            if p.leader == NO_LEADER:
                yield topic, p


def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
    return any(p.leader == broker_id for t in image.topics_by_name.values() for p in t.partitions.values())


def unclean_election_enabled(image: MetadataImage, topic: str, broker_default: bool) -> bool:
    value = image.topic_config(topic).get(UNCLEAN_LEADER_ELECTION_ENABLE)
    return broker_default if value is None else str(value).strip().lower() == "true"


def leader_and_isr_updates(image: MetadataImage, partitions: Iterable[tuple[TopicInfo, PartitionInfo]],
                           unclean_default: bool, broker_to_remove: int = NO_LEADER,
                           broker_to_add: int = NO_LEADER) -> list[PartitionChangeRecord]:
    """ReplicationControlManager.generateLeaderAndIsrUpdates: ``broker_to_remove`` leaves every ISR and may not
    lead; ``broker_to_add`` may lead even though the image still shows it fenced (it is being unfenced)."""

    def acceptable(r: int) -> bool:
        return r != broker_to_remove and (r == broker_to_add or is_active(image, r))

    records = []
    for topic, p in partitions:
        builder = PartitionChangeBuilder(p, topic.topic_id, p.partition, acceptable)
        if unclean_election_enabled(image, topic.name, unclean_default):
            builder.set_election(Election.UNCLEAN)
        builder.set_target_isr([r for r in p.isr if r != broker_to_remove])
        record = builder.build()
        if record is not None:
            records.append(record)
    return records


def elect_leaders(image: MetadataImage, election_type: int, partitions: Iterable[tuple[str, int]] | None,
                  ) -> tuple[list[PartitionChangeRecord], list[tuple[str, int, int, str | None]]]:
    """ElectLeaders (ReplicationControlManager.electLeaders): for each (topic, partition) or, with None, every
    partition whose leader is not its preferred replica: (records, [(topic, partition, error, message)])."""
    explicit = partitions is not None
    if partitions is None:  # every partition; only those needing an election are reported
        partitions = [(t.name, p.partition) for t in image.topics_by_name.values() for p in t.partitions.values()]
    records: list[PartitionChangeRecord] = []
    results = []
    for name, pid in partitions:
        topic = image.topic(name)
        p = topic.partitions.get(pid) if topic is not None else None
        if p is None:
            results.append((name, pid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"No such topic or partition {name}-{pid}"))
            continue
        code, message, record = _elect_one(image, topic, p, election_type)
        if record is not None:
            records.append(record)
        if explicit or code != ErrorCode.ELECTION_NOT_NEEDED:
            results.append((name, pid, code, message))
    return records, results


def _elect_one(image: MetadataImage, topic: TopicInfo, p: PartitionInfo, election_type: int):
    """ReplicationControlManager.electLeader."""
    unclean = election_type == UNCLEAN
    builder = PartitionChangeBuilder(p, topic.topic_id, p.partition, lambda r: is_active(image, r))
    builder.set_election(Election.UNCLEAN if unclean else Election.PREFERRED)
    record = builder.build()
    if record is None or record.leader in (p.leader, -2):
        if unclean:
            if p.leader != NO_LEADER:
                return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", None
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, (
                f"Unable to perform unclean leader election for {topic.name}-{p.partition}"), None
        if p.leader == p.replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", None
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, (
            f"Failed to elect leader for {topic.name}-{p.partition}: the preferred replica "
            f"{p.replicas[0]} is not eligible"), None
    return 0, None, record


def broker_epoch_of(image: MetadataImage, broker_id: int) -> int | None:
    b = image.brokers.get(broker_id)
    return None if b is None else b.broker_epoch


def alter_partition(image: MetadataImage, broker_id: int, broker_epoch: int,
                    topic_id: bytes, partition_id: int, leader_epoch: int, partition_epoch: int,
                    new_isr: list[int], isr_broker_epochs: Callable[[int], int] | None = None,
                    leader_recovery_state: int = 0) -> tuple[int, PartitionChangeRecord | None, PartitionInfo | None]:
    """AlterPartition from a partition leader (ReplicationControlManager.alterPartition): Kafka's checks in
    order, then the ISR change. Returns (error, record or None, the partition as it will be)."""
    b = image.brokers.get(broker_id)
    if b is None or b.broker_epoch != broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH, None, None
    topic = image.topics_by_id.get(topic_id)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_ID, None, None
    p = topic.partitions.get(partition_id)
    if p is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
    # ReplicationControlManager.validateAlterPartitionData, in its order
    if leader_epoch > p.leader_epoch or partition_epoch > p.partition_epoch:
        return ErrorCode.NOT_CONTROLLER, None, None  # this controller is behind the leader's view
    if leader_epoch < p.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, None, None
    if broker_id != p.leader:
        return ErrorCode.INVALID_REQUEST, None, None
    if partition_epoch < p.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION, None, None
    if any(r not in p.replicas for r in new_isr) or len(set(new_isr)) != len(new_isr) or not new_isr:
        return ErrorCode.INVALID_REQUEST, None, None
    if p.leader not in new_isr:
        return ErrorCode.INVALID_REQUEST, None, None
    if leader_recovery_state == 1 and len(new_isr) > 1:
        return ErrorCode.INVALID_REQUEST, None, None
    if p.leader_recovery_state == 0 and leader_recovery_state == 1:
        return ErrorCode.INVALID_REQUEST, None, None
    for r in new_isr:
        rb = image.brokers.get(r)
        epoch = isr_broker_epochs(r) if isr_broker_epochs is not None else -1
        if rb is None or rb.in_controlled_shutdown or rb.fenced or (epoch != -1 and epoch != rb.broker_epoch):
            return ErrorCode.INELIGIBLE_REPLICA, None, None
    builder = PartitionChangeBuilder(p, topic_id, partition_id, lambda r: is_active(image, r) or r == broker_id)
    builder.set_target_isr(new_isr)
    builder.set_target_leader_recovery_state(leader_recovery_state)
    record = builder.build()
    return 0, record, p


# ---- partition reassignment (KIP-455) ---------------------------------------------------------------------------

class _ReassignmentError(Exception):
    """A partition's error; ``message`` None where Kafka's is its error's generic one (ApiError.fromThrowable)."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


ReassignmentTargets = Iterable[tuple[str, Iterable[tuple[int, "list[int] | None"]]]]
ReassignmentResults = list[tuple[str, list[tuple[int, int, "str | None"]]]]


def alter_partition_reassignments(image: MetadataImage, topics: ReassignmentTargets, unclean_default: bool,
                                  allow_replication_factor_change: bool = True,
                                  ) -> tuple[list[PartitionChangeRecord], ReassignmentResults]:
    """AlterPartitionReassignments (ReplicationControlManager.alterPartitionReassignments): per topic, per
    (partition, target replicas or None to cancel): (records, [(topic, [(partition, error, message)])]). A
    partition that fails changes nothing; the others' records commit together."""
    records: list[PartitionChangeRecord] = []
    results = []
    for name, partitions in topics:
        out = []
        for pid, target in partitions:
            try:
                record = _alter_partition_reassignment(image, name, pid, target, unclean_default,
                                                       allow_replication_factor_change)
            except _ReassignmentError as exc:
                out.append((pid, exc.code, exc.message))
                continue
            if record is not None:
                records.append(record)
            out.append((pid, 0, None))
        results.append((name, out))
    return records, results


def _alter_partition_reassignment(image: MetadataImage, name: str, pid: int, target: list[int] | None,
                                  unclean_default: bool, allow_rf_change: bool) -> PartitionChangeRecord | None:
    topic = image.topic(name)
    if topic is None:
        raise _ReassignmentError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    p = topic.partitions.get(pid)
    if p is None:
        raise _ReassignmentError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{pid}.")
    if target is None:
        return _cancel_partition_reassignment(image, topic, p, unclean_default)
    return _change_partition_reassignment(image, topic, p, target, allow_rf_change)


def _cancel_partition_reassignment(image: MetadataImage, topic: TopicInfo, p: PartitionInfo, unclean_default: bool
                                   ) -> PartitionChangeRecord | None:
    """ReplicationControlManager.cancelPartitionReassignment: back to the original replicas."""
    if not p.is_reassigning:
        raise _ReassignmentError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
    try:
        revert = PartitionReassignmentRevert(list(p.replicas), list(p.isr), list(p.removing_replicas),
                                             list(p.adding_replicas))
    except InvalidReplicaAssignment as exc:
        raise _ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None
    unclean = unclean_election_enabled(image, topic.name, unclean_default)
    if revert.unclean and not unclean:
        raise _ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unable to revert partition assignment for {topic.name}:{p.partition} because it "
                                 "would require an unclean leader election.")
    builder = PartitionChangeBuilder(p, topic.topic_id, p.partition, lambda r: is_active(image, r))
    if unclean:
        builder.set_election(Election.UNCLEAN)
    return (builder.set_target_isr(revert.isr).set_target_replicas(revert.replicas)
            .set_target_removing([]).set_target_adding([]).build())


def validate_manual_partition_assignment(image: MetadataImage, replicas: list[int]) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment: non-empty, registered brokers, no repeats."""
    if not replicas:
        raise _ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(replicas):
        if broker_id not in image.brokers:
            raise _ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes broker {broker_id}, but no such "
                                     "broker is registered.")
        if broker_id == previous:
            raise _ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes the broker {broker_id} more than "
                                     "once.")
        previous = broker_id


def _change_partition_reassignment(image: MetadataImage, topic: TopicInfo, p: PartitionInfo, target: list[int],
                                   allow_rf_change: bool) -> PartitionChangeRecord | None:
    """ReplicationControlManager.changePartitionReassignment: the replicas become target + removing with the
    adding / removing lists set (stage 1); the builder completes it at once when the ISR already holds the
    target (a reordering, or only removals), else AlterPartition does once the new replicas have joined."""
    validate_manual_partition_assignment(image, target)
    if not allow_rf_change:  # KIP-860 (v1): the target set of an ongoing reassignment counts as the current one
        current = (set(p.replicas) | set(p.adding_replicas)) - set(p.removing_replicas) if p.is_reassigning \
            else set(p.replicas)
        if len(current) != len(target):
            raise _ReassignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                     f"The replication factor is changed from {len(current)} to {len(target)}")
    reassignment = PartitionReassignmentReplicas.of(list(p.replicas), list(target))
    builder = PartitionChangeBuilder(p, topic.topic_id, p.partition, lambda r: is_active(image, r))
    if reassignment.replicas != list(p.replicas):
        builder.set_target_replicas(reassignment.replicas)
    if reassignment.removing:
        builder.set_target_removing(reassignment.removing)
    if reassignment.adding:
        builder.set_target_adding(reassignment.adding)
    return builder.build()


def list_partition_reassignments(image: MetadataImage, topics: Iterable[tuple[str, Iterable[int]]] | None
                                 ) -> list[tuple[str, list[PartitionInfo]]]:
    """ListPartitionReassignments (ReplicationControlManager.listPartitionReassignments): the ongoing
    reassignments among the named partitions (None: all); unknown topics and partitions are left out."""
    out = []
    if topics is None:
        topics = [(t.name, list(t.partitions)) for t in image.topics_by_name.values()]
    for name, pids in topics:
        topic = image.topic(name)
        if topic is None:
            continue
        ongoing = [p for p in (topic.partitions.get(pid) for pid in pids) if p is not None and p.is_reassigning]
        if ongoing:
            out.append((topic.name, ongoing))
    return out
