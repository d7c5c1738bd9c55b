"""Share groups (KIP-932) under seeded faults: three confluent-kafka ``ShareConsumer``s in explicit acknowledgement
mode, each in a process of its own (tests/integration/share_member.py), read a topic of 3 partitions on a 3-node
cluster (RF 3, min ISR 2, ``__share_group_state`` likewise) while the test kill -9s (and restarts) the leader of a
share partition, the broker hosting the share coordinator of one of the group's share-partitions (the
``__share_group_state`` leader), the group coordinator's broker, and kill -9s a consumer's process (a new member takes
its place: there stay three). Each consumer acknowledges every record it gets with a type drawn from the seed
(mostly Accept, some Release, a few Reject). Everything is recorded as tests/jepsen/history.py's share events: the
consumers stream theirs (the acquisitions with ``Message.delivery_count()``, the acks before ``acknowledge``, the
acknowledgement commit callback's answers, their closes) as JSON lines flushed before they act, read by the test into
its history; the test records each consumer kill as that member's close (just before the SIGKILL: its records may be
released from then on; the acks it sent unanswered may or may not have taken effect) and each broker kill as a fault of
all partitions lasting until leadership has settled after the restart. ``check_share`` judges it with the final SPSO
and state batches per partition read with ReadShareGroupState (key 84) from each share-partition's coordinator: no
delivery after an answered Accept or Reject, every record ends Acknowledged or Archived, no consumer fails fatally.

CI: 3,000 records and one fault of each kind; ``ODRADEK_SOAK=1`` (``make soak``): 20,000 records and three of each.
The seed is printed; ``ODRADEK_FAULT_SEED`` replays a run's plan and the consumers' acknowledgement choices.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.testing.embedded_cluster import EmbeddedCluster, wait_until
from cluster.client_metrics import uuid_string
from protocol.errors import ErrorCode
from protocol.generated.messages import FindCoordinatorRequest, MetadataRequest
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from tests.integration.test_eos_faults import _die_with_test
from tests.integration.test_share_consumer import SHARE_OVERRIDES, group_configs
from tests.jepsen.checker import check_share
from tests.jepsen.cluster_checks import fault_rng
from tests.jepsen.history import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    SHARE_ACK,
    SHARE_ACK_RESULT,
    SHARE_ACQUIRE,
    Event,
    History,
)
from tests.kafka_wire import KafkaWire
from tests.share.share_rpcs import only, read, summary

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import ElectionType, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SOAK = bool(os.environ.get("ODRADEK_SOAK"))
RECORDS = 20_000 if SOAK else 3_000
ROUNDS = 3 if SOAK else 1  # faults of each kind
AHEAD = RECORDS // 10  # records produced beyond the next fault's threshold: the fault meets records in flight
TOPIC, GROUP, PARTITIONS = "share-faults", "share-faults-group", 3
STATE_TOPIC = "__share_group_state"
LOCK_MS = 2000  # the group's share.record.lock.duration.ms (brokers allow down to 1000): lock expiry shows up
CONSUMERS = 3
KINDS = ("leader", "share_coordinator", "group_coordinator", "consumer")
BUDGET_S = 1800 if SOAK else 300  # a hang guard, not a speed requirement
IN_FLIGHT_WAIT_S = 2  # how long a consumer kill waits for its victim to have an acknowledgement unanswered
# a killed consumer stays in the group, holding its assigned partitions, until its session times out (Kafka's 45 s
# default): shorter, so that the partitions only it was assigned stall for seconds (still longer than LOCK_MS, as
# check_share assumes, and than a coordinator's failover, so live members ride through broker kills)
SESSION_TIMEOUT_MS = 6000
OVERRIDES = {**SHARE_OVERRIDES, "group.share.min.session.timeout.ms": SESSION_TIMEOUT_MS,
             "group.share.session.timeout.ms": SESSION_TIMEOUT_MS}
START_S = 60  # a consumer process's start (imports, subscribe), and its stop (the last commit_sync is 30 s)


@dataclass
class Fault:
    at: int  # distinct records delivered when it happens
    kind: str
    log: str = ""


def _plan(rng: random.Random) -> list[Fault]:
    kinds = [k for k in KINDS for _ in range(ROUNDS)]
    rng.shuffle(kinds)
    ats = sorted(rng.randrange(RECORDS // 20, RECORDS * 8 // 10) for _ in kinds)
    return [Fault(at, kind) for at, kind in zip(ats, kinds)]


class Member:
    """One share consumer's process (tests/integration/share_member.py), killed with the test however that ends:
    a thread reads the history events it streams on stdout into the test's ``History`` (in time order) as they
    come, and what else it says (ready, errors) into ``errors``; its librdkafka log goes to ``<name>.log``.
    ``kill`` is the consumer fault; ``_stop`` stops the others at the end; ``abandon`` leaves no process."""

    def __init__(self, name: str, bootstrap: str, history: History, seed: int, errors: list[str],
                 acquired: set[tuple[int, int]], logs: Path) -> None:
        self.member, self.history, self.errors, self.acquired = name, history, errors, acquired
        self.ready = threading.Event()
        self.killed = False
        self.acks_sent = self.acks_answered = 0
        self.log_path = logs / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.share_member", "--bootstrap", bootstrap, "--group", GROUP,
                 "--topic", TOPIC, "--name", name, "--seed", str(seed), "--run-seconds", str(BUDGET_S + 300)],
                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=log,
                preexec_fn=_die_with_test)
        self.reader = threading.Thread(target=self._read, name=f"{name}-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if not line.endswith(b"\n"):
                break  # a torn last line of a killed process: not flushed, so not acted on
            try:
                what = json.loads(line)
            except ValueError:
                self.errors.append(f"{self.member}: not a JSON line: {line[:200]!r}")
                continue
            if "kind" not in what:
                if what.get("event") == "ready":
                    self.ready.set()
                else:
                    self.errors.append(f"{self.member}: {what}")
                continue
            event = Event.from_json(what)
            self.history.add(event)
            if event.kind == SHARE_ACQUIRE:
                self.acquired.add((event.partition, event.offset))
            elif event.kind == SHARE_ACK:
                self.acks_sent += 1
            elif event.kind == SHARE_ACK_RESULT:
                self.acks_answered += len(event.offsets)

    @property
    def unanswered(self) -> int:
        """Acknowledgements it said it sent without (yet) saying their answer."""
        return self.acks_sent - self.acks_answered

    def exited(self) -> str | None:
        """Why it is gone, when it went by itself (not killed, not stopped)."""
        rc = self.proc.poll()
        return None if rc is None else f"{self.member} exited with {rc}: {self.tail()}"

    def tail(self, n: int = 2000) -> str:
        return self.log_path.read_bytes()[-n:].decode(errors="replace")

    def kill(self) -> None:
        """kill -9, with the member's close recorded first: its records may be released from then on."""
        self.killed = True
        self.history.share_close(self.member)
        try:
            self.proc.kill()
            self.proc.wait(30)
        finally:
            self.abandon()

    def abandon(self) -> None:
        """No process left, whatever happened (every path of the test ends here): kill -9 if still running."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.reader.join(30)
        self.proc.stdout.close()


def _stop(members: list[Member], errors: list[str]) -> None:
    """The members not killed stopped together, each by its own stop (SIGTERM once it runs: before its handler is
    installed SIGTERM would kill it): last acknowledgements committed, then closed. A process that does not exit
    in time, or exits with an error, is reported; every process is gone afterwards, also when this fails."""
    try:
        running = [m for m in members if not m.killed]
        deadline = time.monotonic() + START_S
        for m in running:
            while not m.ready.is_set() and m.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        for m in running:
            if m.proc.poll() is None:
                m.proc.send_signal(signal.SIGTERM)
        for m in running:
            try:
                rc = m.proc.wait(START_S)
            except subprocess.TimeoutExpired:
                errors.append(f"{m.member} did not stop in {START_S} s: {m.tail()}")
                continue
            if rc != 0:
                errors.append(f"{m.member} stopped with {rc}: {m.tail()}")
    finally:
        for m in members:
            m.abandon()


def _call(c: EmbeddedCluster, request, version: int):
    """``request`` to a live broker (the first that answers)."""
    for node in c.broker_ids:
        if not c.nodes[node].alive():
            continue
        try:
            with KafkaWire(c.broker_ports[node], timeout=10) as w:
                return w.call(request.API_KEY, version, request)
        except (OSError, ConnectionError):
            continue
    raise ConnectionError("no live broker answered")


def _coordinator(c: EmbeddedCluster, key_type: int, key: str) -> int | None:
    (co,) = _call(c, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 6).coordinators
    return co.node_id if co.error_code == 0 and c.nodes[co.node_id].alive() else None


def topic_id_of(c: EmbeddedCluster, topic: str = TOPIC) -> bytes:
    (t,) = _call(c, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12).topics
    return t.topic_id


def persisted_state(c: EmbeddedCluster, tid: bytes, partition: int, group: str = GROUP
           ) -> tuple[int, list[tuple[int, int, int, int]]] | None:
    """The share-partition's persisted state, (SPSO, [(first, last, state, count)]), as its share coordinator
    answers ReadShareGroupState at the leader epoch it holds (from ReadShareGroupStateSummary: a read at a newer
    epoch would fence the leader, an older one is fenced, -1 too). The summary (key 87) has
    the SPSO alone, which lags the leader's: a write carries the start offset from before its acknowledgements
    apply, so the last records' states are in batches above it."""
    node = _coordinator(c, 2, f"{group}:{uuid_string(tid)}:{partition}")
    if node is None:
        return None
    with KafkaWire(c.broker_ports[node], timeout=10) as w:
        req = summary(group, tid, partition)
        s = only(w.call(req.API_KEY, 1, req))
        if s.error_code != ErrorCode.NONE:
            return None
        req = read(group, tid, partition, leader_epoch=s.leader_epoch)
        p = only(w.call(req.API_KEY, 0, req))
    if p.error_code != ErrorCode.NONE:
        return None
    return p.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                            for b in p.state_batches]


def all_done(state: tuple[int, list] | None, end: int) -> bool:
    """Every record Acknowledged or Archived: below the SPSO, or in a batch of either state above it."""
    if state is None:
        return False
    spso, batches = state
    done = set(range(min(spso, end), end)) - {o for first, last, s, _ in batches if s in (2, 4)
                                              for o in range(first, last + 1)}
    return not done

def _settled(c: EmbeddedCluster) -> bool:
    """Every partition of the topic and of the internal topics fully replicated, led by its preferred replica."""
    md = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(timeout=5).topics
    parts = [p for t in (TOPIC, STATE_TOPIC, "__consumer_offsets") for p in md[t].partitions.values()]
    return all(len(p.isrs) == 3 and p.leader == p.replicas[0] for p in parts)


def _settle(c: EmbeddedCluster) -> None:
    """Until leadership has settled after a restart: ISRs full again, then a preferred leader election."""
    wait_until(lambda: _full_isr(c), 120, 0.2, "full ISRs after the restart", retry=(Exception,))
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    md = admin.list_topics(timeout=10).topics
    tps = [TopicPartition(t, p) for t in (TOPIC, STATE_TOPIC, "__consumer_offsets") for p in md[t].partitions]
    admin.elect_leaders(ElectionType.PREFERRED, tps).result(30)
    wait_until(lambda: _settled(c), 60, 0.2, "preferred leaders back", retry=(Exception,))


def _full_isr(c: EmbeddedCluster) -> bool:
    md = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(timeout=5).topics
    return all(len(p.isrs) == 3 and p.leader >= 0
               for t in (TOPIC, STATE_TOPIC, "__consumer_offsets") for p in md[t].partitions.values())


def test_share_consumers_through_seeded_kills(tmp_path):
    rng = fault_rng()
    plan = _plan(rng)
    print("[plan: " + ", ".join(f"{f.kind}@{f.at}" for f in plan) + "]")
    history = History()
    errors: list[str] = []
    members: list[Member] = []
    started = time.monotonic()
    with EmbeddedCluster(brokers=3, data_dir=tmp_path / "cluster", overrides=OVERRIDES) as c:
        try:
            admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
                TOPIC].result(30)
            group_configs(c.bootstrap_servers, GROUP, LOCK_MS)
            producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 10})
            written = [0]

            def acked(err, msg):
                if err is None:
                    history.ack("producer", msg.partition(), msg.value(), msg.offset())

            def feed(up_to: int) -> None:
                """Records produced (and acknowledged) up to ``up_to``: the consumers work while faults hit."""
                for i in range(written[0], min(up_to, RECORDS)):
                    value = b"%06d " % i + b"x" * 100
                    history.send("producer", i % PARTITIONS, value)
                    producer.produce(TOPIC, value=value, partition=i % PARTITIONS, on_delivery=acked)
                    producer.poll(0)
                written[0] = max(written[0], min(up_to, RECORDS))
                assert producer.flush(60) == 0
            feed(AHEAD)
            tid = topic_id_of(c)

            acquired: set[tuple[int, int]] = set()  # (partition, offset) of every delivery so far

            def join() -> Member:
                m = Member(f"member{len(members)}", c.bootstrap_servers, history, rng.randrange(2**31), errors,
                           acquired, tmp_path)
                members.append(m)
                return m
            live = [join() for _ in range(CONSUMERS)]

            def delivered() -> int:
                return len(acquired)

            def problems() -> list[str]:
                return errors + [why for m in live if (why := m.exited())]

            budget = time.monotonic() + BUDGET_S
            for fault in plan:
                feed(fault.at + AHEAD)
                wait_until(lambda: problems() or delivered() >= fault.at, budget - time.monotonic(), 0.2,
                           f"{fault.at} records delivered")
                assert not problems(), problems()
                feed(delivered() + AHEAD)  # work for the consumers through the fault, however fast they were
                if fault.kind == "consumer":
                    victim = live.pop(rng.randrange(len(live)))
                    # at a moment when it has acknowledgements in flight, if that comes soon
                    waited = time.monotonic()
                    while victim.unanswered == 0 and time.monotonic() < waited + IN_FLIGHT_WAIT_S:
                        time.sleep(0.002)
                    waited, unanswered = time.monotonic() - waited, victim.unanswered
                    victim.kill()
                    live.append(join())
                    fault.log = (f"kill -9 of {victim.member} after {waited:.1f} s ({unanswered} acks unanswered, "
                                 f"{victim.unanswered} after its last line), {live[-1].member} joins")
                else:
                    if fault.kind == "leader":
                        p = rng.randrange(PARTITIONS)
                        node, what = c.leader_of(TOPIC, p), f"leader of {TOPIC}-{p}"
                    elif fault.kind == "share_coordinator":
                        p = rng.randrange(PARTITIONS)
                        node = wait_until(lambda: _coordinator(c, 2, f"{GROUP}:{uuid_string(tid)}:{p}"), 30, 0.2,
                                          "the share coordinator", retry=(Exception,))
                        what = f"share coordinator of {GROUP}:{TOPIC}-{p}"
                    else:
                        node = wait_until(lambda: _coordinator(c, 0, GROUP), 30, 0.2, "the group coordinator",
                                          retry=(Exception,))
                        what = f"group coordinator of {GROUP}"
                    history.fault_start(f"kill {node}")
                    c.kill(node)
                    c.restart(node)
                    _settle(c)
                    history.fault_end(f"kill {node}")
                    fault.log = f"kill -9 of node {node} ({what}), restarted"
                print(f"[{time.monotonic() - started:5.1f} s, {delivered()} delivered] {fault.log}", flush=True)

            feed(RECORDS)
            # until every share-partition's start offset has reached the end: all Acknowledged or Archived
            ends = {p: len(range(p, RECORDS, PARTITIONS)) for p in range(PARTITIONS)}
            finals: dict[int, tuple[int, list] | None] = {}

            def done() -> bool:
                assert not problems(), problems()
                for p in range(PARTITIONS):
                    finals[p] = persisted_state(c, tid, p)
                return all(all_done(finals[p], ends[p]) for p in range(PARTITIONS))
            try:
                wait_until(done, max(1.0, budget - time.monotonic()), 0.5, "every record Acknowledged or Archived",
                           retry=(OSError, ConnectionError))
            except AssertionError as exc:
                spsos = {p: f and f[0] for p, f in finals.items()}
                raise AssertionError(f"{exc}: SPSOs {spsos}, ends {ends}") from None
        finally:
            try:
                _stop(members, errors)
            finally:
                history.dump(tmp_path / "history.jsonl")  # for a postmortem
    states = {0: AVAILABLE, 1: ACQUIRED, 2: ACKNOWLEDGED, 4: ARCHIVED}
    for p, (spso, batches) in finals.items():
        history.share_final(GROUP, p, spso)
        for first, last, state, count in batches:
            if last >= spso:
                history.share_state(GROUP, p, max(first, spso), last, states[state], count)
    report = check_share(history, record_lock_duration_ms=LOCK_MS)
    counts = {k: v for k, v in report.counts().items() if v}
    faults = sum(1 for e in history.events if e.kind == "fault_start") + sum(m.killed for m in members)
    print(f"[{time.monotonic() - started:5.1f} s] {RECORDS} records, {len(members)} members, {faults} faults: "
          f"{counts}")
    assert not errors, errors
    assert report.ok, f"{report.summary()}\n(history in {tmp_path / 'history.jsonl'})"
    assert all(all_done(finals[p], ends[p]) for p in range(PARTITIONS)), finals
