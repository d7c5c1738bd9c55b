"""The KRaft quorum's cost and its failover time: a 3-voter cluster next to today's single voter, in one run.

Run:  .venv/bin/python benchmarks/bench_cluster.py                 # everything, ~10 min
      .venv/bin/python benchmarks/bench_cluster.py --quick         # smoke run, ~2 min
      .venv/bin/python benchmarks/bench_cluster.py --only failover --kills 50 --json out.json

Three sections, each with both topologies running as real ``odradek serve`` processes on loopback (the test
harness's ``BrokerProcess``/``ClusterProcesses``: config/single-node.yaml plus overrides; the cluster's nodes
are combined broker+controller voters):

* ``rtt``: CreateTopics round trips (one topic, one partition, replication factor 1, one request at a time
  over one connection, raw Kafka wire). The single voter and the 3-voter cluster take turns request by
  request, so drift of a shared machine hits both alike. A round trip ends when the controller has committed
  the topic's records: fsync on one node, a majority's fetch of the record on three.
* ``create``: 1,000 partitions created as 1,000 one-partition topics (``--batch`` topics per request) and as
  one topic of 1,000 partitions; topics/s and partitions/s from the first request to the last response, and
  on the cluster until every broker lists every topic in Metadata.
* ``failover``: kill -9 of the active controller, ``--kills`` times in a row, with Kafka's default quorum
  timeouts and with the tests' short ones. After each kill a client sends CreateTopics to a surviving broker
  until one succeeds: "to the next committed change" is kill -> that response. "To a new leader" is kill ->
  a survivor's quorum-state file naming a new leader. The killed node is restarted and the quorum caught up
  (DescribeQuorum: every voter's log end at the high watermark) before the next kill.

Figures are printed as a table (and written with ``--json``). There is no peer here: no other
Kafka-compatible broker runs a KRaft quorum on this machine, so the single voter is the baseline.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol.generated.messages import CreateTopicsRequest, DescribeQuorumRequest, MetadataRequest  # noqa: E402
from protocol.generated.messages.create_topics_request import CreatableTopic  # noqa: E402
from protocol.generated.messages.describe_quorum_request import PartitionData, TopicData  # noqa: E402
from tests.harness import BrokerProcess, ClusterProcesses, wait_until  # noqa: E402
from tests.kafka_wire import KafkaWire  # noqa: E402

CREATE_TOPICS, METADATA, DESCRIBE_QUORUM = 19, 3, 55
KAFKA_DEFAULTS: dict = {}  # controller.quorum.election.timeout.ms 1000, fetch.timeout.ms 2000, ...
TEST_TIMEOUTS = {"controller.quorum.election.timeout.ms": 500, "controller.quorum.fetch.timeout.ms": 1000,
                 "controller.quorum.election.backoff.max.ms": 300, "controller.quorum.request.timeout.ms": 1000,
                 "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
_names = itertools.count()


def topic(partitions: int = 1, rf: int = 1) -> CreatableTopic:
    return CreatableTopic(name=f"bench-{os.getpid()}-{next(_names)}", num_partitions=partitions,
                          replication_factor=rf)


def create(wire: KafkaWire, topics: list[CreatableTopic], timeout_ms: int = 30000) -> list[int]:
    """Error codes of one CreateTopics v7 request."""
    response = wire.call(CREATE_TOPICS, 7, CreateTopicsRequest(topics=topics, timeout_ms=timeout_ms))
    return [t.error_code for t in response.topics]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p99_ms": round(pct(ms, 0.99), 2),
            "max_ms": round(max(ms), 2), "mean_ms": round(statistics.fmean(ms), 2)}


# ---- topologies -----------------------------------------------------------------------------------------------

class Single:
    """Today's single voter: one combined node, the metadata log a quorum of one."""

    name = "1 voter"

    def __init__(self, root: Path, overrides: dict | None = None) -> None:
        (root / "single").mkdir(parents=True)
        self.node = BrokerProcess(root / "single", overrides)

    def start(self) -> None:
        self.node.start()

    def broker_ports(self) -> list[int]:
        return [self.node.port]

    def close(self) -> None:
        self.node.close()


class Three:
    """Three combined broker+controller voters."""

    name = "3 voters"

    def __init__(self, root: Path, overrides: dict | None = None) -> None:
        self.c = ClusterProcesses(root / "three", combined=3, overrides=overrides)

    def start(self) -> None:
        self.c.start()
        wait_until(lambda: self.leader() > 0, 60, 0.1, "a quorum leader")
        for i in self.c.broker_ports:  # CreateTopics needs registered, unfenced brokers to place replicas on
            wait_until(lambda i=i: self.c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, 0.1,
                       f"node {i} unfenced")

    def broker_ports(self) -> list[int]:
        return [p for i, p in self.c.broker_ports.items() if self.c.nodes[i].alive()]

    def quorum_state(self, node_id: int) -> tuple[int, int]:
        """(epoch, leader id) from one node's quorum-state file."""
        path = self.c.nodes[node_id].data_dir / "__cluster_metadata-0" / "quorum-state"
        try:
            state = json.loads(path.read_text())
            return state["leaderEpoch"], state["leaderId"]
        except (OSError, ValueError, KeyError):
            return -1, -1

    def leader(self) -> int:
        best = max((self.quorum_state(i) for i, n in self.c.nodes.items() if n.alive()), default=(-1, -1))
        return best[1]

    def caught_up(self) -> bool:
        """Every voter's log end at the leader's high watermark."""
        request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                          partitions=[PartitionData(partition_index=0)])])
        try:
            with KafkaWire(self.c.controller_ports[self.leader()], timeout=5) as w:
                p = w.call(DESCRIBE_QUORUM, 2, request).topics[0].partitions[0]
        except (OSError, KeyError):
            return False
        ends = {v.log_end_offset for v in p.current_voters}
        return p.error_code == 0 and ends == {p.high_watermark} and len(p.current_voters) == 3

    def close(self) -> None:
        self.c.close()


def visible_everywhere(ports: list[int], names: set[str]) -> bool:
    for port in ports:
        with KafkaWire(port, timeout=10) as w:
            md = w.call(METADATA, 12, MetadataRequest(topics=None))
        if not names <= {t.name for t in md.topics}:
            return False
    return True


# ---- sections -------------------------------------------------------------------------------------------------

def bench_rtt(root: Path, n: int) -> dict:
    single, three = Single(root), Three(root)
    try:
        single.start()
        three.start()
        wires = {single.name: KafkaWire(single.broker_ports()[0]), three.name: KafkaWire(three.broker_ports()[0])}
        times: dict[str, list[float]] = {k: [] for k in wires}
        for w in wires.values():  # warm up: connections, the first topic's code paths
            for _ in range(5):
                assert create(w, [topic()]) == [0]
        for i in range(n):
            order = list(wires.items()) if i % 2 == 0 else list(reversed(wires.items()))
            for name, w in order:
                t0 = time.perf_counter()
                assert create(w, [topic()]) == [0]
                times[name].append((time.perf_counter() - t0) * 1000)
        for w in wires.values():
            w.close()
        out = {name: summary(ms) for name, ms in times.items()}
        out["p50 ratio 3/1"] = round(out[three.name]["p50_ms"] / out[single.name]["p50_ms"], 2)
        return out
    finally:
        single.close()
        three.close()


def bench_create(root: Path, partitions: int, batch: int) -> dict:
    out = {}
    for topo in (Single(root), Three(root)):
        try:
            topo.start()
            ports = topo.broker_ports()
            with KafkaWire(ports[0], timeout=120) as w:
                create(w, [topic()])  # warm up
                many = [topic() for _ in range(partitions)]
                t0 = time.perf_counter()
                for i in range(0, len(many), batch):
                    errors = create(w, many[i:i + batch], timeout_ms=120000)
                    assert errors == [0] * len(errors), errors
                acked = time.perf_counter() - t0
                wait_until(lambda: visible_everywhere(ports, {t.name for t in many}), 120, 0.05, "every topic listed")
                listed = time.perf_counter() - t0
                one = topic(partitions)
                t0 = time.perf_counter()
                assert create(w, [one], timeout_ms=120000) == [0]
                wide = time.perf_counter() - t0
                wait_until(lambda: visible_everywhere(ports, {one.name}), 120, 0.05, "the wide topic listed")
                wide_listed = time.perf_counter() - t0
            out[topo.name] = {
                f"{partitions} topics x 1 partition ({batch}/request): topics/s acked": round(partitions / acked, 1),
                f"{partitions} topics x 1 partition: topics/s listed by every broker": round(partitions / listed, 1),
                f"1 topic x {partitions} partitions: partitions/s acked": round(partitions / wide, 1),
                f"1 topic x {partitions} partitions: partitions/s listed by every broker":
                    round(partitions / wide_listed, 1)}
        finally:
            topo.close()
    return out


def bench_failover(root: Path, kills: int, profile: str, overrides: dict) -> dict:
    three = Three(root / profile.replace(" ", "-"), overrides)
    to_change: list[float] = []
    to_leader: list[float] = []
    attempts = 0
    try:
        three.start()
        for k in range(kills):
            wait_until(three.caught_up, 120, 0.1, "the quorum caught up")
            epoch, leader = max(three.quorum_state(i) for i in three.c.nodes)
            survivors = [i for i in three.c.nodes if i != leader]
            seen: list[float] = []
            stop = threading.Event()

            def watch_election(t0: float) -> None:
                while not stop.is_set():
                    for i in survivors:
                        e, lid = three.quorum_state(i)
                        if e > epoch and lid >= 0:
                            seen.append(time.perf_counter() - t0)
                            return
                    time.sleep(0.002)

            t0 = time.perf_counter()
            three.c.nodes[leader].kill()
            watcher = threading.Thread(target=watch_election, args=(t0,), daemon=True)
            watcher.start()
            port = three.c.broker_ports[survivors[k % 2]]
            done = None
            while done is None and time.perf_counter() - t0 < 120:
                attempts += 1
                try:
                    with KafkaWire(port, timeout=10) as w:
                        if create(w, [topic()], timeout_ms=5000) == [0]:
                            done = time.perf_counter() - t0
                except (OSError, AssertionError):
                    pass
                if done is None:
                    time.sleep(0.01)
            wait_until(lambda: seen, 60, 0.01, "a new leader in a survivor's quorum-state")
            stop.set()
            watcher.join()
            if done is None:
                raise RuntimeError(f"kill {k + 1}: no metadata change committed within 120 s")
            to_change.append(done * 1000)
            to_leader.append(seen[0] * 1000)
            print(f"  {profile}: kill {k + 1}/{kills} of node {leader} (epoch {epoch}): new leader "
                  f"{seen[0] * 1000:.0f} ms, next committed change {done * 1000:.0f} ms", flush=True)
            three.c.start(leader)
        return {"kill -9 -> new leader": summary(to_leader), "kill -9 -> next committed change": summary(to_change),
                "CreateTopics attempts": attempts}
    finally:
        three.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="rtt,create,failover", help="comma-separated sections")
    ap.add_argument("--rtt", type=int, default=300, help="CreateTopics round trips per topology")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=50, help="topics per CreateTopics request in 'create'")
    ap.add_argument("--kills", type=int, default=20, help="controller kills per timeout profile")
    ap.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.quick:
        args.rtt, args.partitions, args.kills = 30, 200, 3
    sections = set(args.only.split(","))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; host {socket.gethostname()}")
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="odradek-bench-cluster-") as tmp:
        root = Path(tmp)
        if "rtt" in sections:
            print(f"rtt: {args.rtt} CreateTopics round trips per topology ...", flush=True)
            results["CreateTopics round trip"] = bench_rtt(root / "rtt", args.rtt)
        if "create" in sections:
            print(f"create: {args.partitions} partitions per topology ...", flush=True)
            results["creating partitions"] = bench_create(root / "create", args.partitions, args.batch)
        if "failover" in sections:
            for profile, overrides in (("Kafka's default timeouts", KAFKA_DEFAULTS),
                                       ("test timeouts", TEST_TIMEOUTS)):
                print(f"failover: {args.kills} kills with {profile} ...", flush=True)
                results[f"failover, {profile}"] = bench_failover(root / "failover", args.kills, profile, overrides)
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
