"""Clients ride through failover unchanged: confluent-kafka, kafka-python, aiokafka and KafkaJS idempotent
producers (paced: the groups commit after every record and must keep up) and a consumer group each of
confluent-kafka, kafka-python, aiokafka and KafkaJS, committing after every record, keep going
while the broker coordinating the most groups is killed (it leads partitions of the topic too; if not, a leader is
killed first; ``ODRADEK_SOAK=1``: a leader, then every broker that coordinates a group, in turn);
``__consumer_offsets`` has three replicas, so a group's new coordinator loads it from its own replica.

KafkaJS 2.2.4 keeps committing to the coordinator it joined through even after that broker answers
NOT_COORDINATOR (it re-finds a coordinator only by restarting its consumer, once its nested retriers give up:
~50 s at its default of 5 retries); in CI its consumer retries once, so the same restart comes within seconds
(``ODRADEK_SOAK=1`` keeps KafkaJS's default).

Every acknowledged record is processed by every group, and a group processes a record twice only when the
commit after its first processing failed (or the client rewound by itself, see ``Runner.rewound``): the
groups keep their committed offsets across the coordinator kills and resume from them.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter

import pytest

from protocol.generated.messages import FindCoordinatorRequest
from tests.harness import ClusterProcesses
from tests.kafka_wire import KafkaWire

pytest.importorskip("confluent_kafka")

from tests.groups.js_member import JsMember  # noqa: E402
from tests.groups.runners import RUNNERS  # noqa: E402
from tests.jepsen.cluster_checks import (  # noqa: E402
    FAST, PARTITIONS, TOPIC, create_topic, fully_in_sync, partitions, probe, until,
)
from tests.jepsen.history import History  # noqa: E402
from tests.jepsen.workload import (  # noqa: E402
    AiokafkaProducer, ConfluentProducer, KafkaJsProducer, KafkaPythonProducer,
)

SOAK = bool(os.environ.get("ODRADEK_SOAK"))
RATE = 15  # records/s per producer
OVERRIDES = {**FAST, "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 6,
        "group.min.session.timeout.ms": 1000, "group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def cluster(tmp_path):
    c = ClusterProcesses(tmp_path, overrides=OVERRIDES)
    try:
        c.start()
        create_topic(c)
        yield c
    finally:
        c.close()


def _coordinator_of(c: ClusterProcesses, group: str) -> int | None:
    """The group's coordinator as a live broker answers FindCoordinator (None while there is none)."""
    port = next(p for i, p in c.broker_ports.items() if c.nodes[i].alive())
    with KafkaWire(port) as w:
        answer = w.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
    return answer.node_id if answer.error_code == 0 else None


def _kill_and_restart(c: ClusterProcesses, node: int, why: str) -> None:
    c.nodes[node].kill()
    time.sleep(1.0)
    c.start(node)
    until(lambda: fully_in_sync(c), 90, f"broker {node} ({why}) back in every ISR")


def test_clients_ride_through_a_leader_kill_and_coordinator_kills(cluster):
    c = cluster
    history = History()
    # paced so that groups committing after every record keep up: the test is about failover, not throughput
    args = (history, lambda: c.bootstrap, TOPIC, PARTITIONS, RATE)
    producers = [ConfluentProducer("ck", *args), KafkaPythonProducer("kp", *args), AiokafkaProducer("ak", *args),
                 KafkaJsProducer("kj", *args)]
    lock = threading.Lock()
    consumed: dict[str, list] = {kind: [] for kind in RUNNERS}
    groups = {kind: f"ride-{kind}" for kind in RUNNERS}
    runners = {kind: cls(c.bootstrap, groups[kind], TOPIC, consumed[kind], lock, f"{kind}-member")
               for kind, cls in RUNNERS.items()}
    js = None
    try:
        for p in producers:
            p.start()
        for r in runners.values():
            r.start()
        js = JsMember(c.bootstrap, "ride-kafkajs", TOPIC, "kafkajs-member",
                      log_path=str(c.root / "kafkajs-member.log"), retries=None if SOAK else 1)
        until(lambda: all(len(r.assigned) == PARTITIONS for r in runners.values())
              and len(js.assigned()) == PARTITIONS, 60, "every group's member to own every partition")
        time.sleep(1.0)

        def coordinator(g):
            return until(lambda: _coordinator_of(c, g), 60, f"the coordinator of {g}")

        coordinators = {g: coordinator(g) for g in [*groups.values(), "ride-kafkajs"]}
        busiest = sorted(set(coordinators.values()), key=lambda n: -list(coordinators.values()).count(n))
        leaders = {leader for leader, _ in partitions(c).values()}
        if SOAK or busiest[0] not in leaders:
            _kill_and_restart(c, partitions(c)[0][0], "a partition leader")
        # in CI one kill does both: the busiest coordinator also leads partitions (else a leader was killed first)
        for node in busiest if SOAK else busiest[:1]:
            _kill_and_restart(c, node, f"coordinator of {sorted(g for g, n in coordinators.items() if n == node)}"
                              f"{' and leader' if node in leaders else ''}")
            time.sleep(1.0)
        moved = {g: coordinator(g) for g in coordinators}
        print(f"[coordinators before {coordinators}, after {moved}]")
        for p in producers:
            p.stop()
        acked = {(e.partition, e.offset) for e in history.events if e.kind == "ack"}
        assert len(acked) > 100
        seen = {kind: lambda kind=kind: set(consumed[kind]) for kind in RUNNERS}
        seen["kafkajs"] = lambda: set(js.processed())
        try:
            until(lambda: all(acked <= f() for f in seen.values()), 120,
                  "every group to process every acknowledged record")
        except AssertionError:
            missing = {kind: sorted(acked - f()) for kind, f in seen.items()}
            stuck = {p for v in missing.values() for p, _ in v[:1]}
            print("[where the groups stopped] " + " | ".join(
                f"partition {p}: {probe(c, p, min(o for v in missing.values() for q, o in v if q == p))}"
                for p in sorted(stuck)))
            raise AssertionError(f"not processed by every group: { {k: (len(v), v[:5]) for k, v in missing.items()} }; "
                                 f"assigned: { {k: sorted(r.assigned) for k, r in runners.items()} }, "
                                 f"kafkajs {sorted(js.assigned())} "
                                 f"{[x for x in js.lines if x.startswith('CRASH')]}") from None
    finally:
        for p in producers:
            if p.thread.is_alive():
                p.stop_event.set()
        for r in runners.values():
            r.stop()
        if js is not None:
            js.stop()
    for kind, r in runners.items():
        dup = {x for x, n in Counter(consumed[kind]).items() if n > 1}
        explained = set(r.uncommitted) | set(r.rewound)
        assert dup <= explained, f"{kind}: processed twice after a successful commit: {sorted(dup - explained)[:10]}"
    dup = {x for x, n in Counter(js.processed()).items() if n > 1}
    assert dup <= set(js.uncommitted()), f"kafkajs: processed twice after a successful commit: {sorted(dup)[:10]}"
