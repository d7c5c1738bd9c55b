"""The classic group: Kafka's ClassicGroup / ClassicGroupMember / ClassicGroupState, as plain data.

A member waiting for its JoinGroup or SyncGroup response holds an opaque *token* (the adapter maps it
to a future); completing it appends ``(token, response)`` to the shard's outbox. Nothing here does
I/O or reads a clock.
"""

from __future__ import annotations

import enum
from typing import Callable

from cluster.groups.group_records import CONSUMER_PROTOCOL_TYPE, SchemaError, parse_subscription
from protocol.errors import ErrorCode
from protocol.generated.messages import JoinGroupResponse, SyncGroupResponse
from protocol.generated.messages.join_group_response import JoinGroupResponseMember

NO_LEADER = ""
UNKNOWN_MEMBER_ID = ""
EMPTY_ASSIGNMENT = b""


# the classic protocol's timer keys (Kafka's classicGroupHeartbeatKey, classicGroupJoinKey, classicGroupSyncKey)
def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = ClassicGroupState
VALID_PREVIOUS = {
    S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.EMPTY: {S.PREPARING_REBALANCE},
}


class GroupError(Exception):
    """A Kafka error raised inside the state machine (Errors.X.exception())."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = int(code)
        self.message = message


class ClassicGroupMember:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "supported_protocols", "assignment", "join_token",
                 "sync_token", "is_new")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 supported_protocols: list[tuple[str, bytes]], assignment: bytes = EMPTY_ASSIGNMENT) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols  # ordered [(name, metadata)]
        self.assignment = assignment
        self.join_token = None
        self.sync_token = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol_name:
                return meta
        raise ValueError(f"Member does not support protocol {protocol_name}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            # New members can be expired even while awaiting join: they never heartbeat
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.supported_protocols]

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError("Member does not support any of the candidate protocols")

    def protocol_names(self) -> set[str]:
        return {n for n, _ in self.supported_protocols}


class ClassicGroup:
    """Kafka's ClassicGroup. ``complete`` is the shard's outbox for (token, response) pairs."""

    def __init__(self, group_id: str, state: ClassicGroupState, now_ms: int, complete: Callable,
                 generation_id: int = 0, protocol_type: str | None = None, protocol_name: str | None = None,
                 leader_id: str | None = None, current_state_timestamp: int | None = None) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = S.DEAD
        self.current_state_timestamp = now_ms if current_state_timestamp is None else current_state_timestamp
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.generation_id = generation_id
        self.leader_id = leader_id
        self.members: dict[str, ClassicGroupMember] = {}  # insertion ordered, like Kafka's leader fallback
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.pending_sync_members: set[str] = set()
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False
        self._complete = complete

    type = "classic"

    # ---- queries ------------------------------------------------------------------------------------
    def is_in_state(self, s: ClassicGroupState) -> bool:
        return self.state is s

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    def num_members(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_empty(self) -> bool:
        return self.state is S.EMPTY

    def is_simple_group(self) -> bool:
        return self.protocol_type is None and self.state is S.EMPTY and not self.members \
            and not self.pending_join_members

    def uses_consumer_group_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[S.PREPARING_REBALANCE]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    # ---- membership -------------------------------------------------------------------------------
    def add(self, member: ClassicGroupMember, join_token=None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise AssertionError(f"static member {member.group_instance_id} already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise AssertionError("The group and member's protocol type must be the same.")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1
        member.join_token = join_token
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            for name in removed.protocol_names():
                self.supported_protocols[name] = self.supported_protocols.get(name, 0) - 1
            if removed.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def add_pending_member(self, member_id: str) -> None:
        self.pending_join_members.add(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is not None:
            current = self.members.get(self.leader_id)
            if current is not None and not current.is_awaiting_join:
                for m in self.members.values():
                    if m.is_awaiting_join:
                        self.leader_id = m.member_id
                        return True
                return False
            return True
        return False

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str
                              ) -> ClassicGroupMember:
        removed = self.members.pop(old_member_id, None)
        if removed is None:
            raise AssertionError(f"Cannot replace non-existing member id {old_member_id}")
        # fence a duplicate that awaits a join or sync response
        self.complete_join(removed, JoinGroupResponse(
            members=[], member_id=old_member_id, protocol_name=None, protocol_type=None, leader=NO_LEADER,
            skip_assignment=False, error_code=ErrorCode.FENCED_INSTANCE_ID))
        self.complete_sync(removed, SyncGroupResponse(assignment=b"", protocol_name=None, protocol_type=None,
                                                      error_code=ErrorCode.FENCED_INSTANCE_ID))
        new = ClassicGroupMember(new_member_id, removed.group_instance_id, removed.client_id, removed.client_host,
                                 removed.rebalance_timeout_ms, removed.session_timeout_ms, removed.protocol_type,
                                 removed.supported_protocols, removed.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def update_member(self, member: ClassicGroupMember, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int, join_token) -> None:
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) - 1
        member.supported_protocols = protocols
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_token is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_token is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.join_token = join_token

    def complete_join(self, member: ClassicGroupMember, response: JoinGroupResponse) -> bool:
        if member.is_awaiting_join:
            self._complete(member.join_token, response)
            member.join_token = None
            self.num_members_awaiting_join -= 1
            return True
        return False

    def complete_all_joins(self, code: int) -> None:
        for mid, m in list(self.members.items()):
            self.complete_join(m, JoinGroupResponse(member_id=mid, error_code=code))

    def complete_sync(self, member: ClassicGroupMember, response: SyncGroupResponse) -> bool:
        if member.is_awaiting_sync:
            self._complete(member.sync_token, response)
            member.sync_token = None
            return True
        return False

    def complete_all_syncs(self, code: int) -> None:
        for m in list(self.members.values()):
            self.complete_sync(m, SyncGroupResponse(error_code=code))

    # ---- protocols --------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        if not self.members:
            raise AssertionError("Cannot select protocol for empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            v = m.vote(candidates)
            votes[v] = votes.get(v, 0) + 1
        # the most votes; ties go to the protocol seen first (Java's HashMap order is arbitrary)
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.state is S.EMPTY:
            return bool(member_protocol_type) and bool(member_protocols)
        n = len(self.members)
        return (self.protocol_type is not None and self.protocol_type == member_protocol_type
                and any(self.supported_protocols.get(name, 0) == n for name in member_protocols))

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is not None:
            topics: set[str] = set()
            try:
                for m in self.members.values():
                    topics.update(parse_subscription(m.metadata(self.protocol_name)).topics)
            except (SchemaError, ValueError):
                return None
            return topics
        return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_group_protocol()
        return topic in self.subscribed_topics

    # ---- transitions ------------------------------------------------------------------------------
    def transition_to(self, target: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise AssertionError(f"Group {self.group_id} should be in one of {VALID_PREVIOUS[target]} states "
                                 f"before moving to {target} state. Instead it is in {self.state} state.")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_members_metadata(self) -> list[JoinGroupResponseMember]:
        if self.state in (S.DEAD, S.PREPARING_REBALANCE):
            raise AssertionError(f"Cannot obtain member metadata for group {self.group_id} in state {self.state}")
        return [JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                        metadata=m.metadata(self.protocol_name)) for m in self.members.values()]

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as ClassicGroup.validateMember."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_id: int,
                               is_transactional: bool = False) -> None:
        if self.state is S.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and self.state is S.EMPTY:
            return  # admin client / manual assignment: commits allowed while the group is empty
        if generation_id >= 0 or member_id or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation_id != self.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        elif not is_transactional and self.state is not S.EMPTY:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if not is_transactional and self.state is S.COMPLETING_REBALANCE:
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)

    def validate_offset_fetch(self, member_id, member_epoch) -> None:
        if self.state is S.DEAD:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)

    def validate_offset_delete(self) -> None:
        if self.state is S.DEAD:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
        if self.state in (S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE) \
                and not self.uses_consumer_group_protocol():
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def validate_delete_group(self) -> None:
        if self.state is S.DEAD:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
        if self.state in (S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def offset_expiration_basis(self):
        """ClassicGroup.offsetExpirationCondition: a function offset -> base timestamp, or None."""
        if self.protocol_type is not None:
            if self.state is S.EMPTY:
                ts = self.current_state_timestamp
                return lambda o: ts if ts is not None and ts >= 0 else o.commit_timestamp_ms
            if self.uses_consumer_group_protocol() and self.subscribed_topics is not None and self.state is S.STABLE:
                return lambda o: o.commit_timestamp_ms
            return None
        return lambda o: o.commit_timestamp_ms

    def in_states(self, states: set[str]) -> bool:
        return str(self.state).lower() in states

    def state_string(self) -> str:
        return str(self.state)


def generate_member_id(client_id: str, group_instance_id: str | None, unique: str) -> str:
    """Kafka's ``clientId-UUID`` (or ``groupInstanceId-UUID``); ``unique`` is the caller's fresh UUID string."""
    return f"{group_instance_id if group_instance_id is not None else client_id}-{unique}"
