"""Share groups (KIP-932, Kafka 4.2): ShareGroupHeartbeat, the share-state partition metadata and
ShareGroupDescribe, beside the consumer groups of ``group_consumer``.

Ported from Kafka's GroupMetadataManager (shareGroupHeartbeat, shareGroupLeave, shareGroupFenceMember,
initializedAssignmentPending, subscribedTopicsChangeMap, maybeCreateInitializeShareGroupStateRequest,
initializeShareGroupState, uninitializeShareGroupState, shareGroupBuildPartitionDeleteRequest, the ShareGroup*
replay methods), modern/share/ShareGroup, ShareGroupMember and ShareGroupAssignmentBuilder.

As for consumer groups, the heartbeat computes ``__consumer_offsets`` records (types 10-15) against the current
state and the state changes only by replaying them, while running and while loading alike; the adapter appends
them before answering. Members make their own member ids (KIP-1082) and join with epoch 0; a share member has no
partitions to revoke, so it moves straight to its target assignment at the target epoch. The assignor
(``share_assignor.SimpleAssignor``) only assigns partitions whose share state the share coordinator has
initialized. A heartbeat whose group subscribes to partitions not yet initialized records them as initializing
(``ShareGroupStatePartitionMetadata``) and outputs an :class:`InitializeShareState` (start offset -1, state epoch =
the group epoch) for the adapter to send; its answer comes back through :meth:`ShareGroupManager.initialized`
(or :meth:`ShareGroupManager.uninitialized` on failure), and the next heartbeat assigns the new partitions.
Partitions initializing for longer than ``group.share.initialize.retry.interval.ms`` are asked again.

The group metadata hash (``ShareGroupMetadataValue.MetadataHash``, Kafka 4.1+) is a hash of the subscribed topics'
names, ids and partition counts; it is compared only with hashes this coordinator computed, so it need not equal
Kafka's Murmur3 value (a group moved from a Kafka coordinator would bump its epoch once).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import hashlib
import logging
import struct
from collections import Counter
from typing import Any, Callable

from cluster.groups.assignors import GroupSpec, MemberSpec, PartitionAssignorError, subscription_is_homogeneous
from cluster.groups.group_classic import GroupError
from cluster.groups.group_config import DynamicGroupConfig, GroupConfig, group_settings
from cluster.groups.group_records import CoordinatorRecord
from cluster.groups.share_assignor import SimpleAssignor
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.coordinator import (
    ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue, ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue, ShareGroupMetadataKey, ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue,
)
from protocol.generated.coordinator import share_group_current_member_assignment_value as cur_v
from protocol.generated.coordinator import share_group_state_partition_metadata_value as spm_v
from protocol.generated.coordinator import share_group_target_assignment_member_value as ta_v
from protocol.generated.messages import (
    AlterShareGroupOffsetsResponse, DeleteShareGroupStateRequest, InitializeShareGroupStateRequest,
    ShareGroupHeartbeatResponse,
)
from protocol.generated.messages import alter_share_group_offsets_response as asgo
from protocol.generated.messages import delete_share_group_offsets_response as dsgo
from protocol.generated.messages import delete_share_group_state_request as dsgs
from protocol.generated.messages import initialize_share_group_state_request as isgs
from protocol.generated.messages import share_group_describe_response as sgd
from protocol.generated.messages import share_group_heartbeat_response as sgh

log = logging.getLogger("odradek.groups")

SHARE_PROTOCOL_TYPE = "share"  # ShareGroup.PROTOCOL_TYPE
LEAVE_GROUP_MEMBER_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36  # a UUID's string form: what clients make (KIP-1082)
UNINITIALIZED_START_OFFSET = -1  # PartitionFactory.UNINITIALIZED_START_OFFSET: share.auto.offset.reset decides
STABLE = 0  # MemberState.STABLE: share members are always stable (nothing to revoke)

Assignment = dict[bytes, set[int]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Assignment = dataclasses.field(default_factory=dict)

    def copy(self, **changes) -> "ShareGroupMember":
        m = copy.deepcopy(self)
        for k, v in changes.items():
            setattr(m, k, v)
        return m

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == STABLE and self.member_epoch == epoch


def _norm(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


@dataclasses.dataclass
class InitTopic:
    """One topic of ShareGroupStatePartitionMetadata (Kafka's InitMapValue)."""

    name: str
    partitions: set[int]
    timestamp: int = -1


@dataclasses.dataclass
class SharePartitionMetadata:
    """ShareGroupStatePartitionMetadata of one group: which share partitions have their state initialized, which
    are being initialized (since ``timestamp``) and which topics' state is being deleted."""

    initializing: dict[bytes, InitTopic] = dataclasses.field(default_factory=dict)
    initialized: dict[bytes, InitTopic] = dataclasses.field(default_factory=dict)
    deleting: dict[bytes, str] = dataclasses.field(default_factory=dict)

    def all_topics(self) -> dict[bytes, set[int]]:
        out: dict[bytes, set[int]] = {}
        for m in (self.initialized, self.initializing):
            for t, v in m.items():
                out.setdefault(t, set()).update(v.partitions)
        return out


@dataclasses.dataclass(frozen=True)
class InitializeShareState:
    """An InitializeShareGroupState the adapter sends to the share coordinator once the heartbeat's records are
    written: every partition at ``state_epoch`` and start offset -1. Its answer goes to
    :meth:`GroupCoordinatorShard.share_group_initialized` / ``share_group_uninitialized``."""

    group_id: str
    state_epoch: int
    topics: tuple[tuple[bytes, tuple[int, ...]], ...]
    # AlterShareGroupOffsets: ((topic id, partition), start offset) pairs; others start at -1
    start_offsets: tuple[tuple[tuple[bytes, int], int], ...] = ()

    def partitions(self) -> dict[bytes, set[int]]:
        return {t: set(ps) for t, ps in self.topics}

    def to_request(self) -> InitializeShareGroupStateRequest:
        starts = dict(self.start_offsets)
        return InitializeShareGroupStateRequest(group_id=self.group_id, topics=[
            isgs.InitializeStateData(topic_id=t, partitions=[
                isgs.PartitionData(partition=p, state_epoch=self.state_epoch,
                                   start_offset=starts.get((t, p), UNINITIALIZED_START_OFFSET))
                for p in ps]) for t, ps in self.topics])


@dataclasses.dataclass(frozen=True)
class DeleteShareState:
    """A DeleteShareGroupState for a share group being deleted (DeleteGroups): the adapter sends it and, once it
    succeeded, deletes the group itself (GroupCoordinatorService.deleteGroups' share step)."""

    group_id: str
    topics: tuple[tuple[bytes, tuple[int, ...]], ...]

    def to_request(self) -> DeleteShareGroupStateRequest:
        return DeleteShareGroupStateRequest(group_id=self.group_id, topics=[
            dsgs.DeleteStateData(topic_id=t, partitions=[dsgs.PartitionData(partition=p) for p in ps])
            for t, ps in self.topics])


def _frozen(topics: dict[bytes, set[int]]) -> tuple[tuple[bytes, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(topics.items()) if ps)


class ShareGroup:
    type = "share"
    protocol_type = SHARE_PROTOCOL_TYPE

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_hash = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.state = ShareGroupState.EMPTY
        self.metadata_refresh_key = None  # (image offset, group epoch) the metadata hash was computed at

    # ---- queries ---------------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return self.state is ShareGroupState.EMPTY

    def state_string(self) -> str:
        return str(self.state)

    def in_states(self, states: set[str]) -> bool:
        return str(self.state).lower() in states

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def get_member(self, member_id: str, create: bool) -> ShareGroupMember:
        m = self.members.get(member_id)
        if m is not None:
            return m
        if not create:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                           f"{self.group_id}.")
        return ShareGroupMember(member_id)

    def subscribed_topic_names(self, old: ShareGroupMember | None = None, new: ShareGroupMember | None = None,
                               removed: frozenset[str] = frozenset()) -> Counter:
        """ModernGroup.computeSubscribedTopicNames: the topics the members subscribe to, with ``old`` replaced
        by ``new`` and the ``removed`` members left out."""
        c: Counter = Counter()
        for mid, m in self.members.items():
            if mid in removed or (old is not None and mid == old.member_id):
                continue
            c.update(m.subscribed_topic_names)
        if new is not None:
            c.update(new.subscribed_topic_names)
        return c

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    # offsets belong to consumer groups: ShareGroup.validateOffsetCommit/Fetch/Delete
    def _not_consumer(self):
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def validate_offset_commit(self, *args) -> None:
        self._not_consumer()

    def validate_offset_fetch(self, *args) -> None:
        self._not_consumer()

    def validate_offset_delete(self) -> None:
        self._not_consumer()

    def validate_delete_group(self) -> None:
        if self.state is not ShareGroupState.EMPTY:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def offset_expiration_basis(self):
        return None  # a share group holds no offsets

    def is_simple_group(self) -> bool:
        return False

    def should_expire(self) -> bool:
        """An empty share group is never deleted by the offsets cleanup: its share state must be deleted first
        (DeleteGroups)."""
        return False

    # ---- replay-time mutations -------------------------------------------------------------------
    def update_member(self, new: ShareGroupMember) -> None:
        self.members[new.member_id] = new
        self.maybe_update_state()

    def remove_member(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self.maybe_update_state()

    def maybe_update_state(self) -> None:
        self.state = ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY


# ---- records (GroupCoordinatorRecordHelpers.newShareGroup*) -----------------------------------------------------

def member_subscription_record(gid: str, m: ShareGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(ShareGroupMemberMetadataKey(group_id=gid, member_id=m.member_id),
                             ShareGroupMemberMetadataValue(rack_id=m.rack_id, client_id=m.client_id,
                                                           client_host=m.client_host,
                                                           subscribed_topic_names=list(m.subscribed_topic_names)))


def epoch_record(gid: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return CoordinatorRecord(ShareGroupMetadataKey(group_id=gid),
                             ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def target_assignment_record(gid: str, mid: str, a: Assignment) -> CoordinatorRecord:
    return CoordinatorRecord(ShareGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid),
                             ShareGroupTargetAssignmentMemberValue(topic_partitions=[
                                 ta_v.TopicPartition(topic_id=t, partitions=sorted(ps))
                                 for t, ps in sorted(a.items()) if ps]))


def target_assignment_epoch_record(gid: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(ShareGroupTargetAssignmentMetadataKey(group_id=gid),
                             ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def current_assignment_record(gid: str, m: ShareGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(ShareGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m.member_id),
                             ShareGroupCurrentMemberAssignmentValue(
                                 member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                                 state=m.state, assigned_partitions=[
                                     cur_v.TopicPartitions(topic_id=t, partitions=sorted(ps))
                                     for t, ps in sorted(m.assigned.items()) if ps]))


def remove_member_records(gid: str, mid: str) -> list[CoordinatorRecord]:
    """Current assignment, target assignment and subscription tombstones, in Kafka's order."""
    return [CoordinatorRecord(ShareGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid), None),
            CoordinatorRecord(ShareGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid), None),
            CoordinatorRecord(ShareGroupMemberMetadataKey(group_id=gid, member_id=mid), None)]


def state_partition_metadata_record(gid: str, meta: SharePartitionMetadata) -> CoordinatorRecord:
    def infos(m: dict[bytes, InitTopic]):
        return [spm_v.TopicPartitionsInfo(topic_id=t, topic_name=v.name, partitions=sorted(v.partitions),
                                          create_timestamp=v.timestamp)
                for t, v in sorted(m.items()) if v.partitions]
    return CoordinatorRecord(ShareGroupStatePartitionMetadataKey(group_id=gid),
                             ShareGroupStatePartitionMetadataValue(
                                 initializing_topics=infos(meta.initializing),
                                 initialized_topics=infos(meta.initialized),
                                 deleting_topics=[spm_v.TopicInfo(topic_id=t, topic_name=n)
                                                  for t, n in sorted(meta.deleting.items())]))


def _from_tps(tps) -> Assignment:
    return {t.topic_id: set(t.partitions) for t in tps if t.partitions}


def _combine(a: dict[bytes, InitTopic], b: dict[bytes, InitTopic]) -> dict[bytes, InitTopic]:
    """GroupMetadataManager.combineInitMaps: the union, ``b``'s name and timestamp winning."""
    out = {t: InitTopic(v.name, set(v.partitions), v.timestamp) for t, v in a.items()}
    for t, v in b.items():
        cur = out.get(t)
        if cur is None:
            out[t] = InitTopic(v.name, set(v.partitions), v.timestamp)
        else:
            out[t] = InitTopic(v.name, cur.partitions | v.partitions, v.timestamp)
    return out


def _minus(a: dict[bytes, InitTopic], topics: dict[bytes, set[int]]) -> dict[bytes, InitTopic]:
    out = {}
    for t, v in a.items():
        left = v.partitions - topics.get(t, set())
        if left:
            out[t] = InitTopic(v.name, left, v.timestamp)
    return out


# ---- the manager ----------------------------------------------------------------------------------------------

class ShareGroupManager:
    """The share-group half of a GroupCoordinatorShard, built from the same narrow collaborators as
    ``ConsumerGroupManager`` (config, clock, image, timer, the shard's group table, ``append``), plus
    ``emit(request)``, which adds an :class:`InitializeShareState` / :class:`DeleteShareState` to the operation's
    result."""

    def __init__(self, *, config: GroupConfig, now_ms: Callable[[], int], image: Callable[[], Any], timer,
                 groups: dict[str, Any], remove_group: Callable[[str], None], append: Callable[..., None],
                 emit: Callable[[Any], None]) -> None:
        self.config = config
        self._now = now_ms
        self._image = image
        self._timer = timer
        self._groups = groups
        self._remove_group = remove_group
        self._append = append
        self._emit_request = emit
        self.assignor = SimpleAssignor()  # tests may put a mock assignor here
        # group id -> ShareGroupStatePartitionMetadata (GroupMetadataManager.shareGroupStatePartitionMetadata)
        self.state_metadata: dict[str, SharePartitionMetadata] = {}
        # heartbeats that bumped a group epoch (the ShareGroupRebalances sensor: share-group-rebalance-count)
        self.rebalances = 0

    # ---- metadata -------------------------------------------------------------------------------
    def _image_topics(self):
        image = self._image()
        return {} if image is None else image.topics_by_name

    def _image_key(self):
        image = self._image()
        return None if image is None else getattr(image, "offset", id(image))

    def topic_name(self, topic_id: bytes) -> str | None:
        image = self._image()
        t = None if image is None else image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    def metadata_hash(self, names) -> int:
        """The subscribed topics that exist, hashed with their ids and partition counts (0: none)."""
        topics = self._image_topics()
        h = hashlib.blake2b(digest_size=8)
        n = 0
        for name in sorted(names):
            t = topics.get(name)
            if t is None:
                continue
            n += 1
            b = name.encode()
            h.update(struct.pack(">H", len(b)) + b + bytes(t.topic_id) + struct.pack(">i", len(t.partitions)))
        return 0 if n == 0 else struct.unpack(">q", h.digest())[0]

    # ---- timers ---------------------------------------------------------------------------------
    @staticmethod
    def _session_key(gid: str, mid: str) -> str:
        return f"share-session-timeout-{gid}-{mid}"

    def group_config(self, gid: str) -> DynamicGroupConfig:
        """The group's share.session.timeout.ms / share.heartbeat.interval.ms (GROUP configs) over the broker's."""
        return group_settings(self.config, self._image(), gid)

    def schedule_session_timeout(self, gid: str, mid: str) -> None:
        self._timer.schedule(self._session_key(gid, mid), self._now(), self.group_config(gid).share_session_timeout_ms,
                             lambda: self._fence_member_operation(gid, mid, "the member session expired."))

    def _fence_member_operation(self, gid: str, mid: str, reason: str) -> None:
        group = self._groups.get(gid)
        if group is None or group.type != "share" or mid not in group.members:
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s", gid, mid, reason)
        self._fence_member(group, group.members[mid])

    # ---- records into the state -----------------------------------------------------------------
    def _emit(self, records: list[CoordinatorRecord]) -> None:
        self._append(records, replay=True)

    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one ShareGroup* record (the replay methods of GroupMetadataManager)."""
        handler = {
            ShareGroupMetadataKey: self._replay_metadata,
            ShareGroupStatePartitionMetadataKey: self._replay_state_partition_metadata,
            ShareGroupMemberMetadataKey: self._replay_member_metadata,
            ShareGroupTargetAssignmentMemberKey: self._replay_target_member,
            ShareGroupTargetAssignmentMetadataKey: self._replay_target_metadata,
            ShareGroupCurrentMemberAssignmentKey: self._replay_current_assignment,
        }[type(record.key)]
        handler(record.key, record.value)

    def _replay_metadata(self, key, value) -> None:
        gid = key.group_id
        if value is not None:
            g = self._persisted_group(gid, True)
            g.group_epoch = value.epoch
            g.metadata_hash = value.metadata_hash
            g.maybe_update_state()
        elif self._persisted_group(gid, False) is not None:
            self._remove_group(gid)

    def _replay_state_partition_metadata(self, key, value) -> None:
        if value is None:
            self.state_metadata.pop(key.group_id, None)
            return

        def topics(infos):
            return {i.topic_id: InitTopic(i.topic_name, set(i.partitions), i.create_timestamp)
                    for i in infos if i.partitions}
        self.state_metadata[key.group_id] = SharePartitionMetadata(
            initializing=topics(value.initializing_topics), initialized=topics(value.initialized_topics),
            deleting={i.topic_id: i.topic_name for i in value.deleting_topics})

    def _replay_member_metadata(self, key, value) -> None:
        g = self._persisted_group(key.group_id, value is not None)
        if g is None:
            return
        if value is not None:
            old = g.get_member(key.member_id, True)
            g.update_member(old.copy(rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                                     subscribed_topic_names=tuple(value.subscribed_topic_names)))
        elif key.member_id in g.members:
            g.remove_member(key.member_id)

    def _replay_target_member(self, key, value) -> None:
        g = self._persisted_group(key.group_id, value is not None)
        if g is None:
            return
        if value is not None:
            g.target_assignment[key.member_id] = _from_tps(value.topic_partitions)
        else:
            g.target_assignment.pop(key.member_id, None)

    def _replay_target_metadata(self, key, value) -> None:
        g = self._persisted_group(key.group_id, value is not None)
        if g is not None:
            g.assignment_epoch = value.assignment_epoch if value is not None else -1

    def _replay_current_assignment(self, key, value) -> None:
        g = self._persisted_group(key.group_id, value is not None)
        if g is None:
            return
        if value is not None:
            old = g.get_member(key.member_id, True)
            g.update_member(old.copy(member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                                     state=value.state, assigned=_from_tps(value.assigned_partitions)))
        elif key.member_id in g.members:
            g.update_member(g.members[key.member_id].copy(
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={}))

    def _persisted_group(self, gid: str, create: bool) -> ShareGroup | None:
        """getOrMaybeCreatePersistedShareGroup: a record of another group type's group is ignored."""
        g = self._groups.get(gid)
        if g is None:
            if not create:
                return None
            g = ShareGroup(gid)
            self._groups[gid] = g
            return g
        if g.type == "share":
            return g
        if g.type == "classic" and g.is_simple_group() and create:
            g = ShareGroup(gid)
            self._groups[gid] = g
            return g
        log.warning("[GroupId %s] share group record for a %s group ignored", gid, g.type)
        return None

    def on_loaded(self, group: ShareGroup) -> None:
        for mid in group.members:
            self.schedule_session_timeout(group.group_id, mid)

    def group_tombstones(self, group: ShareGroup) -> list[CoordinatorRecord]:
        """ShareGroup.createGroupTombstoneRecords, then the share-state partition metadata's tombstone."""
        gid = group.group_id
        recs = [CoordinatorRecord(ShareGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m), None)
                for m in group.members]
        recs += [CoordinatorRecord(ShareGroupTargetAssignmentMemberKey(group_id=gid, member_id=m), None)
                 for m in group.members]
        recs.append(CoordinatorRecord(ShareGroupTargetAssignmentMetadataKey(group_id=gid), None))
        recs += [CoordinatorRecord(ShareGroupMemberMetadataKey(group_id=gid, member_id=m), None)
                 for m in group.members]
        if gid in self.state_metadata:
            recs.append(CoordinatorRecord(ShareGroupStatePartitionMetadataKey(group_id=gid), None))
        recs.append(CoordinatorRecord(ShareGroupMetadataKey(group_id=gid), None))
        return recs

    # ---- ShareGroupHeartbeat --------------------------------------------------------------------
    def heartbeat(self, ctx, req) -> ShareGroupHeartbeatResponse:
        _validate_request(req)
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(req.group_id, req.member_id, req.member_epoch)
        return self._heartbeat(ctx, req)

    def share_group(self, gid: str) -> ShareGroup:
        g = self._groups.get(gid)
        if g is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if g.type != "share":
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        return g

    def _get_or_create(self, gid: str, create: bool) -> ShareGroup:
        g = self._groups.get(gid)
        if g is None:
            if not create:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
            return ShareGroup(gid)  # registered by the replay of its first records
        if g.type != "share":
            # no migration between group types: JoinGroup on a share group answers INCONSISTENT_GROUP_PROTOCOL
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        return g

    def _throw_if_full(self, group: ShareGroup, member_id: str) -> None:
        if len(group.members) >= self.config.share_max_size and member_id not in group.members:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity "
                                                               f"of {self.config.share_max_size} members.")

    @staticmethod
    def _check_epoch(member: ShareGroupMember, received: int) -> None:
        """throwIfShareGroupMemberEpochIsInvalid: the previous epoch is accepted (its answer may have been lost)."""
        if received > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has a greater member epoch "
                                                            f"({received}) than the one known by the group "
                                                            f"coordinator ({member.member_epoch}). The member must "
                                                            "abandon all its partitions and rejoin.")
        if received < member.member_epoch and received != member.previous_member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch "
                                                            f"({received}) than the one known by the group "
                                                            f"coordinator ({member.member_epoch}). The member must "
                                                            "abandon all its partitions and rejoin.")

    def _heartbeat(self, ctx, req) -> ShareGroupHeartbeatResponse:
        gid, mid = req.group_id, req.member_id
        records: list[CoordinatorRecord] = []
        create = req.member_epoch == 0
        group = self._get_or_create(gid, create)
        self._throw_if_full(group, mid)
        member = group.get_member(mid, create)
        self._check_epoch(member, req.member_epoch)
        if create and mid not in group.members:
            log.info("[GroupId %s] Member %s joins the share group.", gid, mid)

        # 1. the member, then the group epoch (new subscriptions, new metadata, newly initialized partitions)
        updated = member.copy(client_id=ctx.client_id, client_host=ctx.client_host)
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        bump = False
        if updated != member:
            records.append(member_subscription_record(gid, updated))
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
        bump = bump or self.initialized_assignment_pending(group)
        group_epoch = group.group_epoch
        refresh_key = (self._image_key(), group.group_epoch)
        if bump or group.metadata_refresh_key != refresh_key:
            new_hash = self.metadata_hash(group.subscribed_topic_names(member, updated))
            if new_hash != group.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                records.append(epoch_record(gid, group_epoch, new_hash))
                log.info("[GroupId %s] Bumped group epoch to %d with metadata hash %d.", gid, group_epoch, new_hash)
                self.rebalances += 1
            group.metadata_refresh_key = (self._image_key(), group_epoch)

        # 2. the target assignment, when the group epoch moved past it
        if group_epoch > group.assignment_epoch:
            target = self._update_target_assignment(group, group_epoch, updated, records)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = group.target_assignment.get(updated.member_id, {})

        # 3. reconcile (ShareGroupAssignmentBuilder: straight to the target, nothing to revoke)
        if bump or not updated.is_reconciled_to(target_epoch):
            new = updated
            if updated.member_epoch != target_epoch or _norm(updated.assigned) != _norm(target) or \
                    updated.state != STABLE:
                new = updated.copy(state=STABLE, previous_member_epoch=updated.member_epoch,
                                   member_epoch=target_epoch, assigned=_norm(target))
            if new != updated:
                records.append(current_assignment_record(gid, new))
            updated = new

        self.schedule_session_timeout(gid, mid)
        resp = ShareGroupHeartbeatResponse(member_id=updated.member_id, member_epoch=updated.member_epoch,
                                           heartbeat_interval_ms=self.group_config(gid).share_heartbeat_interval_ms)
        if req.member_epoch == 0 or req.subscribed_topic_names is not None or \
                _norm(member.assigned) != _norm(updated.assigned):
            resp.assignment = sgh.Assignment(topic_partitions=[
                sgh.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(updated.assigned.items())])
        self._emit(records)
        # 4. the share state of partitions the group subscribes to and has not initialized
        self._maybe_initialize(gid, group_epoch)
        return resp

    def initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """GroupMetadataManager.initializedAssignmentPending: initialized partitions of a subscribed topic that
        the target assignment does not cover yet call for a new assignment."""
        if not group.members:
            return False
        meta = self.state_metadata.get(group.group_id)
        if meta is None or not meta.initialized:
            return False
        subscribed = set(group.subscribed_topic_names())
        if not subscribed:
            return False
        assigned: dict[bytes, set[int]] = {}
        for a in group.target_assignment.values():
            for t, ps in a.items():
                assigned.setdefault(t, set()).update(ps)
        return any(v.name in subscribed and assigned.get(t) != v.partitions for t, v in meta.initialized.items())

    def _update_target_assignment(self, group: ShareGroup, epoch: int, updated: ShareGroupMember,
                                  records: list) -> Assignment:
        members = dict(group.members)
        members[updated.member_id] = updated
        topics = self._image_topics()
        specs = {}
        for mid, m in members.items():
            ids = {topics[n].topic_id for n in m.subscribed_topic_names if n in topics}
            specs[mid] = MemberSpec(ids, {t: set(ps) for t, ps in group.target_assignment.get(mid, {}).items()},
                                    None, m.rack_id)
        counts = {t.topic_id: len(t.partitions) for t in topics.values()
                  if any(t.topic_id in s.subscribed for s in specs.values())}
        meta = self.state_metadata.get(group.group_id)
        assignable = {t: set(v.partitions) for t, v in meta.initialized.items()} if meta is not None else {}
        try:
            result = self.assignor.assign(GroupSpec(specs, subscription_is_homogeneous(specs)), counts, assignable)
        except PartitionAssignorError as exc:
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch "
                                                             f"{epoch}: {exc}") from None
        for mid in specs:
            new = _norm(result.get(mid, {}))
            old = group.target_assignment.get(mid)
            if old is None or _norm(old) != new:
                records.append(target_assignment_record(group.group_id, mid, new))
        records.append(target_assignment_epoch_record(group.group_id, epoch))
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with 'simple' assignor.",
                 group.group_id, epoch)
        return _norm(result.get(updated.member_id, {}))

    # ---- share-state initialization -------------------------------------------------------------
    def subscribed_topics_change_map(self, gid: str, names) -> dict[bytes, InitTopic]:
        """subscribedTopicsChangeMap: partitions of subscribed topics neither initialized nor initializing since
        less than ``group.share.initialize.retry.interval.ms``."""
        if not names:
            return {}
        now = self._now()
        meta = self.state_metadata.get(gid)
        covered: dict[bytes, InitTopic] = {}
        if meta is not None:
            fresh = {t: v for t, v in meta.initializing.items()
                     if now - v.timestamp < self.config.share_initialize_retry_interval_ms}
            covered = _combine(meta.initialized, fresh)
        topics = self._image_topics()
        out = {}
        for name in sorted(names):
            t = topics.get(name)
            if t is None:
                continue
            have = covered[t.topic_id].partitions if t.topic_id in covered else set()
            missing = set(t.partitions) - have
            if missing:
                out[t.topic_id] = InitTopic(name, missing, now)
        return out

    def _maybe_initialize(self, gid: str, group_epoch: int) -> None:
        """maybeCreateInitializeShareGroupStateRequest: record the partitions as initializing and ask the adapter
        to initialize their state."""
        group = self._groups.get(gid)
        if group is None or group.type != "share" or self._image() is None:
            return
        change = self.subscribed_topics_change_map(gid, set(group.subscribed_topic_names()))
        if not change:
            return
        meta = self.state_metadata.get(gid) or SharePartitionMetadata()
        new = SharePartitionMetadata(initializing=_combine(meta.initializing, change),
                                     initialized=dict(meta.initialized),
                                     deleting={t: n for t, n in meta.deleting.items() if t not in change})
        self._emit([state_partition_metadata_record(gid, new)])
        self._emit_request(InitializeShareState(gid, group_epoch, _frozen({t: v.partitions
                                                                           for t, v in change.items()})))

    def initialized(self, gid: str, topics: dict[bytes, set[int]]) -> None:
        """initializeShareGroupState: the share coordinator initialized these partitions: they move from
        initializing to initialized (and become assignable at the next heartbeat)."""
        meta = self.state_metadata.get(gid)
        if meta is None or not topics:
            return
        now = self._now()
        names = {t: (meta.initializing[t].name if t in meta.initializing else self.topic_name(t) or "UNKNOWN")
                 for t in topics}
        done = {t: InitTopic(names[t], set(ps), now) for t, ps in topics.items()}
        new = SharePartitionMetadata(initializing=_minus(meta.initializing, topics),
                                     initialized=_combine(meta.initialized, done), deleting=dict(meta.deleting))
        self._emit([state_partition_metadata_record(gid, new)])

    def uninitialized(self, gid: str, topics: dict[bytes, set[int]]) -> None:
        """uninitializeShareGroupState: initializing these partitions failed; a later heartbeat asks again."""
        meta = self.state_metadata.get(gid)
        if meta is None or not topics:
            return
        new = SharePartitionMetadata(initializing=_minus(meta.initializing, topics),
                                     initialized=_minus(meta.initialized, topics), deleting=dict(meta.deleting))
        self._emit([state_partition_metadata_record(gid, new)])

    def topics_deleted(self, topic_ids: set[bytes]) -> None:
        """maybeCleanupShareGroupState: deleted topics leave every group's share-state partition metadata (the
        share coordinator drops their state itself)."""
        for gid, meta in list(self.state_metadata.items()):
            if not topic_ids & (meta.initializing.keys() | meta.initialized.keys() | meta.deleting.keys()):
                continue
            new = SharePartitionMetadata(
                initializing={t: v for t, v in meta.initializing.items() if t not in topic_ids},
                initialized={t: v for t, v in meta.initialized.items() if t not in topic_ids},
                deleting={t: n for t, n in meta.deleting.items() if t not in topic_ids})
            self._emit([state_partition_metadata_record(gid, new)])

    def delete_state_request(self, group: ShareGroup) -> DeleteShareState | None:
        """shareGroupBuildPartitionDeleteRequest: every topic with (possibly) initialized state moves to deleting,
        and the adapter deletes their share state before the group itself goes."""
        gid = group.group_id
        meta = self.state_metadata.get(gid)
        if meta is None:
            return None
        topics = meta.all_topics()
        for t in meta.deleting:
            topics.setdefault(t, set())
        if not topics:
            return None
        deleting = dict(meta.deleting)
        for t, v in (*meta.initialized.items(), *meta.initializing.items()):
            deleting[t] = v.name
        self._emit([state_partition_metadata_record(gid, SharePartitionMetadata(deleting=deleting))])
        # a topic only in deleting is deleted again with all its partitions, as Kafka does
        image = self._image()
        for t in list(topics):
            if not topics[t] and image is not None and t in image.topics_by_id:
                topics[t] = set(image.topics_by_id[t].partitions)
        return DeleteShareState(gid, _frozen(topics))

    # ---- admin: Describe/Alter/DeleteShareGroupOffsets -------------------------------------------
    def initialized_partitions(self, gid: str) -> dict[bytes, set[int]]:
        """initializedShareGroupPartitions: what DescribeShareGroupOffsets without topics describes."""
        meta = self.state_metadata.get(gid)
        return {} if meta is None else {t: set(v.partitions) for t, v in meta.initialized.items()}

    def alter_offsets(self, gid: str, topics) -> tuple[AlterShareGroupOffsetsResponse, InitializeShareState | None]:
        """GroupMetadataManager.alterShareGroupOffsets (4.2, KAFKA-19662): the group is created when it does not
        exist, refused with NON_EMPTY_GROUP while it has members; partitions of unknown topics, or beyond a topic's
        partition count, are answered UNKNOWN_TOPIC_OR_PARTITION; the others become initializing and are
        initialized by the share coordinator at their new start offsets. The group epoch is bumped (a
        ShareGroupMetadata record) and is the new state epoch, so a share partition's old state (and a leader still
        holding it) is fenced (KIP-932's Administration section, KAFKA-20910)."""
        group = self._get_or_create(gid, True)
        if not group.is_empty():
            raise GroupError(ErrorCode.NON_EMPTY_GROUP, f"The group {gid} is not empty.")
        image_topics = self._image_topics()
        now = self._now()
        out = AlterShareGroupOffsetsResponse(responses=[])
        initializing: dict[bytes, InitTopic] = {}
        starts: dict[tuple[bytes, int], int] = {}
        for t in topics:
            info = image_topics.get(t.topic_name)
            parts = []
            if info is None:
                out.responses.append(asgo.AlterShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name, partitions=[_alter_error(p.partition_index) for p in t.partitions]))
                continue
            for p in t.partitions:
                if 0 <= p.partition_index < len(info.partitions):
                    parts.append(asgo.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index))
                    starts[(info.topic_id, p.partition_index)] = p.start_offset
                else:
                    parts.append(_alter_error(p.partition_index))
            ok = {p.partition_index for p in t.partitions if 0 <= p.partition_index < len(info.partitions)}
            if ok:
                cur = initializing.get(info.topic_id)
                initializing[info.topic_id] = InitTopic(t.topic_name, ok | (cur.partitions if cur else set()), now)
            out.responses.append(asgo.AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name,
                                                                          topic_id=info.topic_id, partitions=parts))
        if not starts:
            return out, None
        epoch = group.group_epoch + 1
        self._emit([epoch_record(gid, epoch, group.metadata_hash)])
        log.info("[GroupId %s] Bumped group epoch to %d to alter share group offsets.", gid, epoch)
        meta = self.state_metadata.get(gid) or SharePartitionMetadata()
        self._emit([state_partition_metadata_record(gid, SharePartitionMetadata(
            initializing=_combine(meta.initializing, initializing), initialized=dict(meta.initialized),
            deleting={t: n for t, n in meta.deleting.items() if t not in initializing}))])
        req = InitializeShareState(gid, epoch, _frozen({t: v.partitions for t, v in initializing.items()}),
                                   tuple(sorted(starts.items())))
        return out, req

    def delete_offsets_initiate(self, gid: str, topic_names: list[str]) -> tuple[list, DeleteShareState | None]:
        """initiateDeleteShareGroupOffsets / sharePartitionsEligibleForOffsetDeletion: an unknown group (or one of
        another type) GROUP_ID_NOT_FOUND, a non-empty one NON_EMPTY_GROUP (both raised); an initialized topic moves
        to deleting and its partitions' state is to be deleted; a topic already deleting is deleted again with all
        its partitions; any other topic is answered UNKNOWN_TOPIC_OR_PARTITION. Returns the error topics and the
        DeleteShareState to send (None: nothing to delete)."""
        group = self.share_group(gid)
        group.validate_delete_group()
        errors: list = []
        meta = self.state_metadata.get(gid)
        if meta is None:
            return errors, None
        initialized = {t: InitTopic(v.name, set(v.partitions), v.timestamp) for t, v in meta.initialized.items()}
        deleting = dict(meta.deleting)
        to_delete: dict[bytes, set[int]] = {}
        image_topics = self._image_topics()
        for name in topic_names:
            info = image_topics.get(name)
            if info is None:
                errors.append(dsgo.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=MESSAGES.get(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            elif info.topic_id in initialized:
                to_delete[info.topic_id] = initialized.pop(info.topic_id).partitions
                deleting[info.topic_id] = name
            elif info.topic_id in deleting:
                to_delete[info.topic_id] = set(info.partitions)
            else:
                errors.append(dsgo.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message="There is no offset information to delete."))
        self._emit([state_partition_metadata_record(gid, SharePartitionMetadata(
            initializing=dict(meta.initializing), initialized=initialized, deleting=deleting))])
        return errors, (DeleteShareState(gid, _frozen(to_delete)) if to_delete else None)

    def delete_offsets_complete(self, gid: str, topics: dict[bytes, str]) -> list:
        """completeDeleteShareGroupOffsets: the topics whose share state was deleted leave ``deleting``."""
        meta = self.state_metadata.get(gid)
        if meta is None:
            return []
        self._emit([state_partition_metadata_record(gid, SharePartitionMetadata(
            initializing=dict(meta.initializing), initialized=dict(meta.initialized),
            deleting={t: n for t, n in meta.deleting.items() if t not in topics}))])
        return [dsgo.DeleteShareGroupOffsetsResponseTopic(topic_name=name, topic_id=t) for t, name in topics.items()]

    # ---- leaving and fencing --------------------------------------------------------------------
    def _leave(self, gid: str, mid: str, epoch: int) -> ShareGroupHeartbeatResponse:
        group = self.share_group(gid)
        member = group.get_member(mid, False)
        log.info("[GroupId %s] Member %s left the share group.", gid, mid)
        self._fence_member(group, member)
        return ShareGroupHeartbeatResponse(member_id=mid, member_epoch=epoch)

    def _fence_member(self, group: ShareGroup, member: ShareGroupMember) -> None:
        """shareGroupFenceMember: the member's tombstones and a bumped group epoch with the new metadata hash."""
        gid = group.group_id
        records = remove_member_records(gid, member.member_id)
        new_hash = self.metadata_hash(group.subscribed_topic_names(removed=frozenset({member.member_id})))
        records.append(epoch_record(gid, group.group_epoch + 1, new_hash))
        self._timer.cancel(self._session_key(gid, member.member_id))
        self._emit(records)

    # ---- describe -------------------------------------------------------------------------------
    def describe(self, gid: str) -> sgd.DescribedGroup:
        try:
            g = self.share_group(gid)
        except GroupError as exc:
            return sgd.DescribedGroup(group_id=gid, error_code=exc.code, error_message=exc.message, members=[])

        def tps(a: Assignment):
            out = []
            for tid, ps in sorted(a.items()):
                name = self.topic_name(tid)
                if name is not None:
                    out.append(sgd.TopicPartitions(topic_id=tid, topic_name=name, partitions=sorted(ps)))
            return out
        members = [sgd.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                              client_id=m.client_id, client_host=m.client_host,
                              subscribed_topic_names=list(m.subscribed_topic_names),
                              assignment=sgd.Assignment(topic_partitions=tps(m.assigned)))
                   for m in g.members.values()]
        return sgd.DescribedGroup(group_id=gid, group_state=str(g.state), group_epoch=g.group_epoch,
                                  assignment_epoch=g.assignment_epoch, assignor_name=self.assignor.name,
                                  members=members)


def _alter_error(partition: int):
    return asgo.AlterShareGroupOffsetsResponsePartition(
        partition_index=partition, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        error_message=MESSAGES.get(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))


def _validate_request(req) -> None:
    """throwIfShareGroupHeartbeatRequestIsInvalid, plus the member id's length (a client-made UUID)."""
    def empty(v):
        return v is not None and not v.strip()

    def bad(msg):
        raise GroupError(ErrorCode.INVALID_REQUEST, msg)
    if req.member_id is None or empty(req.member_id):
        bad("MemberId can't be empty.")
    if len(req.member_id) > MAX_MEMBER_ID_LENGTH:
        bad(f"MemberId can't be longer than {MAX_MEMBER_ID_LENGTH} characters.")
    if req.group_id is None or empty(req.group_id):
        bad("GroupId can't be empty.")
    if empty(req.rack_id):
        bad("RackId can't be empty.")
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            bad("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        bad("MemberEpoch is invalid.")
