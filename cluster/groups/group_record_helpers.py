"""Classic-group and offset records (Kafka's GroupCoordinatorRecordHelpers), shared by the classic and the
consumer-protocol coordinators."""

from __future__ import annotations

from cluster.groups.group_classic import EMPTY_ASSIGNMENT, ClassicGroup
from cluster.groups.group_records import CoordinatorRecord
from cluster.groups.offsets import OffsetAndMetadata
from protocol.generated.coordinator import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey
from protocol.generated.coordinator.group_metadata_value import MemberMetadata


def group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> CoordinatorRecord:
    """GroupCoordinatorRecordHelpers.newGroupMetadataRecord (GroupMetadataValue v3)."""
    members = []
    for m in group.members.values():
        if group.protocol_name is None:
            raise AssertionError("Attempted to write non-empty group metadata with no defined protocol.")
        members.append(MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name), assignment=assignment.get(m.member_id, EMPTY_ASSIGNMENT)))
    return CoordinatorRecord(GroupMetadataKey(group=group.group_id), GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=group.protocol_name,
        leader=group.leader_id, current_state_timestamp=group.current_state_timestamp, members=members))


def empty_group_metadata_record(group: ClassicGroup) -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group=group.group_id), GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=0, protocol=None, leader=None,
        current_state_timestamp=group.current_state_timestamp, members=[]))


def offset_commit_record(group_id: str, topic: str, partition: int, om: OffsetAndMetadata) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group=group_id, topic=topic, partition=partition), om.to_value(),
                             om.value_version())


def offset_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group=group_id, topic=topic, partition=partition), None)
