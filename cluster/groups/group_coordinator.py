"""The group coordinator of one ``__consumer_offsets`` partition, as a pure state machine.

Kafka's GroupCoordinatorShard (GroupMetadataManager + OffsetMetadataManager) without threads, futures,
clocks or I/O. It is fed requests (generated protocol messages), ``now_ms`` and the metadata image,
and answers with a :class:`Result`:

* ``records``: ``__consumer_offsets`` records (:class:`CoordinatorRecord`) the adapter must append
  before it releases any response of this result;
* ``response``: the answer to the request that produced the result (None for JoinGroup/SyncGroup,
  whose answers come as completions, possibly much later);
* ``completions``: ``(token, response)`` pairs: delayed JoinGroup/SyncGroup answers, the token being
  whatever the adapter passed in with the request;
* ``error``: a :class:`GroupError` the request failed with (the adapter turns it into the API's
  error response, as Kafka's ``handleOperationException``).

Timers (session expiry, rebalance and join timeouts, the initial rebalance delay, offset expiration)
live in :class:`Timer` and fire from :meth:`GroupCoordinatorShard.poll`; :meth:`next_deadline` says
when to call it. The state is rebuilt from the partition's records with :meth:`replay` and
:meth:`on_loaded`. Consumer (KIP-848) groups are in ``cluster.groups.group_consumer``, share groups (KIP-932) in
``cluster.groups.group_share``; a result's ``share_state`` lists the share-state RPCs (InitializeShareGroupState,
DeleteShareGroupState) the adapter sends to the share coordinator once the result's records are written.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
from typing import Any, Callable

from cluster.groups.group_classic import (
    EMPTY_ASSIGNMENT, UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupMember, ClassicGroupState, GroupError,
    generate_member_id, heartbeat_key, join_key, sync_key,
)
from cluster.groups.group_config import GroupConfig
from cluster.groups.group_consumer import ConsumerGroupManager
from cluster.groups.group_record_helpers import (
    empty_group_metadata_record, group_metadata_record, offset_commit_record, offset_tombstone,
)
from cluster.groups.group_records import CoordinatorRecord
from cluster.groups.group_share import ShareGroupManager
from cluster.groups.offsets import NO_EXPIRE, OffsetAndMetadata, OffsetStore, PendingTransactionalOffsets
from protocol.errors import ErrorCode
from protocol.generated.coordinator import (
    GroupMetadataKey, GroupMetadataValue, OffsetCommitKey,
)
from protocol.generated.messages import (
    HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse, OffsetDeleteResponse,
    SyncGroupResponse,
)
from protocol.generated.messages.describe_groups_response import DescribedGroup, DescribedGroupMember
from protocol.generated.messages.leave_group_response import MemberResponse
from protocol.generated.messages.list_groups_response import ListedGroup
from protocol.generated.messages.offset_commit_response import OffsetCommitResponsePartition, OffsetCommitResponseTopic
from protocol.generated.messages.offset_delete_response import (
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
)
from protocol.generated.messages.offset_fetch_response import (
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
)
from protocol.generated.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
)

log = logging.getLogger("odradek.groups")

S = ClassicGroupState
INVALID_OFFSET = -1
GROUP_EXPIRATION_KEY = "expire-group-metadata"


@dataclasses.dataclass(frozen=True)
class ReqCtx:
    """What the coordinator needs from a request's header and connection."""

    client_id: str = ""
    client_host: str = ""
    api_version: int = 0
    # the topics among those given that the requester may see (its DESCRIBE ACLs: Kafka drops the others from
    # the topics a regex subscription resolves to, as the member refreshing the regex sees them); None: all
    topic_filter: Callable[[frozenset], frozenset] | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass
class Result:
    records: list[CoordinatorRecord] = dataclasses.field(default_factory=list)
    response: Any = None
    completions: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)
    error: GroupError | None = None
    # a transactional write (TxnOffsetCommit): the records go in one transactional batch of this producer
    # and reach the state (as pending offsets) only once appended, through replay_transactional
    producer_id: int = -1
    producer_epoch: int = -1
    # share-state RPCs to send once the records are written (group_share.InitializeShareState, DeleteShareState)
    share_state: list[Any] = dataclasses.field(default_factory=list)


class Timer:
    """Keyed one-shot timers: scheduling a key again replaces it (Kafka's CoordinatorTimer)."""

    def __init__(self) -> None:
        self._tasks: dict[str, tuple[int, int, Callable[[], None]]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    def schedule(self, key: str, now_ms: int, delay_ms: int, fn: Callable[[], None]) -> None:
        seq = next(self._seq)
        deadline = now_ms + max(0, int(delay_ms))
        self._tasks[key] = (deadline, seq, fn)
        heapq.heappush(self._heap, (deadline, seq, key))

    def schedule_if_absent(self, key: str, now_ms: int, delay_ms: int, fn: Callable[[], None]) -> None:
        if key not in self._tasks:
            self.schedule(key, now_ms, delay_ms, fn)

    def cancel(self, key: str) -> None:
        self._tasks.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self._tasks

    def deadline(self, key: str) -> int | None:
        t = self._tasks.get(key)
        return None if t is None else t[0]

    def next_deadline(self) -> int | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            t = self._tasks.get(key)
            if t is not None and t[1] == seq:
                return deadline
            heapq.heappop(self._heap)
        return None

    def pop_expired(self, now_ms: int) -> Callable[[], None] | None:
        while self._heap and self._heap[0][0] <= now_ms:
            deadline, seq, key = heapq.heappop(self._heap)
            t = self._tasks.get(key)
            if t is not None and t[1] == seq:
                del self._tasks[key]
                return t[2]
        return None

    def clear(self) -> None:
        self._tasks.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._tasks)


def _protocols(req) -> list[tuple[str, bytes]]:
    return [(p.name, bytes(p.metadata)) for p in req.protocols]


def join_reason(req) -> str:
    return req.reason if getattr(req, "reason", None) else "not provided"


class GroupCoordinatorShard:
    """Groups and offsets of one ``__consumer_offsets`` partition."""

    def __init__(self, partition: int, config: GroupConfig, new_uuid: Callable[[], str]) -> None:
        """``new_uuid`` makes member ids: the adapter passes a random UUID source, a simulation a seeded one."""
        self.partition = partition
        self.config = config
        self.new_uuid = new_uuid
        self.groups: dict[str, Any] = {}  # ClassicGroup | ConsumerGroup
        self.offsets = OffsetStore()
        self.pending_offsets = PendingTransactionalOffsets()
        # where the next record lands in the partition's log: a commit's record offset decides whether a
        # transactional offset overrides it when its transaction commits (replayEndTransactionMarker)
        self.next_offset = 0
        self.timer = Timer()
        self.now_ms = 0
        self.image = None  # the latest committed metadata image (on_new_metadata_image)
        self._records: list[CoordinatorRecord] = []
        self._completions: list[tuple[Any, Any]] = []
        self._share_state: list[Any] = []
        # consumer groups share this shard's group table, timer and outbox, through these alone
        self.consumer = ConsumerGroupManager(
            config=config, now_ms=lambda: self.now_ms, image=lambda: self.image, timer=self.timer,
            groups=self.groups, remove_group=self.remove_group, new_uuid=new_uuid, append=self.append,
            complete=self.complete, resume_classic_group=self.resume_classic_group)
        self.share = ShareGroupManager(
            config=config, now_ms=lambda: self.now_ms, image=lambda: self.image, timer=self.timer,
            groups=self.groups, remove_group=self.remove_group, append=self.append, emit=self._share_state.append)

    # ---- plumbing --------------------------------------------------------------------------------
    def complete(self, token, response) -> None:
        """Answer the delayed request ``token`` (JoinGroup/SyncGroup) with ``response``, in this result."""
        if token is not None:
            self._completions.append((token, response))

    def append(self, records: list[CoordinatorRecord] | CoordinatorRecord, replay: bool = False) -> None:
        """Add records to this result; ``replay`` applies them to the state too (else the caller
        already changed the state itself)."""
        if isinstance(records, CoordinatorRecord):
            records = [records]
        for r in records:
            self._records.append(r)
            record_offset = self.next_offset
            self.next_offset += 1
            if replay:
                self.replay(r, -1, record_offset=record_offset)

    def on_new_metadata_image(self, image) -> None:
        """A newly committed metadata image (Kafka's GroupMetadataManager.onNewMetadataImage): topic names,
        ids and partition counts that consumer-group assignments are computed from."""
        self.image = image

    def _run(self, now_ms: int, fn: Callable, *args) -> Result:
        self.now_ms = now_ms
        error = None
        response = None
        try:
            response = fn(*args)
        except GroupError as exc:
            error = exc
        res = Result(self._records, response, self._completions, error)
        res.share_state = list(self._share_state)
        self._records, self._completions = [], []
        self._share_state.clear()
        return res

    def next_deadline(self) -> int | None:
        return self.timer.next_deadline()

    def poll(self, now_ms: int) -> Result:
        """Run every timer due at ``now_ms``."""
        def run():
            while True:
                fn = self.timer.pop_expired(now_ms)
                if fn is None:
                    return None
                try:
                    fn()
                except GroupError as exc:
                    log.debug("timer task failed: %s", exc)
        return self._run(now_ms, run)

    # ---- group lookup ----------------------------------------------------------------------------
    def group(self, group_id: str):
        g = self.groups.get(group_id)
        if g is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return g

    def classic_group(self, group_id: str, create: bool) -> ClassicGroup:
        g = self.groups.get(group_id)
        if g is None:
            if not create:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Classic group {group_id} not found.")
            g = ClassicGroup(group_id, S.EMPTY, self.now_ms, self.complete)
            self.groups[group_id] = g
            return g
        if g.type == "classic":
            return g
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group.")

    def remove_group(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    # ==== JoinGroup ==============================================================================
    def join_group(self, ctx: ReqCtx, req, token, now_ms: int) -> Result:
        return self._run(now_ms, self._join_group, ctx, req, token)

    def _join_group(self, ctx: ReqCtx, req, token) -> None:
        group = self.groups.get(req.group_id)
        if group is not None:
            if group.type == "consumer" and not group.is_empty():
                return self.consumer.classic_join_to_consumer_group(group, ctx, req, token)
            if group.type not in ("consumer", "classic"):
                self.complete(token, JoinGroupResponse(member_id=UNKNOWN_MEMBER_ID,
                                                       error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
                return None
        return self._join_to_classic_group(ctx, req, token)

    def _join_to_classic_group(self, ctx: ReqCtx, req, token) -> None:
        group_id, member_id = req.group_id, req.member_id
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        self.consumer.maybe_delete_empty_consumer_group(group_id)
        records_before = len(self._records)
        is_new_group = group_id not in self.groups
        try:
            group = self.classic_group(group_id, is_unknown)
        except GroupError:
            self.complete(token, JoinGroupResponse(member_id=member_id, error_code=ErrorCode.UNKNOWN_MEMBER_ID))
            return None
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self.complete(token, JoinGroupResponse(member_id=UNKNOWN_MEMBER_ID,
                                                   error_code=ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._join_new_member(ctx, req, group, token)
        else:
            self._join_existing_member(ctx, req, group, token)
        if is_new_group and len(self._records) == records_before and group_id in self.groups:
            # a new group is committed with an empty GroupMetadata record (the leave/expire paths may
            # have removed it already)
            self.append(empty_group_metadata_record(group))
        return None

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.state is S.PREPARING_REBALANCE:
            return (group.has_member(member_id) and group.member(member_id).is_awaiting_join) \
                or group.num_members_awaiting_join < self.config.max_size
        return group.has_member(member_id) or group.num_members() < self.config.max_size

    def _join_new_member(self, ctx: ReqCtx, req, group: ClassicGroup, token) -> None:
        if group.is_in_state(S.DEAD):
            self.complete(token, JoinGroupResponse(member_id=UNKNOWN_MEMBER_ID,
                                                   error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(req.protocol_type, {p.name for p in req.protocols}):
            self.complete(token, JoinGroupResponse(member_id=UNKNOWN_MEMBER_ID,
                                                   error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_member_id = generate_member_id(ctx.client_id or "", req.group_instance_id, self.new_uuid())
            if req.group_instance_id is not None:
                existing = group.static_member_id(req.group_instance_id)
                if existing is not None:
                    log.info("Static member with groupInstanceId=%s and unknown member id joins group %s in %s "
                             "state. Replacing previously mapped member %s with this groupInstanceId.",
                             req.group_instance_id, group.group_id, group.state, existing)
                    self._update_static_member_then_rebalance_or_complete_join(
                        ctx, req, group, existing, new_member_id, token)
                else:
                    self._add_member_then_rebalance_or_complete_join(ctx, req, group, new_member_id, token)
            elif ctx.api_version >= 4:
                # JoinGroupRequest.requiresKnownMemberId: the member must rejoin with the id we hand out
                group.add_pending_member(new_member_id)
                self.timer.schedule(heartbeat_key(group.group_id, new_member_id), self.now_ms,
                                    req.session_timeout_ms,
                                    lambda gid=group.group_id, mid=new_member_id:
                                    self._expire_member_heartbeat(gid, mid))
                self.complete(token, JoinGroupResponse(member_id=new_member_id,
                                                       error_code=ErrorCode.MEMBER_ID_REQUIRED))
            else:
                self._add_member_then_rebalance_or_complete_join(ctx, req, group, new_member_id, token)

    def _join_existing_member(self, ctx: ReqCtx, req, group: ClassicGroup, token) -> None:
        member_id = req.member_id
        if group.is_in_state(S.DEAD):
            self.complete(token, JoinGroupResponse(member_id=member_id,
                                                   error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, {p.name for p in req.protocols}):
            self.complete(token, JoinGroupResponse(member_id=member_id,
                                                   error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                raise AssertionError("a pending member cannot be a static member")
            self._add_member_then_rebalance_or_complete_join(ctx, req, group, member_id, token)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except GroupError as exc:
            self.complete(token, JoinGroupResponse(member_id=member_id, error_code=exc.code, protocol_type=None,
                                                   protocol_name=None))
            return
        member = group.member(member_id)
        protocols = _protocols(req)
        if group.is_in_state(S.PREPARING_REBALANCE):
            self._update_member_then_rebalance_or_complete_join(req, group, member, token)
        elif group.is_in_state(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # the member lost its JoinGroup response: answer with the current generation again
                self.complete(token, JoinGroupResponse(
                    members=group.current_members_metadata() if group.is_leader(member_id) else [],
                    member_id=member_id, generation_id=group.generation_id, protocol_name=group.protocol_name,
                    protocol_type=group.protocol_type, leader=group.leader_id, skip_assignment=False))
            else:
                self._update_member_then_rebalance_or_complete_join(req, group, member, token)
        elif group.is_in_state(S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoining forces a rebalance (e.g. topic metadata changed)
                self._update_member_then_rebalance_or_complete_join(req, group, member, token)
            else:
                self.complete(token, JoinGroupResponse(
                    members=[], member_id=member_id, generation_id=group.generation_id,
                    protocol_name=group.protocol_name, protocol_type=group.protocol_type, leader=group.leader_id,
                    skip_assignment=False))
        else:
            self.complete(token, JoinGroupResponse(member_id=member_id, error_code=ErrorCode.UNKNOWN_MEMBER_ID))

    def _update_member_then_rebalance_or_complete_join(self, req, group, member, token) -> None:
        group.update_member(member, _protocols(req), req.rebalance_timeout_ms, req.session_timeout_ms, token)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"Member {member.member_id} is joining group during {group.state}; "
                   f"client reason: {join_reason(req)}")

    def _add_member_then_rebalance_or_complete_join(self, ctx: ReqCtx, req, group: ClassicGroup, member_id: str,
                                                    token) -> None:
        member = ClassicGroupMember(member_id, req.group_instance_id, ctx.client_id or "", ctx.client_host,
                                    req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                    _protocols(req))
        member.is_new = True
        if group.is_in_state(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member, token)
        # a new member cannot heartbeat while its JoinGroup is parked: time the join out instead
        self._reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"Adding new member {member_id} with group instance id {req.group_instance_id}; "
                   f"client reason: {join_reason(req)}")

    def _update_static_member_then_rebalance_or_complete_join(self, ctx: ReqCtx, req, group: ClassicGroup,
                                                             old_member_id: str, new_member_id: str,
                                                             token) -> None:
        current_leader = group.leader_id
        new_member = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self._reschedule_heartbeat(group, new_member)
        group.update_member(new_member, _protocols(req), req.rebalance_timeout_ms, req.session_timeout_ms, token)
        if group.is_in_state(S.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # the static member is back before its session expired: no rebalance, the group's
                # metadata is stored with the new member id and the member gets its old assignment
                self.append(group_metadata_record(group, group.group_assignment()))
                if ctx.api_version >= 9:
                    is_leader = group.is_leader(new_member_id)
                    group.complete_join(new_member, JoinGroupResponse(
                        members=group.current_members_metadata() if is_leader else [], member_id=new_member_id,
                        generation_id=group.generation_id, protocol_name=group.protocol_name,
                        protocol_type=group.protocol_type, leader=group.leader_id, skip_assignment=is_leader))
                else:
                    group.complete_join(new_member, JoinGroupResponse(
                        member_id=new_member_id, generation_id=group.generation_id,
                        protocol_name=group.protocol_name, protocol_type=group.protocol_type,
                        leader=current_leader, skip_assignment=False))
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"Group's selectedProtocol will change because static member {new_member_id} with "
                           f"instance id {req.group_instance_id} joined with change of protocol")
        elif group.is_in_state(S.COMPLETING_REBALANCE):
            # the leader may already hold the old member id: rebalance so the new id gets an assignment
            self._prepare_rebalance(group, f"Updating metadata for static member {new_member_id} with instance id "
                                           f"{req.group_instance_id}")
        elif group.is_in_state(S.EMPTY) or group.is_in_state(S.DEAD):
            raise AssertionError(f"Group {group.group_id} was not supposed to be in the state {group.state} "
                                 f"when the unknown static member {req.group_instance_id} rejoins.")
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in_state(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_with_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in_state(S.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self.timer.schedule(join_key(gid), self.now_ms, delay,
                                lambda: self._try_complete_initial_rebalance_else_schedule(gid, delay, remaining))
        group.transition_to(S.PREPARING_REBALANCE, self.now_ms)
        log.info("Preparing to rebalance group %s in state %s with old generation %s (reason: %s).",
                 group.group_id, group.state, group.generation_id, reason)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            gid = group.group_id
            self.timer.schedule(join_key(gid), self.now_ms, group.rebalance_timeout_ms(),
                                lambda: self._complete_join_by_id(gid))

    def _try_complete_initial_rebalance_else_schedule(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        try:
            group = self.classic_group(group_id, False)
        except GroupError:
            return
        if group.new_member_added and remaining_ms != 0:
            # a new member arrived during the delay: wait another delay (bounded by the rebalance timeout)
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self.timer.schedule(join_key(group_id), self.now_ms, new_delay,
                                lambda: self._try_complete_initial_rebalance_else_schedule(
                                    group_id, new_delay, new_remaining))
        else:
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in_state(S.PREPARING_REBALANCE):
            return
        if group.previous_state is S.EMPTY:
            return  # the initial rebalance completes from its delayed timer only
        if not group.has_all_members_joined():
            return
        self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        try:
            group = self.classic_group(group_id, False)
        except GroupError:
            return
        self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.timer.cancel(join_key(group.group_id))
        gid = group.group_id
        for failed in [m for m in group.not_yet_rejoined_members() if not m.is_static]:
            group.remove(failed.member_id)
            self.timer.cancel(heartbeat_key(gid, failed.member_id))
        if group.is_in_state(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait for the session timeouts to clear the members out
            self.timer.schedule(join_key(gid), self.now_ms, group.rebalance_timeout_ms(),
                                lambda: self._complete_join_by_id(gid))
            return
        group.init_next_generation(self.now_ms)
        if group.is_in_state(S.EMPTY):
            log.info("Group %s with generation %s is now empty.", gid, group.generation_id)
            self.append(group_metadata_record(group, {}))
        else:
            log.info("Stabilized group %s generation %s with %s members.", gid, group.generation_id,
                     group.num_members())
            for member in list(group.members.values()):
                resp = JoinGroupResponse(
                    members=group.current_members_metadata() if group.is_leader(member.member_id) else [],
                    member_id=member.member_id, generation_id=group.generation_id,
                    protocol_name=group.protocol_name, protocol_type=group.protocol_type, leader=group.leader_id,
                    skip_assignment=False, error_code=0)
                group.complete_join(member, resp)
                self._reschedule_heartbeat(group, member)
                member.is_new = False
                group.pending_sync_members.add(member.member_id)
            self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        gid, gen = group.group_id, group.generation_id
        self.timer.schedule(sync_key(gid), self.now_ms, group.rebalance_timeout_ms(),
                            lambda: self._expire_pending_sync(gid, gen))

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        try:
            group = self.classic_group(group_id, False)
        except GroupError:
            return
        if generation_id != group.generation_id:
            return
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and not group.has_received_sync_from_all_members():
            pending = set(group.pending_sync_members)
            for mid in pending:
                group.remove(mid)
                self.timer.cancel(heartbeat_key(group_id, mid))
            self._prepare_rebalance(group, f"Removing {sorted(pending)} on pending sync request expiration")

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember,
                              timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        self.timer.schedule(heartbeat_key(gid, mid), self.now_ms,
                            member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            lambda: self._expire_member_heartbeat(gid, mid))

    def reschedule_classic_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is not None:
            self._reschedule_heartbeat(group, member)

    def resume_classic_group(self, group: ClassicGroup, rebalance_reason: str | None) -> None:
        """A classic group just made from a consumer group (online downgrade) and put in the group table
        takes up the classic protocol: its members' sessions start, and with a reason it rebalances."""
        for member in list(group.members.values()):
            self._reschedule_heartbeat(group, member)
        if rebalance_reason is not None:
            self._prepare_rebalance(group, rebalance_reason)

    def _expire_member_heartbeat(self, group_id: str, member_id: str) -> None:
        try:
            group = self.classic_group(group_id, False)
        except GroupError:
            return
        if group.is_in_state(S.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("Pending member %s in group %s has been removed after session timeout expiration.",
                     member_id, group_id)
            group.remove(member_id)
            if group.is_in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.has_satisfied_heartbeat():
            log.info("Member %s in group %s has failed, removing it from the group.", member_id, group_id)
            self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration.")

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember, reason: str) -> None:
        group.complete_join(member, JoinGroupResponse(member_id=UNKNOWN_MEMBER_ID,
                                                      error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, code: int) -> None:
        if not group.is_in_state(S.COMPLETING_REBALANCE):
            raise AssertionError(f"Group {group.group_id} must be in CompletingRebalance but is in {group.state}")
        for m in group.members.values():
            m.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, code)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, EMPTY_ASSIGNMENT)
        self._propagate_assignment(group, 0)

    def _propagate_assignment(self, group: ClassicGroup, code: int) -> None:
        pname = group.protocol_name if code == 0 else None
        ptype = group.protocol_type if code == 0 else None
        for m in list(group.members.values()):
            if group.complete_sync(m, SyncGroupResponse(protocol_name=pname, protocol_type=ptype,
                                                        assignment=m.assignment, error_code=code)):
                # the session restarts once the assignment is delivered
                self._reschedule_heartbeat(group, m)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (S.DEAD, S.EMPTY, S.PREPARING_REBALANCE):
            self.timer.cancel(sync_key(group.group_id))
        elif group.has_received_sync_from_all_members():
            self.timer.cancel(sync_key(group.group_id))

    # ==== SyncGroup ==============================================================================
    def sync_group(self, ctx: ReqCtx, req, token, now_ms: int) -> Result:
        return self._run(now_ms, self._sync_group, ctx, req, token)

    def _sync_group(self, ctx: ReqCtx, req, token) -> None:
        group = self.groups.get(req.group_id)
        if group is None or group.is_empty():
            self.complete(token, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
            return None
        if group.type == "consumer":
            return self.consumer.classic_sync_to_consumer_group(group, ctx, req, token)
        if group.type != "classic":
            self.complete(token, SyncGroupResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND))
            return None
        member_id = req.member_id
        err = self._validate_sync_group(group, req)
        if err is not None:
            self.complete(token, SyncGroupResponse(error_code=err))
        elif group.is_in_state(S.PREPARING_REBALANCE):
            self.complete(token, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_in_state(S.COMPLETING_REBALANCE):
            member = group.member(member_id)
            if member.sync_token is not None:
                # a retried SyncGroup replaces the parked one; the old one learns the group moved on
                self.complete(member.sync_token, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_token = token
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader %s for group %s for generation %s. The group has %s "
                         "members.", member_id, group.group_id, group.generation_id, group.num_members())
                assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
                for mid in group.members:
                    assignment.setdefault(mid, EMPTY_ASSIGNMENT)
                self.append(group_metadata_record(group, assignment))
                self._set_and_propagate_assignment(group, assignment)
                group.transition_to(S.STABLE, self.now_ms)
        elif group.is_in_state(S.STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.member(member_id)
            self.complete(token, SyncGroupResponse(protocol_type=group.protocol_type,
                                                   protocol_name=group.protocol_name,
                                                   assignment=member.assignment, error_code=0))
        else:
            raise AssertionError(f"Reached unexpected condition for Dead group {group.group_id}")
        return None

    def _validate_sync_group(self, group: ClassicGroup, req) -> int | None:
        if group.is_in_state(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except GroupError as exc:
            return exc.code
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    # ==== Heartbeat ==============================================================================
    def heartbeat(self, ctx: ReqCtx, req, now_ms: int) -> Result:
        return self._run(now_ms, self._heartbeat, ctx, req)

    def _heartbeat(self, ctx: ReqCtx, req) -> HeartbeatResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
        if group.type == "consumer":
            return self.consumer.classic_heartbeat_to_consumer_group(group, ctx, req)
        if group.type != "classic":
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if group.is_in_state(S.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        group.validate_member(req.member_id, req.group_instance_id)
        if req.generation_id != group.generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if group.is_in_state(S.EMPTY):
            return HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        self._reschedule_heartbeat(group, group.member(req.member_id))
        if group.is_in_state(S.PREPARING_REBALANCE):
            return HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
        return HeartbeatResponse(error_code=0)

    # ==== LeaveGroup =============================================================================
    def leave_group(self, ctx: ReqCtx, req, now_ms: int) -> Result:
        return self._run(now_ms, self._leave_group, ctx, req)

    def _leave_group(self, ctx: ReqCtx, req) -> LeaveGroupResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
        if group.type == "consumer":
            return self.consumer.classic_leave_to_consumer_group(group, ctx, req)
        if group.type != "classic":
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if group.is_in_state(S.DEAD):
            return LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        responses = []
        for ident in req.members:
            reason = ident.reason or "not provided"
            if ident.member_id == UNKNOWN_MEMBER_ID:
                # administrative removal of a static member by instance id
                if ident.group_instance_id is not None and group.has_static_member(ident.group_instance_id):
                    self._remove_current_member(group, group.static_member_id(ident.group_instance_id), reason)
                    responses.append(MemberResponse(member_id=ident.member_id,
                                                    group_instance_id=ident.group_instance_id))
                else:
                    responses.append(MemberResponse(member_id=ident.member_id,
                                                    group_instance_id=ident.group_instance_id,
                                                    error_code=ErrorCode.UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(ident.member_id):
                group.remove(ident.member_id)
                self.timer.cancel(heartbeat_key(group.group_id, ident.member_id))
                responses.append(MemberResponse(member_id=ident.member_id, group_instance_id=ident.group_instance_id))
            else:
                try:
                    group.validate_member(ident.member_id, ident.group_instance_id)
                    self._remove_current_member(group, ident.member_id, reason)
                    responses.append(MemberResponse(member_id=ident.member_id,
                                                    group_instance_id=ident.group_instance_id))
                except GroupError as exc:
                    responses.append(MemberResponse(member_id=ident.member_id,
                                                    group_instance_id=ident.group_instance_id, error_code=exc.code))
        valid = [r.member_id for r in responses if r.error_code == 0]
        if valid:
            reason = f"explicit `LeaveGroup` request for ({', '.join(valid)}) members."
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, reason)
            elif group.is_in_state(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return LeaveGroupResponse(members=responses)

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        log.info("[Group %s] Member %s has left group through explicit `LeaveGroup` request; client reason: %s",
                 group.group_id, member_id, reason)
        group.complete_join(member, JoinGroupResponse(member_id=UNKNOWN_MEMBER_ID,
                                                      error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    # ==== ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848) ==============================
    def consumer_group_heartbeat(self, ctx: ReqCtx, req, now_ms: int) -> Result:
        return self._run(now_ms, self.consumer.heartbeat, ctx, req)

    def consumer_group_describe(self, group_ids: list[str]) -> list:
        return [self.consumer.describe(gid, self.config.consumer_assignors[0]) for gid in group_ids]

    # ==== share groups (KIP-932) =================================================================
    def share_group_heartbeat(self, ctx: ReqCtx, req, now_ms: int) -> Result:
        """ShareGroupHeartbeat; the result's ``share_state`` may hold an InitializeShareState to send."""
        return self._run(now_ms, self.share.heartbeat, ctx, req)

    def share_group_describe(self, group_ids: list[str]) -> list:
        return [self.share.describe(gid) for gid in group_ids]

    def share_group_initialized(self, group_id: str, topics: dict[bytes, set[int]], now_ms: int) -> Result:
        """The share coordinator initialized these partitions (GroupCoordinatorShard.initializeShareGroupState)."""
        return self._run(now_ms, self.share.initialized, group_id, topics)

    def share_group_uninitialized(self, group_id: str, topics: dict[bytes, set[int]], now_ms: int) -> Result:
        """Initializing these partitions failed (uninitializeShareGroupState): a later heartbeat retries."""
        return self._run(now_ms, self.share.uninitialized, group_id, topics)

    def share_group_topics_deleted(self, topic_ids: set[bytes], now_ms: int) -> Result:
        """Topics deleted from the metadata image leave the share groups' share-state partition metadata
        (GroupMetadataManager.maybeCleanupShareGroupState, on a metadata delta deleting topics)."""
        return self._run(now_ms, self.share.topics_deleted, set(topic_ids))

    def share_group_delete_requests(self, group_ids: list[str], now_ms: int) -> Result:
        """First step of DeleteGroups for share groups (GroupCoordinatorShard.sharePartitionDeleteRequests): the
        response maps each empty share group with share state to its DeleteShareState (error 0), each non-empty one
        to (None, NON_EMPTY_GROUP); other groups are left out (their deletion goes on as usual). Once a group's
        share state is deleted, :meth:`delete_groups` deletes it."""
        def run():
            out = {}
            for gid in group_ids:
                group = self.groups.get(gid)
                if group is None or group.type != "share":
                    continue
                try:
                    group.validate_delete_group()
                except GroupError as exc:
                    out[gid] = (None, exc.code)
                    continue
                req = self.share.delete_state_request(group)
                if req is not None:
                    out[gid] = (req, 0)
            return out
        return self._run(now_ms, run)

    def share_group_initialized_partitions(self, group_id: str) -> dict[bytes, set[int]]:
        """The share partitions whose state is initialized (a read: DescribeShareGroupOffsets of all topics)."""
        return self.share.initialized_partitions(group_id)

    def share_group_alter_offsets(self, group_id: str, topics, now_ms: int) -> Result:
        """AlterShareGroupOffsets: the response is (AlterShareGroupOffsetsResponse, InitializeShareState | None);
        the adapter sends the initialization once the records are written (not through ``share_state``: its
        outcome is this request's answer, not a heartbeat's)."""
        return self._run(now_ms, self.share.alter_offsets, group_id, topics)

    def share_group_delete_offsets_initiate(self, group_id: str, topic_names: list[str], now_ms: int) -> Result:
        """First step of DeleteShareGroupOffsets: the response is (error topics, DeleteShareState | None)."""
        return self._run(now_ms, self.share.delete_offsets_initiate, group_id, topic_names)

    def share_group_delete_offsets_complete(self, group_id: str, topics: dict[bytes, str], now_ms: int) -> Result:
        """Last step of DeleteShareGroupOffsets, for the topics whose share state was deleted."""
        return self._run(now_ms, self.share.delete_offsets_complete, group_id, topics)

    # ==== offsets ================================================================================
    def commit_offsets(self, ctx: ReqCtx, req, now_ms: int) -> Result:
        """``req`` is an OffsetCommitRequest whose topics all exist (the handler answers unknown topics)."""
        return self._run(now_ms, self._commit_offsets, ctx, req)

    def _commit_offsets(self, ctx: ReqCtx, req) -> OffsetCommitResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id_or_member_epoch < 0:
                log.info("[GroupId %s] Creating a simple consumer group via manual offset commit.", req.group_id)
                group = self.classic_group(req.group_id, True)
            elif ctx.api_version >= 9:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
            else:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if group.type == "classic":
            group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation_id_or_member_epoch)
            if group.state in (S.STABLE, S.PREPARING_REBALANCE):
                # in the classic protocol a commit keeps the session alive
                self.reschedule_classic_heartbeat(group, req.member_id)
        else:
            group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation_id_or_member_epoch,
                                         False, ctx.api_version)
        expire = NO_EXPIRE if req.retention_time_ms == -1 else self.now_ms + req.retention_time_ms
        out = OffsetCommitResponse(topics=[])
        records = []
        for t in req.topics:
            rt = OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[])
            out.topics.append(rt)
            for p in t.partitions:
                md = p.committed_metadata
                if md is not None and len(md) > self.config.offset_metadata_max_bytes:
                    rt.partitions.append(OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                rt.partitions.append(OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=0))
                om = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, md or "",
                                       self.now_ms, expire)
                records.append(offset_commit_record(req.group_id, t.name, p.partition_index, om))
        self.append(records, replay=True)
        return out

    def commit_transactional_offsets(self, ctx: ReqCtx, req, now_ms: int) -> Result:
        """TxnOffsetCommit (OffsetMetadataManager.commitTransactionalOffset): ``req``'s topics all exist. The
        records are written as the producer's transactional batch; the adapter hands them back to
        :meth:`replay_transactional` once appended, where they become pending offsets."""
        res = self._run(now_ms, self._commit_transactional_offsets, ctx, req)
        res.producer_id, res.producer_epoch = req.producer_id, req.producer_epoch
        return res

    def _commit_transactional_offsets(self, ctx: ReqCtx, req) -> TxnOffsetCommitResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id < 0:
                # a producer committing for a group without membership: a "simple" group
                group = self.classic_group(req.group_id, True)
            else:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if group.type == "classic":
            group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation_id, True)
        else:
            try:
                group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation_id, True,
                                             ctx.api_version)
            except GroupError as exc:
                if exc.code == ErrorCode.STALE_MEMBER_EPOCH:
                    raise GroupError(ErrorCode.ILLEGAL_GENERATION) from None
                raise
        out = TxnOffsetCommitResponse(topics=[])
        for t in req.topics:
            rt = TxnOffsetCommitResponseTopic(name=t.name, partitions=[])
            out.topics.append(rt)
            for p in t.partitions:
                md = p.committed_metadata
                if md is not None and len(md) > self.config.offset_metadata_max_bytes:
                    rt.partitions.append(TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                rt.partitions.append(TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                                      error_code=0))
                om = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, md or "", self.now_ms)
                self._records.append(offset_commit_record(req.group_id, t.name, p.partition_index, om))
        return out

    def replay_transactional(self, records: list[CoordinatorRecord], producer_id: int) -> None:
        """A TxnOffsetCommit's records were appended (at :attr:`next_offset`): their offsets are now pending."""
        for r in records:
            record_offset = self.next_offset
            self.next_offset += 1
            self.replay(r, -1, producer_id, record_offset=record_offset)

    def replay_end_transaction_marker(self, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` is in the log (replayEndTransactionMarker)."""
        self.next_offset += 1
        n = self.pending_offsets.end(producer_id, commit, self.offsets)
        log.debug("%s marker of producer %d: %d transactional offsets materialised",
                  "COMMIT" if commit else "ABORT", producer_id, n)

    def fetch_offsets(self, group_req, require_stable: bool, now_ms: int) -> OffsetFetchResponseGroup:
        """One group of an OffsetFetch (v8+ shape): ``group_req.topics`` None means all topics."""
        self.now_ms = now_ms
        gid = group_req.group_id
        try:
            group = self.group(gid)
            group.validate_offset_fetch(getattr(group_req, "member_id", None),
                                        getattr(group_req, "member_epoch", -1))
            found = True
        except GroupError as exc:
            if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
                return OffsetFetchResponseGroup(group_id=gid, topics=[], error_code=exc.code)
            found = False
        stored = self.offsets.group(gid) if found else {}
        # require_stable (KIP-447): a partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT
        unstable = self.pending_offsets.pending_partitions(gid) if require_stable and found else set()
        topics = []
        if group_req.topics is None:
            for topic, parts in stored.items():
                topics.append(OffsetFetchResponseTopics(name=topic, partitions=[
                    _fetched(p, om, (topic, p) in unstable) for p, om in parts.items()]))
        else:
            for t in group_req.topics:
                parts = stored.get(t.name, {})
                topics.append(OffsetFetchResponseTopics(name=t.name, topic_id=getattr(t, "topic_id", None) or
                                                        bytes(16), partitions=[
                    _fetched(p, parts.get(p), (t.name, p) in unstable) for p in t.partition_indexes]))
        return OffsetFetchResponseGroup(group_id=gid, topics=topics, error_code=0)

    def delete_offsets(self, req, now_ms: int) -> Result:
        return self._run(now_ms, self._delete_offsets, req)

    def _delete_offsets(self, req) -> OffsetDeleteResponse:
        group = self.group(req.group_id)
        group.validate_offset_delete()
        records = []
        topics = []
        for t in req.topics:
            parts = []
            if group.is_subscribed_to_topic(t.name):
                parts = [OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                                       error_code=ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                         for p in t.partitions]
            else:
                for p in t.partitions:
                    parts.append(OffsetDeleteResponsePartition(partition_index=p.partition_index))
                    # a tombstone also for a partition with only pending transactional offsets
                    if self.offsets.get(req.group_id, t.name, p.partition_index) is not None \
                            or self.pending_offsets.has_pending(req.group_id, t.name, p.partition_index):
                        records.append(offset_tombstone(req.group_id, t.name, p.partition_index))
            topics.append(OffsetDeleteResponseTopic(name=t.name, partitions=parts))
        self.append(records, replay=True)
        return OffsetDeleteResponse(topics=topics)

    def delete_all_offsets(self, group_id: str) -> list[CoordinatorRecord]:
        """Tombstones for the committed offsets and for partitions that only have pending transactional ones."""
        stored = self.offsets.group(group_id)
        out = [offset_tombstone(group_id, t, p) for t, ps in stored.items() for p in ps]
        out += [offset_tombstone(group_id, t, p) for t, p in sorted(self.pending_offsets.pending_partitions(group_id))
                if p not in stored.get(t, {})]
        return out

    # ==== admin ==================================================================================
    def delete_groups(self, group_ids: list[str], now_ms: int) -> Result:
        """Results are (group_id, error_code) pairs."""
        def run():
            results = []
            for gid in group_ids:
                try:
                    group = self.group(gid)
                    group.validate_delete_group()
                except GroupError as exc:
                    results.append((gid, exc.code))
                    continue
                records = self.delete_all_offsets(gid) + self.group_tombstones(group)
                self.append(records, replay=True)
                results.append((gid, 0))
            return results
        return self._run(now_ms, run)

    def group_tombstones(self, group) -> list[CoordinatorRecord]:
        if group.type == "classic":
            return [CoordinatorRecord(GroupMetadataKey(group=group.group_id), None)]
        if group.type == "share":
            return self.share.group_tombstones(group)
        return self.consumer.group_tombstones(group)

    def describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None or group.type == "share":  # a share group is not a classic group: as unknown
                out.append(DescribedGroup(group_id=gid, group_state=str(S.DEAD), members=[]))
            elif group.type == "classic":
                if group.is_in_state(S.STABLE):
                    members = [_describe_member(m, group.protocol_name) for m in group.members.values()]
                    out.append(DescribedGroup(group_id=gid, group_state=str(group.state),
                                              protocol_type=group.protocol_type or "",
                                              protocol_data=group.protocol_name or "", members=members))
                else:
                    members = [_describe_member(m, None) for m in group.members.values()]
                    out.append(DescribedGroup(group_id=gid, group_state=str(group.state),
                                              protocol_type=group.protocol_type or "", members=members))
            else:
                out.append(self.consumer.describe_as_classic(group))
        return out

    def list_groups(self, states: set[str], types: set[str]) -> list[ListedGroup]:
        states = {s.strip().lower() for s in states}
        types = {t.strip().lower() for t in types}
        out = []
        for gid, group in self.groups.items():
            if states and not group.in_states(states):
                continue
            if types and group.type not in types:
                continue
            out.append(ListedGroup(group_id=gid, protocol_type=(group.protocol_type or "") if group.type == "classic"
                                   else group.protocol_type, group_state=group.state_string(),
                                   group_type=group.type))
        return out

    # ==== expiration (GroupCoordinatorShard.cleanupGroupMetadata) ================================
    def schedule_group_metadata_expiration(self) -> None:
        self.timer.schedule(GROUP_EXPIRATION_KEY, self.now_ms, self.config.offsets_retention_check_interval_ms,
                            self._cleanup_group_metadata)

    def cleanup_group_metadata(self, now_ms: int) -> Result:
        return self._run(now_ms, self._cleanup_group_metadata)

    def _cleanup_group_metadata(self) -> None:
        for gid in list(self.groups):
            if self._cleanup_expired_offsets(gid):
                self._maybe_delete_group(gid)
        self.schedule_group_metadata_expiration()

    def _cleanup_expired_offsets(self, group_id: str) -> bool:
        stored = self.offsets.group(group_id)
        if not stored:
            return not self.pending_offsets.has_open_transactions(group_id)
        group = self.groups[group_id]
        basis = group.offset_expiration_basis()
        if basis is None:
            return False
        all_expired = True
        records = []
        for topic, parts in stored.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for p, om in parts.items():
                # not while a transaction may still commit an offset for the partition
                if om.is_expired(basis(om), self.now_ms, self.config.offsets_retention_ms) \
                        and not self.pending_offsets.has_pending(group_id, topic, p):
                    records.append(offset_tombstone(group_id, topic, p))
                else:
                    all_expired = False
        self.append(records, replay=True)
        # a group with open transactions stays
        return all_expired and not self.pending_offsets.has_open_transactions(group_id)

    def _maybe_delete_group(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.is_empty():
            return
        if group.type == "share" and not group.should_expire():
            return
        if group.type == "consumer" and group.members:
            return
        self.append(self.group_tombstones(group), replay=True)

    # ==== loading ================================================================================
    def replay(self, record: CoordinatorRecord, offset: int, producer_id: int = -1,
               record_offset: int | None = None) -> None:
        """Apply one record; ``offset`` is its log offset while loading, -1 for this shard's own writes
        (whose offset in the log is ``record_offset``). Offsets of a transactional batch (``producer_id`` >= 0)
        stay pending until the transaction's marker (OffsetMetadataManager.replay)."""
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            at = offset if record_offset is None else record_offset
            if value is not None:
                if key.group not in self.groups:
                    self.classic_group(key.group, True)  # a "simple" group holding manual commits
                om = OffsetAndMetadata.from_record(at, value)
                if producer_id < 0:
                    self.offsets.put(key.group, key.topic, key.partition, om)
                else:
                    self.pending_offsets.put(producer_id, key.group, key.topic, key.partition, om)
            else:
                self.offsets.remove(key.group, key.topic, key.partition)
                self.pending_offsets.remove_partition(key.group, key.topic, key.partition)
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                if offset >= 0 or (self.groups.get(key.group) is not None
                                   and self.groups[key.group].type == "classic"):
                    self.remove_group(key.group)
            elif offset >= 0:  # during operation classic groups are already up to date
                self._replay_group_metadata(key.group, value)
        elif record.is_share_group:
            self.share.replay(record)
        else:
            self.consumer.replay(record)

    def _replay_group_metadata(self, group_id: str, value: GroupMetadataValue) -> None:
        members = []
        for m in value.members:
            rebalance = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            members.append(ClassicGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                              rebalance, m.session_timeout, value.protocol_type,
                                              [(value.protocol, bytes(m.subscription))], bytes(m.assignment)))
        group = ClassicGroup(group_id, S.STABLE if members else S.EMPTY, self.now_ms, self.complete,
                             generation_id=value.generation, protocol_type=value.protocol_type or None,
                             protocol_name=value.protocol, leader_id=value.leader,
                             current_state_timestamp=value.current_state_timestamp
                             if value.current_state_timestamp != -1 else None)
        for m in members:
            group.add(m)
        group.leader_id = value.leader if value.leader else group.leader_id
        self.groups[group_id] = group
        group.subscribed_topics = group.compute_subscribed_topics()

    def on_loaded(self, now_ms: int) -> Result:
        def run():
            for gid, group in list(self.groups.items()):
                if group.type == "classic":
                    for m in list(group.members.values()):
                        self._reschedule_heartbeat(group, m)
                    if group.num_members() > self.config.max_size:
                        self._prepare_rebalance(group, f"Freshly-loaded group {gid} is over capacity")
                elif group.type == "share":
                    self.share.on_loaded(group)
                else:
                    self.consumer.on_loaded(group)
            self.schedule_group_metadata_expiration()
        return self._run(now_ms, run)

    def on_unloaded(self) -> Result:
        """Pending JoinGroup/SyncGroup answers learn the coordinator moved (NOT_COORDINATOR)."""
        def run():
            for group in self.groups.values():
                if group.type == "classic":
                    group.complete_all_joins(ErrorCode.NOT_COORDINATOR)
                    group.complete_all_syncs(ErrorCode.NOT_COORDINATOR)
                    group.state = S.DEAD
            self.timer.clear()
        return self._run(self.now_ms, run)


def _inconsistent(from_request: str | None, group_value: str | None) -> bool:
    return from_request is not None and group_value is not None and from_request != group_value


def _fetched(partition: int, om: OffsetAndMetadata | None, unstable: bool = False) -> OffsetFetchResponsePartitions:
    if unstable:
        return OffsetFetchResponsePartitions(partition_index=partition, committed_offset=INVALID_OFFSET,
                                             committed_leader_epoch=-1, metadata="",
                                             error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT)
    if om is None:
        return OffsetFetchResponsePartitions(partition_index=partition, committed_offset=INVALID_OFFSET,
                                             committed_leader_epoch=-1, metadata="", error_code=0)
    return OffsetFetchResponsePartitions(partition_index=partition, committed_offset=om.committed_offset,
                                         committed_leader_epoch=om.leader_epoch, metadata=om.metadata, error_code=0)


def _describe_member(m: ClassicGroupMember, protocol_name: str | None) -> DescribedGroupMember:
    d = DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                             client_host=m.client_host, member_metadata=b"", member_assignment=m.assignment)
    if protocol_name is not None:
        d.member_metadata = m.metadata(protocol_name)
    return d
