"""KRaft's Raft algorithm as a pure, single-threaded state machine (Kafka's KafkaRaftClient + QuorumState).

Fed messages (``step``), time (``tick``) and proposals; it changes its in-memory log and state and collects
what the driver must do in a ``Ready``, in this order: persist the election state (the quorum-state file),
flush the log, send the messages, apply the committed entries; then ``advance``. Nothing that implies
durability (a granted vote, a fetch offset, a new leader's epoch) leaves before the state or log it
depends on is durable, because the messages of a Ready are sent only after its persistence is done.

Kafka's shape: pull-based replication with Fetch (the fetch offset is the follower's acknowledgement),
a LeaderChange control entry at the start of every epoch, the high watermark advanced only past the epoch
start once a majority of voters has flushed past it (LeaderState.maybeUpdateHighWatermark), divergence
found with the leader's epoch boundaries (validateOffsetAndEpoch) and FetchSnapshot for followers behind
the log start, check-quorum (a leader without fetches from a majority for 1.5 x the fetch timeout resigns),
and KIP-996's pre-vote: a voter whose election timer expires first becomes Prospective and asks for
pre-votes without bumping its epoch; voters that hear from a leader refuse them, so a partitioned or
restarted node cannot disrupt a healthy quorum. Static voters only (kraft.version 0).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from cluster.raft.election_state import NO_ID, ElectionState
from cluster.raft.log import Entry, MemoryLog, Snapshot, Validation
from cluster.raft.messages import (
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest, EndQuorumEpochResponse,
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, RequestFailed, VoteRequest, VoteResponse,
)
from cluster.raft.request_manager import RequestManager
from protocol.errors import ErrorCode

CHECK_QUORUM_TIMEOUT_FACTOR = 1.5  # LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR


class Role(enum.Enum):
    UNATTACHED = "unattached"  # no known leader in this epoch (may have voted: voted_id)
    PROSPECTIVE = "prospective"  # asking for pre-votes (KIP-996), epoch unchanged
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"  # a leader that stepped down; waits for the next election


@dataclasses.dataclass(frozen=True)
class RaftConfig:
    """Kafka's controller.quorum.* settings."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_entries: int = 64


OBSERVER_SESSION_TIMEOUT_MS = 300_000  # LeaderState: an observer not heard from for 5 minutes is forgotten


@dataclasses.dataclass(frozen=True)
class ReplicaProgress:
    """What the leader knows of one replica (LeaderState.ReplicaState), for DescribeQuorum."""

    end_offset: int  # the offset of its last fetch
    last_fetch_ms: int
    last_caught_up_ms: int  # the last time it had fetched up to the leader's log end
    leader_end_at_fetch: int


@dataclasses.dataclass(frozen=True)
class QuorumView:
    """The leader's view of its quorum (DescribeQuorum's partition data)."""

    leader_id: int
    epoch: int
    high_watermark: int
    voters: dict[int, ReplicaProgress]
    observers: dict[int, ReplicaProgress]


@dataclasses.dataclass
class Ready:
    election_state: ElectionState | None = None  # persist first
    flush: bool = False  # then flush the log
    messages: list = dataclasses.field(default_factory=list)  # then send
    load_snapshot: Snapshot | None = None  # then load the snapshot into the application,
    committed: list[Entry] = dataclasses.field(default_factory=list)  # and apply these entries
    leader_change: tuple[int, int] | None = None  # (epoch, leader id) when it changed

    def empty(self) -> bool:
        return (self.election_state is None and not self.flush and not self.messages and self.load_snapshot is None
                and not self.committed and self.leader_change is None)


class RaftNode:
    def __init__(self, node_id: int, voters: frozenset[int] | set[int], log: MemoryLog, rng: Any,
                 config: RaftConfig, now_ms: int, state: ElectionState | None = None) -> None:
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.log = log
        self.rng = rng
        self.cfg = config
        self.is_voter = node_id in self.voters
        state = state or ElectionState(0, voters=self.voters)
        # QuorumState.initialize: a stored epoch below the log's last one (no quorum-state file, as in a directory
        # a single node wrote before it ran as a quorum of one) starts unattached in the log's epoch
        self.stored_epoch_below_log: tuple[int, int] | None = None
        if state.epoch < log.last_fetched_epoch:
            self.stored_epoch_below_log = (state.epoch, log.last_fetched_epoch)
            state = ElectionState(log.last_fetched_epoch, voters=self.voters)
        self.epoch = state.epoch
        self.leader_id = state.leader_id
        self.voted_id = state.voted_id
        latest = log.latest_snapshot
        base = max(log.start_offset, latest.end_offset if latest is not None else 0)
        self.high_watermark = base  # below it everything is committed: a snapshot holds only committed entries
        self.applied = base  # what the application has been given (the latest snapshot, loaded first)
        self._ready = Ready()
        self._snapshot_to_load = latest
        # timers (absolute ms)
        self.election_deadline = 0
        self.fetch_deadline = 0
        self.backoff_until: int | None = None
        self.check_quorum_deadline = 0
        # per-role state
        self.granted: set[int] = set()
        self.rejected: set[int] = set()
        self.vote_sent_at: dict[int, int] = {}
        self.replica_end: dict[int, int] = {}
        self.replica_progress: dict[int, ReplicaProgress] = {}  # voters and observers that fetched
        self.fetched_since_check: set[int] = set()
        self.epoch_start_offset = 0
        self.unacked_begin: dict[int, int] = {}  # voter -> when BeginQuorumEpoch was last sent
        # where fetches are in flight, failed or may go (Kafka's RequestManager); fetch_target: the last one asked
        self.requests = RequestManager(config.retry_backoff_ms, config.request_timeout_ms)
        self.fetch_target: int | None = None
        self.fetching_snapshot: tuple[int, int] | None = None
        self.leader_resigned = False
        self.fetched_from_leader = False
        self.truncations = 0
        self.now = now_ms
        # Kafka's QuorumState.initialize: a node that led this epoch cannot resume it; one that knew a
        # leader follows it; otherwise it waits, unattached
        if self.leader_id == node_id:
            self.role = Role.RESIGNED
            self._reset_election_timer(now_ms)
        elif self.leader_id != NO_ID:
            self.role = Role.FOLLOWER
            self.fetch_deadline = now_ms + self.cfg.fetch_timeout_ms
            self.fetch_target = self.leader_id
        else:
            self.role = Role.UNATTACHED
            self._reset_election_timer(now_ms)
        if len(self.voters) == 1 and self.is_voter and self.role is not Role.FOLLOWER:
            self.election_deadline = now_ms  # a single voter elects itself at once

    # ---- the driver's side ---------------------------------------------------------------------------------

    def ready(self) -> Ready:
        """What to persist, flush, send and apply now (empty if nothing)."""
        r = self._ready
        if self._snapshot_to_load is not None:
            r.load_snapshot = self._snapshot_to_load
            self.applied = max(self.applied, self._snapshot_to_load.end_offset)
            self._snapshot_to_load = None
        if self.applied < self.high_watermark:
            start = max(self.applied, self.log.start_offset)
            r.committed = list(self.log.read_until(start, self.high_watermark))
            if r.committed:
                self.applied = r.committed[-1].next_offset
        self._ready = Ready()
        return r

    def advance(self, now_ms: int) -> None:
        """The last Ready is done: state persisted, log flushed, messages sent, entries applied."""
        self.now = now_ms
        if self.role is Role.LEADER:
            self._maybe_update_high_watermark()

    def propose(self, data: Any, now_ms: int, count: int = 1) -> int | None:
        """Append ``data`` (``count`` records) as the leader; its first offset, or None when this node does not
        lead. It is committed once the high watermark passes ``offset + count``."""
        self.now = now_ms
        if self.role is not Role.LEADER:
            return None
        offset = self.log.end_offset
        self.log.append([Entry(offset, self.epoch, data, count=count)])
        self._ready.flush = True
        return offset

    def snapshot_at(self, offset: int, data: Any) -> bool:
        """The application's state up to ``offset`` (committed, applied) as a snapshot; the log before it stays
        until the log's retention cleans it."""
        latest = self.log.latest_snapshot
        if (offset > min(self.high_watermark, self.applied) or offset <= self.log.start_offset
                or (latest is not None and offset <= latest.end_offset)):
            return False
        prev = self.log.entry(offset - 1)
        if prev is None or prev.next_offset != offset:
            return False
        self.log.create_snapshot(Snapshot(offset, prev.epoch, data))
        return True

    def resign(self, now_ms: int) -> None:
        """Graceful resignation of a leader (EndQuorumEpoch to the other voters)."""
        self.now = now_ms
        if self.role is Role.LEADER:
            self._become_resigned(now_ms)

    # ---- time ------------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        self.now = now_ms
        role = self.role
        if self.backoff_until is not None:
            if now_ms < self.backoff_until:
                return
            self.backoff_until = None
            if self.is_voter and role in (Role.PROSPECTIVE, Role.CANDIDATE, Role.UNATTACHED, Role.RESIGNED):
                self._become_prospective(now_ms)
                return
        if role is Role.LEADER:
            if len(self.voters) > 1 and now_ms >= self.check_quorum_deadline:
                self._become_resigned(now_ms)  # no majority has fetched for 1.5 x the fetch timeout
                return
            for voter, sent in list(self.unacked_begin.items()):
                if now_ms - sent >= self.cfg.request_timeout_ms:
                    self._send_begin_epoch(voter, now_ms)
            return
        if role is Role.FOLLOWER and now_ms >= self.fetch_deadline:
            if self.is_voter:
                self._become_prospective(now_ms)
            else:
                self._become_unattached(self.epoch, now_ms, keep_vote=True)
            return
        if role is Role.FOLLOWER or not self.is_voter:
            self._ask_for_fetch(now_ms)
            return
        if role in (Role.PROSPECTIVE, Role.CANDIDATE):
            for voter in self.voters - {self.node_id} - self.granted - self.rejected:
                if now_ms - self.vote_sent_at.get(voter, now_ms) >= self.cfg.request_timeout_ms:
                    self._send_vote(voter, now_ms)
        if now_ms >= self.election_deadline:
            if role is Role.PROSPECTIVE and self.leader_id not in (NO_ID, self.node_id):
                # KIP-996: a prospective that lost its pre-vote goes back to following the leader it knew (it
                # fetches again; a dead leader makes it time out into a new pre-vote)
                self._become_follower(self.epoch, self.leader_id, now_ms)
            elif role in (Role.PROSPECTIVE, Role.CANDIDATE):
                # lost or split: back off a random time, then ask for pre-votes again
                self.backoff_until = now_ms + self.rng.randint(0, self.cfg.election_backoff_max_ms)
                self.election_deadline = self.backoff_until
                self.role = Role.UNATTACHED if role is Role.CANDIDATE else Role.PROSPECTIVE
            else:
                self._become_prospective(now_ms)

    def next_deadline(self) -> int:
        """The earliest time (ms) at which ``tick`` would act (KafkaRaftClient.poll's timeout): a driver may
        sleep until then instead of ticking on a fixed period; any message or proposal can bring it forward."""
        if self.backoff_until is not None:
            return self.backoff_until
        rt = self.cfg.request_timeout_ms
        role = self.role
        if role is Role.LEADER:
            due = [sent + rt for sent in self.unacked_begin.values()]
            if len(self.voters) > 1:
                due.append(self.check_quorum_deadline)
            return min(due, default=self.now + rt)
        if role is Role.FOLLOWER or not self.is_voter:
            due = [self.now] if self._fetch_choices(self.now) else []
            change = self.requests.next_change_ms(self.now)
            if change is not None:
                due.append(change)
            if role is Role.FOLLOWER:
                due.append(self.fetch_deadline)
            return min(due, default=self.now + rt)
        due = [self.election_deadline]
        if role in (Role.PROSPECTIVE, Role.CANDIDATE):
            due += [self.vote_sent_at[v] + rt for v in self.voters - {self.node_id} - self.granted - self.rejected
                    if v in self.vote_sent_at]
        return min(due)

    # ---- messages --------------------------------------------------------------------------------------

    def step(self, msg: Any, now_ms: int) -> None:
        self.now = now_ms
        handler = _HANDLERS.get(type(msg))
        if handler is not None:
            getattr(self, handler)(msg)  # by name, so a test can replace one handler

    def _send(self, msg: Any) -> None:
        self._ready.messages.append(msg)

    def _maybe_higher_epoch(self, epoch: int, leader_id: int) -> bool:
        """A response or request from a newer epoch: follow its leader, or wait unattached in it.
        Returns True when the message was from a newer epoch (and has been acted on)."""
        if epoch > self.epoch:
            if leader_id != NO_ID and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, self.now)
            else:
                self._become_unattached(epoch, self.now)
            return True
        return False

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return (last_epoch, last_offset) >= (self.log.last_fetched_epoch, self.log.end_offset)

    # Vote (and pre-vote)

    def _on_vote_request(self, r: VoteRequest) -> None:
        def reply(granted: bool, error: int = 0) -> None:
            self._send(VoteResponse(self.node_id, r.src, self.epoch, self.leader_id, granted, error, r.pre_vote))

        if not self.is_voter or r.src not in self.voters:
            return reply(False, ErrorCode.INCONSISTENT_VOTER_SET)
        if r.epoch < self.epoch:
            return reply(False, ErrorCode.FENCED_LEADER_EPOCH)
        up_to_date = self._log_up_to_date(r.last_epoch, r.last_offset)
        if r.pre_vote:  # never changes this node's state
            # FollowerState.canGrantVote: a follower rejects pre-votes only once it has fetched from its leader
            # in this state (one that merely returned to a leader it knew grants them, so followers of a dead
            # leader cannot keep each other from electing a new one)
            leader_alive = self.role is Role.LEADER or (
                self.role is Role.FOLLOWER and self.fetched_from_leader and self.now < self.fetch_deadline
                and not self.leader_resigned)
            return reply(up_to_date and not leader_alive and r.epoch > self.epoch)
        if r.epoch > self.epoch:
            self._become_unattached(r.epoch, self.now)
        granted = False
        if self.role in (Role.UNATTACHED, Role.PROSPECTIVE) and self.leader_id == NO_ID:
            if self.voted_id == r.src:
                granted = True
            elif self.voted_id == NO_ID and up_to_date:
                self.voted_id = r.src
                self.role = Role.UNATTACHED
                self._persist()
                self._reset_election_timer(self.now)
                granted = True
        reply(granted)

    def _on_vote_response(self, r: VoteResponse) -> None:
        if r.error == ErrorCode.INCONSISTENT_VOTER_SET:
            return
        if r.pre_vote:
            if self._maybe_higher_epoch(r.epoch, r.leader_id):
                return
            if self.role is not Role.PROSPECTIVE:
                return
            if r.leader_id != NO_ID and r.leader_id != self.node_id and r.epoch == self.epoch and not r.granted:
                if self.leader_id != r.leader_id:
                    self._become_follower(self.epoch, r.leader_id, self.now)  # a live leader exists
                    return
            (self.granted if r.granted else self.rejected).add(r.src)
            if self._majority(self.granted):
                self._become_candidate(self.now)
            elif self._vote_rejected() and self.leader_id not in (NO_ID, self.node_id):
                self._become_follower(self.epoch, self.leader_id, self.now)  # the leader it knew still leads
            return
        if self._maybe_higher_epoch(r.epoch, r.leader_id):
            return
        if self.role is not Role.CANDIDATE or r.epoch != self.epoch:
            return
        (self.granted if r.granted else self.rejected).add(r.src)
        if self._majority(self.granted):
            self._become_leader(self.now)

    # BeginQuorumEpoch / EndQuorumEpoch

    def _voter_only_error(self, src: int, epoch: int) -> int:
        """KafkaRaftClient.validateVoterOnlyRequest: an old epoch, or a sender or receiver outside the voters."""
        if epoch < self.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if src < 0:
            return ErrorCode.INVALID_REQUEST
        if not self.is_voter or src not in self.voters:
            return ErrorCode.INCONSISTENT_VOTER_SET
        return 0

    def _on_begin_epoch(self, r: BeginQuorumEpochRequest) -> None:
        error = self._voter_only_error(r.src, r.epoch)
        if error:
            self._send(BeginQuorumEpochResponse(self.node_id, r.src, self.epoch, self.leader_id, error))
            return
        if r.epoch > self.epoch or self.role is not Role.FOLLOWER or self.leader_id != r.src:
            if r.epoch == self.epoch and self.role is Role.LEADER:
                return  # cannot happen: one leader per epoch
            self._become_follower(r.epoch, r.src, self.now)
        self._send(BeginQuorumEpochResponse(self.node_id, r.src, self.epoch, self.leader_id))

    def _on_begin_epoch_response(self, r: BeginQuorumEpochResponse) -> None:
        if self._maybe_higher_epoch(r.epoch, r.leader_id):
            return
        if self.role is Role.LEADER and r.epoch == self.epoch and not r.error:
            self.unacked_begin.pop(r.src, None)

    def _on_end_epoch(self, r: EndQuorumEpochRequest) -> None:
        error = self._voter_only_error(r.src, r.epoch)
        if error:
            self._send(EndQuorumEpochResponse(self.node_id, r.src, self.epoch, self.leader_id, error))
            return
        if self._maybe_higher_epoch(r.epoch, NO_ID):
            pass
        elif self.role is Role.FOLLOWER and self.leader_id == r.src:
            self.leader_resigned = True
            # the leader resigned: the first preferred successor runs at once, the others after a backoff
            if self.node_id in r.preferred_successors:
                pos = r.preferred_successors.index(self.node_id)
                delay = 0 if pos == 0 else min(self.cfg.election_backoff_max_ms, self.cfg.retry_backoff_ms * 2 ** pos)
            else:
                delay = self.cfg.election_backoff_max_ms
            self.fetch_deadline = min(self.fetch_deadline, self.now + delay)
        self._send(EndQuorumEpochResponse(self.node_id, r.src, self.epoch, self.leader_id))

    def _on_end_epoch_response(self, r: EndQuorumEpochResponse) -> None:
        self._maybe_higher_epoch(r.epoch, r.leader_id)

    # Fetch

    def _on_fetch_request(self, r: FetchRequest) -> None:
        def reply(**kw) -> None:
            news = (kw.get("error") or kw.get("entries") or kw.get("diverging") or kw.get("snapshot_id")
                    or r.high_watermark < self.high_watermark)
            self._send(FetchResponse(self.node_id, r.src, self.epoch, self.leader_id,
                                     high_watermark=self.high_watermark, log_start_offset=self.log.start_offset,
                                     fetch_offset=r.fetch_offset, last_fetched_epoch=r.last_fetched_epoch,
                                     may_wait=not news, **kw))

        # KafkaRaftClient.handleFetchRequest: malformed positions first; a fetch offset past this log's end is
        # not one of them (a follower with a longer divergent tail is told where to truncate)
        if r.fetch_offset < 0 or r.last_fetched_epoch < 0 or r.last_fetched_epoch > r.epoch:
            return reply(error=ErrorCode.INVALID_REQUEST)
        if r.epoch < self.epoch:
            return reply(error=ErrorCode.FENCED_LEADER_EPOCH)
        if r.epoch > self.epoch:
            return reply(error=ErrorCode.UNKNOWN_LEADER_EPOCH)
        if self.role is not Role.LEADER:
            return reply(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        v = self.log.validate_offset_and_epoch(r.fetch_offset, r.last_fetched_epoch)
        if v.kind is Validation.DIVERGING:
            return reply(diverging=(v.offset, v.epoch))
        if v.kind is Validation.SNAPSHOT:
            return reply(snapshot_id=(v.offset, v.epoch))
        self._track_progress(r.src, r.fetch_offset)
        if r.src in self.voters:
            self.replica_end[r.src] = r.fetch_offset
            self.fetched_since_check.add(r.src)
            if self._majority(self.fetched_since_check | {self.node_id}):
                self.check_quorum_deadline = self.now + int(CHECK_QUORUM_TIMEOUT_FACTOR * self.cfg.fetch_timeout_ms)
                self.fetched_since_check = set()
            self.unacked_begin.pop(r.src, None)  # fetching in this epoch acknowledges it
            self._maybe_update_high_watermark()
        reply(entries=self.log.read(r.fetch_offset, self.cfg.fetch_max_entries))

    def _track_progress(self, replica: int, fetch_offset: int) -> None:
        """LeaderState.ReplicaState.updateFollowerState: caught up when it fetched from the leader's log end
        as of this fetch, or from the log end as of its previous fetch (then caught up at that time)."""
        prev = self.replica_progress.get(replica)
        if prev is None and replica not in self.voters:  # a new observer: forget those gone quiet first
            for gone in [o for o, p in self.replica_progress.items() if o not in self.voters
                         and self.now - p.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS]:
                del self.replica_progress[gone]
        end = self.log.end_offset
        caught_up = prev.last_caught_up_ms if prev else -1
        if fetch_offset >= end:
            caught_up = max(caught_up, self.now)
        elif prev is not None and fetch_offset >= prev.leader_end_at_fetch:
            caught_up = max(caught_up, prev.last_fetch_ms)
        last_fetch = max(prev.last_fetch_ms, self.now) if prev else self.now
        self.replica_progress[replica] = ReplicaProgress(fetch_offset, last_fetch, caught_up, end)

    def quorum_view(self) -> QuorumView | None:
        """The leader's view of every voter and recent observer (None unless this node leads)."""
        if self.role is not Role.LEADER:
            return None
        me = ReplicaProgress(self.log.end_offset, -1, self.now, self.log.end_offset)
        unknown = ReplicaProgress(-1, -1, -1, -1)
        voters = {v: me if v == self.node_id else self.replica_progress.get(v, unknown) for v in sorted(self.voters)}
        observers = {o: p for o, p in sorted(self.replica_progress.items())
                     if o not in self.voters and self.now - p.last_fetch_ms < OBSERVER_SESSION_TIMEOUT_MS}
        return QuorumView(self.node_id, self.epoch, self.high_watermark, voters, observers)

    def _on_fetch_response(self, r: FetchResponse) -> None:
        if self._maybe_higher_epoch(r.epoch, r.leader_id):
            return
        if r.src != self.fetch_target:
            return
        if r.error:
            if r.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and r.epoch == self.epoch and r.leader_id not in (
                    NO_ID, self.node_id, r.src, self.leader_id) and self.role is not Role.LEADER:
                self._become_follower(self.epoch, r.leader_id, self.now)  # told who leads
            else:  # nothing learnt: ask again after the backoff (elsewhere, if this was not the leader)
                self.requests.on_failure(r.src, self.now)
            return
        self.requests.on_success(r.src)
        if self.role is not Role.FOLLOWER or r.epoch != self.epoch or r.src != self.leader_id:
            if self.role is not Role.LEADER and r.epoch == self.epoch and r.src == r.leader_id:
                self._become_follower(self.epoch, r.src, self.now)
            else:
                return
        self.fetch_deadline = self.now + self.cfg.fetch_timeout_ms
        self.fetched_from_leader = True
        if (r.fetch_offset, r.last_fetched_epoch) != (self.log.end_offset, self.log.last_fetched_epoch):
            return  # answers an older fetch: the log has moved since
        if r.diverging is not None:
            target = max(self._truncation_offset(*r.diverging), self.log.start_offset)
            if target < self.high_watermark:
                raise AssertionError(f"node {self.node_id}: truncation to {target} below the high watermark "
                                     f"{self.high_watermark}")
            self.log.truncate_to(target)
            self.truncations += 1
            self._send_fetch(self.now)
            return
        if r.snapshot_id is not None:
            self.fetching_snapshot = r.snapshot_id
            self.requests.on_sent(self.leader_id, self.now)
            self._send(FetchSnapshotRequest(self.node_id, self.leader_id, self.epoch, r.snapshot_id))
            return
        new = [e for e in r.entries if e.offset >= self.log.end_offset]  # whole batches past our end
        if new and new[0].offset == self.log.end_offset:
            self.log.append(new)
            self._ready.flush = True
        if r.high_watermark >= 0:
            self._set_high_watermark(min(r.high_watermark, self.log.end_offset))
        self._send_fetch(self.now)

    def _truncation_offset(self, end: int, epoch: int) -> int:
        """ReplicatedLog.truncateToEndOffset: where our log and the leader's agree, given that the leader's
        ``epoch`` ends at ``end``: our end for that epoch (capped at the leader's) when we have the epoch, else
        our end for the largest epoch below it (the next fetch names that one and the leader checks again)."""
        if epoch == 0:
            return min(end, self.log.end_offset)
        local_epoch, local_end = self.log.end_offset_for_epoch(epoch)
        return min(local_end, end) if local_epoch == epoch else local_end

    def _on_request_failed(self, r: RequestFailed) -> None:
        """A Fetch or FetchSnapshot got no usable answer: that destination backs off, and the next tick asks
        again (an observer asks another voter at once)."""
        if r.request in ("FetchRequest", "FetchSnapshotRequest") and r.src == self.fetch_target \
                and self.requests.in_flight(r.src, self.now):
            self.requests.on_failure(r.src, self.now)

    def _on_fetch_snapshot_request(self, r: FetchSnapshotRequest) -> None:
        snap = self.log.snapshot_with_id(*r.snapshot_id)
        if r.epoch != self.epoch or self.role is not Role.LEADER:
            error = ErrorCode.FENCED_LEADER_EPOCH if r.epoch < self.epoch else ErrorCode.NOT_LEADER_OR_FOLLOWER
            self._send(FetchSnapshotResponse(self.node_id, r.src, self.epoch, self.leader_id, error))
            return
        if snap is None:
            self._send(FetchSnapshotResponse(self.node_id, r.src, self.epoch, self.leader_id,
                                             ErrorCode.SNAPSHOT_NOT_FOUND))
            return
        self._send(FetchSnapshotResponse(self.node_id, r.src, self.epoch, self.leader_id, 0,
                                         (snap.end_offset, snap.epoch), snap.data))

    def _on_fetch_snapshot_response(self, r: FetchSnapshotResponse) -> None:
        if self._maybe_higher_epoch(r.epoch, r.leader_id):
            return
        if self.role is not Role.FOLLOWER or r.src != self.leader_id or self.fetching_snapshot is None:
            return
        self.fetching_snapshot = None
        self.requests.on_success(r.src)
        if r.error or r.snapshot_id is None:
            self._send_fetch(self.now)
            return
        self.fetch_deadline = self.now + self.cfg.fetch_timeout_ms
        end, epoch = r.snapshot_id
        snap = Snapshot(end, epoch, r.data)
        if end > self.log.end_offset or self.log.validate_offset_and_epoch(end, epoch).kind is not Validation.VALID:
            self.log.install_snapshot(snap)
            self._snapshot_to_load = snap
            self.applied = min(self.applied, end)
            self._set_high_watermark(end)
        self._send_fetch(self.now)

    # ---- transitions -----------------------------------------------------------------------------------

    def _persist(self) -> None:
        self._ready.election_state = ElectionState(self.epoch, self.leader_id, self.voted_id, self.voters)

    def _reset_election_timer(self, now_ms: int) -> None:
        t = self.cfg.election_timeout_ms
        self.election_deadline = now_ms + t + self.rng.randrange(t)

    def _clear_role_state(self) -> None:
        self.granted, self.rejected, self.vote_sent_at = set(), set(), {}
        self.replica_end, self.fetched_since_check, self.unacked_begin = {}, set(), {}
        self.replica_progress = {}
        self.requests.reset(self.now)
        self.fetching_snapshot = None
        self.backoff_until = None
        self.leader_resigned = False
        self.fetched_from_leader = False  # a successful Fetch from the leader in this follower state

    def _become_unattached(self, epoch: int, now_ms: int, keep_vote: bool = False) -> None:
        changed = epoch != self.epoch or self.leader_id != NO_ID or (self.voted_id != NO_ID and not keep_vote)
        same_epoch = epoch == self.epoch
        self.epoch = epoch
        self.leader_id = NO_ID
        if not (keep_vote and same_epoch):
            self.voted_id = NO_ID
        self.role = Role.UNATTACHED
        self._clear_role_state()
        self.fetch_target = None
        self._reset_election_timer(now_ms)
        if changed:
            self._persist()
            self._ready.leader_change = (self.epoch, NO_ID)

    def _become_prospective(self, now_ms: int) -> None:
        self.role = Role.PROSPECTIVE
        self._clear_role_state()
        self.granted = {self.node_id}
        self._reset_election_timer(now_ms)
        if self._majority(self.granted):
            self._become_candidate(now_ms)
            return
        for voter in self.voters - {self.node_id}:
            self._send_vote(voter, now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        self.epoch += 1
        self.leader_id = NO_ID
        self.voted_id = self.node_id
        self.role = Role.CANDIDATE
        self._clear_role_state()
        self.granted = {self.node_id}
        self._persist()
        self._ready.leader_change = (self.epoch, NO_ID)
        self._reset_election_timer(now_ms)
        if self._majority(self.granted):
            self._become_leader(now_ms)
            return
        for voter in self.voters - {self.node_id}:
            self._send_vote(voter, now_ms)

    def _become_leader(self, now_ms: int) -> None:
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self._clear_role_state()
        self._persist()
        self._ready.leader_change = (self.epoch, self.node_id)
        self.epoch_start_offset = self.log.end_offset
        self.log.append([Entry(self.epoch_start_offset, self.epoch, ("LeaderChange", self.epoch, self.node_id),
                               control=True)])
        self._ready.flush = True
        self.check_quorum_deadline = now_ms + int(CHECK_QUORUM_TIMEOUT_FACTOR * self.cfg.fetch_timeout_ms)
        for voter in self.voters - {self.node_id}:
            self._send_begin_epoch(voter, now_ms)

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        changed = epoch != self.epoch or leader_id != self.leader_id
        if epoch != self.epoch:
            self.voted_id = NO_ID
        self.epoch = epoch
        self.leader_id = leader_id
        self.role = Role.FOLLOWER
        self._clear_role_state()
        self.fetch_target = leader_id
        self.fetch_deadline = now_ms + self.cfg.fetch_timeout_ms
        if changed:
            self._persist()
            self._ready.leader_change = (epoch, leader_id)
        self._send_fetch(now_ms)

    def _become_resigned(self, now_ms: int) -> None:
        self.role = Role.RESIGNED  # in memory only, as Kafka: the epoch and leader stay on disk
        ends = dict(self.replica_end)
        successors = tuple(sorted(self.voters - {self.node_id}, key=lambda v: (-ends.get(v, -1), v)))
        self._clear_role_state()
        self._reset_election_timer(now_ms)
        for voter in successors:
            self._send(EndQuorumEpochRequest(self.node_id, voter, self.epoch, successors))

    # ---- leader and follower helpers ------------------------------------------------------------------

    def _majority(self, ids: set[int]) -> bool:
        return len(ids & self.voters) * 2 > len(self.voters)

    def _vote_rejected(self) -> bool:
        """EpochElection.isVoteRejected: too many rejections for the votes left to make a majority."""
        return not self._majority(self.voters - self.rejected)

    def _send_vote(self, voter: int, now_ms: int) -> None:
        self.vote_sent_at[voter] = now_ms
        pre = self.role is Role.PROSPECTIVE
        self._send(VoteRequest(self.node_id, voter, self.epoch + 1 if pre else self.epoch,
                               self.log.last_fetched_epoch, self.log.end_offset, pre))

    def _send_begin_epoch(self, voter: int, now_ms: int) -> None:
        self.unacked_begin[voter] = now_ms
        self._send(BeginQuorumEpochRequest(self.node_id, voter, self.epoch))

    def _send_fetch(self, now_ms: int, to: int | None = None) -> None:
        """A Fetch to ``to``, by default to the leader this node follows."""
        target = self.leader_id if to is None else to
        if target == NO_ID or target == self.node_id:
            return
        self.fetch_target = target
        self.requests.on_sent(target, now_ms)
        self._send(FetchRequest(self.node_id, target, self.epoch, self.log.end_offset,
                                self.log.last_fetched_epoch, self.high_watermark))

    def _fetch_choices(self, now_ms: int) -> list[int]:
        """Where a follower or an observer may send a Fetch now (empty: nowhere yet). A follower fetches from its
        leader once the last request is answered, timed out or backed off; an observer whose leader's request
        failed or timed out, or that knows no leader, asks any voter who leads (Kafka's pollFollowerAsObserver
        and pollUnattachedAsObserver: maybeSendAnyVoterFetch)."""
        req = self.requests
        if self.role is Role.FOLLOWER:
            leader = self.leader_id
            if self.is_voter or not (req.timed_out(leader, now_ms) or req.backing_off(leader, now_ms)):
                return [leader] if req.ready(leader, now_ms) and not req.any_in_flight(now_ms) else []
        elif self.is_voter:
            return []
        return req.choices(self.voters, now_ms)

    def _ask_for_fetch(self, now_ms: int) -> None:
        """A Fetch to where ``_fetch_choices`` allows now, if anywhere (one of several at random)."""
        choices = self._fetch_choices(now_ms)
        if choices:
            self._send_fetch(now_ms, choices[self.rng.randrange(len(choices))] if len(choices) > 1 else choices[0])

    def _set_high_watermark(self, hw: int) -> None:
        if hw > self.high_watermark:
            self.high_watermark = hw

    def _maybe_update_high_watermark(self) -> None:
        """LeaderState.maybeUpdateHighWatermark: the end offset a majority of voters has flushed, once it is
        past the start of this epoch."""
        ends = sorted((self.log.flushed_offset if v == self.node_id else self.replica_end.get(v, 0)
                       for v in self.voters), reverse=True)
        candidate = ends[len(self.voters) // 2]
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate


_HANDLERS = {
    VoteRequest: "_on_vote_request",
    VoteResponse: "_on_vote_response",
    BeginQuorumEpochRequest: "_on_begin_epoch",
    BeginQuorumEpochResponse: "_on_begin_epoch_response",
    EndQuorumEpochRequest: "_on_end_epoch",
    EndQuorumEpochResponse: "_on_end_epoch_response",
    FetchRequest: "_on_fetch_request",
    FetchResponse: "_on_fetch_response",
    FetchSnapshotRequest: "_on_fetch_snapshot_request",
    FetchSnapshotResponse: "_on_fetch_snapshot_response",
    RequestFailed: "_on_request_failed",
}
