"""Property tests of SharePartition against a simple model of what share consumers may observe.

Random histories of members fetching (both acquire modes), acknowledging (any type, Renew included, per batch or
per offset, valid or not), closing their sessions, time passing, and share-state writes answered in any order with
success or failure. Checked after every step:

- at most one holder per offset: an offset goes to a member only when no one holds it or the holder's lock ran out;
- no delivery of an offset after an Accept, Reject or Gap of it was answered without error;
- delivery counts never decrease and never pass ``group.share.delivery.count.limit``;
- ``delivery_complete_count`` (KIP-1226) equals the terminal offsets of the window;

and at the end, once every write is answered, every lock expired and one member accepted whatever it gets, every
offset of the log is Acknowledged or Archived (the SPSO reached the log's end).
"""

from __future__ import annotations

import copy
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.share.share_partition import (
    AcknowledgementBatch,
    BatchRange,
    RecordState,
    SharePartition,
    StateBatch,
    StateWrite,
    is_terminal,
)
from protocol.errors import ErrorCode

LOCK_MS = 50
MEMBERS = ("m0", "m1", "m2")


@dataclasses.dataclass
class Model:
    log: list[BatchRange]
    max_delivery: int
    now: int = 0
    holder: dict = dataclasses.field(default_factory=dict)  # offset -> (member, lock deadline)
    final: set = dataclasses.field(default_factory=set)  # offsets whose Accept/Reject/Gap was answered
    counts: dict = dataclasses.field(default_factory=dict)  # offset -> last delivery count seen
    held: dict = dataclasses.field(default_factory=lambda: {m: [] for m in MEMBERS})  # member -> acquired ranges
    pending: dict = dataclasses.field(default_factory=dict)  # write id -> (kind, member, [(offset, type)])
    writes: dict = dataclasses.field(default_factory=dict)  # write id -> StateWrite

    @property
    def log_end(self) -> int:
        return self.log[-1].last_offset + 1

    def read(self, offset: int, n_batches: int) -> list[BatchRange]:
        """Log.read: the batch holding ``offset`` (or the next one) and those after it."""
        out = [b for b in self.log if b.last_offset >= offset]
        return out[:n_batches]


def deliver(sp: SharePartition, m: Model, member: str, got) -> None:
    for rec in got.records:
        assert 1 <= rec.delivery_count <= m.max_delivery, rec
        for o in range(rec.first_offset, rec.last_offset + 1):
            assert o not in m.final, f"offset {o} delivered after its Accept/Reject was answered"
            h = m.holder.get(o)
            assert h is None or h[1] <= m.now, f"offset {o} given to {member} while {h} holds it (now {m.now})"
            assert rec.delivery_count >= m.counts.get(o, 0), f"delivery count of {o} went down"
            m.counts[o] = rec.delivery_count
            m.holder[o] = (member, m.now + LOCK_MS)
        m.held[member].append((rec.first_offset, rec.last_offset))


def check_invariants(sp: SharePartition) -> None:
    terminal = 0
    for first, last, state, _count, _member in sp.cached_batches():
        for o in range(max(first, sp.start_offset), last + 1):
            s = state if state is not None else sp.record_state(o)[0]
            if is_terminal(s):
                terminal += 1
    assert sp.delivery_complete_count == terminal
    assert sp.num_in_flight_records() >= 0


def answer(sp: SharePartition, m: Model, wid: int, ok: bool) -> None:
    kind, member, offsets = m.pending.pop(wid)
    err = sp.write_completed(wid, 0 if ok else ErrorCode.COORDINATOR_NOT_AVAILABLE, m.now)
    if kind == "timeout":
        assert err == ErrorCode.NONE
        return
    assert (err == ErrorCode.NONE) == ok
    if not ok:
        return
    for o, t in offsets:
        if kind == "release" or t == 2:
            if m.holder.get(o, ("",))[0] == member:
                m.holder.pop(o, None)
        elif t in (0, 1, 3):
            m.final.add(o)
            m.holder.pop(o, None)


def take_background(sp: SharePartition, m: Model) -> None:
    for w in sp.drain_writes():
        m.writes[w.write_id] = w
        m.pending[w.write_id] = ("timeout", "", [])


def snapshot(sp: SharePartition):
    """Everything a caller can see of a share partition's state."""
    end = max(sp.end_offset, sp.start_offset) + 1
    return (sp.start_offset, sp.end_offset, sp.delivery_complete_count, sp.next_fetch_offset(), sp.next_deadline(),
            sp.pending_writes(), sp.cached_batches(),
            [(sp.record_state(o), sp.has_ongoing_transition(o), sp.lock_deadline(o)) for o in range(end)])


def random_steps(sp: SharePartition, m: Model, data, fifo: bool, coord: Coordinator | None = None,
                 bounded_reads: bool = False) -> None:
    """Members fetch, acknowledge, close sessions; time passes; writes are answered (in order when ``fifo``).
    With ``bounded_reads`` every fetch reads the whole log and is checked to acquire the same from the read cut
    after the batch holding :meth:`SharePartition.acquire_read_bound` (what the broker's reads scan)."""
    for _step in range(data.draw(st.integers(5, 40), label="steps")):
        op = data.draw(st.sampled_from(["fetch", "fetch", "ack", "ack", "release", "time", "answer"]), label="op")
        member = data.draw(st.sampled_from(MEMBERS), label="member")
        if op == "fetch":
            offset = sp.next_fetch_offset()
            n_batches = len(m.log) if bounded_reads else data.draw(st.integers(1, 4), label="batches")
            batches = m.read(offset, n_batches)
            max_fetch = data.draw(st.integers(1, 8), label="max_fetch")
            record_limit = data.draw(st.booleans(), label="record_limit")
            batch_size = data.draw(st.integers(1, 8))
            if bounded_reads:
                bound = sp.acquire_read_bound(offset, max_fetch)
                cut = next((i + 1 for i, b in enumerate(batches) if b.last_offset >= bound), len(batches))
                other = copy.deepcopy(sp)
                got_cut = other.acquire(member, batches[:cut], fetch_offset=offset, max_fetch_records=max_fetch,
                                        batch_size=batch_size, now=m.now, record_limit=record_limit)
            got = sp.acquire(member, batches, fetch_offset=offset, max_fetch_records=max_fetch,
                             batch_size=batch_size, now=m.now, record_limit=record_limit)
            if bounded_reads:
                assert got_cut == got, (bound, cut, batches)
                assert snapshot(other) == snapshot(sp)
            n = sum(r.last_offset - r.first_offset + 1 for r in got.records)
            assert got.count == n
            assert not record_limit or n <= max_fetch, (got, max_fetch)
            deliver(sp, m, member, got)
        elif op == "ack" and m.held[member]:
            first, last = data.draw(st.sampled_from(m.held[member]), label="range")
            lo = data.draw(st.integers(first, last))
            hi = data.draw(st.integers(lo, last))
            if data.draw(st.booleans(), label="per_offset"):
                types = tuple(data.draw(st.integers(0, 4)) for _ in range(lo, hi + 1))
            else:
                types = (data.draw(st.integers(0, 4), label="type"),)
            t = sp.acknowledge(member, [AcknowledgementBatch(lo, hi, types)], m.now)
            per = [(o, types[o - lo] if len(types) > 1 else types[0]) for o in range(lo, hi + 1)]
            if t.error == ErrorCode.NONE:
                for o, ty in per:
                    if ty == 4:
                        m.holder[o] = (member, m.now + LOCK_MS)
                if t.write is not None:
                    m.writes[t.write.write_id] = t.write
                    m.pending[t.write.write_id] = ("ack", member, [(o, ty) for o, ty in per if ty != 4])
        elif op == "release":
            t = sp.release_acquired_records(member, m.now)
            if t.write is not None:
                offs = [(o, 2) for sb in t.write.state_batches for o in range(sb.first_offset, sb.last_offset + 1)]
                m.writes[t.write.write_id] = t.write
                m.pending[t.write.write_id] = ("release", member, offs)
            m.held[member] = []
        elif op == "time":
            m.now += data.draw(st.integers(1, LOCK_MS), label="dt")
            expired(sp, m, sp.on_time(m.now))
        elif op == "answer" and m.pending:
            wid = min(m.pending) if fifo else data.draw(st.sampled_from(sorted(m.pending)), label="write")
            ok = data.draw(st.booleans(), label="ok")
            if ok and coord is not None:
                coord.apply(m.writes[wid])
            answer(sp, m, wid, ok)
        take_background(sp, m)
        check_invariants(sp)


def expired(sp: SharePartition, m: Model, writes) -> None:
    for w in writes:
        m.writes[w.write_id] = w
        m.pending[w.write_id] = ("timeout", "", [])


def drain(sp: SharePartition, m: Model, coord: Coordinator | None = None) -> None:
    """Answer every write, let every lock run out, then one member accepts whatever it gets, until the SPSO
    reaches the log's end (bounded)."""
    for _round in range(200):
        for _ in range(2):
            for wid in sorted(m.pending):
                if coord is not None:
                    coord.apply(m.writes[wid])
                answer(sp, m, wid, True)
            m.now += LOCK_MS
            expired(sp, m, sp.on_time(m.now))
        check_invariants(sp)
        if sp.start_offset >= m.log_end:
            return
        offset = sp.next_fetch_offset()
        got = sp.acquire("m0", m.read(offset, len(m.log)), fetch_offset=offset, max_fetch_records=500,
                         batch_size=500, now=m.now)
        deliver(sp, m, "m0", got)
        if got.records:
            t = sp.acknowledge("m0", [AcknowledgementBatch(r.first_offset, r.last_offset, (1,))
                                      for r in got.records], m.now)
            assert t.error == ErrorCode.NONE, t
            m.writes[t.write.write_id] = t.write
            m.pending[t.write.write_id] = ("ack", "m0", [(o, 1) for r in got.records
                                                         for o in range(r.first_offset, r.last_offset + 1)])
        take_background(sp, m)


@st.composite
def logs(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=2, max_size=10))
    out, base = [], 0
    for s in sizes:
        out.append(BatchRange(base, base + s - 1))
        base += s
    return out


def new_partition(max_in_flight: int, max_delivery: int, start: int = 0, state_epoch: int = 0,
                  batches=()) -> SharePartition:
    sp = SharePartition("g", "t", 0, max_in_flight_records=max_in_flight, max_delivery_count=max_delivery,
                        record_lock_duration_ms=LOCK_MS)
    sp.begin_initialize()
    sp.initialize(start, state_epoch, list(batches))
    return sp


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=logs(), max_delivery=st.integers(2, 5), max_in_flight=st.integers(3, 12), data=st.data())
def test_share_partition_against_model(log, max_delivery, max_in_flight, data):
    sp = new_partition(max_in_flight, max_delivery)
    m = Model(log, max_delivery)
    random_steps(sp, m, data, fifo=False)
    drain(sp, m)
    assert sp.start_offset == m.log_end, (sp.start_offset, sp.cached_batches())
    assert sp.cached_batches() == [] and sp.delivery_complete_count == 0
    assert all(m.counts.get(o, 0) <= max_delivery for o in range(m.log_end))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=logs(), max_delivery=st.integers(2, 5), max_in_flight=st.integers(3, 12), data=st.data())
def test_reads_cut_at_the_acquire_read_bound_acquire_the_same(log, max_delivery, max_in_flight, data):
    """The broker scans a read's batch headers only up to the batch holding ``acquire_read_bound`` (a share fetch
    of 500 records no longer reads every header of a 50 MB read): whatever the state, acquiring from the cut read
    gives the same records and leaves the same state as from the whole read."""
    sp = new_partition(max_in_flight, max_delivery)
    m = Model(log, max_delivery)
    random_steps(sp, m, data, fifo=False, bounded_reads=True)


class Coordinator:
    """The share coordinator's view, as its ShareUpdate records combine: the latest start offset and, per offset
    from it, the last state written (acquisitions are never written)."""

    def __init__(self) -> None:
        self.start = 0
        self.states: dict[int, tuple[int, int]] = {}

    def apply(self, w: StateWrite) -> None:
        self.start = max(self.start, w.start_offset)
        for sb in w.state_batches:
            for o in range(sb.first_offset, sb.last_offset + 1):
                self.states[o] = (sb.delivery_state, sb.delivery_count)
        self.states = {o: v for o, v in self.states.items() if o >= self.start}

    def read(self) -> tuple[int, list[StateBatch]]:
        return self.start, [StateBatch(o, o, *self.states[o]) for o in sorted(self.states)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=logs(), max_delivery=st.integers(2, 5), max_in_flight=st.integers(3, 12), data=st.data())
def test_leader_change_reloads_persisted_state(log, max_delivery, max_in_flight, data):
    """A new leader loads what was written (ReadShareGroupState) and carries on: nothing whose Accept or Reject
    was answered comes back; records held or unwritten return (counts back to the last written, as the issue
    allows across a leader change), gaps of the initial read included; everything ends Acknowledged or Archived.
    Writes are sent and applied in the order the partition issued them."""
    sp = new_partition(max_in_flight, max_delivery)
    m = Model(log, max_delivery)
    coord = Coordinator()
    random_steps(sp, m, data, fifo=True, coord=coord)
    # the leader dies: writes in flight may or may not have been applied, none was answered
    for wid in sorted(m.pending):
        if data.draw(st.booleans(), label="applied"):
            coord.apply(m.writes[wid])
    m.pending.clear()
    start, batches = coord.read()
    sp = new_partition(max_in_flight, max_delivery, start, 1, batches)
    m.holder.clear()
    m.held = {k: [] for k in MEMBERS}
    m.counts = {o: c for o, (_s, c) in coord.states.items()}
    random_steps(sp, m, data, fifo=True, coord=coord)
    drain(sp, m, coord)
    assert sp.start_offset == m.log_end, (sp.start_offset, sp.cached_batches())
    # what was answered is durable: an answered Accept/Reject/Gap is below the persisted start or persisted terminal
    assert all(o < coord.start or coord.states[o][0] in (2, 4) for o in m.final)


def test_release_on_session_close_keeps_records_deliverable():
    """The delivery a closed session had is not counted: a record at the limit is delivered again, not archived."""
    sp = SharePartition("g", "t", 0, max_delivery_count=2, record_lock_duration_ms=LOCK_MS)
    sp.begin_initialize()
    sp.initialize(0, 0, [])
    for member in ("m0", "m1", "m2"):
        got = sp.acquire(member, [BatchRange(0, 0)], fetch_offset=0, max_fetch_records=1, batch_size=1, now=0)
        assert got.records[0].delivery_count == 1
        t = sp.release_acquired_records(member, 0)
        assert sp.write_completed(t.write.write_id, 0, 0) == ErrorCode.NONE
    assert sp.record_state(0) == (RecordState.AVAILABLE, 0, "")
