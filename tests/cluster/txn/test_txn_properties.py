"""Properties of the coordinator shard under random sequences of requests, write reports, marker answers, timer
ticks and reloads: no transition Kafka calls illegal is ever attempted (TransactionMetadata raises on one), the
state stays well formed, every request is answered exactly once, and replaying the committed records rebuilds the
state the records describe."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.txn.txn_coordinator import TxnConfig, TxnCoordinatorShard
from cluster.txn.txn_metadata import SHORT_MAX, TransactionState, TransactionVersion
from protocol.errors import ErrorCode as E

S = TransactionState
IDS = ["a", "b", "c"]
PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
WRITE_ERRORS = [E.NONE] * 6 + [E.NOT_ENOUGH_REPLICAS, E.NOT_LEADER_OR_FOLLOWER, E.MESSAGE_TOO_LARGE]
MARKER_ERRORS = [E.NONE] * 6 + [E.NOT_LEADER_OR_FOLLOWER, E.INVALID_PRODUCER_EPOCH]
# how often each step is drawn: writes and markers must be answered for transactions to get anywhere
STEPS = ["init"] * 2 + ["add"] * 3 + ["end"] * 3 + ["write"] * 6 + ["markers"] * 4 + ["tick", "reload", "pids"]
CONFIG = TxnConfig(transaction_log_num_partitions=1, transactional_id_expiration_ms=50_000,
                   remove_expired_transactional_ids_interval_ms=20_000)


class Driver:
    """Plays the adapter and the clients."""

    def __init__(self, level: TransactionVersion) -> None:
        self.pids = itertools.count(1000)
        self.pids_available = True
        self.shard = TxnCoordinatorShard(0, CONFIG, self._pid, 1, level)
        self.now = 1_000_000
        self.epoch = 0
        self.shard.load(self.epoch, [], self.now)
        self.writes: dict[int, list] = {}  # outstanding write id -> records
        self.log: list[tuple[int, list]] = []  # committed (write id, records)
        self.client: dict[str, tuple[int, int]] = {}  # what each client believes its producer id/epoch is
        self.answers: dict[object, int] = {}
        self.owner: dict[object, str] = {}  # request token -> transactional id
        self.tokens = itertools.count()

    def _pid(self):
        return next(self.pids) if self.pids_available else None

    def token(self):
        t = next(self.tokens)
        self.answers[t] = 0
        return t

    def take(self, res, token=None):
        for w in res.writes:
            self.writes[w.write_id] = w.records
        if token is not None and res.response is not None:
            self.answer(token, res.response)
        for t, outcome in res.completions:
            self.answer(t, outcome)
        self.check()

    def answer(self, token, outcome):
        self.answers[token] += 1
        assert self.answers[token] == 1, f"request {token} answered twice"
        pid = getattr(outcome, "producer_id", -1)
        if getattr(outcome, "error", 1) == E.NONE and pid >= 0 and token in self.owner:
            self.client[self.owner[token]] = (pid, outcome.producer_epoch)

    def check(self):
        for txn_id, md in self.shard.transactions.items():
            assert -1 <= md.producer_epoch <= SHORT_MAX
            if md.pending_state is not None:
                assert md.state in md.pending_state.valid_previous_states, (md.state, md.pending_state)
                assert md.pending_state is not S.PREPARE_EPOCH_FENCE  # never outlives a call
            assert md.state is not S.PREPARE_EPOCH_FENCE
            if md.state is S.EMPTY:
                assert not md.topic_partitions
            if md.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and md.pending_state is None:
                assert not md.topic_partitions

    # ---- steps --------------------------------------------------------------------------------------------------
    def step(self, data):
        kind = data.draw(st.sampled_from(STEPS))
        if kind in ("add", "end") and not self.client:
            kind = "init"  # no client has a producer id yet
        known = sorted(self.client) if kind in ("add", "end") else IDS
        txn_id = data.draw(st.sampled_from(known))
        pid, epoch = self.client.get(txn_id, (0, 0))
        if data.draw(st.integers(0, 9)) == 0:
            epoch += data.draw(st.sampled_from([-1, 1]))  # a stale or future client
        if kind == "init":
            t = self.token()
            self.owner[t] = txn_id
            expected = (pid, epoch) if txn_id in self.client and data.draw(st.booleans()) else None
            timeout = data.draw(st.sampled_from([60_000] * 4 + [1000, 0]))
            self.take(self.shard.init_producer_id(txn_id, timeout, expected, self.now, token=t), t)
        elif kind == "add":
            t = self.token()
            parts = data.draw(st.sets(st.sampled_from(PARTITIONS), min_size=1))
            tv = data.draw(st.sampled_from([TransactionVersion.TV_0, TransactionVersion.TV_2]))  # v0-3 or implicit
            self.take(self.shard.add_partitions_to_txn(txn_id, pid, epoch, parts, self.now, token=t,
                                                       client_transaction_version=tv), t)
        elif kind == "end":
            t = self.token()
            self.owner[t] = txn_id
            tv = data.draw(st.sampled_from([TransactionVersion.TV_0, TransactionVersion.TV_2]))
            self.take(self.shard.end_txn(txn_id, pid, epoch, data.draw(st.booleans()), tv, self.now, token=t), t)
        elif kind == "write" and self.writes:
            write_id = data.draw(st.sampled_from(sorted(self.writes)))
            error = data.draw(st.sampled_from(WRITE_ERRORS))
            records = self.writes.pop(write_id)
            if error == E.NONE:
                self.log.append((write_id, records))
            self.take(self.shard.write_completed(write_id, error, self.now))
        elif kind == "markers":
            pending = self.shard.pending_markers()
            if pending:
                m = data.draw(st.sampled_from(pending))
                errors = {tp: data.draw(st.sampled_from(MARKER_ERRORS)) for tp in m.partitions}
                self.take(self.shard.markers_written(m.transactional_id, m.coordinator_epoch, errors, self.now))
        elif kind == "tick":
            self.now += data.draw(st.sampled_from([100, 5_000, 10_000, 30_000]))
            self.take(self.shard.poll(self.now))
        elif kind == "reload":
            self.epoch += 1
            self.writes.clear()  # unanswered appends are lost with the leadership
            self.take(self.shard.load(self.epoch, self.committed_records(), self.now))
        elif kind == "pids":
            self.pids_available = not self.pids_available

    def committed_records(self):
        return [r.encode() for _, records in sorted(self.log, key=lambda e: e[0]) for r in records]

    def drain(self):
        """Commit every write and answer every marker until nothing is in flight."""
        for _ in range(50):
            if self.writes:
                write_id = min(self.writes)
                self.log.append((write_id, self.writes.pop(write_id)))
                self.take(self.shard.write_completed(write_id, E.NONE, self.now))
                continue
            pending = self.shard.pending_markers()
            if pending:
                m = pending[0]
                self.take(self.shard.markers_written(m.transactional_id, m.coordinator_epoch,
                                                     dict.fromkeys(m.partitions, E.NONE), self.now))
                continue
            deadline = self.shard.next_deadline()
            if self.shard._complete_retries and deadline is not None:
                self.now = max(self.now, deadline)
                self.take(self.shard.poll(self.now))
                continue
            return
        raise AssertionError("the shard did not settle")


LEVELS = st.sampled_from([TransactionVersion.TV_0, TransactionVersion.TV_2])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), LEVELS)
def test_random_sequences_keep_the_state_valid_and_answer_every_request_once(data, level):
    d = Driver(level)
    for _ in range(data.draw(st.integers(1, 60))):
        d.step(data)
    d.pids_available = True
    d.drain()
    assert all(n == 1 for n in d.answers.values()), d.answers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), LEVELS)
def test_replaying_the_committed_records_rebuilds_the_state(data, level):
    d = Driver(level)
    for _ in range(data.draw(st.integers(1, 60))):
        d.step(data)
    d.pids_available = True
    d.drain()
    fresh = TxnCoordinatorShard(0, CONFIG, lambda: None, 1, level)
    fresh.load(d.epoch + 1, d.committed_records(), d.now)
    for txn_id, md in d.shard.transactions.items():
        if md.producer_epoch == -1 or md.has_failed_epoch_fence:
            continue  # created, or fenced, in memory by a write that failed: not in the log (as in Kafka)
        got = fresh.transactions[txn_id]
        # Kafka's completeTransitionTo(Empty) keeps the last transaction's start time in memory while the record
        # holds -1: the start time is compared when there is a transaction
        start = (got.txn_start_timestamp, md.txn_start_timestamp) if md.state is not S.EMPTY else (0, 0)
        # in Prepare*, a partition leaves the in-memory set when its marker is written (the record keeps it)
        marking = md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        assert md.topic_partitions <= got.topic_partitions if marking else md.topic_partitions == got.topic_partitions
        assert (got.producer_id, got.producer_epoch, got.state, got.txn_timeout_ms, got.txn_last_update_timestamp,
                start[0]) == (md.producer_id, md.producer_epoch, md.state, md.txn_timeout_ms,
                              md.txn_last_update_timestamp, start[1]), (got, md)
        if level.supports_epoch_bump:
            assert got.client_transaction_version == md.client_transaction_version
    for txn_id in fresh.transactions:
        assert txn_id in d.shard.transactions  # a tombstoned id stays gone
