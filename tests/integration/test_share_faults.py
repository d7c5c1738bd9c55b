"""Share groups (KIP-932) under seeded faults: three confluent-kafka ``ShareConsumer``s in explicit acknowledgement
mode read a topic of 3 partitions on a 3-node cluster (RF 3, min ISR 2, ``__share_group_state`` likewise) while the
test kill -9s (and restarts) the leader of a share partition, the broker hosting the share coordinator of one of the
group's share-partitions (the ``__share_group_state`` leader), the group coordinator's broker, and closes a consumer
(a new member takes its place). Each consumer acknowledges every record it gets with a type drawn from the seed
(mostly Accept, some Release, a few Reject). Everything is recorded as tests/jepsen/history.py's share events (the
acquisitions with ``Message.delivery_count()``, the acks before ``acknowledge``, the acknowledgement commit
callback's answers, the closes, each broker kill as a fault of all partitions lasting until leadership has settled
after the restart) and judged by ``check_share`` with the final SPSO and state batches per partition read with
ReadShareGroupState (key 84) from each share-partition's coordinator: no delivery after an answered
Accept or Reject, every record ends Acknowledged or Archived, no consumer fails fatally.

CI: 3,000 records and one fault of each kind; ``ODRADEK_SOAK=1`` (``make soak``): 20,000 records and three of each.
The seed is printed; ``ODRADEK_FAULT_SEED`` replays a run's plan and the consumers' acknowledgement choices.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass

import pytest

from broker.testing.embedded_cluster import EmbeddedCluster, wait_until
from cluster.client_metrics import uuid_string
from protocol.errors import ErrorCode
from protocol.generated.messages import FindCoordinatorRequest, MetadataRequest
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from tests.integration.test_share_consumer import SHARE_OVERRIDES, group_configs
from tests.jepsen.checker import check_share
from tests.jepsen.cluster_checks import fault_rng
from tests.jepsen.history import ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, REJECT, RELEASE, History
from tests.kafka_wire import KafkaWire
from tests.share.share_rpcs import only, read, summary

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, ElectionType, Producer, ShareConsumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SOAK = bool(os.environ.get("ODRADEK_SOAK"))
RECORDS = 20_000 if SOAK else 3_000
ROUNDS = 3 if SOAK else 1  # faults of each kind
AHEAD = RECORDS // 10  # records produced beyond the next fault's threshold: the fault meets records in flight
TOPIC, GROUP, PARTITIONS = "share-faults", "share-faults-group", 3
STATE_TOPIC = "__share_group_state"
LOCK_MS = 2000  # the group's share.record.lock.duration.ms (brokers allow down to 1000): lock expiry shows up
CONSUMERS = 3
ACK_WEIGHTS = ((ACCEPT, 85), (RELEASE, 12), (REJECT, 3))
ACK_TYPES = {ACCEPT: AcknowledgeType.ACCEPT, RELEASE: AcknowledgeType.RELEASE, REJECT: AcknowledgeType.REJECT}
KINDS = ("leader", "share_coordinator", "group_coordinator", "consumer")
BUDGET_S = 1800 if SOAK else 300  # a hang guard, not a speed requirement


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


class Member(threading.Thread):
    """One share consumer's life in a thread: poll, record, acknowledge each record with a seeded type; the
    acknowledgement commit callback records the answers. ``retire`` closes it (a consumer fault or the end)."""

    def __init__(self, name: str, bootstrap: str, history: History, seed: int, errors: list[str]) -> None:
        super().__init__(name=name, daemon=True)
        self.member, self.history, self.errors = name, history, errors
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.delivered = 0
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                       "share.acknowledgement.mode": "explicit"})
        self.consumer.set_acknowledgement_commit_callback(self._answered)
        self.consumer.subscribe([TOPIC])
        self.created = time.monotonic()

    def _answered(self, offsets, exc) -> None:
        error = None if exc is None else str(exc.args[0].name() if exc.args else exc)
        for tp, offs in offsets.items():
            part_error = error if tp.error is None else tp.error.name()
            self.history.share_ack_result(self.member, tp.partition, offs, part_error)

    def run(self) -> None:
        previous_start = self.created
        try:
            while not self.stop.is_set():
                start = time.monotonic()
                messages = self.consumer.poll(0.5)
                for m in messages:
                    if m.error() is not None:
                        if m.error().fatal():
                            self.errors.append(f"{self.member}: fatal {m.error()}")
                            return
                        continue
                    # a response that arrived after the previous poll returned may be handed out by this one
                    self.history.share_acquire(self.member, m.partition(), m.offset(), m.value(),
                                               m.delivery_count(), since=previous_start)
                    self.delivered += 1
                    kind = self.rng.choices([k for k, _ in ACK_WEIGHTS], [w for _, w in ACK_WEIGHTS])[0]
                    self.history.share_ack(self.member, m.partition(), m.offset(), kind)
                    self.consumer.acknowledge(m, ACK_TYPES[kind])
                previous_start = start
            self.consumer.commit_sync(30)  # the last acknowledgements, answered through the callback
        except Exception as exc:  # noqa: BLE001 - any consumer failure is a finding, reported by the test
            self.errors.append(f"{self.member}: {type(exc).__name__}: {exc}")

    def retire(self) -> None:
        """Stop polling, then close (its held records are released) with the close recorded first."""
        self.stop.set()
        self.join(60)
        self.history.share_close(self.member)
        try:
            self.consumer.close()
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"{self.member}: close: {type(exc).__name__}: {exc}")


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
    with EmbeddedCluster(brokers=3, data_dir=tmp_path / "cluster", overrides=SHARE_OVERRIDES) as c:
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

            def join() -> Member:
                m = Member(f"member{len(members)}", c.bootstrap_servers, history, rng.randrange(2**31), errors)
                members.append(m)
                m.start()
                return m
            live = [join() for _ in range(CONSUMERS)]

            def delivered() -> int:
                return len({(e.partition, e.offset) for e in history.events if e.kind == "share_acquire"})

            budget = time.monotonic() + BUDGET_S
            for fault in plan:
                feed(fault.at + AHEAD)
                wait_until(lambda: errors or delivered() >= fault.at, budget - time.monotonic(), 0.2,
                           f"{fault.at} records delivered")
                assert not errors, errors
                if fault.kind == "consumer":
                    victim = live.pop(rng.randrange(len(live)))
                    victim.retire()
                    live.append(join())
                    fault.log = f"closed {victim.member}, {live[-1].member} joins"
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
                assert not errors, errors
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
            for m in members:
                if not m.stop.is_set():
                    m.retire()
            history.dump(tmp_path / "history.jsonl")  # for a postmortem
    states = {0: AVAILABLE, 1: ACQUIRED, 2: ACKNOWLEDGED, 4: ARCHIVED}
    for p, (spso, batches) in finals.items():
        history.share_final(GROUP, p, spso)
        for first, last, state, count in batches:
            if last >= spso:
                history.share_state(GROUP, p, max(first, spso), last, states[state], count)
    report = check_share(history, record_lock_duration_ms=LOCK_MS)
    counts = {k: v for k, v in report.counts().items() if v}
    faults = sum(1 for e in history.events if e.kind == "fault_start") + sum(1 for f in plan if f.kind == "consumer")
    print(f"[{time.monotonic() - started:5.1f} s] {RECORDS} records, {len(members)} members, {faults} faults: "
          f"{counts}")
    assert not errors, errors
    assert report.ok, f"{report.summary()}\n(history in {tmp_path / 'history.jsonl'})"
    assert all(all_done(finals[p], ends[p]) for p in range(PARTITIONS)), finals
