"""Consumer groups of the KIP-848 protocol (ConsumerGroupHeartbeat), and the migration between the
classic and the consumer protocol (Kafka's ``group.consumer.migration.policy``).

Ported from Kafka's GroupMetadataManager (consumerGroupHeartbeat, consumerGroupLeave,
classicGroupJoinToConsumerGroup, convertToConsumerGroup, convertToClassicGroup, the replay methods),
modern/consumer/ConsumerGroup, ConsumerGroupMember, CurrentAssignmentBuilder and TargetAssignmentBuilder.

As in Kafka, every change of a consumer group is expressed as ``__consumer_offsets`` records that
are then *replayed* into the state: the heartbeat computes the records against the current state,
and the state changes only by replaying them (:meth:`ConsumerGroupManager.replay`), during normal
operation and when a partition is loaded alike.

Regex subscriptions (``SubscribedTopicRegex``, v1) are resolved against the metadata image with
Python's ``re.fullmatch`` (Kafka uses RE2J ``matches()``), internal topics excluded; a group's
subscription metadata is recomputed whenever the metadata image changed since the last computation
(Kafka refreshes on metadata image updates too), which bumps the group epoch when the topics or
their partition counts changed.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import re
from collections import Counter
from typing import Any, Callable

from cluster.groups.assignors import (
    ASSIGNORS, GroupSpec, MemberSpec, PartitionAssignorError, subscription_is_homogeneous,
)
from cluster.groups.group_classic import (
    UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupMember, ClassicGroupState, GroupError, heartbeat_key, join_key,
    sync_key,
)
from cluster.groups.group_config import DynamicGroupConfig, GroupConfig, group_settings
from cluster.groups.group_record_helpers import group_metadata_record
from cluster.groups.group_records import (
    CONSUMER_PROTOCOL_TYPE, CoordinatorRecord, SchemaError, consumer_protocol_version, parse_assignment,
    parse_subscription, serialize_assignment,
)
from protocol.errors import ErrorCode
from protocol.generated.coordinator import (
    ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue, GroupMetadataKey,
)
from protocol.generated.coordinator import consumer_group_current_member_assignment_value as cur_v
from protocol.generated.coordinator import consumer_group_member_metadata_value as mm_v
from protocol.generated.coordinator import consumer_group_partition_metadata_value as pm_v
from protocol.generated.coordinator import consumer_group_target_assignment_member_value as ta_v
from protocol.generated.messages import (
    ConsumerGroupHeartbeatResponse, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse,
)
from protocol.generated.messages import consumer_group_describe_response as cgd
from protocol.generated.messages import consumer_group_heartbeat_response as cgh
from protocol.generated.messages.leave_group_response import MemberResponse

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

Assignment = dict[bytes, set[int]]


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass
class ClassicMeta:
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclasses.dataclass
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Assignment = dataclasses.field(default_factory=dict)
    pending_revocation: Assignment = dataclasses.field(default_factory=dict)
    classic: ClassicMeta | None = None

    def copy(self, **changes) -> "ConsumerGroupMember":
        m = copy.deepcopy(self)
        for k, v in changes.items():
            setattr(m, k, v)
        return m

    @property
    def use_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def subscription_key(self) -> tuple:
        return (self.subscribed_topic_names, self.subscribed_topic_regex)


def _norm(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


class ConsumerGroup:
    type = "consumer"
    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, tuple[bytes, int]] = {}
        self.partition_epochs: dict[tuple[bytes, int], int] = {}
        self.state = ConsumerGroupState.EMPTY
        self.metadata_refresh_key = None  # (image offset, group epoch) the subscription metadata was computed at

    # ---- queries ---------------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def state_string(self) -> str:
        return str(self.state)

    def in_states(self, states: set[str]) -> bool:
        return str(self.state).lower() in states

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def get_member(self, member_id: str, create: bool) -> ConsumerGroupMember:
        m = self.members.get(member_id)
        if m is not None:
            return m
        if not create:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                           f"{self.group_id}.")
        return ConsumerGroupMember(member_id)

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        mid = self.static_member_id(instance_id)
        return None if mid is None else self.members.get(mid)

    def target_for(self, member_id: str, instance_id: str | None = None) -> Assignment:
        if instance_id is not None:
            prev = self.static_member_id(instance_id)
            if prev is not None:
                return self.target_assignment.get(prev, {})
            return {}
        return self.target_assignment.get(member_id, {})

    def current_partition_epoch(self, topic_id: bytes, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def num_classic_members(self) -> int:
        return sum(1 for m in self.members.values() if m.use_classic_protocol)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        m = self.members.get(member_id)
        return m is not None and not m.use_classic_protocol and self.num_classic_members() == len(self.members) - 1

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        if self.is_empty():
            return bool(names)
        classic = [m for m in self.members.values() if m.use_classic_protocol]
        counts = Counter(n for m in classic for n, _ in m.classic.protocols)
        return any(counts.get(n, 0) == len(classic) for n in names)

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            for t, ps in self.target_assignment.get(member.member_id, {}).items():
                have = member.assigned.get(t, set())
                for p in ps:
                    if p not in have and self.current_partition_epoch(t, p) != -1:
                        return True
        return False

    def preferred_server_assignor(self, default: str, old=None, new=None) -> str:
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if old is not None and old.server_assignor:
            counts[old.server_assignor] -= 1
        if new is not None and new.server_assignor:
            counts[new.server_assignor] += 1
        counts = +counts
        return max(counts.items(), key=lambda kv: kv[1])[0] if counts else default

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscription_metadata or any(
            topic in m.subscribed_topic_names for m in self.members.values())

    def validate_offset_commit(self, member_id, instance_id, member_epoch, is_transactional, api_version) -> None:
        if member_epoch < 0 and not self.members:
            return
        if is_transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return  # TxnOffsetCommit v0-2 carry no member: nothing to check
        member = self.get_member(member_id, False)
        if not is_transactional and not member.use_classic_protocol and api_version < 9:
            raise GroupError(ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by "
                                                            "members using the modern group protocol")
        self._validate_member_epoch(member_epoch, member)

    def validate_offset_fetch(self, member_id, member_epoch) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        self._validate_member_epoch(member_epoch, member)

    def _validate_member_epoch(self, received: int, member: ConsumerGroupMember) -> None:
        if received != member.member_epoch:
            if member.use_classic_protocol:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)

    def validate_offset_delete(self) -> None:
        return None

    def validate_delete_group(self) -> None:
        if self.state is not ConsumerGroupState.EMPTY:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def offset_expiration_basis(self):
        return lambda o: o.commit_timestamp_ms

    # ---- replay-time mutations -------------------------------------------------------------------
    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        self._remove_partition_epochs(old)
        self.members[new.member_id] = new
        for a in (new.assigned, new.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.partition_epochs[(t, p)] = new.member_epoch
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self.maybe_update_state()

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        self._remove_partition_epochs(old)
        if old is not None and old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self.maybe_update_state()

    def _remove_partition_epochs(self, old: ConsumerGroupMember | None) -> None:
        if old is None:
            return
        for a in (old.assigned, old.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    if self.partition_epochs.get((t, p)) == old.member_epoch:
                        del self.partition_epochs[(t, p)]

    def maybe_update_state(self) -> None:
        if not self.members:
            self.state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            self.state = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            self.state = ConsumerGroupState.RECONCILING
        else:
            self.state = ConsumerGroupState.STABLE


# ---- records (GroupCoordinatorRecordHelpers) -------------------------------------------------------------------

def _tps(cls, a: Assignment) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items()) if ps]


def _from_tps(tps) -> Assignment:
    return {t.topic_id: set(t.partitions) for t in tps if t.partitions}


def member_subscription_record(gid: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    classic = None
    if m.classic is not None:
        classic = mm_v.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[mm_v.ClassicProtocol(name=n, metadata=md) for n, md in m.classic.protocols])
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id=gid, member_id=m.member_id),
                             ConsumerGroupMemberMetadataValue(
                                 instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                                 client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                                 subscribed_topic_regex=m.subscribed_topic_regex,
                                 rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
                                 classic_member_metadata=classic))


def member_subscription_tombstone(gid: str, mid: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id=gid, member_id=mid), None)


def epoch_record(gid: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group_id=gid), ConsumerGroupMetadataValue(epoch=epoch))


def subscription_metadata_record(gid: str, meta: dict[str, tuple[bytes, int]]) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group_id=gid), ConsumerGroupPartitionMetadataValue(
        topics=[pm_v.TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
                for name, (tid, n) in sorted(meta.items())]))


def target_assignment_record(gid: str, mid: str, a: Assignment) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid),
                             ConsumerGroupTargetAssignmentMemberValue(topic_partitions=_tps(ta_v.TopicPartition, a)))


def target_assignment_epoch_record(gid: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id=gid),
                             ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def current_assignment_record(gid: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m.member_id),
                             ConsumerGroupCurrentMemberAssignmentValue(
                                 member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                                 state=int(m.state), assigned_partitions=_tps(cur_v.TopicPartitions, m.assigned),
                                 partitions_pending_revocation=_tps(cur_v.TopicPartitions, m.pending_revocation)))


def remove_member_records(gid: str, mid: str) -> list[CoordinatorRecord]:
    return [CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid), None),
            CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid), None),
            member_subscription_tombstone(gid, mid)]


# ---- reconciliation (CurrentAssignmentBuilder) ------------------------------------------------------------------

def _owns_any(owned: list | None, partitions: Assignment) -> bool:
    if owned is None:
        return True
    for tp in owned:
        pending = partitions.get(tp.topic_id, set())
        if any(p in pending for p in tp.partitions):
            return True
    return False


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment, partition_epoch,
              owned: list | None) -> ConsumerGroupMember:
    def next_assignment(epoch: int, current: Assignment) -> ConsumerGroupMember:
        unreleased = False
        assigned: Assignment = {}
        revoking: Assignment = {}
        pending: Assignment = {}
        for t in set(target) | set(current):
            tgt = target.get(t, set())
            cur = current.get(t, set())
            keep = cur & tgt
            rev = cur - keep
            add = tgt - keep
            blocked = {p for p in add if partition_epoch(t, p) != -1}
            if blocked:
                unreleased = True
            add -= blocked
            if keep:
                assigned[t] = keep
            if rev:
                revoking[t] = rev
            if add:
                pending[t] = add
        if revoking and _owns_any(owned, revoking):
            return member.copy(state=MemberState.UNREVOKED_PARTITIONS, previous_member_epoch=member.member_epoch,
                               member_epoch=epoch, assigned=assigned, pending_revocation=revoking)
        for t, ps in pending.items():
            assigned.setdefault(t, set()).update(ps)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return member.copy(state=state, previous_member_epoch=member.member_epoch, member_epoch=target_epoch,
                           assigned=assigned, pending_revocation={})

    s = member.state
    if s is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return next_assignment(member.member_epoch, member.assigned)
        return member
    if s is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return next_assignment(member.member_epoch + 1, member.assigned)
    if s is MemberState.UNRELEASED_PARTITIONS:
        return next_assignment(member.member_epoch, member.assigned)
    if owned is None or owned:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                                                        "The member must abandon all its partitions and rejoin.")
    return next_assignment(target_epoch, member.assigned)


def _updated_epochs(m: ConsumerGroupMember, new_epoch_member: ConsumerGroupMember) -> ConsumerGroupMember:
    return new_epoch_member


# ---- the manager --------------------------------------------------------------------------------------------------

class ConsumerGroupManager:
    """The consumer-group half of a GroupCoordinatorShard. As Kafka's GroupMetadataManager it is built
    from narrow collaborators, never the shard itself:

    * ``config``: the GroupConfig;
    * ``now_ms()``: the time of the operation being run;
    * ``image()``: the latest metadata image (None before the first one);
    * ``timer``: the shard's keyed Timer (schedule, schedule_if_absent, cancel), whose
      tasks the shard's poll runs;
    * ``groups``: the shard's group table (group id -> ClassicGroup | ConsumerGroup), shared, and
      ``remove_group(group_id)`` the one way a group leaves it;
    * ``new_uuid()``: member ids;
    * ``append(records, replay=...)``: adds records to the operation's result, replaying them into the
      state when asked (the shard's replay dispatches consumer-group records back to :meth:`replay`);
    * ``complete(token, response)``: answers a delayed JoinGroup/SyncGroup;
    * ``resume_classic_group(group, rebalance_reason)``: hands a group downgraded to the classic protocol
      (already in ``groups``) to the classic-group half, which starts its members' sessions and, given a
      reason, rebalances it.
    """

    def __init__(self, *, config: GroupConfig, now_ms: Callable[[], int], image: Callable[[], Any], timer,
                 groups: dict[str, Any], remove_group: Callable[[str], None], new_uuid: Callable[[], str],
                 append: Callable[..., None], complete: Callable[[Any, Any], None],
                 resume_classic_group: Callable[[ClassicGroup, str | None], None]) -> None:
        self.config = config
        self._now = now_ms
        self._image = image
        self._timer = timer
        self._groups = groups
        self._remove_group = remove_group
        self._new_uuid = new_uuid
        self._append = append
        self._complete = complete
        self._resume_classic_group = resume_classic_group
        self.assignors = {name: cls() for name, cls in ASSIGNORS.items()}  # tests may add a mock assignor
        # group id -> regex -> (image offset, topics): a regex's topics as the member that last refreshed it may
        # see them (GroupMetadataManager.refreshRegularExpressions with an authorizer); a regex not here resolves to
        # the image's matching topics. Kept by the coordinator, not in records (Kafka writes
        # ConsumerGroupRegularExpression records): after a reload the next filtered heartbeat refreshes it.
        self.regex_topics: dict[str, dict[str, tuple[Any, frozenset[str]]]] = {}

    # ---- metadata -------------------------------------------------------------------------------
    def _image_topics(self):
        image = self._image()
        return {} if image is None else image.topics_by_name

    def _image_key(self):
        image = self._image()
        return None if image is None else getattr(image, "offset", id(image))

    def resolve_regex(self, regex: str) -> frozenset[str]:
        """The image's non-internal topics a regex matches (none for an invalid regex)."""
        try:
            pattern = re.compile(regex)
        except re.error:
            return frozenset()
        return frozenset(t for t in self._image_topics() if t not in INTERNAL_TOPICS and pattern.fullmatch(t))

    def member_topics(self, m: ConsumerGroupMember, group: ConsumerGroup | None = None) -> set[str]:
        topics = set(m.subscribed_topic_names)
        regex = m.subscribed_topic_regex
        if regex:
            refreshed = self.regex_topics.get(group.group_id, {}).get(regex) if group is not None else None
            topics |= refreshed[1] if refreshed is not None else self.resolve_regex(regex)
        return topics

    def refresh_regexes(self, group: ConsumerGroup, updated: ConsumerGroupMember, topic_filter) -> None:
        """Kafka's regex refresh with an authorizer: every regex of the group not yet resolved at the current
        image is resolved again and keeps only the topics the heartbeating member may see (``topic_filter``)."""
        key = self._image_key()
        regexes = {m.subscribed_topic_regex for m in group.members.values() if m.member_id != updated.member_id}
        regexes = (regexes | {updated.subscribed_topic_regex}) - {None, ""}
        known = self.regex_topics.setdefault(group.group_id, {})
        for regex in regexes:
            refreshed = known.get(regex)
            if refreshed is None or refreshed[0] != key:
                known[regex] = (key, frozenset(topic_filter(self.resolve_regex(regex))))
        for regex in set(known) - regexes:
            del known[regex]
        if not known:
            del self.regex_topics[group.group_id]

    def subscribed_topic_names(self, group: ConsumerGroup, old=None, new=None, removed=()) -> Counter:
        c: Counter = Counter()
        for mid, m in group.members.items():
            if mid in removed or (old is not None and mid == old.member_id):
                continue
            c.update(self.member_topics(m, group))
        if new is not None:
            c.update(self.member_topics(new, group))
        return c

    def compute_subscription_metadata(self, names) -> dict[str, tuple[bytes, int]]:
        topics = self._image_topics()
        return {n: (topics[n].topic_id, len(topics[n].partitions)) for n in names if n in topics}

    def topic_name(self, topic_id: bytes) -> str | None:
        image = self._image()
        if image is None:
            return None
        t = image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    def topic_id(self, name: str) -> bytes | None:
        t = self._image_topics().get(name)
        return None if t is None else t.topic_id

    # ---- timers ---------------------------------------------------------------------------------
    def _session_key(self, gid, mid):
        return f"session-timeout-{gid}-{mid}"

    def _rebalance_key(self, gid, mid):
        return f"rebalance-timeout-{gid}-{mid}"

    def _join_key(self, gid, mid):
        return f"consumer-join-timeout-{gid}-{mid}"

    def _sync_key(self, gid, mid):
        return f"consumer-sync-timeout-{gid}-{mid}"

    def group_config(self, gid: str) -> DynamicGroupConfig:
        """The group's consumer.session.timeout.ms / consumer.heartbeat.interval.ms (GROUP configs) over the
        broker's (GroupMetadataManager.consumerGroupSessionTimeoutMs / consumerGroupHeartbeatIntervalMs)."""
        return group_settings(self.config, self._image(), gid)

    def schedule_session_timeout(self, gid: str, mid: str, timeout_ms: int | None = None) -> None:
        self._timer.schedule(self._session_key(gid, mid), self._now(),
                             self.group_config(gid).consumer_session_timeout_ms if timeout_ms is None else timeout_ms,
                             lambda: self._fence_member_operation(gid, mid, "the member session expired."))

    def schedule_rebalance_timeout(self, gid: str, mid: str, epoch: int, timeout_ms: int) -> None:
        def expire():
            group = self._groups.get(gid)
            if group is None or group.type != "consumer" or mid not in group.members:
                return
            member = group.members[mid]
            if member.member_epoch == epoch:
                self._fence_member(group, member, None)
        self._timer.schedule(self._rebalance_key(gid, mid), self._now(), timeout_ms, expire)

    def schedule_join_timeout_if_absent(self, gid: str, mid: str, timeout_ms: int) -> None:
        self._timer.schedule_if_absent(
            self._join_key(gid, mid), self._now(), timeout_ms,
            lambda: self._fence_member_operation(gid, mid, "the classic member failed to join within the rebalance "
                                                           "timeout."))

    def schedule_sync_timeout(self, gid: str, mid: str, timeout_ms: int) -> None:
        self._timer.schedule(self._sync_key(gid, mid), self._now(), timeout_ms,
                             lambda: self._fence_member_operation(gid, mid, "the member failed to sync within "
                                                                            "timeout."))

    def cancel_timers(self, gid: str, mid: str) -> None:
        for key in (self._session_key(gid, mid), self._rebalance_key(gid, mid), self._join_key(gid, mid),
                    self._sync_key(gid, mid)):
            self._timer.cancel(key)

    def _fence_member_operation(self, gid: str, mid: str, reason: str) -> None:
        group = self._groups.get(gid)
        if group is None or group.type != "consumer":
            return
        member = group.members.get(mid)
        if member is None:
            return
        self._fence_member(group, member, None)

    # ---- records into the state -----------------------------------------------------------------
    def _emit(self, records: list[CoordinatorRecord], replay: bool = True) -> None:
        self._append(records, replay=replay)

    def replay(self, record: CoordinatorRecord) -> None:
        key, value = record.key, record.value
        gid = key.group_id
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is not None:
                self._persisted_group(gid, True).group_epoch = value.epoch
                self._groups[gid].maybe_update_state()
            else:
                g = self._persisted_group(gid, False)
                if g is not None:
                    self._remove_group(gid)
                    self.regex_topics.pop(gid, None)
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            g = self._persisted_group(gid, value is not None)
            if g is not None:
                g.subscription_metadata = {} if value is None else {
                    t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics}
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            g = self._persisted_group(gid, value is not None)
            if g is None:
                return
            if value is not None:
                old = g.get_member(key.member_id, True)
                classic = None
                cm = value.classic_member_metadata
                if cm is not None:
                    classic = ClassicMeta(cm.session_timeout_ms, [(p.name, bytes(p.metadata))
                                                                  for p in cm.supported_protocols])
                g.update_member(old.copy(instance_id=value.instance_id, rack_id=value.rack_id,
                                         client_id=value.client_id, client_host=value.client_host,
                                         subscribed_topic_names=tuple(value.subscribed_topic_names),
                                         subscribed_topic_regex=value.subscribed_topic_regex or None,
                                         rebalance_timeout_ms=value.rebalance_timeout_ms,
                                         server_assignor=value.server_assignor or None, classic=classic))
            elif key.member_id in g.members:
                g.remove_member(key.member_id)
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            g = self._persisted_group(gid, value is not None)
            if g is None:
                return
            if value is not None:
                g.target_assignment[key.member_id] = _from_tps(value.topic_partitions)
            else:
                g.target_assignment.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            g = self._persisted_group(gid, value is not None)
            if g is None:
                return
            g.assignment_epoch = value.assignment_epoch if value is not None else -1
            g.maybe_update_state()
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            g = self._persisted_group(gid, value is not None)
            if g is None:
                return
            if value is not None:
                old = g.get_member(key.member_id, True)
                try:
                    state = MemberState(value.state)
                except ValueError:
                    state = MemberState.UNKNOWN
                g.update_member(old.copy(member_epoch=value.member_epoch,
                                         previous_member_epoch=value.previous_member_epoch, state=state,
                                         assigned=_from_tps(value.assigned_partitions),
                                         pending_revocation=_from_tps(value.partitions_pending_revocation)))
            elif key.member_id in g.members:
                g.update_member(g.members[key.member_id].copy(
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned={}, pending_revocation={}))

    def _persisted_group(self, gid: str, create: bool) -> ConsumerGroup | None:
        g = self._groups.get(gid)
        if g is None:
            if not create:
                return None
            g = ConsumerGroup(gid)
            self._groups[gid] = g
            return g
        if g.type == "consumer":
            return g
        if g.is_simple_group() or create:
            # a "simple" classic group only holds offsets; it is not backed by group records
            g = ConsumerGroup(gid)
            self._groups[gid] = g
            return g
        return None

    def on_loaded(self, group: ConsumerGroup) -> None:
        for mid, m in group.members.items():
            self.schedule_session_timeout(group.group_id, mid,
                                          m.classic.session_timeout_ms if m.use_classic_protocol else None)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_rebalance_timeout(group.group_id, mid, m.member_epoch, m.rebalance_timeout_ms)

    def group_tombstones(self, group: ConsumerGroup, replaced: tuple[str, str] | None = None
                         ) -> list[CoordinatorRecord]:
        gid = group.group_id

        def ids():
            for mid in group.members:
                yield replaced[1] if replaced is not None and mid == replaced[0] else mid
        recs = [CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m), None)
                for m in ids()]
        recs += [CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=m), None)
                 for m in ids()]
        recs.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id=gid), None))
        recs += [member_subscription_tombstone(gid, m) for m in ids()]
        recs.append(CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group_id=gid), None))
        recs.append(CoordinatorRecord(ConsumerGroupMetadataKey(group_id=gid), None))
        return recs

    def maybe_delete_empty_consumer_group(self, group_id: str) -> None:
        g = self._groups.get(group_id)
        if g is not None and g.type == "consumer" and g.is_empty():
            # tombstones written, not replayed: the group is simply dropped
            self._emit(self.group_tombstones(g), replay=False)
            self._remove_group(group_id)
            self.regex_topics.pop(group_id, None)

    # ---- ConsumerGroupHeartbeat -----------------------------------------------------------------
    def heartbeat(self, ctx, req) -> ConsumerGroupHeartbeatResponse:
        self._validate_request(req, ctx.api_version)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req.group_id, req.instance_id, req.member_id, req.member_epoch)
        return self._heartbeat(ctx, req)

    def _validate_request(self, req, api_version: int) -> None:
        def empty(v):
            return v is not None and not v.strip()

        def bad(msg):
            raise GroupError(ErrorCode.INVALID_REQUEST, msg)
        if not req.group_id or empty(req.group_id):
            bad("GroupId can't be empty.")
        if api_version >= 1 or req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if req.member_id is None or not req.member_id.strip():
                bad("MemberId can't be empty.")
        if empty(req.instance_id):
            bad("InstanceId can't be empty.")
        if empty(req.rack_id):
            bad("RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                bad("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                bad("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and getattr(req, "subscribed_topic_regex", None) is None:
                bad("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                bad("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            bad("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.config.consumer_assignors)}.")
        regex = getattr(req, "subscribed_topic_regex", None)
        if regex:
            try:
                re.compile(regex)
            except re.error as exc:
                raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a "
                                                                       f"valid regular expression: {exc}.") from None

    def get_or_create_consumer_group(self, group_id: str, create: bool, records: list) -> ConsumerGroup:
        g = self._groups.get(group_id)
        if g is None:
            if not create:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id)
        if g.type == "consumer":
            return g
        if create and g.type == "classic" and g.is_empty():
            # an empty classic group (or a simple one) is replaced by the consumer group
            if not g.is_simple_group():
                records.append(CoordinatorRecord(GroupMetadataKey(group=group_id), None))
            return ConsumerGroup(group_id)
        if create and g.type == "classic" and self._validate_online_upgrade(g):
            return self._convert_to_consumer_group(g, records)
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")

    def _throw_if_full(self, group: ConsumerGroup, member_id: str) -> None:
        if len(group.members) >= self.config.consumer_max_size and (not member_id or member_id not in group.members):
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity "
                                                               f"of {self.config.consumer_max_size} members.")

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, received: int, owned) -> None:
        if received > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                                            f"({received}) than the one known by the group "
                                                            f"coordinator ({member.member_epoch}). The member must "
                                                            "abandon all its partitions and rejoin.")
        if received < member.member_epoch:
            subset = owned is not None and all(
                set(tp.partitions) <= member.assigned.get(tp.topic_id, set()) and tp.topic_id in member.assigned
                for tp in owned)
            if received != member.previous_member_epoch or not subset:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member "
                                                                f"epoch ({received}) than the one known by the group "
                                                                f"coordinator ({member.member_epoch}). The member "
                                                                "must abandon all its partitions and rejoin.")

    def _get_member_for_heartbeat(self, group, member_id, member_epoch, instance_id, owned, create, classic,
                                  records) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.get_member(member_id, create)
            if not classic:
                self._check_epoch(member, member_epoch, owned)
            return member
        existing = group.static_member(instance_id)
        if create:
            if existing is None:
                return group.get_member(member_id, True)
            if not classic and not existing.use_classic_protocol and existing.member_epoch != \
                    LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
            new = existing.copy(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            # replace the member: the new id takes over the old one's target and current assignment
            records.extend(remove_member_records(group.group_id, existing.member_id))
            records.append(member_subscription_record(group.group_id, new))
            records.append(target_assignment_record(group.group_id, member_id,
                                                    group.target_assignment.get(existing.member_id, {})))
            records.append(current_assignment_record(group.group_id, new))
            return new
        if existing is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                           f"{instance_id} was fenced by member {existing.member_id}.")
        if not classic:
            self._check_epoch(existing, member_epoch, owned)
        return existing

    def _heartbeat(self, ctx, req) -> ConsumerGroupHeartbeatResponse:
        gid = req.group_id
        records: list[CoordinatorRecord] = []
        create = req.member_epoch == 0
        group = self.get_or_create_consumer_group(gid, create, records)
        member_id = req.member_id or self._new_uuid()
        self._throw_if_full(group, req.member_id)
        owned = req.topic_partitions
        member = self._get_member_for_heartbeat(group, member_id, req.member_epoch, req.instance_id, owned, create,
                                                False, records)
        updated = member.copy(client_id=ctx.client_id, client_host=ctx.client_host, classic=None)
        if req.instance_id is not None:
            updated.instance_id = req.instance_id
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            updated.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        regex = getattr(req, "subscribed_topic_regex", None)
        if regex is not None:
            updated.subscribed_topic_regex = regex or None
        if ctx.topic_filter is not None:
            self.refresh_regexes(group, updated, ctx.topic_filter)
        updated = self._update_and_assign(group, member, updated, records, owned)
        self.schedule_session_timeout(gid, updated.member_id)
        resp = ConsumerGroupHeartbeatResponse(member_id=updated.member_id, member_epoch=updated.member_epoch,
                                              heartbeat_interval_ms=self.group_config(gid).consumer_heartbeat_interval_ms)
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                                         and owned is not None)
        if full or _norm(member.assigned) != _norm(updated.assigned):
            resp.assignment = cgh.Assignment(topic_partitions=[
                cgh.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(updated.assigned.items())])
        self._emit(records)
        return resp

    def _update_and_assign(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                           records: list, owned) -> ConsumerGroupMember:
        """Steps 1-3 of consumerGroupHeartbeat: persist the member, bump the epoch when subscriptions or
        their metadata changed, recompute the target assignment, reconcile the member."""
        gid = group.group_id
        bump = False
        if updated != member:
            records.append(member_subscription_record(gid, updated))
            bump = updated.subscription_key() != member.subscription_key()
        group_epoch = group.group_epoch
        meta = group.subscription_metadata
        refresh_key = (self._image_key(), group.group_epoch)
        if bump or group.metadata_refresh_key != refresh_key:
            names = self.subscribed_topic_names(group, old=member, new=updated)
            meta = self.compute_subscription_metadata(names)
            if meta != group.subscription_metadata:
                bump = True
                records.append(subscription_metadata_record(gid, meta))
            if bump:
                group_epoch += 1
                records.append(epoch_record(gid, group_epoch))
            group.metadata_refresh_key = (self._image_key(), group_epoch)
        if group_epoch > group.assignment_epoch:
            target = self._update_target_assignment(group, group_epoch, member, updated, meta, records)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = group.target_for(updated.member_id, updated.instance_id)
        if not updated.is_reconciled_to(target_epoch):
            new = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
            if new != updated:
                records.append(current_assignment_record(gid, new))
                if not new.use_classic_protocol:
                    if new.state is MemberState.UNREVOKED_PARTITIONS:
                        self.schedule_rebalance_timeout(gid, new.member_id, new.member_epoch,
                                                        new.rebalance_timeout_ms)
                    else:
                        self._timer.cancel(self._rebalance_key(gid, new.member_id))
            updated = new
        return updated

    def _update_target_assignment(self, group: ConsumerGroup, epoch: int, member, updated, meta, records
                                  ) -> Assignment:
        default = self.config.consumer_assignors[0]
        name = group.preferred_server_assignor(default, member, updated)
        assignor = self.assignors.get(name) or self.assignors[default]
        members = dict(group.members)
        prev = group.static_member_id(updated.instance_id)
        if prev is not None and prev != updated.member_id:
            members.pop(prev, None)
        members[updated.member_id] = updated
        specs: dict[str, MemberSpec] = {}
        for mid, m in members.items():
            assignment = group.target_assignment.get(mid, {})
            if mid == updated.member_id and prev is not None and prev != mid:
                assignment = group.target_assignment.get(prev, {})
            topic_ids = {meta[n][0] for n in self.member_topics(m, group) if n in meta}
            specs[mid] = MemberSpec(topic_ids, {t: set(ps) for t, ps in assignment.items()}, m.instance_id, m.rack_id)
        counts = {tid: n for tid, n in meta.values()}
        try:
            result = assignor.assign(GroupSpec(specs, subscription_is_homogeneous(specs)), counts)
        except PartitionAssignorError as exc:
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch "
                                                             f"{epoch}: {exc}") from None
        for mid in specs:
            new = _norm(result.get(mid, {}))
            old = group.target_assignment.get(mid)
            if old is None or _norm(old) != new:
                records.append(target_assignment_record(group.group_id, mid, new))
        records.append(target_assignment_epoch_record(group.group_id, epoch))
        return _norm(result.get(updated.member_id, {}))

    # ---- leaving and fencing --------------------------------------------------------------------
    def _leave(self, gid, instance_id, member_id, member_epoch) -> ConsumerGroupHeartbeatResponse:
        group = self._consumer_group(gid)
        resp = ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=member_epoch)
        if instance_id is None:
            member = group.get_member(member_id, False)
            self._fence_member(group, member, resp)
            return resp
        member = group.static_member(instance_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                           f"{instance_id} was fenced by member {member.member_id}.")
        if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # the static member will be back: keep its place and assignment, epoch -2
            leaving = member.copy(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            self._emit([current_assignment_record(gid, leaving)])
            return ConsumerGroupHeartbeatResponse(member_id=member.member_id,
                                                  member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self._fence_member(group, member, resp)
        return resp

    def _consumer_group(self, gid: str) -> ConsumerGroup:
        g = self._groups.get(gid)
        if g is None or g.type != "consumer":
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found." if g is None else
                             f"Group {gid} is not a consumer group")
        return g

    def _fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember, response):
        gid = group.group_id
        if self._validate_online_downgrade_with_fenced_member(group, member.member_id):
            self._convert_to_classic_group(group, member.member_id, None)
            return response
        records = remove_member_records(gid, member.member_id)
        names = self.subscribed_topic_names(group, removed={member.member_id})
        meta = self.compute_subscription_metadata(names)
        if meta != group.subscription_metadata:
            records.append(subscription_metadata_record(gid, meta))
        records.append(epoch_record(gid, group.group_epoch + 1))
        self.cancel_timers(gid, member.member_id)
        self._emit(records)
        return response

    # ---- migration policy -----------------------------------------------------------------------
    def _upgrade_enabled(self) -> bool:
        return self.config.migration_policy in ("upgrade", "bidirectional")

    def _downgrade_enabled(self) -> bool:
        return self.config.migration_policy in ("downgrade", "bidirectional")

    def _validate_online_upgrade(self, g: ClassicGroup) -> bool:
        return (self._upgrade_enabled() and g.uses_consumer_group_protocol()
                and g.num_members() <= self.config.consumer_max_size)

    def _validate_online_downgrade_with_fenced_member(self, group: ConsumerGroup, fenced: str) -> bool:
        return (group.all_members_use_classic_protocol_except(fenced) and len(group.members) > 1
                and self._downgrade_enabled() and len(group.members) - 1 <= self.config.max_size)

    def _convert_to_consumer_group(self, g: ClassicGroup, records: list) -> ConsumerGroup:
        """A consumer-protocol member joins a classic group: the classic group becomes a consumer group
        whose members keep their last classic assignment (KIP-848 online upgrade)."""
        g.complete_all_joins(ErrorCode.REBALANCE_IN_PROGRESS)
        g.complete_all_syncs(ErrorCode.REBALANCE_IN_PROGRESS)
        records.append(CoordinatorRecord(GroupMetadataKey(group=g.group_id), None))
        cg = ConsumerGroup(g.group_id)
        cg.group_epoch = cg.assignment_epoch = g.generation_id
        try:
            for cm in g.members.values():
                assigned: Assignment = {}
                if cm.assignment:
                    for topic, ps in parse_assignment(cm.assignment).partitions:
                        tid = self.topic_id(topic)
                        if tid is not None:
                            assigned.setdefault(tid, set()).update(ps)
                sub = parse_subscription(cm.metadata(g.protocol_name))
                m = ConsumerGroupMember(cm.member_id, member_epoch=g.generation_id,
                                        previous_member_epoch=g.generation_id, state=MemberState.STABLE,
                                        instance_id=cm.group_instance_id, rack_id=sub.rack_id,
                                        rebalance_timeout_ms=cm.rebalance_timeout_ms, client_id=cm.client_id,
                                        client_host=cm.client_host,
                                        subscribed_topic_names=tuple(sorted(set(sub.topics))), assigned=assigned,
                                        classic=ClassicMeta(cm.session_timeout_ms, list(cm.supported_protocols)))
                cg.target_assignment[m.member_id] = {t: set(ps) for t, ps in assigned.items()}
                cg.update_member(m)
        except (SchemaError, ValueError):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {g.group_id} to "
                                                           "consumer group because the embedded consumer protocol "
                                                           "is malformed.") from None
        # ConsumerGroup.createConsumerGroupRecords
        records.extend(member_subscription_record(cg.group_id, m) for m in cg.members.values())
        records.append(epoch_record(cg.group_id, cg.group_epoch))
        records.extend(target_assignment_record(cg.group_id, mid, cg.target_assignment[mid]) for mid in cg.members)
        records.append(target_assignment_epoch_record(cg.group_id, cg.group_epoch))
        records.extend(current_assignment_record(cg.group_id, m) for m in cg.members.values())
        for mid, m in cg.members.items():
            self.schedule_session_timeout(cg.group_id, mid, m.classic.session_timeout_ms)
        for mid in [*g.members, *g.pending_join_members]:  # only this group's: "g-x" is another group
            self._timer.cancel(heartbeat_key(g.group_id, mid))
        self._timer.cancel(join_key(g.group_id))
        self._timer.cancel(sync_key(g.group_id))
        return cg

    def _convert_to_classic_group(self, group: ConsumerGroup, leaving_id: str,
                                  joining: ConsumerGroupMember | None) -> None:
        """The last consumer-protocol member left a group of classic members: it becomes a classic
        group again (online downgrade), then rebalances without the member that left."""
        records = self.group_tombstones(group, None if joining is None else (leaving_id, joining.member_id))
        cg = ClassicGroup(group.group_id, ClassicGroupState.STABLE, self._now(), self._complete,
                          generation_id=group.group_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE)
        members = [m for mid, m in group.members.items() if mid != leaving_id]
        if joining is not None:
            members.append(joining)
        for m in members:
            cg.add(ClassicGroupMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                      m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                                      list(m.classic.protocols)))
        cg.protocol_name = cg.select_protocol()
        cg.subscribed_topics = cg.compute_subscribed_topics()
        for cm in cg.members.values():
            source = leaving_id if joining is not None and cm.member_id == joining.member_id else cm.member_id
            parts = []
            for tid, ps in sorted(group.target_assignment.get(source, {}).items()):
                name = self.topic_name(tid)
                if name is not None:
                    parts.append((name, sorted(ps)))
            try:
                version = consumer_protocol_version(cm.metadata(cg.protocol_name))
            except SchemaError:
                version = 0
            cm.assignment = serialize_assignment(parts, version)
        records.append(group_metadata_record(cg, cg.group_assignment()))
        for mid in group.members:
            self.cancel_timers(group.group_id, mid)
        self._emit(records, replay=False)
        self._groups[group.group_id] = cg
        self._resume_classic_group(
            cg, None if joining is not None else f"Downgrade group {cg.group_id} from consumer to classic.")

    # ---- classic members in a consumer group ----------------------------------------------------
    def classic_join_to_consumer_group(self, group: ConsumerGroup, ctx, req, token) -> None:
        gid = req.group_id
        records: list[CoordinatorRecord] = []
        member_id = req.member_id
        unknown = member_id == UNKNOWN_MEMBER_ID
        if unknown:
            member_id = self._new_uuid()
        try:
            self._throw_if_full(group, member_id)
            if not group.supports_classic_protocols(req.protocol_type, {p.name for p in req.protocols}):
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not "
                                                                        "supported.")
            if unknown and req.group_instance_id is None and ctx.api_version >= 4:
                self._complete(token, JoinGroupResponse(member_id=member_id,
                                                        error_code=ErrorCode.MEMBER_ID_REQUIRED))
                return None
            member = self._get_member_for_heartbeat(group, member_id, -1, req.group_instance_id, [],
                                                    req.group_instance_id is None or unknown, True, records)
            protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
            try:
                sub = parse_subscription(protocols[0][1])
            except SchemaError:
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "Malformed embedded consumer protocol in "
                                                                        "subscription deserialization.") from None
            updated = member.copy(client_id=ctx.client_id, client_host=ctx.client_host,
                                  subscribed_topic_names=tuple(sorted(set(sub.topics))),
                                  classic=ClassicMeta(req.session_timeout_ms, protocols))
            if req.group_instance_id is not None:
                updated.instance_id = req.group_instance_id
            if sub.rack_id is not None:
                updated.rack_id = sub.rack_id
            if req.rebalance_timeout_ms != -1:
                updated.rebalance_timeout_ms = req.rebalance_timeout_ms
            owned = []
            for topic, ps in sub.owned_partitions:
                tid = self.topic_id(topic)
                if tid is not None:
                    owned.append(cgh.TopicPartitions(topic_id=tid, partitions=list(ps)))
            updated = self._update_and_assign(group, member, updated, records, owned)
        except GroupError as exc:
            self._complete(token, JoinGroupResponse(member_id=member_id if not unknown else "",
                                                    error_code=exc.code))
            return None
        existing_static = group.static_member_id(req.group_instance_id)
        downgrade = (existing_static is not None and existing_static != updated.member_id
                     and group.all_members_use_classic_protocol_except(existing_static)
                     and self._downgrade_enabled() and len(group.members) <= self.config.max_size)
        resp = JoinGroupResponse(member_id=updated.member_id, generation_id=updated.member_epoch,
                                 protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=updated.classic.protocols[0][0],
                                 leader="", members=[], skip_assignment=False)
        self._timer.cancel(self._join_key(gid, updated.member_id))
        if downgrade:
            self._emit(records, replay=False)
            self._convert_to_classic_group(group, existing_static, updated)
        else:
            self._emit(records)
            self.schedule_session_timeout(gid, updated.member_id, req.session_timeout_ms)
            self.schedule_sync_timeout(gid, updated.member_id, req.rebalance_timeout_ms)
        self._complete(token, resp)
        return None

    def _validate_classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None
                                 ) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.get_member(member_id, False)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a "
                                                              f"member of group {group.group_id}.")
            if member.member_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        if not member.use_classic_protocol:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic "
                                                          "protocol.")
        return member

    def classic_sync_to_consumer_group(self, group: ConsumerGroup, ctx, req, token) -> None:
        try:
            member = self._validate_classic_member(group, req.member_id, req.group_instance_id)
            if member.member_epoch != req.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            name = member.classic.protocols[0][0]
            if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                    (req.protocol_name is not None and req.protocol_name != name):
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            self._throw_if_rebalance_in_progress(group, member)
        except GroupError as exc:
            self._complete(token, SyncGroupResponse(error_code=exc.code))
            return None
        self._timer.cancel(self._sync_key(group.group_id, member.member_id))
        self.schedule_session_timeout(group.group_id, member.member_id, member.classic.session_timeout_ms)
        self._complete(token, SyncGroupResponse(protocol_type=req.protocol_type, protocol_name=req.protocol_name,
                                                assignment=self._classic_assignment(member)))
        return None

    def _throw_if_rebalance_in_progress(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.schedule_join_timeout_if_absent(group.group_id, member.member_id, member.rebalance_timeout_ms)
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)

    def _classic_assignment(self, member: ConsumerGroupMember) -> bytes:
        parts = []
        for tid, ps in sorted(member.assigned.items()):
            name = self.topic_name(tid)
            if name is not None:
                parts.append((name, sorted(ps)))
        try:
            version = consumer_protocol_version(member.classic.protocols[0][1])
        except SchemaError:
            version = 0
        return serialize_assignment(parts, version)

    def classic_heartbeat_to_consumer_group(self, group: ConsumerGroup, ctx, req) -> HeartbeatResponse:
        member = self._validate_classic_member(group, req.member_id, req.group_instance_id)
        if member.member_epoch != req.generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        self.schedule_session_timeout(group.group_id, member.member_id, member.classic.session_timeout_ms)
        code = 0
        waiting = (member.state is MemberState.UNRELEASED_PARTITIONS
                   and not group.waiting_on_unreleased_partition(member))
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or waiting:
            code = ErrorCode.REBALANCE_IN_PROGRESS
            self.schedule_join_timeout_if_absent(group.group_id, member.member_id, member.rebalance_timeout_ms)
        return HeartbeatResponse(error_code=code)

    def classic_leave_to_consumer_group(self, group: ConsumerGroup, ctx, req) -> LeaveGroupResponse:
        gid = group.group_id
        responses = []
        records: list[CoordinatorRecord] = []
        leaving: set[str] = set()
        for ident in req.members:
            mid, iid = ident.member_id, ident.group_instance_id
            try:
                if iid is None:
                    member = group.get_member(mid, False)
                    if not member.use_classic_protocol:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    member = group.static_member(iid)
                    if member is None:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                    if mid != UNKNOWN_MEMBER_ID and member.member_id != mid:
                        raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
                    if not member.use_classic_protocol:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                    mid = member.member_id
                records.extend(remove_member_records(gid, mid))
                self.cancel_timers(gid, mid)
                leaving.add(mid)
                responses.append(MemberResponse(member_id=mid, group_instance_id=iid))
            except GroupError as exc:
                responses.append(MemberResponse(member_id=mid, group_instance_id=iid, error_code=exc.code))
        if records:
            meta = self.compute_subscription_metadata(self.subscribed_topic_names(group, removed=leaving))
            if meta != group.subscription_metadata:
                records.append(subscription_metadata_record(gid, meta))
            records.append(epoch_record(gid, group.group_epoch + 1))
            self._emit(records)
        return LeaveGroupResponse(members=responses)

    # ---- describe -------------------------------------------------------------------------------
    def describe(self, group_id: str, default_assignor: str) -> cgd.DescribedGroup:
        g = self._groups.get(group_id)
        if g is None or g.type != "consumer":
            return cgd.DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                      error_message=f"Group {group_id} not found." if g is None else
                                      f"Group {group_id} is not a consumer group.", members=[])

        def tps(a: Assignment):
            out = []
            for tid, ps in sorted(a.items()):
                name = self.topic_name(tid)
                if name is not None:
                    out.append(cgd.TopicPartitions(topic_id=tid, topic_name=name, partitions=sorted(ps)))
            return out
        members = [cgd.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                              member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                              subscribed_topic_names=list(m.subscribed_topic_names),
                              subscribed_topic_regex=m.subscribed_topic_regex,
                              assignment=cgd.Assignment(topic_partitions=tps(m.assigned)),
                              target_assignment=cgd.Assignment(topic_partitions=tps(
                                  g.target_assignment.get(m.member_id, {}))))
                   for m in g.members.values()]
        return cgd.DescribedGroup(group_id=group_id, group_state=str(g.state), group_epoch=g.group_epoch,
                                  assignment_epoch=g.assignment_epoch,
                                  assignor_name=g.preferred_server_assignor(default_assignor), members=members)

    def describe_as_classic(self, group: ConsumerGroup):
        """DescribeGroups on a consumer group: Kafka only describes classic groups there (Dead)."""
        from protocol.generated.messages.describe_groups_response import DescribedGroup  # noqa: PLC0415
        return DescribedGroup(group_id=group.group_id, group_state="Dead", members=[])
