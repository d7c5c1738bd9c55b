"""Network partitions for real: three combined nodes, each in its own Linux network namespace, linked only to
each other through a switch namespace (tests/netns.py; addresses from ``TEST_RANGE``, nothing routed
elsewhere). Clients (the Jepsen workload's producers and readers) run inside the switch namespace and reach
every node on its client link; a partition takes a node's cluster link down, so it loses the quorum and its
followers while clients still reach it.

* A partition leader cut off: the others elect a new leader, the old one acknowledges no acks=all write,
  and once the link is back it truncates its divergent tail and rejoins every ISR.
* The active controller cut off: a new one is elected and metadata changes go on.
* Under the transactional workload (tests/jepsen/txn_workload.py), a transaction coordinator's broker or a
  partition leader cut off in turn: the checker finds no aborted or uncommitted read, no committed record lost
  or torn from its transaction, no input processed twice by the consume-transform-produce leg.
In all, the history checker finds nothing lost, duplicated or inconsistent, and every replica ends with the
leader's batches below the high watermark.

CI runs 1 cut of the transactional test; ``ODRADEK_SOAK=1`` runs ``ODRADEK_FAULT_ROUNDS`` (default 8). A failing
run prints its seed; ``ODRADEK_FAULT_SEED`` replays the same choices.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.netns import NetnsCluster, NetnsLab, in_netns, unshare_works

pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.jepsen.cluster_checks import (  # noqa: E402
    FAST, PARTITIONS, REPLICATED_STATE, TOPIC, acks_from, create_topic, fault_rng, finish, fully_in_sync,
    live_bootstrap, partitions, txn_finish, txn_victim, txn_workload, until,
)
from tests.jepsen.workload import Workload  # noqa: E402

pytestmark = pytest.mark.skipif(not unshare_works(), reason="network namespaces unavailable here (unshare -n fails)")

SOAK = bool(os.environ.get("ODRADEK_SOAK"))
TXN_CUTS = int(os.environ.get("ODRADEK_FAULT_ROUNDS", 8)) if SOAK else 1



@pytest.fixture
def lab():
    lab = NetnsLab(3).create()
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture
def cluster(lab, tmp_path):
    c = NetnsCluster(tmp_path, lab, {**FAST, **REPLICATED_STATE})
    try:
        c.start()
        with in_netns(lab.switch):
            create_topic(c)
        yield c
    finally:
        c.close()


@pytest.fixture
def rng():
    return fault_rng()


def test_partitioned_leader_cannot_acknowledge_and_truncates_after_healing(lab, cluster, rng):
    c = cluster
    with in_netns(lab.switch):  # the workload's threads (and librdkafka's) live in the switch namespace
        with Workload(lambda: c.bootstrap, TOPIC, PARTITIONS) as workload:
            time.sleep(1.0)
            partition = rng.randrange(PARTITIONS)
            victim = partitions(c)[partition][0]
            lab.cut(victim)
            until(lambda: partitions(c, without=victim)[partition][0] not in (victim, -1), 30,
                  f"a new leader than partitioned {victim}")
            assert acks_from(c, victim, partition, workload.history) == [], "a partitioned leader acknowledged writes"
            time.sleep(rng.uniform(0.0, 2.0))
            lab.mend(victim)
            until(lambda: fully_in_sync(c), 90, f"broker {victim} back in every ISR")
            finish(c, workload)


def test_partitioned_active_controller_is_replaced_and_the_cluster_goes_on(lab, cluster, rng):
    c = cluster
    with in_netns(lab.switch):
        with Workload(lambda: c.bootstrap, TOPIC, PARTITIONS) as workload:
            time.sleep(1.0)
            _, victim = until(lambda: (lambda q: q if q[1] >= 0 else None)(c.quorum_leader()), 30,
                              "the active controller")
            lab.cut(victim)
            until(lambda: c.quorum_leader()[1] not in (victim, -1), 30, f"a new controller than partitioned {victim}")
            admin = AdminClient({"bootstrap.servers": live_bootstrap(c, victim)})

            def created():
                for f in admin.create_topics([NewTopic("after-partition", 1, 2)], request_timeout=10).values():
                    f.result()
                return True

            until(created, 60, "a topic created while the old controller is cut off")
            time.sleep(rng.uniform(0.0, 2.0))
            lab.mend(victim)
            until(lambda: fully_in_sync(c), 90, f"node {victim} back in every ISR")
            finish(c, workload)


def test_transactions_through_partitioned_coordinators_and_leaders(lab, cluster, rng):
    c = cluster
    first = rng.randrange(2)  # coordinators and leaders in turn
    with in_netns(lab.switch):
        with txn_workload(c, rng.randrange(2**32)) as workload:
            time.sleep(2.0)
            for round_ in range(TXN_CUTS):
                victim, what = txn_victim(c, rng, workload.txn_ids, coordinator=(round_ + first) % 2 == 0)
                print(f"[round {round_}: cluster link of broker {victim} cut, {what}]")
                lab.cut(victim)
                until(lambda: all(victim != leader and victim not in isr
                                  for leader, isr in partitions(c, without=victim).values()), 30,
                      f"partitioned {victim} out of every ISR")
                time.sleep(rng.uniform(0.0, 2.0))
                lab.mend(victim)
                until(lambda: fully_in_sync(c), 90, f"broker {victim} back in every ISR")
                time.sleep(rng.uniform(0.5, 2.0))
            txn_finish(c, workload)
