"""Replication under faults, judged by a Jepsen-style history (tests/jepsen): idempotent acks=all producers
(confluent-kafka and kafka-python) and two readers run against an RF 3, ``min.insync.replicas=2`` topic of 6
partitions while partition leaders are killed with SIGKILL and restarted after a random delay, or stopped with
SIGSTOP for longer than the broker session timeout, or cut off from every other node by the broker's test-only
fault hook (a partition leader, then the active controller). The checker must find nothing lost, duplicated,
read at two offsets, or read out of order; every killed, paused or isolated broker rejoins every ISR; and at
the end every replica holds the leader's batches byte for byte below the high watermark.

The same faults under the transactional workload (tests/jepsen/txn_workload.py: transactional producers
committing and aborting across partitions, a consume-transform-produce leg, read_committed and read_uncommitted
readers), each aimed at a transaction coordinator's broker or a partition leader: the checker must find no
aborted or uncommitted read, no committed record lost or torn from its transaction, no input processed twice.

CI runs the short profile (each test on one topology: 2 kill rounds, one pause, the controller isolated; the
isolated leader runs in CI across network namespaces instead);
``ODRADEK_SOAK=1`` runs the long one (every test on both topologies, ``ODRADEK_FAULT_ROUNDS`` kill rounds,
default 20, and 3 pauses). A failing run prints its seed;
``ODRADEK_FAULT_SEED`` replays the same choices of victims and delays (and of the transactional workload's
partitions, sizes and commits or aborts).
"""

from __future__ import annotations

import os
import time

import pytest

from tests.harness import ClusterProcesses

pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.jepsen.cluster_checks import (  # noqa: E402
    FAST, PARTITIONS, REPLICATED_STATE, TOPIC, acks_from, create_topic, fault_rng, finish, fully_in_sync,
    live_bootstrap, partitions, txn_finish, txn_victim, txn_workload, until,
)
from tests.jepsen.workload import Workload  # noqa: E402

SOAK = bool(os.environ.get("ODRADEK_SOAK"))
KILL_ROUNDS = int(os.environ.get("ODRADEK_FAULT_ROUNDS", 20)) if SOAK else 2
PAUSES = 3 if SOAK else 1
TXN_PAUSES = 6 if SOAK else 1  # CI: one, a coordinator's broker or a leader's (the seed chooses)
TXN_KILLS = KILL_ROUNDS if SOAK else 1
TOPOLOGIES = {"3 combined": {"combined": 3}, "3 controllers + 3 brokers": {"combined": 0, "controllers": 3,
                                                                           "brokers": 3}}


def topologies(in_ci: str) -> list[str]:
    """Both topologies in the long profile; the short one runs each test on one (they alternate)."""
    return list(TOPOLOGIES) if SOAK else [in_ci]


@pytest.fixture
def cluster(request, tmp_path):
    c = ClusterProcesses(tmp_path, overrides={**FAST, **REPLICATED_STATE}, fault_hook=True, **TOPOLOGIES[request.param])
    try:
        c.start()
        create_topic(c)
        yield c
    finally:
        c.close()


@pytest.fixture
def rng():
    return fault_rng()


@pytest.mark.parametrize("cluster", topologies("3 combined"), indirect=True)
def test_leader_kills_lose_nothing_and_replicas_agree(cluster, rng):
    c = cluster
    with Workload(lambda: c.bootstrap, TOPIC, PARTITIONS) as workload:
        time.sleep(1.0)
        for round_ in range(KILL_ROUNDS):
            partition = rng.randrange(PARTITIONS)
            victim = partitions(c)[partition][0]
            c.nodes[victim].kill()
            time.sleep(rng.uniform(0.2, 3.0))
            c.start(victim)
            until(lambda: fully_in_sync(c), 90, f"round {round_}: broker {victim} back in every ISR")
            time.sleep(rng.uniform(0.0, 1.0))
        finish(c, workload)


@pytest.mark.parametrize("cluster", topologies("3 controllers + 3 brokers"), indirect=True)
def test_paused_leader_is_replaced_and_in_flight_writes_are_answered_or_kept(cluster, rng):
    """SIGSTOP a leader for longer than the session timeout (3 s here) while writes to it are in flight: a new
    leader is elected; on SIGCONT the paused broker truncates what it alone had and rejoins."""
    c = cluster
    with Workload(lambda: c.bootstrap, TOPIC, PARTITIONS) as workload:
        time.sleep(1.0)
        for _ in range(PAUSES):
            partition = rng.randrange(PARTITIONS)
            victim = partitions(c)[partition][0]
            led = [p for p, (leader, _) in partitions(c).items() if leader == victim]
            sent_before = sum(1 for e in workload.history.events if e.kind == "send" and e.partition in led)
            c.nodes[victim].pause()
            until(lambda: partitions(c, without=victim)[partition][0] not in (victim, -1), 30,
                  f"a new leader than paused {victim}")
            in_flight = sum(1 for e in workload.history.events if e.kind == "send" and e.partition in led) - sent_before
            assert in_flight >= 100, f"only {in_flight} writes went to the paused leader's partitions"
            time.sleep(rng.uniform(0.0, 2.0))
            c.nodes[victim].resume()
            until(lambda: fully_in_sync(c), 90, f"paused broker {victim} back in every ISR")
        finish(c, workload)


@pytest.mark.soak  # CI runs the same scenario across network namespaces (test_netns_partitions.py)
@pytest.mark.parametrize("cluster", topologies("3 combined"), indirect=True)
def test_isolated_leader_cannot_acknowledge_and_truncates_after_healing(cluster, rng):
    """A partition leader cut off from the quorum and its followers (clients still reach it): the others elect
    a new leader; the old one acknowledges no acks=all write; healed, it truncates its divergent tail."""
    c = cluster
    with Workload(lambda: c.bootstrap, TOPIC, PARTITIONS) as workload:
        time.sleep(1.0)
        partition = rng.randrange(PARTITIONS)
        victim = partitions(c)[partition][0]
        c.isolate(victim)
        until(lambda: partitions(c, without=victim)[partition][0] not in (victim, -1), 30,
              f"a new leader than isolated {victim}")
        assert acks_from(c, victim, partition, workload.history) == [], "an isolated leader acknowledged writes"
        time.sleep(rng.uniform(0.0, 2.0))
        c.heal()
        until(lambda: fully_in_sync(c), 90, f"healed broker {victim} back in every ISR")
        finish(c, workload)


@pytest.mark.parametrize("cluster", topologies("3 controllers + 3 brokers"), indirect=True)
def test_isolated_active_controller_is_replaced_and_the_cluster_goes_on(cluster, rng):
    c = cluster
    with Workload(lambda: c.bootstrap, TOPIC, PARTITIONS) as workload:
        time.sleep(1.0)
        _, victim = until(lambda: (lambda q: q if q[1] >= 0 else None)(c.quorum_leader()), 30, "the active controller")
        c.isolate(victim)
        until(lambda: c.quorum_leader()[1] not in (victim, -1), 30, f"a new active controller than isolated {victim}")
        admin = AdminClient({"bootstrap.servers": live_bootstrap(c, victim)})

        def created():  # metadata changes go on through the new controller
            for f in admin.create_topics([NewTopic("after-isolation", 1, 2)], request_timeout=10).values():
                f.result()
            return True

        until(created, 60, "a topic created while the old controller is cut off")
        time.sleep(rng.uniform(0.0, 2.0))
        c.heal()
        until(lambda: fully_in_sync(c), 90, f"healed node {victim} back in every ISR")
        finish(c, workload)


def _out_of_every_isr(c, victim: int) -> bool:
    """The other brokers no longer count ``victim`` as leader or in-sync replica of any partition (fenced)."""
    return all(victim != leader and victim not in isr for leader, isr in partitions(c, without=victim).values())


@pytest.mark.parametrize("cluster", topologies("3 combined"), indirect=True)
def test_transactions_through_coordinator_and_leader_kills(cluster, rng):
    """kill -9 of a transaction coordinator's broker or of a partition leader, restarted after a random delay."""
    c = cluster
    first = rng.randrange(2)  # coordinators and leaders in turn
    with txn_workload(c, rng.randrange(2**32)) as workload:
        time.sleep(2.0)
        for round_ in range(TXN_KILLS):
            victim, what = txn_victim(c, rng, workload.txn_ids, coordinator=(round_ + first) % 2 == 0)
            print(f"[round {round_}: kill -9 of broker {victim}, {what}]")
            c.nodes[victim].kill()
            time.sleep(rng.uniform(0.2, 3.0))
            c.start(victim)
            until(lambda: fully_in_sync(c), 90, f"round {round_}: broker {victim} back in every ISR")
            time.sleep(rng.uniform(0.5, 2.0))
        txn_finish(c, workload)


@pytest.mark.parametrize("cluster", topologies("3 controllers + 3 brokers"), indirect=True)
def test_transactions_through_paused_coordinators_and_leaders(cluster, rng):
    """SIGSTOP of a transaction coordinator's broker or a partition leader until it is fenced, then SIGCONT."""
    c = cluster
    first = rng.randrange(2)  # coordinators and leaders in turn
    with txn_workload(c, rng.randrange(2**32)) as workload:
        time.sleep(2.0)
        for round_ in range(TXN_PAUSES):
            victim, what = txn_victim(c, rng, workload.txn_ids, coordinator=(round_ + first) % 2 == 0)
            print(f"[round {round_}: SIGSTOP of broker {victim}, {what}]")
            c.nodes[victim].pause()
            until(lambda: _out_of_every_isr(c, victim), 30, f"paused {victim} out of every ISR")
            time.sleep(rng.uniform(0.0, 2.0))
            c.nodes[victim].resume()
            until(lambda: fully_in_sync(c), 90, f"paused broker {victim} back in every ISR")
            time.sleep(rng.uniform(0.5, 2.0))
        txn_finish(c, workload)
