"""Issue 30's share consumer cases on a 3-node cluster (RF 3), confluent-kafka 2.16 ``ShareConsumer``s, one cluster
for the module (a topic and a group per case), implicit and explicit acknowledgement:

- three consumers of one partition all get records, none twice;
- a record released 5 times (``group.share.delivery.count.limit`` 5) is archived: never delivered a 6th time, the
  share-partition start offset (SPSO) moves past it;
- a consumer process killed with SIGKILL while it holds records under a 60 s lock: its connection drops and the
  leader releases its share session's records at once (Kafka 4.2's ``releaseAcquiredRecords``, the delivery not
  counted: they come back with the same delivery count), so the surviving consumer gets them long before the lock;
- members join and leave while records are produced: each record accepted once;
- ``share.auto.offset.reset``: latest (the default) sees only records produced after the partition's share state
  was initialized, earliest sees them all.

Each case ends with every record Acknowledged or Archived in the share coordinators' state and
DescribeShareGroupOffsets v1's lag 0 (``odradek cluster status``'s too, in the joins and leaves case). The
persisted SPSO may stay below the log end, as Kafka's: a state write carries the start offset from before its
acknowledgements apply (KIP-1226's lag subtracts the delivery complete count above it).

The same consumers at Kafka's default timers (and Kafka's ``group.share.*`` defaults: heartbeat 5 s, lock 30 s)
through a partition leader's kill -9 are test_share_consumer_cluster.py's kill test, parametrized.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import AcknowledgeType, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker import cluster_status
from broker.testing.embedded_cluster import EmbeddedCluster, wait_until
from protocol.errors import ErrorCode as E
from protocol.generated.messages import DescribeShareGroupOffsetsRequest
from protocol.generated.messages import describe_share_group_offsets_request as dsgo
from tests.integration.test_share_consumer import SHARE_OVERRIDES, group_configs, poll_records, produce, share_consumer
from tests.integration.test_share_faults import all_done, persisted_state, topic_id_of
from tests.integration.test_share_groups_cluster import coordinator
from tests.kafka_wire import KafkaWire

DEADLINE_S = 60  # a hang guard for each case's loops, not a speed requirement
LONG_LOCK_MS = 15_000  # where a lock expiry would only add redeliveries the case is not about
RETRIABLE = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with EmbeddedCluster(brokers=3, data_dir=tmp_path_factory.mktemp("share-cases"), overrides=SHARE_OVERRIDES) as c:
        c.admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        yield c


def new_topic(c: EmbeddedCluster, topic: str, partitions: int) -> None:
    c.admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
    wait_until(lambda: all(c.leader_of(topic, p) > 0 for p in range(partitions)), 30, 0.1, f"{topic}'s leaders")


def share_offsets(c: EmbeddedCluster, group: str) -> dict[tuple[str, int], tuple[int, int]] | None:
    """DescribeShareGroupOffsets v1 at the group's coordinator: (topic, partition) -> (SPSO, lag); None while the
    coordinator moves or loads."""
    with KafkaWire(c.broker_ports[coordinator(c, group)], timeout=30) as w:
        (g,) = w.call(90, 1, DescribeShareGroupOffsetsRequest(groups=[
            dsgo.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])).groups
    codes = {g.error_code} | {p.error_code for t in g.topics for p in t.partitions}
    assert codes <= {0} | RETRIABLE, g
    if codes != {0}:
        return None
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in g.topics for p in t.partitions}


def wait_caught_up(c: EmbeddedCluster, group: str, topic: str, ends: dict[int, int]) -> dict[int, int]:
    """Until every record of ``topic`` up to ``ends`` (partition -> log end offset) is Acknowledged or Archived in
    the share coordinators' state (ReadShareGroupState: below the SPSO or in a batch of either state) and
    DescribeShareGroupOffsets v1 answers lag 0 for each partition (KIP-1226: end - SPSO - delivery complete count).
    The persisted SPSO may stay below the end, as Kafka's does: a write carries the start offset from before its
    acknowledgements apply; the next write moves it. Returns each partition's persisted SPSO."""
    tid = topic_id_of(c, topic)
    last: list = [None, None]

    def caught_up() -> bool:
        offsets = share_offsets(c, group)
        states = {p: persisted_state(c, tid, p, group) for p in ends}
        last[:] = offsets, states
        return offsets is not None and all(offsets.get((topic, p), (None, None))[1] == 0 for p in ends) and \
            all(all_done(states[p], end) for p, end in ends.items())
    try:
        wait_until(caught_up, DEADLINE_S, 0.2, f"{group}'s records of {topic} all done",
                   retry=(OSError, ConnectionError))
    except AssertionError as exc:
        raise AssertionError(f"{exc}: (SPSO, lag) {last[0]}, states {last[1]}") from None
    return {p: last[1][p][0] for p in ends}


def test_three_consumers_of_one_partition_all_get_records(cluster):
    """One partition, three members (a share group assigns it to each). A fetch acquires whole producer batches,
    so the records come in batches of 20, a batch per round, and the members poll in a rotating order: all three
    get some, and no record comes twice."""
    topic, group, batch = "cases-one-partition", "cases-one-partition", 20
    new_topic(cluster, topic, 1)
    group_configs(cluster.bootstrap_servers, group, LONG_LOCK_MS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    consumers = [share_consumer(cluster.bootstrap_servers, group, topic) for _ in range(3)]
    seen: dict[int, int] = {}
    got = [0, 0, 0]
    produced = 0
    try:
        end = time.monotonic() + DEADLINE_S
        rounds = 0
        while (not all(got) or produced < 200 or len(seen) < produced) and time.monotonic() < end:
            if not all(got) or produced < 200:
                for i in range(batch):
                    producer.produce(topic, value=b"%06d" % (produced + i))
                assert producer.flush(30) == 0
                produced += batch
            rounds += 1
            for i in [(rounds + k) % 3 for k in range(3)]:
                for m in poll_records(consumers[i], 0.1):
                    seen[m.offset()] = seen.get(m.offset(), 0) + 1
                    got[i] += 1
        for sc in consumers:
            sc.commit_sync(30)
    finally:
        for sc in consumers:
            sc.close()
    assert len(seen) == produced, f"{len(seen)} of {produced} records consumed"
    assert set(seen.values()) == {1}, sorted(o for o, n in seen.items() if n > 1)[:20]
    assert all(got), got
    wait_caught_up(cluster, group, topic, {0: produced})


def test_a_record_released_five_times_is_archived(cluster):
    """Explicit mode, two members: offset 2 released at every delivery returns with counts 1..5 (to either member)
    and then never; the others are accepted once; the SPSO moves past it to the log end (lag 0)."""
    topic, group, records, victim, limit = "cases-archive", "cases-archive", 10, 2, 5
    new_topic(cluster, topic, 1)
    group_configs(cluster.bootstrap_servers, group, LONG_LOCK_MS)
    produce(cluster.bootstrap_servers, topic, records)
    consumers = [share_consumer(cluster.bootstrap_servers, group, topic, explicit=True) for _ in range(2)]
    deliveries: list[tuple[int, int, int]] = []  # (offset, delivery count, consumer)
    accepted: list[int] = []
    try:
        def round_(timeout: float) -> None:
            for i, sc in enumerate(consumers):
                for m in poll_records(sc, timeout):
                    deliveries.append((m.offset(), m.delivery_count(), i))
                    if m.offset() == victim:
                        sc.acknowledge(m, AcknowledgeType.RELEASE)
                    else:
                        accepted.append(m.offset())
                        sc.acknowledge(m, AcknowledgeType.ACCEPT)
                sc.commit_sync(30)
        end = time.monotonic() + DEADLINE_S
        while (len(accepted) < records - 1 or (victim, limit) not in {d[:2] for d in deliveries}) \
                and time.monotonic() < end:
            round_(0.2)
        # the fifth release archived it: a few more rounds deliver nothing; then one more record, accepted: its
        # state write carries the start offset the archive moved past the records before it
        for _ in range(2):
            round_(0.5)
        archived = list(deliveries)
        produce(cluster.bootstrap_servers, topic, 1)
        while len(accepted) < records and time.monotonic() < end:
            round_(0.2)
    finally:
        for sc in consumers:
            sc.close()
    assert [d[1] for d in archived if d[0] == victim] == list(range(1, limit + 1)), archived
    assert sorted(accepted) == [o for o in range(records + 1) if o != victim], deliveries
    assert [d for d in deliveries if d[0] == victim] == [d for d in archived if d[0] == victim], deliveries
    assert wait_caught_up(cluster, group, topic, {0: records + 1}) == {0: records}
    assert share_offsets(cluster, group) == {(topic, 0): (records, 0)}


KILLED_CONSUMER = r"""
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
end = time.monotonic() + 60
while time.monotonic() < end:
    held = [m for m in c.poll(0.5) if m.error() is None]
    if held:
        print(" ".join(f"{m.offset()}:{m.delivery_count()}" for m in held), flush=True)
        time.sleep(300)  # holding them, unacknowledged, until killed
"""


def test_a_killed_consumers_records_return_when_its_connection_drops(cluster):
    """A consumer process takes records (explicit mode, a 60 s lock) and is killed with SIGKILL: the leader
    releases its share session's records when the connection closes, not at the lock's expiry. The surviving
    consumer gets a record produced after them (it is assigned and fetching) but none of the held ones while the
    process lives; after the kill it gets each held record with delivery count 1 (a release on disconnect does not
    count the delivery; an expired lock would have made it 2) well inside the lock (a 30 s bound)."""
    topic, group, records, lock_ms = "cases-kill", "cases-kill", 10, 60_000
    new_topic(cluster, topic, 1)
    group_configs(cluster.bootstrap_servers, group, lock_ms)
    produce(cluster.bootstrap_servers, topic, records)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CONSUMER, cluster.bootstrap_servers, group, topic],
                            stdout=subprocess.PIPE, text=True)
    survivor = None
    got: list[tuple[int, int]] = []
    try:
        line = proc.stdout.readline()  # the child's own 60 s deadline bounds this
        held = sorted(tuple(map(int, pair.split(":"))) for pair in line.split())
        assert held and all(count == 1 for _, count in held), line
        held_offsets = {o for o, _ in held}
        survivor = share_consumer(cluster.bootstrap_servers, group, topic)
        produce(cluster.bootstrap_servers, topic, 1)  # offset 10: the survivor's once it fetches
        end = time.monotonic() + DEADLINE_S
        while records not in {o for o, _ in got} and time.monotonic() < end:
            got += [(m.offset(), m.delivery_count()) for m in poll_records(survivor, 0.5)]
        assert records in {o for o, _ in got} and not held_offsets & {o for o, _ in got}, (got, held)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        end = time.monotonic() + 30  # the lock is 60 s: records got within 30 s came back by the disconnect
        while len(got) < records + 1 and time.monotonic() < end:
            got += [(m.offset(), m.delivery_count()) for m in poll_records(survivor, 0.5)]
        survivor.commit_sync(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        if survivor is not None:
            survivor.close()
    assert sorted(got) == [(o, 1) for o in range(records + 1)], (got, held)
    wait_caught_up(cluster, group, topic, {0: records + 1})


def test_members_join_and_leave_and_every_record_ends_acknowledged(cluster, capsys):
    """Records produced in three parts while members join and leave, every record accepted once (an acceptance
    answered through the acknowledgement commit callback, none twice, no delivery after one), each share-partition's
    records all Acknowledged, the lag 0, as ``odradek cluster status`` shows too. A leaving member commits its last
    poll's acceptances, or (every other one) just closes: librdkafka 2.16's ``close`` sends no implicit
    acknowledgements, its session's records are released (the delivery not counted) and go to the others."""
    topic, group, partitions, records = "cases-churn", "cases-churn", 3, 2700
    new_topic(cluster, topic, partitions)
    group_configs(cluster.bootstrap_servers, group, LONG_LOCK_MS)
    accepted: dict[tuple[int, int], int] = {}
    violations: list[tuple[int, int]] = []
    failed: list[str] = []

    def on_ack(offsets, exc):
        if exc is not None:
            failed.append(str(exc))
            return
        for tp, offs in offsets.items():
            for o in offs:
                accepted[(tp.partition, o)] = accepted.get((tp.partition, o), 0) + 1

    def join():
        sc = share_consumer(cluster.bootstrap_servers, group, topic, **{"max.poll.records": 100})
        sc.set_acknowledgement_commit_callback(on_ack)
        return sc

    # (records accepted, what happens): a part produced, a member joins, the oldest member leaves
    plan = [(0, "produce"), (0, "join"), (300, "join"), (600, "produce"), (700, "join"), (1000, "leave"),
            (1400, "produce"), (1600, "join"), (1900, "leave"), (2200, "leave")]
    part = records // 3
    produced = joined = left = 0
    live: list = []
    try:
        end = time.monotonic() + DEADLINE_S
        while (len(accepted) < records or plan) and time.monotonic() < end:
            while plan and len(accepted) >= plan[0][0]:
                _, what = plan.pop(0)
                if what == "produce":
                    produce(cluster.bootstrap_servers, topic, part, size=100, partitions=partitions)
                    produced += part
                elif what == "join":
                    live.append(join())
                    joined += 1
                else:
                    sc = live.pop(0)
                    if left % 2 == 0:
                        sc.commit_sync(30)
                    sc.close()
                    left += 1
            for sc in live:
                for m in poll_records(sc, 0.1):
                    key = (m.partition(), m.offset())
                    if key in accepted:
                        violations.append(key)
            if produced == records and not plan:
                for sc in live:
                    sc.commit_sync(30)  # the last polls' acceptances answered
    finally:
        for sc in live:
            sc.close()
    assert (produced, joined, left) == (records, 4, 3) and not plan, (produced, joined, left, plan)
    assert not violations, f"delivered after an answered acceptance: {violations[:20]}"
    assert not failed, failed
    assert set(accepted) == {(p, o) for p in range(partitions) for o in range(records // partitions)}
    assert set(accepted.values()) == {1}, sorted(k for k, n in accepted.items() if n > 1)[:20]
    wait_caught_up(cluster, group, topic, {p: records // partitions for p in range(partitions)})
    assert cluster_status.main(["status", "--bootstrap-server", cluster.bootstrap_servers.split(",")[0]]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith(f"  {group}  ") and line.endswith(f"{topic} lag=0") for line in out.splitlines()), out


def test_latest_sees_only_later_records_and_earliest_all(cluster):
    """Ten records per partition before either group exists. The group at Kafka's default ``share.auto.offset.reset``
    (latest) starts each share-partition at the log end when its leader first initializes it: records are produced
    one per partition per round until it has some of every partition; it gets every record from its first on and
    none of the ten. The group set to earliest gets every record."""
    topic, partitions, before = "cases-reset", 3, 30
    new_topic(cluster, topic, partitions)
    produce(cluster.bootstrap_servers, topic, before, partitions=partitions)
    group_configs(cluster.bootstrap_servers, "cases-latest", LONG_LOCK_MS, reset=None)
    group_configs(cluster.bootstrap_servers, "cases-earliest", LONG_LOCK_MS)
    latest = share_consumer(cluster.bootstrap_servers, "cases-latest", topic)
    seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
    produced = before
    try:
        end = time.monotonic() + DEADLINE_S
        while not all(len(s) >= 3 for s in seen.values()) and time.monotonic() < end:
            produce(cluster.bootstrap_servers, topic, partitions, partitions=partitions)
            produced += partitions
            for m in poll_records(latest, 0.3):
                seen[m.partition()].append(m.offset())
        ends = produced // partitions
        while sum(len(s) for s in seen.values()) < sum(ends - min(s, default=ends) for s in seen.values()) \
                and time.monotonic() < end:
            for m in poll_records(latest, 0.3):
                seen[m.partition()].append(m.offset())
        latest.commit_sync(30)
    finally:
        latest.close()
    for p, offsets in seen.items():
        assert offsets and min(offsets) >= before // partitions, (p, offsets)
        assert sorted(offsets) == list(range(min(offsets), ends)), (p, offsets)

    earliest = share_consumer(cluster.bootstrap_servers, "cases-earliest", topic)
    all_seen: set[tuple[int, int]] = set()
    try:
        end = time.monotonic() + DEADLINE_S
        while len(all_seen) < produced and time.monotonic() < end:
            all_seen.update((m.partition(), m.offset()) for m in poll_records(earliest, 0.3))
        earliest.commit_sync(30)
    finally:
        earliest.close()
    assert all_seen == {(p, o) for p in range(partitions) for o in range(ends)}
    for group in ("cases-latest", "cases-earliest"):
        wait_caught_up(cluster, group, topic, {p: ends for p in range(partitions)})
