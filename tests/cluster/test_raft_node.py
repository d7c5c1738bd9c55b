"""The Raft core driven by hand, one message at a time: cases ported from Kafka's KafkaRaftClientTest,
QuorumStateTest and LeaderStateTest (each docstring names the Kafka test method)."""

from __future__ import annotations

import random

from cluster.raft.election_state import ElectionState
from cluster.raft.log import Entry, MemoryLog, Snapshot
from cluster.raft.messages import (
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
    FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, VoteRequest, VoteResponse,
)
from cluster.raft.node import RaftConfig, RaftNode, Role
from protocol.errors import ErrorCode

CFG = RaftConfig(election_timeout_ms=1000, fetch_timeout_ms=2000, election_backoff_max_ms=500,
                 request_timeout_ms=500)


def node(node_id=1, voters=(1, 2, 3), state=None, log=None, now=0) -> RaftNode:
    return RaftNode(node_id, frozenset(voters), log or MemoryLog(), random.Random(1), CFG, now, state)


def drain(n: RaftNode, now: int = 0):
    """Run the node's Readys as a driver would (persist, flush, collect messages); returns them."""
    out = []
    for _ in range(10):
        r = n.ready()
        if r.empty():
            break
        if r.flush:
            n.log.flush()
        out += r.messages
        n.advance(now)
    return out


def elect(n: RaftNode, now: int = 0) -> RaftNode:
    """Make ``n`` the leader of a 3-voter quorum (pre-vote, vote, one grant each)."""
    n.tick(n.election_deadline + now)
    t = n.election_deadline
    msgs = drain(n, t)
    for m in msgs:
        if isinstance(m, VoteRequest) and m.pre_vote:
            n.step(VoteResponse(m.dst, n.node_id, n.epoch, -1, True, pre_vote=True), t)
    msgs = drain(n, t)
    for m in msgs:
        if isinstance(m, VoteRequest) and not m.pre_vote:
            n.step(VoteResponse(m.dst, n.node_id, n.epoch, -1, True), t)
    drain(n, t)
    assert n.role is Role.LEADER
    return n


def test_initialize_single_member_quorum():
    """KafkaRaftClientTest.testInitializeSingleMemberQuorum: a lone voter elects itself and its LeaderChange
    entry commits at once."""
    n = node(voters=(1,))
    n.tick(0)
    drain(n)
    assert n.role is Role.LEADER and n.epoch == 1
    assert n.log.entry(0).control and n.high_watermark == 1


def test_leader_append_single_member_quorum():
    """KafkaRaftClientTest.testLeaderAppendSingleMemberQuorum"""
    n = node(voters=(1,))
    n.tick(0)
    drain(n)
    assert n.propose("a", 1) == 1 and n.propose("b", 1) == 2
    assert n.high_watermark == 1  # not flushed yet
    r = n.ready()
    n.log.flush()
    n.advance(1)
    assert n.high_watermark == 3 and [e.data for e in n.ready().committed] == ["a", "b"]
    assert r.flush


def test_initialize_as_resigned_leader():
    """QuorumStateTest.testInitializeAsResignedLeader: a restarted leader cannot resume its epoch."""
    n = node(state=ElectionState(5, leader_id=1, voters=frozenset({1, 2, 3})))
    assert (n.role, n.epoch) == (Role.RESIGNED, 5)


def test_initialize_as_follower_with_elected_leader():
    """QuorumStateTest.testInitializeAsFollower"""
    n = node(state=ElectionState(5, leader_id=2, voters=frozenset({1, 2, 3})))
    assert (n.role, n.leader_id) == (Role.FOLLOWER, 2)


def test_initialize_as_unattached_after_voting_keeps_the_vote():
    """QuorumStateTest.testInitializeAsVoted: the vote survives a restart, a second candidate is refused."""
    n = node(state=ElectionState(5, voted_id=2, voters=frozenset({1, 2, 3})))
    n.step(VoteRequest(3, 1, 5, 0, 0), 1)
    (resp,) = drain(n)
    assert not resp.granted
    n.step(VoteRequest(2, 1, 5, 0, 0), 2)
    assert drain(n)[0].granted


def test_election_persists_before_votes_are_sent():
    """KafkaRaftClientTest.testInitializeAsCandidateAndBecomeLeader: the candidate's epoch and self-vote are in
    the same Ready as its VoteRequests (the driver persists before sending)."""
    n = node()
    n.tick(n.election_deadline)
    pre = n.ready()
    assert pre.election_state is None and all(m.pre_vote for m in pre.messages)  # pre-votes change nothing
    for m in pre.messages:
        n.step(VoteResponse(m.dst, 1, 0, -1, True, pre_vote=True), n.election_deadline)
    r = n.ready()
    assert r.election_state == ElectionState(1, -1, 1, frozenset({1, 2, 3}))
    assert {m.dst for m in r.messages if isinstance(m, VoteRequest) and not m.pre_vote} == {2, 3}


def test_leader_writes_leader_change_and_begin_quorum_epoch():
    """KafkaRaftClientTest.testInitializeAsCandidateAndBecomeLeader: the new leader's first entry is a
    LeaderChange control record; BeginQuorumEpoch goes to the other voters."""
    n = node()
    n.tick(n.election_deadline)
    t = n.election_deadline
    for m in drain(n, t):
        n.step(VoteResponse(m.dst, 1, 0, -1, True, pre_vote=True), t)
    for m in drain(n, t):
        if isinstance(m, VoteRequest):
            n.step(VoteResponse(m.dst, 1, 1, -1, True), t)
    msgs = drain(n, t)
    assert n.role is Role.LEADER and n.log.entry(0).control
    assert {m.dst for m in msgs if isinstance(m, BeginQuorumEpochRequest)} == {2, 3}


def test_update_high_watermark_quorum_size_three():
    """LeaderStateTest.testUpdateHighWatermarkQuorumSizeThree: the HW is what a majority fetched, and only past
    the epoch start."""
    n = elect(node())
    for d in ("a", "b", "c"):
        n.propose(d, 1)
    drain(n, 1)
    assert n.high_watermark == 0
    n.step(FetchRequest(2, 1, 1, 0, 0), 2)  # voter 2 has nothing yet: the epoch start is not committed
    drain(n, 2)
    assert n.high_watermark == 0
    n.step(FetchRequest(2, 1, 1, 2, 1), 3)
    drain(n, 3)
    assert n.high_watermark == 2
    n.step(FetchRequest(3, 1, 1, 4, 1), 4)
    drain(n, 4)
    assert n.high_watermark == 4


def test_non_monotonic_high_watermark_update():
    """LeaderStateTest.testNonMonotonicHighWatermarkUpdate: a follower's fetch offset going back (it was
    restarted) never moves the high watermark back."""
    n = elect(node())
    n.propose("a", 1)
    drain(n, 1)
    n.step(FetchRequest(2, 1, 1, 2, 1), 2)
    drain(n, 2)
    assert n.high_watermark == 2
    n.step(FetchRequest(2, 1, 1, 1, 1), 3)
    drain(n, 3)
    assert n.high_watermark == 2


def test_a_fetcher_behind_on_the_high_watermark_is_answered_at_once():
    """KIP-1166 (KafkaRaftClient.handleFetchRequest's isHighWatermarkUpdated, Fetch v18): an empty answer may be
    parked only when the fetcher already knows the leader's high watermark; otherwise the follower would learn of
    a commit only after the long poll (a broker applied every metadata change ~500 ms after the others)."""
    n = elect(node())
    n.propose("a", 1)
    drain(n, 1)
    n.step(FetchRequest(2, 1, 1, 2, 1, high_watermark=0), 2)  # voter 2 is caught up: the HW moves to 2
    drain(n, 2)
    assert n.high_watermark == 2

    def answer(known: int) -> FetchResponse:
        n.step(FetchRequest(3, 1, 1, 2, 1, high_watermark=known), 3)
        (resp,) = [m for m in drain(n, 3) if isinstance(m, FetchResponse)]
        assert not resp.entries and resp.high_watermark == 2
        return resp

    assert not answer(0).may_wait  # voter 3 has the records but not the news that they are committed
    assert not answer(-1).may_wait  # it knows no high watermark at all
    assert answer(2).may_wait  # nothing new: the leader may park it
    assert answer(2**63 - 1).may_wait  # a fetcher before v18 says nothing: parked as before


def test_invalid_fetch_request():
    """KafkaRaftClientTest.testInvalidFetchRequest and testFetchRequestClusterIdValidation's epoch checks"""
    n = elect(node())
    drain(n, 1)
    for req, error in [(FetchRequest(2, 1, 1, -5, 0), ErrorCode.INVALID_REQUEST),
                       (FetchRequest(2, 1, 1, 0, -1), ErrorCode.INVALID_REQUEST),
                       (FetchRequest(2, 1, 1, 0, 2), ErrorCode.INVALID_REQUEST),  # last epoch past the current
                       (FetchRequest(2, 1, 0, 0, 0), ErrorCode.FENCED_LEADER_EPOCH),
                       (FetchRequest(2, 1, 2, 0, 0), ErrorCode.UNKNOWN_LEADER_EPOCH)]:
        n.step(req, 2)
        (resp,) = [m for m in drain(n, 2) if isinstance(m, FetchResponse)]
        assert resp.error == error


def test_a_fetch_past_the_leaders_end_is_told_where_to_diverge():
    """A follower whose uncommitted tail of an old epoch reaches past the new leader's log end (a leader killed
    with appended, unreplicated batches) is answered with the diverging epoch, not an error, so it truncates.
    Found by the snapshot test: such a follower used to get INVALID_REQUEST forever while nothing new was
    appended."""
    n = elect(node())
    drain(n, 1)
    n.step(FetchRequest(2, 1, 1, 99, 0), 2)
    (resp,) = [m for m in drain(n, 2) if isinstance(m, FetchResponse)]
    assert resp.error == 0 and resp.diverging == (0, 0)


def test_follower_log_reconciliation():
    """KafkaRaftClientTest.testFollowerLogReconciliation: a follower with a divergent tail truncates to what the
    leader's epochs say, then fetches the leader's entries."""
    log = MemoryLog()
    log.append([Entry(0, 1, "a"), Entry(1, 1, "b"), Entry(2, 2, "x"), Entry(3, 2, "y")])
    log.flush()
    n = node(state=ElectionState(3, leader_id=2, voters=frozenset({1, 2, 3})), log=log)
    n.tick(0)  # a restarted follower fetches on its first tick
    (fetch,) = [m for m in drain(n) if isinstance(m, FetchRequest)]
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (4, 2)
    n.step(FetchResponse(2, 1, 3, 2, diverging=(2, 1), high_watermark=2, fetch_offset=4, last_fetched_epoch=2), 1)
    (fetch,) = [m for m in drain(n, 1) if isinstance(m, FetchRequest)]
    assert n.log.end_offset == 2 and (fetch.fetch_offset, fetch.last_fetched_epoch) == (2, 1)
    n.step(FetchResponse(2, 1, 3, 2, high_watermark=3, entries=(Entry(2, 3, "c"),), fetch_offset=2,
                         last_fetched_epoch=1), 2)
    drain(n, 2)
    assert [e.data for e in n.log.entries] == ["a", "b", "c"] and n.high_watermark == 3


def test_diverging_epoch_truncates_to_our_end_of_that_epoch():
    """ReplicatedLog.truncateToEndOffset (found by the 10,000-run soak, seed 520): the leader says its epoch 1
    ends at 5, past our end; our epoch 1 ends at 3 (then an epoch 2 entry it never had): we cut to 3, not to
    min(5, our end), which cut nothing and fetched the same divergence forever."""
    log = MemoryLog()
    log.append([Entry(0, 1, "a"), Entry(1, 1, "b"), Entry(2, 1, "c"), Entry(3, 2, "x")])
    log.flush()
    n = node(state=ElectionState(3, leader_id=2, voters=frozenset({1, 2, 3})), log=log)
    n.tick(0)
    (fetch,) = [m for m in drain(n) if isinstance(m, FetchRequest)]
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (4, 2)
    n.step(FetchResponse(2, 1, 3, 2, diverging=(5, 1), high_watermark=2, fetch_offset=4, last_fetched_epoch=2), 1)
    (fetch,) = [m for m in drain(n, 1) if isinstance(m, FetchRequest)]
    assert n.log.end_offset == 3 and (fetch.fetch_offset, fetch.last_fetched_epoch) == (3, 1)
    # the leader has no epoch 1 entry at all (its epoch below ours): we cut to our end for that lower epoch
    log = MemoryLog()
    log.append([Entry(0, 1, "a"), Entry(1, 3, "b")])
    log.flush()
    n = node(state=ElectionState(4, leader_id=2, voters=frozenset({1, 2, 3})), log=log)
    n.tick(0)
    drain(n)
    n.step(FetchResponse(2, 1, 4, 2, diverging=(9, 2), high_watermark=1, fetch_offset=2, last_fetched_epoch=3), 1)
    assert n.log.end_offset == 1


def test_stale_fetch_response_is_ignored():
    """A late or duplicated answer to an older fetch cannot make a follower truncate what it has since fetched
    (found by the simulator)."""
    log = MemoryLog()
    log.append([Entry(0, 1, "a"), Entry(1, 1, "b")])
    log.flush()
    n = node(state=ElectionState(1, leader_id=2, voters=frozenset({1, 2, 3})), log=log)
    drain(n)
    n.step(FetchResponse(2, 1, 1, 2, diverging=(0, 0), high_watermark=2, fetch_offset=5, last_fetched_epoch=1), 1)
    drain(n, 1)
    assert n.log.end_offset == 2


def test_candidate_ignores_vote_request_on_same_epoch():
    """KafkaRaftClientTest.testCandidateIgnoreVoteRequestOnSameEpoch: a candidate voted for itself."""
    n = node()
    n.tick(n.election_deadline)
    t = n.election_deadline
    for m in drain(n, t):
        n.step(VoteResponse(m.dst, 1, 0, -1, True, pre_vote=True), t)
    drain(n, t)
    assert n.role is Role.CANDIDATE
    n.step(VoteRequest(2, 1, n.epoch, 0, 0), t)
    (resp,) = [m for m in drain(n, t) if isinstance(m, VoteResponse)]
    assert not resp.granted and n.role is Role.CANDIDATE


def test_vote_request_from_old_epoch_and_non_voter():
    """KafkaRaftClientTest.testHandleVoteRequestWithOlderEpoch / testVoteRequestFromNonVoter: no state change."""
    n = node(state=ElectionState(5, voters=frozenset({1, 2, 3})))
    n.step(VoteRequest(2, 1, 4, 9, 100), 1)
    n.step(VoteRequest(7, 1, 6, 9, 100), 1)
    old, stranger = drain(n, 1)
    assert (old.granted, old.error) == (False, ErrorCode.FENCED_LEADER_EPOCH)
    assert (stranger.granted, stranger.error) == (False, ErrorCode.INCONSISTENT_VOTER_SET)
    assert (n.epoch, n.voted_id) == (5, -1)


def test_begin_and_end_quorum_epoch_from_a_non_voter_change_nothing():
    """KafkaRaftClient.validateVoterOnlyRequest: a BeginQuorumEpoch or EndQuorumEpoch whose sender is not a
    voter is INCONSISTENT_VOTER_SET (one from an old epoch FENCED_LEADER_EPOCH) and no state changes."""
    n = node(state=ElectionState(3, leader_id=2, voters=frozenset({1, 2, 3})))
    drain(n)
    n.step(BeginQuorumEpochRequest(9, 1, 4), 10)
    n.step(EndQuorumEpochRequest(9, 1, 3), 10)
    n.step(BeginQuorumEpochRequest(3, 1, 2), 10)
    begin, end, old = [m for m in drain(n, 10)
                       if isinstance(m, (BeginQuorumEpochResponse, EndQuorumEpochResponse))]
    assert begin.error == end.error == ErrorCode.INCONSISTENT_VOTER_SET
    assert old.error == ErrorCode.FENCED_LEADER_EPOCH
    assert (n.epoch, n.leader_id, n.role) == (3, 2, Role.FOLLOWER) and not n.leader_resigned


def test_follower_with_live_leader_refuses_pre_votes():
    """KafkaRaftClientPreVoteTest.testHandlePreVoteRequestAsFollowerWithElectedLeader (KIP-996): a follower
    grants pre-votes until it has fetched from its leader; then it refuses them (no disruption by a
    partitioned node), and grants again once its fetch timeout has passed."""
    n = node(state=ElectionState(3, leader_id=2, voters=frozenset({1, 2, 3})))
    n.tick(0)
    (fetch,) = [m for m in drain(n) if isinstance(m, FetchRequest)]
    n.step(VoteRequest(3, 1, 4, 3, 10, pre_vote=True), 5)
    (resp,) = [m for m in drain(n, 5) if isinstance(m, VoteResponse)]
    assert resp.granted and (n.epoch, n.role) == (3, Role.FOLLOWER)  # not fetched from the leader yet
    n.step(FetchResponse(2, 1, 3, 2, high_watermark=0, fetch_offset=fetch.fetch_offset,
                         last_fetched_epoch=fetch.last_fetched_epoch), 8)
    drain(n, 8)
    n.step(VoteRequest(3, 1, 4, 3, 10, pre_vote=True), 10)
    (resp,) = [m for m in drain(n, 10) if isinstance(m, VoteResponse)]
    assert not resp.granted and (n.epoch, n.role) == (3, Role.FOLLOWER)
    n.step(VoteRequest(3, 1, 4, 3, 10, pre_vote=True), 2500)
    (resp,) = [m for m in drain(n, 2500) if isinstance(m, VoteResponse)]
    assert resp.granted and n.epoch == 3  # a pre-vote never changes the voter's epoch


def test_prospective_that_loses_its_pre_vote_follows_the_leader_it_knew():
    """KIP-996 (Kafka 4.x ProspectiveState): a follower whose fetches timed out asks for pre-votes; rejected by
    a majority that still follows the leader, it goes back to following that leader and fetches again. Found
    by the simulator's convergence check: such a node used to ask for pre-votes forever."""
    n = node(state=ElectionState(3, leader_id=2, voters=frozenset({1, 2, 3})))
    n.tick(0)
    drain(n)
    n.tick(CFG.fetch_timeout_ms + 1)
    msgs = drain(n, CFG.fetch_timeout_ms + 1)
    assert n.role is Role.PROSPECTIVE and {m.dst for m in msgs if isinstance(m, VoteRequest)} == {2, 3}
    now = CFG.fetch_timeout_ms + 5
    for voter in (2, 3):
        n.step(VoteResponse(voter, 1, 3, 2, False, pre_vote=True), now)
    msgs = drain(n, now)
    assert (n.role, n.epoch, n.leader_id) == (Role.FOLLOWER, 3, 2)
    assert [m.dst for m in msgs if isinstance(m, FetchRequest)] == [2]


def test_handle_begin_quorum_epoch_after_user_initiated_resign():
    """KafkaRaftClientTest.testHandleBeginQuorumEpochAfterUserInitiatedResign: a resigned leader follows the next
    leader."""
    n = elect(node())
    n.resign(10)
    msgs = drain(n, 10)
    assert n.role is Role.RESIGNED and {m.dst for m in msgs if isinstance(m, EndQuorumEpochRequest)} == {2, 3}
    n.step(BeginQuorumEpochRequest(2, 1, n.epoch + 1), 11)
    drain(n, 11)
    assert (n.role, n.leader_id) == (Role.FOLLOWER, 2)


def test_check_quorum_resigns_a_leader_without_fetches():
    """KafkaRaftClientTest.testLeaderShouldResignLeadershipIfNotGetFetchRequestFromMajorityVoters"""
    n = elect(node())
    n.tick(int(1.5 * CFG.fetch_timeout_ms) - 1)
    assert n.role is Role.LEADER
    n.step(FetchRequest(2, 1, 1, 0, 0), 1000)  # one voter fetching is a majority with the leader
    n.tick(2500)
    assert n.role is Role.LEADER
    n.tick(1000 + int(1.5 * CFG.fetch_timeout_ms) + 1)
    assert n.role is Role.RESIGNED


def test_fetch_snapshot_when_behind_the_log_start():
    """KafkaRaftClientTest.testFetchResponseWithSnapshotId / testFetchSnapshotRequest*: a follower below the
    leader's log start gets the snapshot and loads it."""
    leader = elect(node())
    for i in range(5):
        leader.propose(i, 1)
    drain(leader, 1)
    leader.step(FetchRequest(2, 1, 1, 6, 1), 2)
    drain(leader, 2)
    assert leader.high_watermark == 6 and leader.applied == 6
    assert leader.snapshot_at(6, ("state", 6))
    assert leader.log.delete_before_snapshot(leader.log.latest_snapshot)  # retention deleted the log before it
    leader.step(FetchRequest(3, 1, 1, 0, 0), 3)
    (resp,) = [m for m in drain(leader, 3) if isinstance(m, FetchResponse)]
    assert resp.snapshot_id == (6, 1)
    leader.step(FetchSnapshotRequest(3, 1, 1, (6, 1)), 4)
    (snap,) = [m for m in drain(leader, 4) if isinstance(m, FetchSnapshotResponse)]
    follower = node(3, state=ElectionState(1, leader_id=1, voters=frozenset({1, 2, 3})))
    drain(follower)
    follower.fetching_snapshot = (6, 1)
    follower.step(snap, 5)
    r = follower.ready()
    assert r.load_snapshot == Snapshot(6, 1, ("state", 6)) and follower.log.start_offset == 6
