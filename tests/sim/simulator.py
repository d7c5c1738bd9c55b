"""A seeded, single-threaded simulation of a KRaft quorum under simulated time (Kafka's RaftEventSimulationTest).

Nodes are ``RaftNode`` state machines over ``MemoryLog``s; an event heap delivers messages (with loss,
delay, reordering, duplication and partitions), ticks nodes with per-node jitter, runs each node's Ready
after a random disk latency (so a crash in between loses what was not yet persisted or flushed), crashes
and restarts nodes, and has a small application propose entries and take snapshots. Invariants are
checked after every event; the same seed replays the same run exactly.

The transport is the driver's: a request to a crashed node is refused, and a fetch in flight to a node that
crashes fails, within a few ms (the sender's core hears RequestFailed); a request to a hung node (accepting,
never answering, as under SIGSTOP) or lost on the way fails at the sender when its request timeout passes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import random
from typing import Any

from cluster.raft.election_state import ElectionState
from cluster.raft.log import MemoryLog
from cluster.raft.messages import (
    BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchResponse, FetchSnapshotRequest, RequestFailed,
    VoteRequest,
)
from cluster.raft.node import RaftConfig, RaftNode, Role

FETCH_MAX_WAIT_MS = 100  # below the request timeout, as Kafka's 500 ms is below its 2 s
SIM_CONFIG = RaftConfig(election_timeout_ms=500, fetch_timeout_ms=1000, election_backoff_max_ms=300,
                        request_timeout_ms=300, retry_backoff_ms=20, fetch_max_entries=8)
# Kafka's controller.quorum.* defaults (QuorumConfig): election 1 s, fetch 2 s, backoff 1 s, request 2 s, retry 20 ms
KAFKA_CONFIG = RaftConfig(election_timeout_ms=1000, fetch_timeout_ms=2000, election_backoff_max_ms=1000,
                          request_timeout_ms=2000, retry_backoff_ms=20, fetch_max_entries=8)
REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest)


class InvariantViolation(AssertionError):
    pass


@dataclasses.dataclass
class SimNode:
    id: int
    log: MemoryLog
    store: ElectionState | None = None  # the quorum-state file
    raft: RaftNode | None = None  # None while crashed
    applied: list = dataclasses.field(default_factory=list)  # the application's state: payloads in order
    ready_scheduled: bool = False
    incarnation: int = 0
    last_store_epoch: int = -1
    last_hw: int = 0


@dataclasses.dataclass
class Counters:
    leader_changes: int = 0
    commits: int = 0
    truncations: int = 0
    snapshot_loads: int = 0
    snapshots: int = 0
    crashes: int = 0
    messages: int = 0
    dropped: int = 0


class Simulation:
    def __init__(self, seed: int, voters: int = 3, observers: int = 1, config: RaftConfig = SIM_CONFIG,
                 loss: float = 0.05, duplicate: float = 0.02, delay: tuple[int, int] = (1, 30),
                 snapshot_every: int = 40) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.cfg = config
        self.voter_ids = frozenset(range(1, voters + 1))
        self.nodes = {i: SimNode(i, MemoryLog()) for i in range(1, voters + observers + 1)}
        self.loss, self.duplicate, self.delay = loss, duplicate, delay
        self.snapshot_every = snapshot_every
        self.now = 0
        self.events: list = []
        self._seq = 0
        self.groups: list[set[int]] | None = None  # network partition: nodes talk only within a group
        self.hung: set[int] = set()  # nodes that accept requests and never answer (nor act)
        self.parked: dict[int, list] = {}  # leader id -> empty fetch answers it holds back
        self.counters = Counters()
        self.leaders: dict[int, int] = {}  # epoch -> leader id (every leader ever seen)
        self.committed: dict[int, tuple[int, Any, int]] = {}  # offset -> (epoch, data, count) of each committed entry
        self.committed_end = 0  # the offset after the last committed entry
        self.committed_payloads: list = []  # the application payloads in commit order
        self.next_payload = 0
        self.trace = hashlib.sha256()
        for n in self.nodes.values():
            self._start(n)

    # ---- events -------------------------------------------------------------------------------------

    def _at(self, t: int, kind: str, *args) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, kind, args))

    def _start(self, n: SimNode) -> None:
        n.incarnation += 1
        n.raft = RaftNode(n.id, self.voter_ids, n.log, random.Random(self.rng.getrandbits(32)), self.cfg,
                          self.now, n.store)
        n.applied = []
        n.last_hw = n.raft.high_watermark
        self._at(self.now + self.rng.randint(1, 10), "tick", n.id, n.incarnation)
        self._schedule_ready(n)

    def _schedule_ready(self, n: SimNode) -> None:
        if not n.ready_scheduled:
            n.ready_scheduled = True
            self._at(self.now + self.rng.randint(0, 4), "ready", n.id, n.incarnation)

    def send(self, msg) -> None:
        if isinstance(msg, FetchResponse) and msg.may_wait:
            # the leader parks an empty answer (Kafka's fetch purgatory) until its log or high watermark moves
            # or FETCH_MAX_WAIT_MS passes, as the driver does: followers do not spin on empty fetches
            self.parked.setdefault(msg.src, []).append(msg)
            self._at(self.now + FETCH_MAX_WAIT_MS, "release", msg.src, msg)
            return
        self._transmit(msg)

    def _ev_release(self, node_id: int, msg) -> None:
        parked = self.parked.get(node_id, [])
        for i, m in enumerate(parked):
            if m is msg:
                del parked[i]
                self._transmit(msg)
                return

    def _release_all(self, node_id: int) -> None:
        for msg in self.parked.pop(node_id, []):
            self._transmit(msg)

    def _transmit(self, msg) -> None:
        self.counters.messages += 1
        if self.groups is not None and not any(msg.src in g and msg.dst in g for g in self.groups):
            self.counters.dropped += 1
            self._fail_later(msg, self.cfg.request_timeout_ms)
            return
        if self.rng.random() < self.loss:
            self.counters.dropped += 1
            self._fail_later(msg, self.cfg.request_timeout_ms)
            return
        if msg.dst in self.hung:
            self._fail_later(msg, self.cfg.request_timeout_ms)
            return
        if self.nodes[msg.dst].raft is None:  # nothing listens: refused at once
            self._fail_later(msg, self.rng.randint(1, 5))
            return
        copies = 2 if self.rng.random() < self.duplicate else 1
        for _ in range(copies):
            self._at(self.now + self.rng.randint(*self.delay), "deliver", msg)

    def run_until(self, t_end: int) -> None:
        while self.events and self.events[0][0] <= t_end:
            t, _, kind, args = heapq.heappop(self.events)
            self.now = t
            self.trace.update(f"{t}:{kind}:{args!r}".encode())
            try:
                getattr(self, "_ev_" + kind)(*args)
            except InvariantViolation:
                raise
            except AssertionError as exc:  # a node's own safety check (e.g. truncation below the HW)
                self._fail(str(exc))
            self.check_invariants()
        self.now = max(self.now, t_end)

    def _ev_tick(self, node_id: int, incarnation: int) -> None:
        n = self.nodes[node_id]
        if n.raft is None or n.incarnation != incarnation:
            return
        if node_id in self.hung:  # stopped: it ticks again once resumed
            self._at(self.now + 10, "tick", node_id, incarnation)
            return
        r = n.raft
        quiet = self.now < r.next_deadline()  # the driver sleeps until the deadline: a tick before it must be a no-op
        before = (r.role, r.epoch, r.leader_id, r.voted_id, len(r._ready.messages), r.election_deadline,
                  r.backoff_until, r.requests.snapshot()) if quiet else None
        r.tick(self.now)
        if quiet and before != (r.role, r.epoch, r.leader_id, r.voted_id, len(r._ready.messages),
                                r.election_deadline, r.backoff_until, r.requests.snapshot()):
            self._fail(f"node {node_id} acted on a tick before its next_deadline()")
        self._schedule_ready(n)
        self._at(self.now + 10 + self.rng.randint(0, 5), "tick", node_id, incarnation)

    def _fail_later(self, msg, after_ms: int) -> None:
        """The sender's transport gives up on a request: its core hears RequestFailed (a lost answer is not)."""
        if isinstance(msg, REQUESTS):
            self._at(self.now + after_ms, "deliver", RequestFailed(msg.dst, msg.src, type(msg).__name__))

    def _ev_deliver(self, msg) -> None:
        n = self.nodes[msg.dst]
        if n.raft is None or msg.dst in self.hung:
            return
        n.raft.step(msg, self.now)
        self._schedule_ready(n)

    def _ev_ready(self, node_id: int, incarnation: int) -> None:
        n = self.nodes[node_id]
        if n.raft is None or n.incarnation != incarnation:
            return
        if node_id in self.hung:
            n.ready_scheduled = False
            return
        n.ready_scheduled = False
        moved = (n.raft.log.end_offset, n.raft.high_watermark)
        for _ in range(100):
            r = n.raft.ready()
            if r.empty():
                break
            if r.election_state is not None:
                if r.election_state.epoch < n.last_store_epoch:
                    self._fail(f"node {n.id} persisted epoch {r.election_state.epoch} after {n.last_store_epoch}")
                n.store = r.election_state
                n.last_store_epoch = r.election_state.epoch
            if r.flush:
                n.log.flush()
            for m in r.messages:
                self.send(m)
            if r.load_snapshot is not None:
                n.applied = list(r.load_snapshot.data)
                self.counters.snapshot_loads += 1
            for e in r.committed:
                if not e.control:
                    n.applied.append(e.data)
            if r.leader_change is not None and r.leader_change[1] == n.id:
                self.counters.leader_changes += 1
            n.raft.advance(self.now)
        if (n.raft.log.end_offset, n.raft.high_watermark) != moved:
            self._release_all(n.id)

    # ---- the application and the faults ----------------------------------------------------------------

    def leader(self) -> SimNode | None:
        live = [n for n in self.nodes.values() if n.raft is not None and n.raft.role is Role.LEADER
                and n.id not in self.hung]
        return max(live, key=lambda n: n.raft.epoch) if live else None

    def propose(self) -> int | None:
        n = self.leader()
        if n is None:
            return None
        payload = ("p", self.next_payload)
        # a batch of one to three records: entries span offsets, as KRaft's record batches do
        offset = n.raft.propose(payload, self.now, count=1 + self.next_payload % 3)
        if offset is not None:
            self.next_payload += 1
            self._schedule_ready(n)
        return offset

    def maybe_snapshot(self, n: SimNode) -> None:
        raft = n.raft
        if raft is None:
            return
        latest = raft.log.latest_snapshot
        if raft.applied - max(raft.log.start_offset, latest.end_offset if latest else 0) < self.snapshot_every:
            return
        if raft.snapshot_at(raft.applied, tuple(n.applied)):
            self.counters.snapshots += 1
            # retention: sometimes the log before the newest snapshot goes at once, sometimes older snapshots
            # and the log after them stay (a follower a little behind then fetches entries, not the snapshot)
            if self.rng.random() < 0.3:
                raft.log.delete_before_snapshot(raft.log.latest_snapshot)
            else:
                raft.log.clean(lambda _snapshot: self.rng.random() < 0.5)

    def crash(self, node_id: int) -> None:
        n = self.nodes[node_id]
        if n.raft is None:
            return
        self.counters.truncations += n.raft.truncations
        n.raft = None
        n.ready_scheduled = False
        self.parked.pop(node_id, None)  # a crashed leader answers nothing
        n.log.crash()
        self.counters.crashes += 1
        for other in self.nodes.values():  # its connections close: a fetch in flight to it fails at once
            if other.raft is not None:
                self._at(self.now + self.rng.randint(1, 5), "deliver", RequestFailed(node_id, other.id, "FetchRequest"))

    def restart(self, node_id: int) -> None:
        n = self.nodes[node_id]
        if n.raft is None:
            self._start(n)

    def partition(self, groups: list[set[int]]) -> None:
        self.groups = groups

    def heal(self) -> None:
        self.groups = None

    # ---- invariants ----------------------------------------------------------------------------------

    def _fail(self, what: str) -> None:
        raise InvariantViolation(f"seed={self.seed} voters={len(self.voter_ids)} t={self.now}: {what}")

    def check_invariants(self) -> None:
        majority = len(self.voter_ids) // 2 + 1
        for n in self.nodes.values():
            raft = n.raft
            if raft is None:
                continue
            if raft.role is Role.LEADER:  # one leader per epoch
                seen = self.leaders.setdefault(raft.epoch, n.id)
                if seen != n.id:
                    self._fail(f"two leaders in epoch {raft.epoch}: {seen} and {n.id}")
                if raft.high_watermark < n.last_hw:
                    self._fail(f"leader {n.id} high watermark went back {n.last_hw} -> {raft.high_watermark}")
            n.last_hw = raft.high_watermark
            hw = raft.high_watermark
            # every entry below a high watermark is committed: the same everywhere, forever
            last = raft.log.entry(hw - 1)
            if last is not None and last.next_offset != hw:
                self._fail(f"node {n.id} high watermark {hw} splits a batch")
            start = max(raft.log.start_offset, min(self.committed_end, hw))
            for e in raft.log.read_until(start, hw):
                key = (e.epoch, e.data, e.count)
                prev = self.committed.setdefault(e.offset, key)
                if prev != key:
                    self._fail(f"node {n.id} has {key} at committed offset {e.offset}, committed {prev}")
                if e.offset == self.committed_end:
                    self.committed_end = e.next_offset
                    if not e.control:
                        self.committed_payloads.append(e.data)
                        self.counters.commits += 1
            if raft.role is Role.LEADER and hw > 0:  # the high watermark is durable on a majority
                durable = sum(1 for v in self.voter_ids if self._holds_durably(self.nodes[v], hw))
                if durable < majority:
                    self._fail(f"leader {n.id} high watermark {hw} is durable on {durable} voters only")
            # the application saw a prefix of what was committed
            if n.applied != self.committed_payloads[:len(n.applied)]:
                self._fail(f"node {n.id} applied {n.applied[-3:]} not a prefix of the committed sequence")

    def check_converged(self) -> None:
        """Liveness after a quiet spell: every node holds the leader's log end and high watermark and has
        applied everything committed."""
        leader = self.leader()
        if leader is None:
            self._fail("no leader after the quiet spell")
        want = (leader.raft.log.end_offset, leader.raft.log.last_fetched_epoch, leader.raft.high_watermark)
        for n in self.nodes.values():
            if n.raft is None or n.id in self.hung:
                continue  # down for the liveness check
            got = (n.raft.log.end_offset, n.raft.log.last_fetched_epoch, n.raft.high_watermark)
            if got != want or n.applied != self.committed_payloads:
                self._fail(f"node {n.id} did not converge on leader {leader.id}'s log in {QUIET_MS} ms of quiet: "
                           f"(end, last epoch, high watermark) {got} against {want}, applied {len(n.applied)} "
                           f"of {len(self.committed_payloads)}")

    def _holds_durably(self, n: SimNode, hw: int) -> bool:
        log = n.log
        if log.flushed_offset < hw:
            return False
        if log.latest_snapshot is not None and log.latest_snapshot.end_offset >= hw:
            return True
        e = log.entry(hw - 1)
        return e is not None and self.committed.get(e.offset) == (e.epoch, e.data, e.count)

    def check_logs_match(self) -> None:
        """Log matching: two logs holding the same (offset, epoch) hold the same entries up to it."""
        logs = [(n.id, n.log) for n in self.nodes.values()]
        for i, (a_id, a) in enumerate(logs):
            for b_id, b in logs[i + 1:]:
                lo = max(a.start_offset, b.start_offset)
                hi = min(a.end_offset, b.end_offset)
                last_same = None
                for off in range(hi - 1, lo - 1, -1):
                    ea, eb = a.entry(off), b.entry(off)
                    if ea.epoch == eb.epoch:
                        last_same = off
                        break
                if last_same is None:
                    continue
                for off in range(lo, last_same + 1):
                    if a.entry(off) != b.entry(off):
                        self._fail(f"logs of {a_id} and {b_id} agree at {last_same} but differ at {off}")


QUIET_MS = 3_000


def run_scenario(seed: int, voters: int, length_ms: int = 12_000, heal_at: int = 8_000,
                 observers: int = 1) -> Simulation:
    """One seeded run: random faults until ``heal_at``, then a healthy network; afterwards a leader must be
    elected and a new proposal committed before the end, and every node must converge after a quiet spell
    (liveness). A failure names the call that replays it."""
    try:
        return _run_scenario(seed, voters, length_ms, heal_at, observers)
    except InvariantViolation as exc:
        raise InvariantViolation(f"{exc} [replay: run_scenario({seed}, {voters}, length_ms={length_ms}, "
                                 f"heal_at={heal_at}, observers={observers})]") from None


def _run_scenario(seed: int, voters: int, length_ms: int, heal_at: int, observers: int) -> Simulation:
    sim = Simulation(seed, voters=voters, observers=observers)
    rng = random.Random(seed * 7919 + voters)
    ids = sorted(sim.nodes)
    t = 0
    while t < heal_at:
        t += rng.randint(20, 120)
        sim.run_until(t)
        for _ in range(rng.randint(0, 2)):
            sim.propose()
        r = rng.random()
        if r < 0.03:
            sim.crash(rng.choice(ids))
        elif r < 0.06:
            leader = sim.leader()  # the faults that matter most: the leader dies mid-replication
            if leader is not None:
                sim.crash(leader.id)
        elif r < 0.12:
            down = [i for i in ids if sim.nodes[i].raft is None]
            if down:
                sim.restart(rng.choice(down))
        elif r < 0.14:
            cut = set(rng.sample(ids, rng.randint(1, len(ids) // 2)))
            sim.partition([cut, set(ids) - cut])
        elif r < 0.17:
            sim.heal()
        for n in sim.nodes.values():
            sim.maybe_snapshot(n)
    sim.heal()
    sim.loss = 0.0
    for i in ids:
        sim.restart(i)
    deadline = length_ms
    committed_before = len(sim.committed_payloads)
    proposed_after_heal = False
    while t < deadline:
        t += 50
        sim.run_until(t)
        if sim.leader() is not None and sim.propose() is not None:
            proposed_after_heal = True
        for n in sim.nodes.values():
            sim.maybe_snapshot(n)
    sim.check_logs_match()
    if sim.leader() is None:
        sim._fail(f"no leader {deadline - heal_at} ms after the faults healed")
    if not proposed_after_heal or len(sim.committed_payloads) <= committed_before:
        sim._fail("nothing committed after the faults healed")
    quiet_until = t + QUIET_MS  # nothing proposed: every node must converge on the leader's log
    while t < quiet_until:
        t += 50
        sim.run_until(t)
        for n in sim.nodes.values():
            sim.maybe_snapshot(n)
    sim.check_converged()
    for n in sim.nodes.values():
        if n.raft is not None:
            sim.counters.truncations += n.raft.truncations
    return sim


def observer_bound_ms(config: RaftConfig) -> int:
    """How long after a new leader is elected every live observer must follow it: one request timeout (it may
    just have asked a hung voter) plus a second for the rounds of asking voters that did not know yet (each a
    retry backoff and two message delays, a few dozen ms) and for the voters to hear of the new leader."""
    return config.request_timeout_ms + 1000


def run_observer_scenario(seed: int, voters: int, observers: int = 2, config: RaftConfig = KAFKA_CONFIG,
                          fault_ms: int = 15_000) -> Simulation:
    """Observers after their leader dies for good (issue 26): random faults, then a healed network at Kafka's
    timer ratios; once every node follows the leader, the leader is killed and stays down (with 5 voters a second
    voter hangs: it accepts requests and never answers). A new leader must be elected; every live observer must
    follow it within ``observer_bound_ms`` of its election, and every live node must converge afterwards."""
    try:
        return _run_observer_scenario(seed, voters, observers, config, fault_ms)
    except InvariantViolation as exc:
        raise InvariantViolation(f"{exc} [replay: run_observer_scenario({seed}, {voters}, observers={observers}, "
                                 f"fault_ms={fault_ms})]") from None


def _run_observer_scenario(seed: int, voters: int, observers: int, config: RaftConfig, fault_ms: int) -> Simulation:
    sim = Simulation(seed, voters=voters, observers=observers, config=config)
    rng = random.Random(seed * 7919 + voters + 1)
    ids = sorted(sim.nodes)
    observer_ids = [i for i in ids if i not in sim.voter_ids]
    t = 0
    while t < fault_ms:  # the faults of run_scenario, at a slower pace for the longer timers
        t += rng.randint(50, 300)
        sim.run_until(t)
        sim.propose()
        r = rng.random()
        if r < 0.04:
            sim.crash(rng.choice(ids))
        elif r < 0.10:
            down = [i for i in ids if sim.nodes[i].raft is None]
            if down:
                sim.restart(rng.choice(down))
        elif r < 0.13:
            cut = set(rng.sample(ids, rng.randint(1, len(ids) // 2)))
            sim.partition([cut, set(ids) - cut])
        elif r < 0.17:
            sim.heal()
        for n in sim.nodes.values():
            sim.maybe_snapshot(n)
    sim.heal()
    sim.loss = 0.0
    for i in ids:
        sim.restart(i)

    def all_follow(leader: SimNode, among) -> bool:
        return all(sim.nodes[i].raft is not None and sim.nodes[i].raft.role is Role.FOLLOWER
                   and (sim.nodes[i].raft.epoch, sim.nodes[i].raft.leader_id) == (leader.raft.epoch, leader.id)
                   for i in among)

    settle_until = t + 30_000
    while t < settle_until:
        t += 50
        sim.run_until(t)
        sim.propose()
        leader = sim.leader()
        if leader is not None and all_follow(leader, [i for i in ids if i != leader.id]):
            break
    else:
        sim._fail("the healed cluster did not settle on one leader in 30 s")
    old = sim.leader()
    sim.crash(old.id)  # kill -9, and it stays down
    if voters >= 5:
        sim.hung.add(rng.choice(sorted(sim.voter_ids - {old.id})))
    killed_at = t
    elected_at = None
    bound = observer_bound_ms(config)
    while t < killed_at + 60_000:
        t += 10
        sim.run_until(t)
        leader = sim.leader()
        if leader is not None and leader.id != old.id and elected_at is None:
            elected_at = t
        if elected_at is not None:
            if all_follow(leader, observer_ids):
                break
            if t > elected_at + bound:
                states = {i: (sim.nodes[i].raft.role.value, sim.nodes[i].raft.epoch, sim.nodes[i].raft.leader_id)
                          for i in observer_ids}
                sim._fail(f"observers {states} did not follow leader {leader.id} (epoch {leader.raft.epoch}) within "
                          f"{bound} ms of its election at t={elected_at} (leader {old.id} killed at t={killed_at})")
    else:
        sim._fail(f"no new leader 60 s after leader {old.id} was killed")
    sim.observer_delay_ms = t - elected_at
    committed_before = len(sim.committed_payloads)
    until = t + 3_000
    while t < until:
        t += 50
        sim.run_until(t)
        sim.propose()
    if len(sim.committed_payloads) <= committed_before:
        sim._fail("nothing committed after the leader was killed")
    quiet_until = t + 2 * config.fetch_timeout_ms + QUIET_MS
    while t < quiet_until:
        t += 50
        sim.run_until(t)
    sim.check_converged()
    sim.check_logs_match()
    return sim
