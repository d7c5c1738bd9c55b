"""The cluster at scale (issue 31, "Bad input"): the active controller fails while ISR changes are in flight.

1,000 partitions x RF 3, broker session 4 s (the rejoin test's cluster), as 3 combined nodes and as 3 controllers +
3 brokers. A broker that is not the active controller is killed with -9 and restarted on its data; while the
partition leaders send AlterPartitions for its rejoin (it catches up a few partitions per fetch, so they come as a
stream), the active controller (the quorum leader) fails with one in flight and is started again once the quorum
has a new leader. "In flight" is made certain: the controller is frozen (SIGSTOP) as a request goes out and kept
frozen only if its sender still waits once anything already sent has arrived. Then either

* "killed frozen": it is killed as it is (the request unread, or decided and maybe replicated, never answered), or
* "committed, answer lost": the senders' fault hook drops the AlterPartition answers from it, it is thawed, commits
  the change (a sender's under-replicated partitions go down) and is killed: the retried request names changes
  the new controller finds committed.

Asserted:

* every ISR is full again within 60 s of the controller kill;
* no controller fences a broker but one that really is down (the killed controller's own broker, when combined,
  at most once), and that one not before its session, counted from that controller's activation, has run out;
* the AlterPartitions in flight reached a new controller (the sender logs the request answered there after the
  failed attempts); with the answer lost, the new controller refused the committed changes (the sender's failed
  ISR updates went up: INVALID_UPDATE_VERSION, the change is in its metadata already);
* nothing is committed twice: replaying the committed metadata log, every PartitionChangeRecord changes its
  partition and bumps its partition epoch by one, and each new controller committed ISR joins.

One round per topology (one "killed frozen", one "committed, answer lost"); ``ODRADEK_SOAK=1`` runs 3,000 partitions and
3 rounds per topology (both cases in each).
"""

from __future__ import annotations

import datetime
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from cluster.metadata_image import MetadataImage, PartitionInfo
from cluster.metadata_serde import decode_record
from protocol.generated.messages import AlterPartitionRequest
from protocol.generated.metadata import PartitionChangeRecord
from protocol.record_codec import decode_batch
from storage.config import LogConfig
from storage.log import FetchIsolation, Log
from tests.harness import ClusterProcesses, MetricsPorts, scrape, wait_until
from tests.integration.test_scale_rejoin import OVERRIDES, PER_TOPIC, SESSION_MS, isr_gaps, start_with_topics

confluent_kafka = pytest.importorskip("confluent_kafka")

SOAK = bool(os.environ.get("ODRADEK_SOAK"))
PARTITIONS = 3000 if SOAK else 1000
ROUNDS = 3 if SOAK else 1
FULL_WITHIN_S = 60.0
TOPOLOGIES = {"3 combined": {"combined": 3}, "3 controllers + 3 brokers": {"combined": 0, "controllers": 3,
                                                                          "brokers": 3}}
SENT = "odradek_server_alterpartition_requests_total"
CHANGES_SENT = "odradek_server_alterpartition_changes_total"
FAILED = "kafka_server_replicamanager_failedisrupdates_total"
ANSWERED = ("kafka_server_replicamanager_isrexpands_total", "kafka_server_replicamanager_isrshrinks_total", FAILED)
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
FROZEN, COMMITTED = "killed frozen", "committed, answer lost"
CASES = (FROZEN, COMMITTED)
# Kafka's controller.quorum.fetch.timeout.ms: a controller frozen for a moment is not voted out meanwhile
QUORUM = {**OVERRIDES, "controller.quorum.fetch.timeout.ms": 2000}
# the restarted broker catches up a few partitions per fetch (replica.fetch.response.max.bytes counts whole batches,
# the first always sent): its rejoin is a stream of AlterPartitions over ~100 fetches per leader rather than one
PER_FETCH = max(1, PARTITIONS // 200)
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ [\w.]+: (.*)$")
FENCING = re.compile(r"Fencing broker (\d+) because its session has timed out")
ACTIVE = re.compile(r"node (\d+) is the active controller \(epoch (\d+)\)")
RETRIED = re.compile(r"AlterPartitionRequest answered by controller (\d+) after (\d+) failed")


def log_events(c: ClusterProcesses, pattern: re.Pattern, since: float) -> list[tuple[float, int, re.Match]]:
    """(wall time, node, match) of every line at or after ``since`` that matches ``pattern``, in every start's log
    of every node, by time."""
    out = []
    for i, node in c.nodes.items():
        for path in sorted(node.data_dir.parent.glob(f"broker-{node.data_dir.name}-*.stderr")):
            for line in path.read_text(errors="replace").splitlines():
                m = LINE.match(line)
                found = m and pattern.search(m.group(2))
                if found:
                    at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    if at >= since:
                        out.append((at, i, found))
    return sorted(out, key=lambda e: e[0])


def counters(metrics: Mapping[int, int], nodes: list[int], name: str) -> dict[int, float]:
    return {i: scrape(metrics[i])[name] for i in nodes}


def unanswered(m: dict[str, float]) -> float:
    """ISR changes a broker (its scraped metrics) has sent in AlterPartition requests and no answer has named yet."""
    return m[CHANGES_SENT] - sum(m[name] for name in ANSWERED)


def partition_gauge(port: int, name: str, topics: list[str]) -> list[float]:
    """A per-partition gauge's values for the topics' partitions on one broker."""
    names = {f'topic="{t}"' for t in topics}
    return [v for k, v in scrape(port).items() if k.startswith(name + "{") and any(n in k for n in names)]


def log_ends(port: int, topics: list[str]) -> set[float]:
    return set(partition_gauge(port, "kafka_log_log_logendoffset", topics))


def log_sizes(port: int, topics: list[str]) -> list[float]:
    return partition_gauge(port, "kafka_log_log_size", topics)


def produce_one_record_each(c: ClusterProcesses, topics: list[str]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "acks": 1, "linger.ms": 5})
    for t in topics:
        for n in range(PER_TOPIC):
            producer.produce(t, b"catch me up", partition=n)
    assert producer.flush(60) == 0, "records left unsent"


def committed_changes(node_dir: Path) -> list[tuple[int, PartitionChangeRecord, PartitionInfo, PartitionInfo]]:
    """(quorum epoch, record, partition before, partition after) of every PartitionChangeRecord in a stopped
    node's ``__cluster_metadata-0``, replayed in order through the metadata image."""
    log = Log.open(str(node_dir / "__cluster_metadata-0"), LogConfig.from_props({}), now_ms=0)
    image, out = MetadataImage(), []
    try:
        for batch in log.iter_batches(0, FetchIsolation.LOG_END):
            header, records = decode_batch(bytes(batch))
            if header.is_control:
                continue
            for r in records:
                record, _ = decode_record(bytes(r.value))
                offset = header.base_offset + r.offset_delta
                if not isinstance(record, PartitionChangeRecord):
                    image = image.apply([record], offset)
                    continue
                before = image.topics_by_id[record.topic_id].partitions[record.partition_id]
                image = image.apply([record], offset)
                after = image.topics_by_id[record.topic_id].partitions[record.partition_id]
                out.append((header.partition_leader_epoch, record, before, after))
        return out
    finally:
        log.close()


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_a_controller_failover_during_a_thousand_isr_rejoins_commits_nothing_twice_and_fences_no_live_broker(
        tmp_path, topology):
    c = ClusterProcesses(tmp_path, overrides=QUORUM, fault_hook=True, **TOPOLOGIES[topology])
    metrics = MetricsPorts({i: c.nodes[i] for i in c.broker_ports})
    epochs: list[tuple[int, int]] = []  # (the killed controller's, the next) quorum epoch of each round
    try:
        a, topics = start_with_topics(c, PARTITIONS, socket_timeout_ms=60000)

        for round_ in range(ROUNDS):
            case = CASES[(round_ + list(TOPOLOGIES).index(topology)) % len(CASES)]
            old_epoch, controller = c.quorum_leader()
            victim = min(set(c.broker_ports) - {controller})
            c.nodes[victim].kill()
            wait_until(lambda: isr_gaps(a, topics) == PARTITIONS, 60, 0.5, f"broker {victim} out of every ISR",
                       retry=(Exception,))
            # what the restarted broker catches up on, partition by partition; every live replica has it first, so
            # each ISR's high watermark is its leader's end and a rejoin means caught up
            produce_one_record_each(c, topics)
            live = [i for i in c.broker_ports if i != victim]
            wait_until(lambda: all(log_ends(metrics[i], topics) == {round_ + 1} for i in live), 120, 0.5,
                       "the records on every live replica")
            senders = [i for i in live if i != controller]
            sent_before = counters(metrics, senders, SENT)
            batch = max(log_sizes(metrics[live[0]], topics)) / (round_ + 1)  # one record's batch
            c.nodes[victim].overrides["replica.fetch.response.max.bytes"] = int(batch * PER_FETCH)
            c.start(victim)
            del c.nodes[victim].overrides["replica.fetch.response.max.bytes"]  # this start only
            for attempt in range(100):  # frozen with an AlterPartition unanswered (else thawed for the next one)
                wait_until(lambda: any(unanswered(scrape(metrics[i])) > 0 for i in senders), 60, 0.005,
                           f"an AlterPartition for broker {victim}'s rejoin", retry=(OSError,))
                failed_at = time.time()
                c.nodes[controller].pause()
                time.sleep(0.2)
                frozen = {i: scrape(metrics[i]) for i in senders}
                in_flight = [i for i in senders if unanswered(frozen[i]) > 0]
                if in_flight:
                    break
                c.nodes[controller].resume()
            else:
                raise AssertionError("the controller answered every AlterPartition before it could be frozen")
            if case == COMMITTED:
                for i in senders:
                    c.drop_requests(i, [controller], [AlterPartitionRequest.API_KEY])
                c.nodes[controller].resume()
                frozen_s = time.time() - failed_at
                wait_until(lambda: any(scrape(metrics[i])[UNDER_REPLICATED] < frozen[i][UNDER_REPLICATED]
                                       for i in senders), 20, 0.02,
                           "the thawed controller to commit an ISR change whose answer is lost")
                assert c.quorum_leader() == (old_epoch, controller), (
                    f"controller {controller} lost its leadership while frozen for {frozen_s:.1f} s")
            c.nodes[controller].kill()
            killed_at = time.time()
            frozen_s = frozen_s if case == COMMITTED else killed_at - failed_at
            sent_at_kill = counters(metrics, senders, SENT)
            refused_at_kill = counters(metrics, senders, FAILED)
            if case == COMMITTED:
                for i in senders:
                    c.drop_requests(i, [])
            new_epoch, new_controller = wait_until(
                lambda: s if (s := c.quorum_leader())[0] > old_epoch else None, 30, 0.05, "a new quorum leader")
            wait_until(lambda: set(in_flight) <= {i for _, i, _ in log_events(c, RETRIED, failed_at)}, 30, 0.1,
                       f"the AlterPartitions in flight at {in_flight} answered after the failover")
            refused = sum(counters(metrics, senders, FAILED).values()) - sum(refused_at_kill.values())
            c.start(controller)
            wait_until(lambda: isr_gaps(a, topics) == 0, FULL_WITHIN_S, 0.5, "every ISR full after the failover",
                       retry=(Exception,))
            full_s = time.time() - killed_at
            sent_after = counters(metrics, senders, SENT)
            activations = [(at, i) for at, i, _ in log_events(c, ACTIVE, failed_at)]
            assert new_controller in [i for _, i in activations], f"node {new_controller} never activated"
            fencings = [(at - max(t for t, j in activations if j == i and t <= at), i, int(m.group(1)))
                        for at, i, m in log_events(c, FENCING, failed_at)]
            retried = [(i, int(m.group(1)), int(m.group(2))) for _, i, m in log_events(c, RETRIED, failed_at)]
            epochs.append((old_epoch, new_epoch))
            print(f"\n{topology}, round {round_} ({case}): {PARTITIONS} partitions, broker {victim} restarted, "
                  f"controller {controller} failed with AlterPartitions in flight (frozen {frozen_s:.1f} s, attempt "
                  f"{attempt + 1}): active controllers (node, s after the kill) "
                  f"{[(i, round(at - killed_at, 1)) for at, i in activations]}, every ISR full {full_s:.1f} s after "
                  f"the kill; AlterPartition requests sent before the restart {sent_before}, at the kill "
                  f"{sent_at_kill}, at the end {sent_after}; answered after the failover (sender, by, failed "
                  f"attempts) {retried}; changes refused in those answers {refused:.0f}; fencings (s after the "
                  f"fencing controller's activation, by, broker) {[(round(s, 1), i, b) for s, i, b in fencings]}")
            # nobody is fenced but the killed controller's own broker (really down), and only once its session,
            # started at the activation of the controller that fences it, has run out
            down = [controller] if controller in c.broker_ports else []
            # (a restart that registers again once the session has run out replaces it before any fencing, too)
            assert sorted(b for _, _, b in fencings) in ([], down), fencings
            assert all(s >= SESSION_MS / 1000 - 0.25 for s, _, _ in fencings), fencings
            assert any(sender in senders and by != controller for sender, by, _ in retried), (
                "no AlterPartition in flight at the kill was answered by a new controller")
            if case == COMMITTED:  # the old controller's commits, answered as such: nothing written again
                assert refused > 0, "the retried changes the old controller had committed were not refused"
            assert full_s <= FULL_WITHIN_S
            if down:  # settle before the next round: every broker back and unfenced
                wait_until(lambda: c.nodes[controller].log_lines(rf"node {controller} is unfenced") >= 1, 60,
                           what=f"broker {controller} unfenced again")
        last_controller = c.quorum_leader()[1]
    finally:
        c.close()

    # the committed log, as the last active controller has it (every node is stopped: nothing is in flight)
    changes = committed_changes(c.nodes[last_controller].data_dir)
    joins: dict[int, int] = {}  # quorum epoch -> ISR joins it committed
    for epoch, record, before, after in changes:
        assert after.partition_epoch == before.partition_epoch + 1
        assert (after.isr, after.leader, after.leader_epoch, after.replicas) != (
            before.isr, before.leader, before.leader_epoch, before.replicas), f"a change committed twice: {record}"
        joins[epoch] = joins.get(epoch, 0) + len(set(after.isr) - set(before.isr))
    print(f"{len(changes)} partition changes committed; ISR joins per quorum epoch {joins}; rounds' epochs (old, new) "
          f"{epochs}")
    for _, new_epoch in epochs:
        assert joins.get(new_epoch, 0) > 0, f"the new controller of epoch {new_epoch} committed no ISR join"
