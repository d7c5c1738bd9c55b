"""Partition replication's cost and its failover time: a replication-factor-3 topic next to today's RF 1, in one run.

Run:  .venv/bin/python benchmarks/bench_replication.py                    # everything, ~20 min
      .venv/bin/python benchmarks/bench_replication.py --quick            # smoke run, ~2 min
      .venv/bin/python benchmarks/bench_replication.py --only failover --kills 50 --json out.json
      .venv/bin/python benchmarks/bench_replication.py --only throughput --inter-broker SSL   # RF 3 over TLS links

Real ``odradek serve`` processes on loopback (the test harness's ``BrokerProcess``/``ClusterProcesses``:
config/single-node.yaml plus overrides): a single combined node holding RF 1 topics written with acks=1 (the
baseline), and a cluster of three combined broker+controller nodes holding RF 3, ``min.insync.replicas=2`` topics
written with acks=all and ``enable.idempotence=true``. Every topic has one partition; every case gets a fresh
topic. Clients are librdkafka's (confluent-kafka) in this process.

* ``throughput``: produce and consume msg/s and MB/s (MB = 10^6 bytes of record values) for 100 B and 1 KiB
  values (``--records``/``--records-1k``: 200k and 50k; ``--quick`` 10x fewer). Produce: ``linger.ms=5``, default
  ``batch.size``, records handed over with ``produce_batch``, timed from the first call to ``flush() == 0``,
  after one untimed record (the producer's start and a new partition's first follower fetch are not throughput).
  Consume: one consumer, ``assign`` at offset 0, until every record is read (``fetch.queue.backoff.ms=10``, as in
  bench_broker.py: the default 1 s backoff makes 100-byte runs bimodal). RF 1 and RF 3 alternate, which goes
  first alternating with the repetition (``--repeat``); medians, and the median of the per-pair RF3/RF1 ratios.
* ``cpu``: broker CPU-seconds (utime+stime of each process, /proc/<pid>/stat) per GB produced on the RF 3 topic,
  for the partition leader and each follower, from before the first produce call until every replica's log holds
  the leader's bytes (the partition directories' ``.log`` sizes equal). Leader, mean follower, follower/leader
  (the target is a follower costing at most half the leader: reported, not asserted), and the RF 1 broker's own
  CPU-s/GB as a reference. Each node's idle CPU rate (``--idle-seconds`` of no traffic before each case: KRaft
  ticks, heartbeats, long polls) is sampled too, and every figure is also given net of it (rate x the case's
  wall time subtracted): at 2-3 % of a core per node it is a large part of a short case's figure. The active
  controller is one of the three nodes and its heartbeat handling is in its figure; the table names it.
* ``latency``: end to end at a fixed rate (``--rate`` 1000 msg/s for ``--seconds`` 20, quick 5): the producer
  (``linger.ms=0``) puts ``time.time_ns()`` in each value, a consumer thread (``assign``, default
  ``fetch.wait.max.ms``) takes the receive time minus that; p50/p99/max ms on RF 3 acks=all and on RF 1 acks=1.
* ``failover``: kill -9 of the partition leader, ``--kills`` times (20, quick 3), with Kafka's default timeouts
  and with the tests' short ones (FAST in tests/integration/test_replication_faults.py). One persistent
  idempotent acks=all producer sends one record at a time (the next once the previous is reported); a kill's
  figure is from SIGKILL to the first successful delivery report of a record produced after the killed process
  was reaped, which only the new leader can acknowledge. The killed node is restarted and the ISR full again
  before the next kill. p50/max per profile, and how many kills also took the active controller.

The figures are ratios within one run, not absolute claims: three Python brokers and the client share a 2-core
machine (other jobs may be running too: the load average is printed), so throughput measures how much of the
machine each process got. Figures are printed as tables and written with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.harness import BrokerProcess, ClusterProcesses, wait_until  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
KAFKA_DEFAULTS: dict = {}  # broker.session.timeout.ms 9000, heartbeat 2000, election timeout 1000, ...
# FAST in tests/integration/test_replication_faults.py
TEST_TIMEOUTS = {"controller.quorum.election.timeout.ms": 500, "controller.quorum.fetch.timeout.ms": 1000,
                 "controller.quorum.election.backoff.max.ms": 300, "controller.quorum.request.timeout.ms": 1000,
                 "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500,
                 "replica.lag.time.max.ms": 4000}
RF1, RF3 = "RF 1 acks=1", "RF 3 acks=all"
QUIET = {"log_level": 0}  # librdkafka's "connection refused" lines while a broker is down


def until(cond, timeout: float = 60.0, what: str = "condition"):
    return wait_until(cond, timeout, 0.1, what, retry=(Exception,))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p99_ms": round(pct(ms, 0.99), 2),
            "max_ms": round(max(ms), 2) if ms else float("nan"),
            "mean_ms": round(statistics.fmean(ms), 2) if ms else float("nan")}


def cpu_seconds(pid: int) -> float:
    """utime+stime of every thread of the process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fresh_topic(tag: str) -> str:
    return f"bench-{tag}-{uuid.uuid4().hex[:8]}"


# ---- topologies -----------------------------------------------------------------------------------------------

class Single:
    """Today's baseline: one combined node, RF 1 topics, acks=1."""

    name = RF1
    rf, acks, idempotent = 1, "1", False

    def __init__(self, root: Path) -> None:
        (root / "single").mkdir(parents=True)
        self.node = BrokerProcess(root / "single")

    def start(self) -> "Single":
        self.node.start()  # a quorum of one registers nothing (no "unfenced" line): topic creation is retried
        return self

    @property
    def bootstrap(self) -> str:
        return self.node.bootstrap

    def nodes(self) -> dict[int, BrokerProcess]:
        return {1: self.node}

    def close(self) -> None:
        self.node.close()


class Three:
    """Three combined broker+controller nodes, RF 3 topics with min.insync.replicas=2, acks=all. ``inter_broker``
    SSL or SASL_SSL: each broker also listens on a REPLICATION listener of that protocol, its
    ``inter.broker.listener.name`` (replication, and the rest of the broker-to-broker traffic, go over TLS;
    SCRAM-SHA-512 for SASL_SSL, the nodes' credential bootstrapped as ``odradek format --add-scram``); clients still
    use PLAINTEXT."""

    name = RF3
    rf, acks, idempotent = 3, "all", True

    def __init__(self, root: Path, overrides: dict | None = None, inter_broker: str = "PLAINTEXT") -> None:
        self.c = ClusterProcesses(root, combined=3, overrides=overrides)
        if inter_broker != "PLAINTEXT":
            self.name = f"{RF3}, inter-broker {inter_broker}"
            self._secure_replication(root, inter_broker)

    def _secure_replication(self, root: Path, protocol: str) -> None:
        from broker.testing.secure_cluster import MECHANISM, NODE_USER, SCRAM_MODULE, SecureSetup
        from tests.harness import reserve_ports

        setup = SecureSetup(root / "security", ())
        ports = dict(zip(self.c.broker_ports, reserve_ports(len(self.c.broker_ports))))
        props = {"inter.broker.listener.name": "REPLICATION",
                 "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,REPLICATION:{protocol},"
                                                   "CONTROLLER:PLAINTEXT",
                 "ssl.keystore.type": "PEM", "ssl.keystore.location": str(setup.node_cert.pem),
                 "ssl.truststore.type": "PEM", "ssl.truststore.location": str(setup.ca.pem)}
        if protocol == "SASL_SSL":
            jaas = f'{SCRAM_MODULE} required username="{NODE_USER}" password="{setup.passwords[NODE_USER]}";'
            props |= {"listener.name.replication.sasl.enabled.mechanisms": MECHANISM,
                      f"listener.name.replication.{MECHANISM.lower()}.sasl.jaas.config": jaas,
                      "sasl.mechanism.inter.broker.protocol": MECHANISM}
        for i, port in ports.items():
            node = self.c.nodes[i]
            plain, _, rest = node.overrides["listeners"].partition(",")
            node.overrides |= props
            node.overrides["listeners"] = ",".join(filter(None, [plain, f"REPLICATION://127.0.0.1:{port}", rest]))
            node.overrides["advertised.listeners"] = f"{plain},REPLICATION://127.0.0.1:{port}"
            if protocol == "SASL_SSL":
                setup.bootstrap(node.data_dir)

    def start(self) -> "Three":
        self.c.start()
        for i in self.c.broker_ports:
            until(lambda i=i: self.c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, f"node {i} unfenced")
        return self

    @property
    def bootstrap(self) -> str:
        return self.live_bootstrap()

    def live_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for i, p in self.c.broker_ports.items() if self.c.nodes[i].alive())

    def nodes(self) -> dict[int, BrokerProcess]:
        return self.c.nodes

    def close(self) -> None:
        self.c.close()


def create_topic(topo: Single | Three, name: str) -> None:
    """Create a one-partition topic, retried until it succeeds, and wait until it is led with a full ISR."""
    config = {"min.insync.replicas": "2"} if topo.rf == 3 else {}

    def created() -> bool:
        admin = AdminClient({"bootstrap.servers": topo.bootstrap, **QUIET})
        for f in admin.create_topics([NewTopic(name, 1, topo.rf, config=config)], request_timeout=10).values():
            try:
                f.result()
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # an earlier attempt went through
                    raise
        return True

    until(created, 60, f"topic {name} created")
    full_isr_leader(topo.bootstrap, name, topo.rf, 60)


def full_isr_leader(bootstrap, topic: str, rf: int, timeout: float, what: str = "") -> int:
    """The partition's leader once a broker reports it with a full ISR (brokers' metadata lags a little)."""
    def led() -> int | None:
        leader, isr = partition_state(bootstrap() if callable(bootstrap) else bootstrap, topic)
        return leader if leader >= 0 and len(isr) == rf else None

    leader = until(led, timeout, what or f"topic {topic} led with a full ISR")
    assert isinstance(leader, int)
    return leader


def partition_state(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    """(leader, sorted ISR) of partition 0, as a broker answers Metadata."""
    md = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(topic, timeout=5)
    t = md.topics[topic]
    if t.error is not None:
        raise KafkaException(t.error)
    p = t.partitions[0]
    return p.leader, sorted(p.isrs)


# ---- clients --------------------------------------------------------------------------------------------------

def produce(topo: Single | Three, topic: str, n: int, size: int, timeout: float) -> float:
    """``n`` records of ``size`` bytes as fast as the client goes; seconds from the first call to flush() == 0."""
    p = Producer({"bootstrap.servers": topo.bootstrap, "acks": topo.acks, "enable.idempotence": topo.idempotent,
                  "linger.ms": 5, "compression.type": "none", "message.timeout.ms": int(timeout * 1000),
                  "log_level": 4})
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    value = os.urandom(size)
    deadline = time.monotonic() + timeout
    # one record first, outside the timing: the producer's start (an idempotent one waits ~0.5 s for its producer
    # id) and a new partition's first follower fetch (answered UNKNOWN_TOPIC_ID when it reaches the leader before
    # the leader has the partition, then retried after replica.fetch.backoff.ms, as Kafka) are not throughput
    p.produce(topic, value, on_delivery=on_delivery)
    if p.flush(timeout):
        raise TimeoutError(f"produce to {topic}: the first record unacknowledged after {timeout}s")
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        msgs = [{"value": value} for _ in range(min(1000, n - sent))]
        queued = p.produce_batch(topic, msgs, on_delivery=on_delivery)
        sent += queued
        if queued < len(msgs):  # the local queue is full: serve delivery reports
            p.poll(0.005)
            if time.monotonic() > deadline:
                raise TimeoutError(f"produce to {topic}: local queue still full after {timeout}s")
        p.poll(0)
    left = p.flush(max(1.0, deadline - time.monotonic()))
    seconds = time.perf_counter() - t0
    if left:
        raise TimeoutError(f"produce to {topic}: {left} records unacknowledged after {timeout}s")
    if errors:
        raise RuntimeError(f"produce to {topic}: delivery errors {errors}")
    return seconds


def consume(bootstrap: str, topic: str, n: int, size: int, timeout: float) -> float:
    """Read ``n`` records from offset 0 with a manual assign; seconds."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "fetch.queue.backoff.ms": 10, "log_level": 4})
    try:
        got = 0
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while got < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consume {topic}: {got}/{n} records after {timeout}s")
            msgs = c.consume(min(10000, n - got), 0.5)
            for m in msgs:
                if m.error() is not None:
                    raise RuntimeError(f"consume {topic}: {m.error()}")
            if msgs and len(msgs[-1].value()) != size:
                raise RuntimeError(f"consume {topic}: a record of {len(msgs[-1].value())} bytes, not {size}")
            got += len(msgs)
        return time.perf_counter() - t0
    finally:
        c.close()


# ---- sections -------------------------------------------------------------------------------------------------

def bench_throughput(single: Single | Three, three: Three, sizes: dict[int, int], repeat: int, timeout: float,
                     label: str = "RF3/RF1") -> dict:
    """``three`` against ``single`` (the baseline), interleaved; ``label`` names the ratio ``three``/``single``."""
    out: dict = {}
    for size, n in sizes.items():
        runs: dict[str, list[tuple[float, float]]] = {single.name: [], three.name: []}
        for rep in range(repeat):
            order = [single, three] if rep % 2 == 0 else [three, single]
            for topo in order:
                topic = fresh_topic(f"tp-{size}b-rf{topo.rf}")
                create_topic(topo, topic)
                ps = produce(topo, topic, n, size, timeout)
                cs = consume(topo.bootstrap, topic, n, size, timeout)
                runs[topo.name].append((n / ps, n / cs))
                print(f"  {size} B x {n} {topo.name} run {rep + 1}/{repeat}: produce {n / ps:,.0f} msg/s, "
                      f"consume {n / cs:,.0f} msg/s", flush=True)
        row: dict = {}
        for name, rs in runs.items():
            prod, cons = statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)
            row[name] = {"produce msg/s": round(prod), "produce MB/s": round(prod * size / 1e6, 2),
                         "consume msg/s": round(cons), "consume MB/s": round(cons * size / 1e6, 2)}
        for i, what in ((0, "produce"), (1, "consume")):
            ratios = [b[i] / a[i] for a, b in zip(runs[single.name], runs[three.name])]
            row[f"{what} ratio {label}"] = round(statistics.median(ratios), 3)
            row[f"{what} ratio range"] = [round(min(ratios), 3), round(max(ratios), 3)]
            row[f"{what} pair ratios"] = [round(x, 3) for x in ratios]
        row["compared"] = [single.name, three.name, label]
        out[f"{size} B x {n}"] = row
    return out


def log_bytes(node: BrokerProcess, topic: str) -> int:
    d = node.data_dir / f"{topic}-0"
    try:
        return sum(f.stat().st_size for f in d.iterdir() if f.name.endswith(".log"))
    except FileNotFoundError:
        return -1


def idle_rates(pids: dict[int, int], seconds: float) -> dict[int, float]:
    """Each process's CPU-seconds per second while nothing is produced (KRaft ticks and heartbeats, the
    followers' long polls, the log manager's timers): what a case's figure holds that is not its records."""
    before = {i: cpu_seconds(pid) for i, pid in pids.items()}
    t0 = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - t0
    return {i: (cpu_seconds(pid) - before[i]) / elapsed for i, pid in pids.items()}


def bench_cpu(single: Single, three: Three, sizes: dict[int, int], repeat: int, timeout: float,
              idle_seconds: float = 5.0) -> dict:
    out: dict = {}
    for size, n in sizes.items():
        gb = 0.0
        leader_s, follower_s, single_s = 0.0, [], 0.0
        leader_net, follower_net, single_net = 0.0, [], 0.0
        idle: list[float] = []
        leaders, controllers = [], []
        for rep in range(repeat):
            topic = fresh_topic(f"cpu-{size}b-rf3")
            create_topic(three, topic)
            leader = full_isr_leader(three.bootstrap, topic, 3, 60)
            nodes = three.nodes()
            rates = idle_rates({i: nd.proc.pid for i, nd in nodes.items()}, idle_seconds)
            idle.extend(rates.values())
            before = {i: cpu_seconds(nd.proc.pid) for i, nd in nodes.items()}
            t0 = time.perf_counter()
            produce(three, topic, n, size, timeout)

            def caught_up() -> bool:  # every replica's log holds the leader's bytes
                sizes_now = {i: log_bytes(nd, topic) for i, nd in nodes.items()}
                return sizes_now[leader] > 0 and len(set(sizes_now.values())) == 1

            until(caught_up, 120, f"{topic}: every replica caught up")
            after = {i: cpu_seconds(nd.proc.pid) for i, nd in nodes.items()}
            elapsed = time.perf_counter() - t0
            gb += n * size / 1e9
            used = {i: after[i] - before[i] for i in nodes}
            net = {i: used[i] - rates[i] * elapsed for i in nodes}
            followers = [i for i in nodes if i != leader]
            leader_s += used[leader]
            leader_net += net[leader]
            follower_s.append(sum(used[i] for i in followers) / len(followers))
            follower_net.append(sum(net[i] for i in followers) / len(followers))
            leaders.append(leader)
            controllers.append(three.c.quorum_leader()[1])
            # the baseline: the single broker's CPU for the same records on RF 1 acks=1
            topic1 = fresh_topic(f"cpu-{size}b-rf1")
            create_topic(single, topic1)
            pid = single.node.proc.pid
            rate1 = idle_rates({1: pid}, idle_seconds)[1]
            idle.append(rate1)
            b1 = cpu_seconds(pid)
            t1 = time.perf_counter()
            produce(single, topic1, n, size, timeout)
            used1 = cpu_seconds(pid) - b1
            single_s += used1
            single_net += used1 - rate1 * (time.perf_counter() - t1)
        leader_gb, follower_gb = leader_s / gb, sum(follower_s) / gb
        leader_net_gb, follower_net_gb = leader_net / gb, sum(follower_net) / gb
        out[f"{size} B x {n}"] = {
            "leader CPU-s/GB": round(leader_gb, 1), "mean follower CPU-s/GB": round(follower_gb, 1),
            "follower/leader": round(follower_gb / leader_gb, 3) if leader_gb else None,
            "target follower/leader": "<= 0.5 (reported, not asserted)",
            "RF 1 broker CPU-s/GB": round(single_s / gb, 1),
            "RF3 leader / RF1 broker": round(leader_s / single_s, 3) if single_s else None,
            "idle CPU-s/s per node (min, max)": [round(min(idle), 4), round(max(idle), 4)],
            "net of idle: leader CPU-s/GB": round(leader_net_gb, 1),
            "net of idle: mean follower CPU-s/GB": round(follower_net_gb, 1),
            "net of idle: follower/leader": round(follower_net_gb / leader_net_gb, 3) if leader_net_gb > 0 else None,
            "net of idle: RF 1 broker CPU-s/GB": round(single_net / gb, 1),
            "leader node per run": leaders, "active controller per run": controllers}
    return out


def paced_latency(topo: Single | Three, rate: float, seconds: float, size: int = 100) -> dict:
    """End-to-end latency: ``rate`` records/s for ``seconds``, each carrying its send time."""
    topic = fresh_topic(f"lat-rf{topo.rf}")
    create_topic(topo, topic)
    pad = b"x" * max(0, size - 8)
    received: list[tuple[int, int]] = []  # (send ns, receive ns)
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        c = Consumer({"bootstrap.servers": topo.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "log_level": 4})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            while not stop.is_set():
                m = c.poll(0.1)  # returns with the first record there (consume(n, t) waits for n or t)
                now = time.time_ns()
                if m is None:
                    continue
                if m.error() is not None:
                    errors.append(str(m.error()))
                else:
                    received.append((struct.unpack_from(">q", m.value())[0], now))
        finally:
            c.close()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    p = Producer({"bootstrap.servers": topo.bootstrap, "acks": topo.acks, "enable.idempotence": topo.idempotent,
                  "linger.ms": 0, "log_level": 4})
    try:
        # warm up: connections and metadata on both clients, then the paced run
        p.produce(topic, struct.pack(">q", time.time_ns()) + pad)
        assert p.flush(30) == 0, "warm-up record not acknowledged"
        until(lambda: received, 30, "the warm-up record consumed")
        received.clear()
        n = int(rate * seconds)
        t0 = time.perf_counter()
        for i in range(n):
            while (wait := t0 + i / rate - time.perf_counter()) > 0:
                p.poll(wait)
            while True:
                try:
                    p.produce(topic, struct.pack(">q", time.time_ns()) + pad)
                    break
                except BufferError:
                    p.poll(0.001)
            p.poll(0)
        assert p.flush(60) == 0, "records not acknowledged"
        until(lambda: len(received) >= n, 60, f"{n} records consumed")
    finally:
        stop.set()
        t.join(10)
    if errors:
        raise RuntimeError(f"latency consumer: {errors[:3]}")
    ms = [(r - s) / 1e6 for s, r in received]
    return {**summary(ms), "records": n, "rate msg/s": rate}


def bench_latency(single: Single, three: Three, rate: float, seconds: float) -> dict:
    out = {RF3: paced_latency(three, rate, seconds), RF1: paced_latency(single, rate, seconds)}
    out["p50 ratio RF3/RF1"] = round(out[RF3]["p50_ms"] / out[RF1]["p50_ms"], 2)
    out["p99 ratio RF3/RF1"] = round(out[RF3]["p99_ms"] / out[RF1]["p99_ms"], 2)
    return out


class Probe:
    """One persistent idempotent acks=all producer sending one record at a time, each once the previous one is
    reported; ``arm(t)`` asks for the time of the first successful delivery of a record produced after ``t``."""

    def __init__(self, three: Three, topic: str) -> None:
        self.three, self.topic = three, topic
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.cutoff: float | None = None
        self.first_ok: float | None = None
        self.sent = self.acked = self.failed = 0
        self.last_error = ""
        self.thread = threading.Thread(target=self.run, daemon=True)

    def producer(self) -> Producer:
        return Producer({"bootstrap.servers": self.three.c.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": 600000, **QUIET})

    def arm(self, cutoff: float) -> None:
        with self.lock:
            self.cutoff, self.first_ok = cutoff, None

    def run(self) -> None:
        p = self.producer()
        i = 0
        while not self.stop.is_set():
            box: list = []
            sent_at = time.perf_counter()
            p.produce(self.topic, b"probe-%08d" % i, partition=0, on_delivery=lambda err, msg: box.append(err))
            self.sent += 1
            i += 1
            while not box and not self.stop.is_set():
                p.poll(0.01)
            if not box:
                break
            now = time.perf_counter()
            if box[0] is None:
                self.acked += 1
                with self.lock:
                    if self.cutoff is not None and self.first_ok is None and sent_at >= self.cutoff:
                        self.first_ok = now
            else:
                self.failed += 1
                self.last_error = str(box[0])
                if box[0].fatal():  # an idempotent producer that cannot go on: start a new one
                    p.flush(1)
                    p = self.producer()
        p.flush(5)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def bench_failover(root: Path, kills: int, profile: str, overrides: dict) -> dict:
    three = Three(root, overrides)
    times: list[float] = []
    with_controller: list[float] = []
    probe = None
    try:
        three.start()
        topic = fresh_topic("failover")
        create_topic(three, topic)
        probe = Probe(three, topic)
        probe.thread.start()
        until(lambda: probe.acked > 0, 60, "the probe's first acknowledged record")
        for k in range(kills):
            leader = full_isr_leader(three.live_bootstrap, topic, 3, 120, f"kill {k + 1}: a full ISR")
            controller = three.c.quorum_leader()[1]
            t0 = time.perf_counter()
            three.c.nodes[leader].kill()
            probe.arm(time.perf_counter())  # the old leader is reaped: only a new one can acknowledge from here
            until(lambda: probe.first_ok is not None, 180, f"kill {k + 1}: an acks=all write acknowledged")
            ms = (probe.first_ok - t0) * 1000
            times.append(ms)
            if leader == controller:
                with_controller.append(ms)
            new_leader = until(lambda: (lambda ld: ld if ld >= 0 else None)(
                partition_state(three.live_bootstrap(), topic)[0]), 60, "the new leader")
            print(f"  {profile}: kill {k + 1}/{kills} of leader {leader}"
                  f"{' (also the active controller)' if leader == controller else ''}: "
                  f"next acks=all write acknowledged after {ms:.0f} ms (new leader {new_leader})", flush=True)
            three.c.start(leader)
            until(lambda: three.c.nodes[leader].log_lines(rf"node {leader} is unfenced") >= 1, 60,
                  f"restarted node {leader} unfenced")
        full_isr_leader(three.live_bootstrap, topic, 3, 120, "a full ISR at the end")
        return {"kill -9 -> next acks=all write acknowledged": summary(times),
                "kills that also took the active controller": len(with_controller),
                "of those": summary(with_controller) if with_controller else {},
                "probe records sent/acked/failed": [probe.sent, probe.acked, probe.failed],
                "last delivery error": probe.last_error}
    finally:
        if probe is not None:
            probe.close()
        three.close()


# ---- output ---------------------------------------------------------------------------------------------------

def fmt(ratio: float | None) -> str:
    """A ratio, or n/a when its denominator measured 0 CPU ticks (too few records for the clock's resolution)."""
    return "n/a" if ratio is None else f"{ratio:.3f}"


def print_tables(results: dict) -> None:
    if "throughput" in results:
        rows = results["throughput"].values()
        label = next(iter(rows))["compared"][2] if rows else "RF3/RF1"
        width = max([14] + [len(n) for row in rows for n in row["compared"]])
        print(f"\n== throughput (medians; ratio = median of per-pair {label}) ==")
        print(f"{'case':<14} {'topology':<{width}} {'produce msg/s':>14} {'MB/s':>8} {'consume msg/s':>14} {'MB/s':>8}"
              f" {'pair ratios':>12}")
        for case, row in results["throughput"].items():
            for name in row["compared"][:2]:
                r = row[name]
                print(f"{case:<14} {name:<{width}} {r['produce msg/s']:>14,} {r['produce MB/s']:>8.2f} "
                      f"{r['consume msg/s']:>14,} {r['consume MB/s']:>8.2f}")
            print(f"{case:<14} {label:<{width}} {row[f'produce ratio {label}']:>14.3f} {'':>8} "
                  f"{row[f'consume ratio {label}']:>14.3f} {'':>8}  produce {row['produce pair ratios']}")
    if "cpu" in results:
        print("\n== broker CPU-seconds per GB produced (RF 3 acks=all; RF 1 acks=1 for reference) ==")
        print(f"{'case':<14} {'':<12} {'leader':>8} {'follower':>9} {'fol/lead':>9} {'RF1 broker':>11} {'lead/RF1':>9}")
        for case, r in results["cpu"].items():
            print(f"{case:<14} {'as measured':<12} {r['leader CPU-s/GB']:>8.1f} {r['mean follower CPU-s/GB']:>9.1f} "
                  f"{fmt(r['follower/leader']):>9} {r['RF 1 broker CPU-s/GB']:>11.1f} "
                  f"{fmt(r['RF3 leader / RF1 broker']):>9}"
                  f"   (leader {r['leader node per run']}, controller {r['active controller per run']})")
            print(f"{'':<14} {'net of idle':<12} {r['net of idle: leader CPU-s/GB']:>8.1f} "
                  f"{r['net of idle: mean follower CPU-s/GB']:>9.1f} {fmt(r['net of idle: follower/leader']):>9} "
                  f"{r['net of idle: RF 1 broker CPU-s/GB']:>11.1f}"
                  f"   (idle {r['idle CPU-s/s per node (min, max)'][0]:.3f}-"
                  f"{r['idle CPU-s/s per node (min, max)'][1]:.3f} CPU-s/s per node)")
        print("target: follower/leader <= 0.5 (reported, not asserted)")
    if "latency" in results:
        r = results["latency"]
        print("\n== end-to-end latency at a fixed rate (ms) ==")
        print(f"{'topology':<14} {'records':>8} {'p50':>8} {'p99':>8} {'max':>8}")
        for name in (RF3, RF1):
            print(f"{name:<14} {r[name]['records']:>8} {r[name]['p50_ms']:>8.2f} {r[name]['p99_ms']:>8.2f} "
                  f"{r[name]['max_ms']:>8.2f}")
        print(f"{'RF3/RF1':<14} {'':>8} {r['p50 ratio RF3/RF1']:>8.2f} {r['p99 ratio RF3/RF1']:>8.2f}")
    fo = {k: v for k, v in results.items() if k.startswith("failover")}
    if fo:
        print("\n== failover: kill -9 of the partition leader -> next acks=all write acknowledged (ms) ==")
        print(f"{'profile':<36} {'kills':>6} {'p50':>8} {'max':>8}   {'also the controller: kills, p50':>32}")
        for name, r in fo.items():
            s = r["kill -9 -> next acks=all write acknowledged"]
            both = f"{r['of those']['p50_ms']:.0f}" if r["of those"] else "-"
            print(f"{name:<36} {s['n']:>6} {s['p50_ms']:>8.0f} {s['max_ms']:>8.0f}   "
                  f"{r['kills that also took the active controller']:>26}, {both:>5}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="throughput,cpu,latency,failover", help="comma-separated sections")
    ap.add_argument("--records", type=int, default=200_000, help="100-byte records per throughput/cpu case")
    ap.add_argument("--records-1k", type=int, default=50_000, help="1 KiB records per throughput/cpu case")
    ap.add_argument("--repeat", type=int, default=3, help="runs per throughput and cpu case")
    ap.add_argument("--rate", type=float, default=1000.0, help="records/s in 'latency'")
    ap.add_argument("--seconds", type=float, default=20.0, help="duration of each 'latency' run")
    ap.add_argument("--kills", type=int, default=20, help="leader kills per timeout profile")
    ap.add_argument("--idle-seconds", type=float, default=5.0,
                    help="'cpu': seconds of idle CPU sampled per node before each case ('net of idle')")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound on each produce/consume run (s)")
    ap.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    ap.add_argument("--inter-broker", choices=("SSL", "SASL_SSL"),
                    help="'throughput' only: RF 3 with the inter-broker listener on this protocol against RF 3 on "
                         "PLAINTEXT (two clusters, interleaved; clients on PLAINTEXT), instead of RF 3 against RF 1")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.quick:
        args.records, args.records_1k, args.repeat, args.seconds, args.kills = 20_000, 5_000, 1, 5.0, 3
    sections = set(args.only.split(","))
    unknown = sections - {"throughput", "cpu", "latency", "failover"}
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}")
    if args.inter_broker and sections != {"throughput"}:
        ap.error("--inter-broker goes with --only throughput")
    sizes = {100: args.records, 1024: args.records_1k}
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; host {socket.gethostname()}")
    started = time.perf_counter()
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="odradek-bench-replication-") as tmp:
        root = Path(tmp)
        if args.inter_broker:
            plain, secured = Three(root / "three"), Three(root / "three-secured", inter_broker=args.inter_broker)
            try:
                plain.start()
                secured.start()
                print(f"throughput: {sizes} records per case, {args.repeat} run(s) per cluster, RF 3 inter-broker "
                      f"PLAINTEXT against {args.inter_broker} ...", flush=True)
                results["throughput"] = bench_throughput(plain, secured, sizes, args.repeat, args.timeout,
                                                         f"{args.inter_broker}/PLAINTEXT")
            finally:
                secured.close()
                plain.close()
        elif sections & {"throughput", "cpu", "latency"}:
            single, three = Single(root), Three(root / "three")
            try:
                single.start()
                three.start()
                if "throughput" in sections:
                    print(f"throughput: {sizes} records per case, {args.repeat} run(s) per topology ...", flush=True)
                    results["throughput"] = bench_throughput(single, three, sizes, args.repeat, args.timeout)
                if "cpu" in sections:
                    print(f"cpu: {sizes} records per case, {args.repeat} run(s) ...", flush=True)
                    results["cpu"] = bench_cpu(single, three, sizes, args.repeat, args.timeout, args.idle_seconds)
                if "latency" in sections:
                    print(f"latency: {args.rate:.0f} msg/s for {args.seconds:.0f} s per topology ...", flush=True)
                    results["latency"] = bench_latency(single, three, args.rate, args.seconds)
            finally:
                three.close()
                single.close()
        if "failover" in sections:
            for profile, overrides in (("Kafka's default timeouts", KAFKA_DEFAULTS),
                                       ("test timeouts", TEST_TIMEOUTS)):
                print(f"failover: {args.kills} leader kills with {profile} ...", flush=True)
                results[f"failover, {profile}"] = bench_failover(root / f"failover-{len(results)}", args.kills,
                                                                 profile, overrides)
    print_tables(results)
    print(f"\nwall time {time.perf_counter() - started:.0f} s; load average now {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
