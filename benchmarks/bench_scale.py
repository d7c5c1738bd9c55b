"""The cluster at scale (issue 31): per-partition cost and recovery times at 1,000, 3,000 and 10,000 partitions.

Run:  .venv/bin/python benchmarks/bench_scale.py --json scale.json          # 100 (reference), 1k, 3k, 10k
      .venv/bin/python benchmarks/bench_scale.py --scales 1000,3000        # a part of the curve, ~5 min
      .venv/bin/python benchmarks/bench_scale.py --quick                   # smoke run, ~1-2 min (300 partitions)

Per scale N (and first at ``--reference`` partitions, 100 by default: the small end of the curve and the reference
for the controller failover), a fresh cluster of 3 combined broker+controller nodes, real ``odradek serve``
processes on 127.0.0.1 (the tests' ``ClusterProcesses``), with broker session 4 s, heartbeat 1 s,
``replica.lag.time.max.ms`` 5 s and the short quorum timeouts (``FAST_FAILOVER``), as tests/integration/
test_scale_rejoin.py; N partitions as topics of 100, RF 3, ``min.insync.replicas`` 2 (a topic config). Phases:

* create: CreateTopics (``--create-batch`` topics per request, raw wire; by default 100: one request up to 10,000
  partitions, Kafka's cap per request, whose event-loop lag is issue 31's figure) one after another. Partitions/s
  from the first request to the last answer, to the first moment every partition has a leader and a full ISR in the
  Metadata of every broker, and to the start of a full state that then lasts ``STABLE_S`` (8.5 s: a leader drops a
  follower that has not fetched for ``replica.lag.time.max.ms``, so an ISR full at creation can shrink seconds later
  and come back; the brokers' logs' "ISR now" lines count the changes);
* idle: ``--settle`` s, then utime+stime of each node (/proc/<pid>/stat) over ``--idle-seconds`` without any client
  traffic or scrape (% of one core); then VmRSS and open file descriptors (/proc/<pid>/fd, by kind: segment files,
  index files, sockets, others; and the limit) per node and per hosted partition (RF 3 on 3 nodes: every node hosts
  all N);
* metadata: ``--metadata-requests`` full Metadata requests (v12, every topic) per node, timed from the send to the
  last byte of the answer (the client's decoding is not counted); the median per node;
* broker restart: kill -9 of a broker that is not the active controller; it is fenced and out of every ISR; then
  it starts again. Times from the process start to its "loaded N partitions" line, to "node N is unfenced" (log
  timestamps) and to every ISR full again (polled every 0.25 s). The AlterPartition requests the other brokers sent
  for the rejoin, and the ISR changes they carried (``odradek_server_alterpartition_requests``/``_changes``), the
  Raft batches the controller appended meanwhile (``odradek_controller_metadata_batches``), the controller's
  largest heartbeat gap (``odradek_controller_broker_contact_gap_max_ms``, since it became active) and every broker
  fenced during the phase ("Fencing broker N because its session has timed out" in any node's log);
* controller failover (``--controller-kills``): kill -9 of the active controller, then one-partition RF 1
  CreateTopics to the survivors until one is answered without error; also to a survivor's quorum-state naming a new
  leader, and the fencings of the phase (after the killed node's own).

Event-loop lag: the nodes export ``kafka_network_socketserver_event_loop_lag_ms``, the lag of the last 250 ms sleep
of a watcher task: a gauge, not a maximum. A thread samples it every ``--lag-interval`` s during each phase (not
during the idle CPU window) and once as a phase ends, and keeps the largest value per node and phase. A stall
shows in the gauge for about one interval after it ends, so the figure is a lower bound of the phase's largest lag.
The nodes also count every measurement in the histogram ``odradek_event_loop_lag_ms``: read as each phase starts and
ends, its highest bucket that gained a measurement bounds the phase's worst lag from above (a node killed in the
phase: its new process's measurements only).

Then a single node (``odradek serve`` as config/single-node.yaml: combined, one voter, Kafka's default heartbeat
and session) with ``--single-node`` partitions (default: the largest scale), RF 1, one record each: a clean restart
(SIGTERM, start again) and a kill -9 restart, each timed from the process start to its "loaded N partitions" line,
to unfenced, to its listener accepting clients, and to a ListOffsets of every partition answered without error
(polled every 0.1 s from the start). And benchmarks/bench_apply.py in a subprocess (``--apply-sizes``): publishing
a one-partition metadata change on a broker hosting 1,000 vs 10,000 partitions.

Prints a table per scale, the cost curve (per node; per partition as total / N and as "marg": the increase over the
reference / the increase in partitions), the single node and the apply figures, and writes everything with
``--json``. Every wait is bounded; every node is killed on exit (on an error, Ctrl-C or SIGTERM too). An error in
one scale is recorded with the nodes' log tails and the run goes on. ``--keep`` keeps the data and the logs. The
machine is small and shared: read the load average printed with the figures.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from broker.testing.embedded_cluster import FAST_FAILOVER, quorum_leader_of  # noqa: E402
from protocol.generated.messages import (  # noqa: E402
    CreateTopicsRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest,
)
from protocol.generated.messages.create_topics_request import CreatableTopic, CreatableTopicConfig  # noqa: E402
from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic  # noqa: E402
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from protocol.record_codec import Record, build_batch  # noqa: E402
from tests.harness import BrokerProcess, ClusterProcesses, reserve_ports, scrape, wait_until  # noqa: E402
from tests.kafka_wire import KafkaWire  # noqa: E402

PRODUCE, LIST_OFFSETS, METADATA, CREATE_TOPICS = 0, 2, 3, 19
TOPIC_ALREADY_EXISTS = 36
PER_TOPIC, RF, MIN_ISR = 100, 3, 2
SESSION_MS, LAG_MAX_MS = 4000, 5000
OVERRIDES = {**FAST_FAILOVER, "broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 1000,
             "replica.lag.time.max.ms": LAG_MAX_MS, "offsets.topic.replication.factor": 3}
# a leader checks its followers every replica.lag.time.max.ms / 2 and drops one not caught up for lag.max: an ISR
# that stays full this long after creating the partitions has no follower left to drop
STABLE_S = LAG_MAX_MS * 1.5 / 1000 + 1
LAG_METRIC = "kafka_network_socketserver_event_loop_lag_ms"
LAG_HISTOGRAM = "odradek_event_loop_lag_ms"
FENCING = re.compile(r"Fencing broker (\d+) because its session has timed out")
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
SHORT = {"broker restart": "restart", "controller failover": "ctl kill"}  # table headers
LOADED = re.compile(r"loaded (\d+) partitions in ([\d.]+) s")
STARTED = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.0f} s] {msg}", flush=True)


def bound(n: int, base: float = 60.0, per_1k: float = 30.0) -> float:
    """A wait's limit for ``n`` partitions: generous, but never unbounded."""
    return base + per_1k * n / 1000


# ---- processes --------------------------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fds(pid: int) -> dict:
    """Open file descriptors by kind: segment files, index files (CPython's mmap holds a duplicate of each mapped
    index's descriptor), sockets, the rest; and the process's limit."""
    kinds: collections.Counter = collections.Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.endswith(".log"):
            kinds["log"] += 1
        elif target.endswith((".index", ".timeindex")):
            kinds["index"] += 1
        elif target.startswith("socket:"):
            kinds["socket"] += 1
        else:
            kinds["other"] += 1
    limit = -1
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            limit = int(line.split()[3])
    return {"total": sum(kinds.values()), **dict(kinds), "limit": limit}


def log_time(line: str) -> float | None:
    """The wall-clock time of a node's log line (its asctime, local time)."""
    m = LOG_TIME.match(line)
    if m is None:
        return None
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def first_line(path: Path, pattern: str) -> str | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if re.search(pattern, line):
            return line
    return None


def since(line: str | None, wall0: float) -> float | None:
    t = log_time(line) if line else None
    return None if t is None else round(t - wall0, 3)


# ---- event-loop lag sampler -------------------------------------------------------------------------------------

def lag_buckets(port: int) -> dict[float, float] | None:
    """The node's ``LAG_HISTOGRAM`` as cumulative counts by upper bound (None: not reachable)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics?name[]={LAG_HISTOGRAM}_bucket",
                                      timeout=2).read().decode()
    except OSError:
        return None
    out = {}
    for m in re.finditer(rf'^{LAG_HISTOGRAM}_bucket{{le="([^"]+)"}} (\S+)$', text, re.M):
        out[float(m.group(1))] = float(m.group(2))
    return out


def worst_bucket(start: dict[float, float] | None, end: dict[float, float] | None) -> float | None:
    """The upper bound of the highest histogram bucket that gained a measurement between two scrapes (a process
    restarted in between: its own counts alone)."""
    if not end:
        return None
    if not start or sum(end.values()) < sum(start.values()):
        start = {}
    worst = None
    below = 0.0
    for bound in sorted(end):
        gained = end[bound] - start.get(bound, 0.0)
        if gained > below:
            worst = bound
        below = gained
    return worst


class LagSampler(threading.Thread):
    """Scrapes ``LAG_METRIC`` of every target (name -> metrics port) every ``interval`` s while a phase is set;
    keeps the largest value per phase and target, and the scrapes' own wall time. Each phase also reads every
    target's ``LAG_HISTOGRAM`` as it starts and ends: the bucket bound of the phase's worst measurement."""

    def __init__(self, interval: float) -> None:
        super().__init__(name="lag-sampler", daemon=True)
        self.interval = interval
        self.targets: dict[str, int] = {}
        self.maxima: dict[str, dict[str, float]] = {}
        self.samples: collections.Counter = collections.Counter()
        self.bounds: dict[str, dict[str, float | None]] = {}
        self.scrape_s: list[float] = []
        self._phase: str | None = None
        self._generation = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def phase(self, name: str):
        with self._lock:
            self._phase = name
            self.maxima.setdefault(name, {})
            targets = dict(self.targets)
        start = {t: lag_buckets(port) for t, port in targets.items()}
        try:
            yield
        finally:
            with self._lock:
                self._phase = None
                targets = dict(self.targets)
            self.sample(name)
            bounds = {t: worst_bucket(start.get(t), lag_buckets(port)) for t, port in targets.items()}
            with self._lock:
                self.bounds[name] = bounds

    def stop(self) -> None:
        self._stop.set()

    def take(self) -> tuple[dict, dict, dict]:
        """The maxima, sample counts and histogram bounds so far, then none (a late sample of the previous targets
        is dropped)."""
        with self._lock:
            out = ({phase: {k: round(v, 1) for k, v in per.items()} for phase, per in self.maxima.items()},
                   dict(self.samples), self.bounds)
            self.maxima, self.samples, self.targets, self.bounds = {}, collections.Counter(), {}, {}
            self._generation += 1
        return out

    def run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                phase = self._phase
            if phase is not None:
                self.sample(phase)

    def sample(self, phase: str) -> None:
        """One scrape of every target (also done as a phase ends, so a short phase has one sample)."""
        with self._lock:
            targets, generation = dict(self.targets), self._generation
        for name, port in targets.items():
            t0 = time.perf_counter()
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics?name[]={LAG_METRIC}",
                                              timeout=2).read().decode()
            except OSError:  # a killed or starting node
                continue
            self.scrape_s.append(time.perf_counter() - t0)
            for line in text.splitlines():
                if line.startswith(LAG_METRIC + " "):
                    value = float(line.rpartition(" ")[2])
                    with self._lock:
                        if generation != self._generation:
                            return
                        per = self.maxima.setdefault(phase, {})
                        per[name] = max(per.get(name, 0.0), value)
                        self.samples[phase] += 1


# ---- requests ---------------------------------------------------------------------------------------------------

def topic_names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{t:03d}" for t in range((n + PER_TOPIC - 1) // PER_TOPIC)]


def create_topics(port: int, names: list[str], rf: int, batch: int, timeout_s: float,
                  configs: dict | None = None, exists_ok: bool = False) -> int:
    """CreateTopics of ``names`` (PER_TOPIC partitions each), ``batch`` per request, one after another; returns
    the number of requests. Raises on any error (but TOPIC_ALREADY_EXISTS with ``exists_ok``: a retry)."""
    cfg = [CreatableTopicConfig(name=k, value=str(v)) for k, v in (configs or {}).items()]
    requests = 0
    with KafkaWire(port, timeout=timeout_s) as w:
        for i in range(0, len(names), batch):
            topics = [CreatableTopic(name=t, num_partitions=PER_TOPIC, replication_factor=rf, configs=cfg)
                      for t in names[i:i + batch]]
            r = w.call(CREATE_TOPICS, 7, CreateTopicsRequest(topics=topics, timeout_ms=int(timeout_s * 1000)))
            requests += 1
            bad = [(t.name, t.error_code, t.error_message) for t in r.topics
                   if t.error_code and not (exists_ok and t.error_code == TOPIC_ALREADY_EXISTS)]
            if bad:
                raise RuntimeError(f"CreateTopics failed: {bad[:3]}")
    return requests


def metadata(port: int, timeout: float = 30.0):
    with KafkaWire(port, timeout=timeout) as w:
        return w.call(METADATA, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))


def isr_gaps(port: int, names: set[str], n: int, rf: int = RF) -> int:
    """Partitions of ``names`` that this broker does not list with a leader and a full ISR."""
    md = metadata(port)
    full = 0
    for t in md.topics:
        if t.name in names and t.error_code == 0:
            full += sum(1 for p in t.partitions
                        if p.error_code == 0 and p.leader_id >= 0 and len(p.isr_nodes) == len(p.replica_nodes) == rf)
    return n - full


def gaps_everywhere(ports: list[int], names: set[str], n: int) -> int:
    """The largest ISR gap any of ``ports`` reports (the first port first: usually the only one asked)."""
    worst = 0
    for port in ports:
        worst = max(worst, isr_gaps(port, names, n))
        if worst:
            return worst
    return worst


def metadata_latency(port: int, k: int) -> dict:
    """``k`` full Metadata requests over one connection, send to last byte (decoding not counted)."""
    times = []
    with KafkaWire(port, timeout=60) as w:
        w.call(METADATA, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))  # warm-up
        for _ in range(k):
            t0 = time.perf_counter()
            corr = w.send(METADATA, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
            frame = w.recv_frame()
            times.append((time.perf_counter() - t0) * 1000)
            w._pending.pop(corr, None)
            assert frame is not None, "the broker closed the connection"
    return {"p50_ms": round(statistics.median(times), 2), "max_ms": round(max(times), 2),
            "response_bytes": len(frame)}


class LogWatch:
    """Lines of every node's logs (every start) that match ``PATTERNS``, counted per node (per fenced broker for
    "fenced"), reading only what was appended since the last ``poll``."""

    PATTERNS = {"fenced": FENCING,  # keyed by the fenced broker, as test_scale_rejoin.py reads them
                "isr_changes": re.compile(r": ISR now \["),  # a leader's ISR change, committed
                "shrink_decisions": re.compile(r"shrinking the ISR from")}  # a leader found followers out of sync

    def __init__(self, c: ClusterProcesses) -> None:
        self.c = c
        self._pos: dict[Path, int] = {}
        self.counts = {name: collections.Counter() for name in self.PATTERNS}

    def poll(self) -> dict[str, collections.Counter]:
        for i, node in self.c.nodes.items():
            for path in sorted(node.data_dir.parent.glob(f"broker-{node.data_dir.name}-*.stderr")):
                with open(path, "rb") as f:
                    f.seek(self._pos.get(path, 0))
                    data = f.read()
                end = data.rfind(b"\n") + 1  # whole lines only
                self._pos[path] = self._pos.get(path, 0) + end
                text = data[:end].decode(errors="replace")
                for name, pattern in self.PATTERNS.items():
                    for m in pattern.finditer(text):
                        self.counts[name][int(m.group(1)) if pattern.groups else i] += 1
        return {name: collections.Counter(v) for name, v in self.counts.items()}


def since_counts(now: dict, before: dict, name: str) -> dict[int, int]:
    return dict(now[name] - before[name])


def new_fencings(now: dict, before: dict) -> list[int]:
    return sorted((now["fenced"] - before["fenced"]).elements())


def counter(values: dict[str, float], name: str) -> float:
    return values.get(name + "_total", values.get(name, float("nan")))


WATCHED = {"alterpartition_requests": "odradek_server_alterpartition_requests",
           "alterpartition_changes": "odradek_server_alterpartition_changes",
           "failed_isr_updates": "kafka_server_replicamanager_failedisrupdates",
           "metadata_batches": "odradek_controller_metadata_batches",
           "contact_gap_max_ms": "odradek_controller_broker_contact_gap_max_ms"}


def snapshot(c: ClusterProcesses, mports: dict[int, int]) -> dict[int, dict]:
    """The watched counters of every running node (one full scrape each: not free at 10,000 partitions)."""
    out = {}
    for i, port in mports.items():
        if c.nodes[i].alive():
            try:
                values = scrape(port)
            except OSError:
                continue
            out[i] = {k: counter(values, name) for k, name in WATCHED.items()}
    return out


def delta(after: dict[int, dict], before: dict[int, dict], key: str) -> dict[int, int]:
    return {i: int(after[i][key] - before[i][key]) for i in after if i in before}


def settle_full(watch: LogWatch, ports: list[int], nameset: set[str], n: int, t0: float, limit: float) -> float:
    """Seconds from ``t0`` to the start of a full-ISR state that then lasts a whole ``STABLE_S`` (no gap in the
    brokers' Metadata, asked in turn, and no ISR change in the logs): creating many logs takes long enough for the
    leaders to drop followers that have not fetched yet, and take them back a moment later."""
    full_since, k = None, 0
    changes = sum(watch.poll()["isr_changes"].values())
    while time.monotonic() - t0 < limit:
        try:
            gaps = isr_gaps(ports[k % len(ports)], nameset, n)
        except (OSError, AssertionError):
            gaps = None
        k += 1
        now_changes = sum(watch.poll()["isr_changes"].values())
        if gaps != 0 or now_changes != changes:
            full_since, changes = None, now_changes
        elif full_since is None:
            full_since = time.monotonic()
        elif time.monotonic() - full_since >= STABLE_S:
            return full_since - t0
        time.sleep(0.5)
    raise AssertionError(f"the ISRs did not stay full for {STABLE_S} s within {limit:.0f} s")


# ---- one cluster at one scale -----------------------------------------------------------------------------------

def run_cluster(root: Path, n: int, args, sampler: LagSampler) -> dict:
    out: dict = {"partitions": n, "topics": len(topic_names("x", n)), "rf": RF, "min_insync": MIN_ISR,
                 "loadavg_start": os.getloadavg()[0]}
    c = ClusterProcesses(root, overrides=OVERRIDES)
    mports = dict(zip(c.nodes, reserve_ports(len(c.nodes))))
    for i, node in c.nodes.items():
        node.overrides["metrics.prometheus.listener"] = f"127.0.0.1:{mports[i]}"
    out["phase"] = "start"
    try:
        c.start(timeout=120)
        for i in c.broker_ports:
            wait_until(lambda i=i: c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, 0.1, f"{i} unfenced")
        sampler.targets = {str(i): p for i, p in mports.items()}
        watch = LogWatch(c)
        logs = {"started": watch.poll()}
        snaps = out["counters"] = {"started": snapshot(c, mports)}
        ports = list(c.broker_ports.values())
        names = topic_names(f"scale{n}", n)
        nameset = set(names)

        # ---- create ----
        out["phase"] = "create"
        say(f"{n}: creating {len(names)} topics x {PER_TOPIC} partitions, RF {RF}")
        with sampler.phase("create"):
            t0 = time.monotonic()
            # a forward that timed out is sent again by the broker (as Kafka's channel does): its retry may find
            # the topics its first attempt created
            requests = create_topics(ports[0], names, RF, args.create_batch, bound(n, 30, 10),
                                     {"min.insync.replicas": MIN_ISR}, exists_ok=True)
            acked = time.monotonic() - t0
            wait_until(lambda: gaps_everywhere(ports, nameset, n) == 0, bound(n), 0.2,
                       "every partition led with a full ISR on every broker", retry=(OSError, AssertionError))
            first_full = time.monotonic() - t0
            full = settle_full(watch, ports, nameset, n, t0, bound(n))
        logs["created"] = watch.poll()
        snaps["created"] = snapshot(c, mports)
        out["create"] = {"requests": requests, "acked_s": round(acked, 3), "first_full_isr_s": round(first_full, 3),
                         "full_isr_s": round(full, 3), "partitions_per_s_acked": round(n / acked, 1),
                         "partitions_per_s_full": round(n / full, 1),
                         "isr_changes": since_counts(logs["created"], logs["started"], "isr_changes"),
                         "shrink_decisions": since_counts(logs["created"], logs["started"], "shrink_decisions"),
                         "contact_gap_max_ms": {i: v["contact_gap_max_ms"] for i, v in snaps["created"].items()}}
        say(f"{n}: created in {acked:.1f} s, every ISR full at {first_full:.1f} s, and stable from {full:.1f} s "
            f"({n / full:.0f} partitions/s); ISR changes meanwhile {sum(out['create']['isr_changes'].values())}")

        # ---- idle: CPU over a quiet window, then memory and descriptors ----
        out["phase"] = "idle"
        time.sleep(args.settle)
        pids = {i: c.nodes[i].proc.pid for i in c.nodes}
        cpu0, w0 = {i: cpu_seconds(p) for i, p in pids.items()}, time.monotonic()
        time.sleep(args.idle_seconds)
        cpu1, w1 = {i: cpu_seconds(p) for i, p in pids.items()}, time.monotonic()
        nodes = {}
        for i, pid in pids.items():
            nodes[i] = {"idle_cpu_pct": round((cpu1[i] - cpu0[i]) / (w1 - w0) * 100, 2),
                        "rss_mb": round(rss_mb(pid), 1), "fds": fds(pid)}
        with sampler.phase("idle"):
            time.sleep(args.lag_idle_seconds)
        logs["idled"] = watch.poll()
        snaps["idled"] = snapshot(c, mports)
        out["idle"] = {"isr_changes": since_counts(logs["idled"], logs["created"], "isr_changes"),
                       "contact_gap_max_ms": {i: v["contact_gap_max_ms"] for i, v in snaps["idled"].items()}}
        out["loadavg_idle"] = os.getloadavg()[0]
        say(f"{n}: idle CPU % " + ", ".join(f"{i}: {v['idle_cpu_pct']:.1f}" for i, v in nodes.items())
            + "; RSS MB " + ", ".join(f"{i}: {v['rss_mb']:.0f}" for i, v in nodes.items())
            + "; fds " + ", ".join(f"{i}: {v['fds']['total']}" for i, v in nodes.items()))

        # ---- full Metadata latency ----
        out["phase"] = "metadata"
        with sampler.phase("metadata"):
            for i, port in c.broker_ports.items():
                nodes[i]["metadata"] = metadata_latency(port, args.metadata_requests)
        out["nodes"] = nodes
        say(f"{n}: full Metadata p50 ms " + ", ".join(f"{i}: {v['metadata']['p50_ms']:.1f}" for i, v in nodes.items()))

        # ---- kill -9 of a broker that is not the controller, and its restart ----
        out["phase"] = "broker restart"
        with sampler.phase("broker restart"):
            out["broker_restart"] = broker_restart(c, watch, mports, n, nameset)
        r = out["broker_restart"]
        say(f"{n}: broker {r['node']} restarted: unfenced {r['unfenced_s']} s, every ISR full {r['full_isr_s']} s, "
            f"AlterPartition requests {r['alterpartition_requests']}, batches {r['metadata_batches']}, "
            f"fenced {r['fenced']}")

        # ---- kill -9 of the active controller to the next answered CreateTopics ----
        out["phase"] = "controller failover"
        kills = []
        with sampler.phase("controller failover"):
            for k in range(args.controller_kills):
                if k:
                    restart_and_rejoin(c, kills[-1]["node"], n, nameset)
                kills.append(controller_failover(c, watch, f"scale{n}-ctl{k}"))
                say(f"{n}: controller {kills[-1]['node']} killed: next answered CreateTopics "
                    f"{kills[-1]['next_create_s']} s, new quorum leader {kills[-1]['new_leader_s']} s, "
                    f"fenced {kills[-1]['fenced']}")
        out["controller_failover"] = kills
        out["phase"] = "done"
    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on with the next scale
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
        out["log_tails"] = {i: node.stderr_tail(3000) for i, node in c.nodes.items()}
        say(f"{n}: FAILED in phase {out['phase']}: {out['error']}")
        for i, tail in out["log_tails"].items():
            print(f"--- node {i} log tail ---\n{tail[-1500:]}", flush=True)
    finally:
        out["loop_lag_max_ms"], out["loop_lag_samples"], out["loop_lag_bucket_ms"] = sampler.take()
        c.close()
    return out


def broker_restart(c: ClusterProcesses, watch: LogWatch, mports: dict[int, int], n: int, nameset: set[str]) -> dict:
    _, controller = c.quorum_leader()
    victim = min(set(c.nodes) - {controller})
    others = [i for i in c.nodes if i != victim]
    survivor_ports = [c.broker_ports[i] for i in others]
    logs_before = watch.poll()
    at_kill = snapshot(c, mports)
    t_kill = time.monotonic()
    c.nodes[victim].kill()
    wait_until(lambda: watch.poll()["fenced"][victim] > logs_before["fenced"][victim], 30, 0.1,
               f"broker {victim} fenced")
    fenced_after_s = time.monotonic() - t_kill
    wait_until(lambda: isr_gaps(survivor_ports[0], nameset, n) == n, bound(n), 0.5,
               f"broker {victim} out of every ISR", retry=(OSError, AssertionError))
    out_of_isr_s = time.monotonic() - t_kill
    out_of_isr = snapshot(c, mports)
    _, controller = c.quorum_leader()

    wall0, t0 = time.time(), time.monotonic()
    c.start(victim, timeout=bound(n))
    start_returned = time.monotonic() - t0
    node = c.nodes[victim]
    wait_until(lambda: node.log_lines(rf"node {victim} is unfenced") >= 1, bound(n), 0.05, f"{victim} unfenced")
    unfenced_polled = time.monotonic() - t0
    full_isr, gaps_left = None, None
    deadline = t0 + bound(n, 60, 30)
    while time.monotonic() < deadline:
        try:
            gaps_left = gaps_everywhere(survivor_ports, nameset, n)
        except (OSError, AssertionError):
            gaps_left = None
        if gaps_left == 0:
            full_isr = time.monotonic() - t0
            break
        time.sleep(0.25)
    rejoined = snapshot(c, mports)
    logs_after = watch.poll()
    _, controller_after = c.quorum_leader()
    loaded = first_line(node.log_path, LOADED.pattern)
    m = LOADED.search(loaded or "")
    same_controller = controller == controller_after and controller in rejoined and controller in out_of_isr

    def others_delta(after, before, key):
        return {i: v for i, v in delta(after, before, key).items() if i in others}

    return {
        "node": victim, "controller": controller, "controller_after": controller_after,
        "fenced_after_kill_s": round(fenced_after_s, 2), "out_of_every_isr_s": round(out_of_isr_s, 2),
        "shrink_alterpartition_requests": others_delta(out_of_isr, at_kill, "alterpartition_requests"),
        "shrink_alterpartition_changes": others_delta(out_of_isr, at_kill, "alterpartition_changes"),
        "start_returned_s": round(start_returned, 2),
        "loaded_s": since(loaded, wall0), "loaded_own_s": float(m.group(2)) if m else None,
        "unfenced_s": since(first_line(node.log_path, rf"node {victim} is unfenced"), wall0)
        or round(unfenced_polled, 2),
        "full_isr_s": None if full_isr is None else round(full_isr, 2),
        "not_full_at_timeout": None if full_isr is not None else gaps_left,
        "alterpartition_requests": others_delta(rejoined, out_of_isr, "alterpartition_requests"),
        "alterpartition_changes": others_delta(rejoined, out_of_isr, "alterpartition_changes"),
        "failed_isr_updates": others_delta(rejoined, out_of_isr, "failed_isr_updates"),
        "metadata_batches": int(rejoined[controller]["metadata_batches"] - out_of_isr[controller]["metadata_batches"])
        if same_controller else None,
        "contact_gap_max_ms": rejoined.get(controller_after, {}).get("contact_gap_max_ms"),
        "isr_changes": since_counts(logs_after, logs_before, "isr_changes"),
        "fenced": new_fencings(logs_after, logs_before),
    }


def restart_and_rejoin(c: ClusterProcesses, node_id: int, n: int, nameset: set[str]) -> None:
    c.start(node_id, timeout=bound(n))
    wait_until(lambda: c.nodes[node_id].log_lines(rf"node {node_id} is unfenced") >= 1, bound(n), 0.1,
               f"{node_id} unfenced")
    wait_until(lambda: isr_gaps(c.broker_ports[node_id], nameset, n) == 0, bound(n), 0.5, "every ISR full",
               retry=(OSError, AssertionError))


def controller_failover(c: ClusterProcesses, watch: LogWatch, prefix: str) -> dict:
    epoch, leader = c.quorum_leader()
    survivors = [i for i in c.nodes if i != leader]
    logs_before = watch.poll()
    seen: list[float] = []
    stop = threading.Event()

    def watch_election(t0: float) -> None:
        while not stop.is_set() and time.monotonic() - t0 < 120:
            e, lid = quorum_leader_of({i: c.nodes[i] for i in survivors})
            if e > epoch and lid >= 0:
                seen.append(time.monotonic() - t0)
                return
            time.sleep(0.005)

    t0 = time.monotonic()
    c.nodes[leader].kill()
    watcher = threading.Thread(target=watch_election, args=(t0,), daemon=True)
    watcher.start()
    done, attempts, errors = None, 0, collections.Counter()
    while done is None and time.monotonic() - t0 < 120:
        attempts += 1
        try:
            with KafkaWire(c.broker_ports[survivors[attempts % 2]], timeout=10) as w:
                r = w.call(CREATE_TOPICS, 7, CreateTopicsRequest(topics=[CreatableTopic(
                    name=f"{prefix}-{attempts}", num_partitions=1, replication_factor=1)], timeout_ms=5000))
            code = r.topics[0].error_code
            if code == 0:
                done = time.monotonic() - t0
            else:
                errors[str(code)] += 1
        except (OSError, AssertionError) as exc:
            errors[type(exc).__name__] += 1
        if done is None:
            time.sleep(0.01)
    stop.set()
    watcher.join(5)
    if done is None:
        raise RuntimeError(f"no CreateTopics answered within 120 s of killing controller {leader} ({dict(errors)})")
    with contextlib.suppress(AssertionError):  # the killed node's fencing, for the fenced list
        wait_until(lambda: watch.poll()["fenced"][leader] > logs_before["fenced"][leader], SESSION_MS / 1000 + 15,
                   0.1)
    logs_after = watch.poll()
    return {"node": leader, "epoch": epoch, "next_create_s": round(done, 3),
            "new_leader_s": round(seen[0], 3) if seen else None, "attempts": attempts, "errors": dict(errors),
            "isr_changes": since_counts(logs_after, logs_before, "isr_changes"),
            "fenced": new_fencings(logs_after, logs_before)}


# ---- one node, RF 1 ---------------------------------------------------------------------------------------------

def list_offsets_request(names: list[str]) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=t, partitions=[
        ListOffsetsPartition(partition_index=p, timestamp=-1) for p in range(PER_TOPIC)]) for t in names])


def served(port: int, request: ListOffsetsRequest, n: int) -> int:
    """Partitions a ListOffsets answers without error."""
    with KafkaWire(port, timeout=30) as w:
        r = w.call(LIST_OFFSETS, 7, request)
    return sum(1 for t in r.topics for p in t.partitions if p.error_code == 0)


def start_until_served(node: BrokerProcess, port: int, request: ListOffsetsRequest, n: int) -> dict:
    """Start the node and poll its (fixed) port with ListOffsets from the first moment; times from the spawn."""
    wall0, t0 = time.time(), time.monotonic()
    node.start(wait=False)
    answered, last = None, 0
    while time.monotonic() - t0 < bound(n) and node.alive():
        try:
            last = served(port, request, n)
        except (OSError, AssertionError):
            last = 0
        if last == n:
            answered = time.monotonic() - t0
            break
        time.sleep(0.1)
    node.wait_started(bound(n))
    log = node.log_path
    loaded = first_line(log, LOADED.pattern)
    m = LOADED.search(loaded or "")
    recovery = first_line(log, r"clean shutdown, recovery skipped|logs recovered from their recovery")
    return {"serving_s": since(first_line(log, r"odradek node \d+ listening on"), wall0),
            "loaded_s": since(loaded, wall0), "loaded_own_s": float(m.group(2)) if m else None,
            "unfenced_s": since(first_line(log, r"node \d+ is unfenced"), wall0),
            "all_served_s": None if answered is None else round(answered, 2),
            "served_at_timeout": None if answered is not None else last,
            "recovery": recovery.split(": ", 2)[-1] if recovery else None}


def run_single(root: Path, n: int, args, sampler: LagSampler) -> dict:
    out: dict = {"partitions": n, "rf": 1, "loadavg_start": os.getloadavg()[0], "phase": "start"}
    (root / "single").mkdir(parents=True, exist_ok=True)
    port, mport = reserve_ports(2)
    node = BrokerProcess(root / "single" / "data", {  # a fixed port: polled from the moment the process starts
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "metrics.prometheus.listener": f"127.0.0.1:{mport}"})
    node.data_dir.mkdir(parents=True, exist_ok=True)
    names = topic_names(f"single{n}", n)
    request = list_offsets_request(names)
    try:
        node.start(timeout=60)
        sampler.targets = {"single": mport}
        out["phase"] = "create"
        say(f"single node: creating {n} partitions, RF 1")
        t0 = time.monotonic()
        wait_until(lambda: create_topics(node.port, names[:1], 1, 1, 30, exists_ok=True) == 1, 30, 0.2,
                   "the first topic created", retry=(OSError, RuntimeError, AssertionError))
        create_topics(node.port, names[1:], 1, args.create_batch, bound(n, 30, 10))
        wait_until(lambda: served(node.port, request, n) == n, bound(n), 0.2, "every partition served",
                   retry=(OSError, AssertionError))
        out["create_s"] = round(time.monotonic() - t0, 2)
        batch = build_batch([Record(value=b"x" * 100)])
        with KafkaWire(node.port, timeout=120) as w:
            r = w.call(PRODUCE, 9, ProduceRequest(acks=1, timeout_ms=60000, topic_data=[TopicProduceData(
                name=t, partition_data=[PartitionProduceData(index=p, records=batch) for p in range(PER_TOPIC)])
                for t in names]))
        bad = sum(1 for t in r.responses for p in t.partition_responses if p.error_code)
        assert bad == 0, f"{bad} partitions refused the record"
        time.sleep(args.settle)
        out["rss_mb"], out["fds"] = round(rss_mb(node.proc.pid), 1), fds(node.proc.pid)
        say(f"single node: {n} partitions, one record each; RSS {out['rss_mb']:.0f} MB, fds {out['fds']['total']}")

        out["phase"] = "clean restart"
        with sampler.phase("single: clean restart"):
            t0 = time.monotonic()
            node.terminate(timeout=bound(n, 30, 10))
            out["shutdown_s"] = round(time.monotonic() - t0, 2)
            out["clean_restart"] = start_until_served(node, port, request, n)
        say(f"single node: clean restart (SIGTERM took {out['shutdown_s']} s): {out['clean_restart']}")
        out["phase"] = "kill -9 restart"
        with sampler.phase("single: kill -9 restart"):
            node.kill()
            out["kill9_restart"] = start_until_served(node, port, request, n)
        say(f"single node: kill -9 restart: {out['kill9_restart']}")
        out["phase"] = "done"
    except Exception as exc:  # noqa: BLE001 - recorded
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
        out["log_tail"] = node.stderr_tail(3000)
        say(f"single node: FAILED in phase {out['phase']}: {out['error']}\n{out['log_tail'][-1500:]}")
    finally:
        out["loop_lag_max_ms"], out["loop_lag_samples"], out["loop_lag_bucket_ms"] = sampler.take()
        node.kill()
        node.close()
    return out


# ---- benchmarks/bench_apply.py ----------------------------------------------------------------------------------

def run_apply(args) -> dict:
    cmd = [sys.executable, str(REPO / "benchmarks" / "bench_apply.py"), "--json", "--sizes", args.apply_sizes,
           "--changes", str(args.apply_changes), "--seconds", str(args.apply_seconds)]
    say(f"bench_apply.py --sizes {args.apply_sizes}")
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    except subprocess.TimeoutExpired:
        return {"error": "bench_apply.py took more than 900 s"}
    if done.returncode:
        return {"error": f"bench_apply.py exited {done.returncode}: {done.stderr[-1500:]}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    sizes = result["sizes"]
    if len(sizes) >= 2:
        result["ratio_largest_to_smallest"] = round(sizes[-1]["median_us"] / sizes[0]["median_us"], 2)
    return result


# ---- report -----------------------------------------------------------------------------------------------------

def lag_cell(sampled: float | None, bound: float | None) -> str:
    return f"{fmt(sampled, '.0f')}/{fmt(bound, '.0f')}"


def fmt(v, spec: str = ".1f", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def print_scale(r: dict) -> None:
    n = r["partitions"]
    print(f"\n== {n:,} partitions ({r['topics']} topics x {PER_TOPIC}, RF {RF}, min.insync.replicas {MIN_ISR}; "
          f"3 combined nodes; load average {r['loadavg_start']:.2f} at the start) ==")
    if "error" in r:
        print(f"FAILED in phase {r['phase']}: {r['error']}")
    if "create" in r:
        cr = r["create"]
        print(f"create: {cr['requests']} CreateTopics answered in {cr['acked_s']:.2f} s "
              f"({cr['partitions_per_s_acked']:,.0f} partitions/s); every ISR full on every broker at "
              f"{cr['first_full_isr_s']:.2f} s, full and stable from {cr['full_isr_s']:.2f} s "
              f"({cr['partitions_per_s_full']:,.0f} partitions/s); meanwhile {sum(cr['isr_changes'].values())} ISR "
              f"changes committed, {sum(cr['shrink_decisions'].values())} shrink decisions; the controller's largest "
              f"heartbeat gap {max(cr['contact_gap_max_ms'].values(), default=None)} ms")
    if "idle" in r:
        idle = r["idle"]
        print(f"settle + idle window: {sum(idle['isr_changes'].values())} ISR changes; the controller's largest "
              f"heartbeat gap so far {max(idle['contact_gap_max_ms'].values(), default=None)} ms")
    nodes = r.get("nodes", {})
    lag = r.get("loop_lag_max_ms", {})
    bounds = r.get("loop_lag_bucket_ms", {})
    phases = list(lag)
    if nodes:
        head = (f"{'node':>4} {'RSS MB':>7} {'KB/part':>8} {'fds':>6} {'log':>6} {'index':>6} {'sock':>5} "
                f"{'limit':>6} {'fd/part':>7} {'idle CPU %':>10} {'Metadata p50 ms':>15}")
        print(head + "".join(f" {'lag ' + SHORT.get(p, p):>12}" for p in phases))
        for i, v in nodes.items():
            f = v["fds"]
            md = v.get("metadata", {})
            print(f"{i:>4} {v['rss_mb']:>7.0f} {v['rss_mb'] * 1024 / n:>8.1f} {f['total']:>6} {f.get('log', 0):>6} "
                  f"{f.get('index', 0):>6} {f.get('socket', 0):>5} {f['limit']:>6} {f['total'] / n:>7.2f} "
                  f"{v['idle_cpu_pct']:>10.2f} {fmt(md.get('p50_ms'), '.1f'):>15}"
                  + "".join(f" {lag_cell(lag[p].get(str(i)), bounds.get(p, {}).get(str(i))):>12}" for p in phases))
        print("(lag: the largest sampled value of the node's event-loop lag gauge in each phase / the bucket bound of "
              "its worst measurement from the lag histogram, ms)")
    b = r.get("broker_restart")
    if b:
        print(f"broker kill -9 of node {b['node']} (controller {b['controller']}): fenced {b['fenced_after_kill_s']} s "
              f"and out of every ISR {b['out_of_every_isr_s']} s after the kill (AlterPartition requests "
              f"{b['shrink_alterpartition_requests']} carrying {b['shrink_alterpartition_changes']} changes)")
        print(f"  restart, from the process start: logs loaded {fmt(b['loaded_s'], '.2f')} s (node's own figure "
              f"{b['loaded_own_s']} s), unfenced {fmt(b['unfenced_s'], '.2f')} s, every ISR full "
              f"{fmt(b['full_isr_s'], '.2f', 'NOT within the bound (' + str(b['not_full_at_timeout']) + ' left)')} s")
        print(f"  rejoin: AlterPartition requests {b['alterpartition_requests']} carrying "
              f"{b['alterpartition_changes']} ISR changes (failed {b['failed_isr_updates']}); Raft batches at the "
              f"controller {b['metadata_batches']}; ISR changes committed in the phase "
              f"{sum(b['isr_changes'].values())}; "
              f"largest heartbeat gap at the controller {b['contact_gap_max_ms']} ms; fenced during the phase "
              f"{b['fenced']} ({'only the killed one' if b['fenced'] == [b['node']] else 'NOT only the killed one'})"
              + ("" if b["controller_after"] == b["controller"]
                 else f"; the controller moved to {b['controller_after']}"))
    for k in r.get("controller_failover", []):
        print(f"controller kill -9 of node {k['node']}: next answered CreateTopics {k['next_create_s']:.2f} s "
              f"({k['attempts']} attempts, {k['errors']}), new quorum leader {fmt(k['new_leader_s'], '.2f')} s; "
              f"fenced {k['fenced']}; ISR changes committed by then {sum(k['isr_changes'].values())}")


def print_curve(scales: list[dict]) -> None:
    ok = [r for r in scales if r.get("nodes")]
    if not ok:
        return
    ref = ok[0]
    print(f"\n== cost curve (per node, mean of the 3 nodes, each hosting every partition; 'marg' = the increase over "
          f"{ref['partitions']:,} partitions / the increase in partitions) ==")
    print(f"{'partitions':>10} {'RSS MB':>7} {'KB/part':>8} {'marg KB':>8} {'fds':>6} {'fd/part':>7} {'marg fd':>7} "
          f"{'idle CPU %':>10} {'marg %/1k':>9} {'Metadata ms':>11} {'create p/s':>10} {'unfenced s':>10} "
          f"{'rejoin s':>8} {'AlterPart':>9} {'batches':>7} {'ctl kill s':>10}")

    def mean(r, f):
        return statistics.fmean(f(v) for v in r["nodes"].values())

    def rss(r):
        return mean(r, lambda v: v["rss_mb"])

    def fd(r):
        return mean(r, lambda v: v["fds"]["total"])

    def cpu(r):
        return mean(r, lambda v: v["idle_cpu_pct"])

    for r in ok:
        n = r["partitions"]
        dn = n - ref["partitions"]
        mds = [v["metadata"]["p50_ms"] for v in r["nodes"].values() if "metadata" in v]
        b = r.get("broker_restart") or {}
        kills = [k["next_create_s"] for k in r.get("controller_failover", [])]
        print(f"{n:>10,} {rss(r):>7.0f} {rss(r) * 1024 / n:>8.1f} "
              f"{fmt((rss(r) - rss(ref)) * 1024 / dn if dn else None, '.1f'):>8} {fd(r):>6.0f} {fd(r) / n:>7.2f} "
              f"{fmt((fd(r) - fd(ref)) / dn if dn else None, '.2f'):>7} {cpu(r):>10.2f} "
              f"{fmt((cpu(r) - cpu(ref)) / dn * 1000 if dn else None, '.2f'):>9} "
              f"{fmt(statistics.median(mds) if mds else None, '.1f'):>11} "
              f"{r['create']['partitions_per_s_full']:>10,.0f} {fmt(b.get('unfenced_s'), '.1f'):>10} "
              f"{fmt(b.get('full_isr_s'), '.1f'):>8} "
              f"{fmt(sum(b['alterpartition_requests'].values()) if b else None, 'd'):>9} "
              f"{fmt(b.get('metadata_batches'), 'd'):>7} {fmt(statistics.median(kills) if kills else None, '.2f'):>10}")


def print_single(s: dict) -> None:
    print(f"\n== a single node, {s['partitions']:,} partitions (RF 1, one record each; load average "
          f"{s['loadavg_start']:.2f} at the start) ==")
    if "error" in s:
        print(f"FAILED in phase {s['phase']}: {s['error']}")
    if "rss_mb" in s:
        print(f"RSS {s['rss_mb']:.0f} MB ({s['rss_mb'] * 1024 / s['partitions']:.1f} KB/partition), fds "
              f"{s['fds']['total']} (log {s['fds'].get('log', 0)}, index {s['fds'].get('index', 0)}; limit "
              f"{s['fds']['limit']})")
    for key, what in (("clean_restart", f"clean restart (SIGTERM took {s.get('shutdown_s')} s)"),
                      ("kill9_restart", "kill -9 restart")):
        v = s.get(key)
        if v:
            print(f"{what}, from the process start: logs loaded {fmt(v['loaded_s'], '.2f')} s (node's own figure "
                  f"{v['loaded_own_s']} s), unfenced {fmt(v['unfenced_s'], '.2f')} s, clients let in "
                  f"{fmt(v['serving_s'], '.2f')} s, every partition served "
                  f"{fmt(v['all_served_s'], '.2f', 'NOT in time')} s [{v['recovery']}]")
    for phase, per in s.get("loop_lag_max_ms", {}).items():
        bound = s.get("loop_lag_bucket_ms", {}).get(phase, {}).get("single")
        print(f"largest sampled event-loop lag, {phase}: {fmt(per.get('single'), '.0f')} ms (histogram: worst "
              f"measurement <= {fmt(bound, '.0f')} ms)")


def print_apply(a: dict) -> None:
    print("\n== publishing a one-partition change (benchmarks/bench_apply.py) ==")
    if "error" in a:
        print(f"FAILED: {a['error']}")
        return
    for s in a["sizes"]:
        print(f"{s['partitions']:>8,} hosted: median {s['median_us']:,.0f} us, best {s['best_us']:,.0f} us "
              f"({s['publishes']} publishes)")
    if "ratio_largest_to_smallest" in a:
        print(f"{a['sizes'][-1]['partitions']:,} / {a['sizes'][0]['partitions']:,}: "
              f"{a['ratio_largest_to_smallest']:.2f}x per change")


# ---- main -------------------------------------------------------------------------------------------------------

def _interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="1000,3000,10000", help="partitions per cluster, comma separated")
    ap.add_argument("--reference", type=int, default=100, help="a first, small cluster (0: none)")
    ap.add_argument("--single-node", type=int, default=None,
                    help="partitions of the single-node restart (default: the largest scale; 0: skip)")
    ap.add_argument("--apply-sizes", default="1000,10000", help="bench_apply.py's --sizes ('': skip)")
    ap.add_argument("--apply-changes", type=int, default=200)
    ap.add_argument("--apply-seconds", type=float, default=20.0)
    ap.add_argument("--create-batch", type=int, default=100, help="topics (of 100 partitions) per CreateTopics")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after creation before the idle window")
    ap.add_argument("--idle-seconds", type=float, default=20.0, help="the idle CPU window")
    ap.add_argument("--lag-idle-seconds", type=float, default=3.0, help="event-loop lag sampled after the window")
    ap.add_argument("--lag-interval", type=float, default=0.25, help="event-loop lag sampling interval, s")
    ap.add_argument("--metadata-requests", type=int, default=10, help="full Metadata requests per node")
    ap.add_argument("--controller-kills", type=int, default=1, help="controller kills per scale")
    ap.add_argument("--quick", action="store_true", help="smoke run: 300 partitions, short windows (~2-3 min)")
    ap.add_argument("--dir", default=None, help="where the clusters' data go (a temporary directory under it)")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs and the nodes' logs (printed)")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()
    if args.quick:  # small figures, unless given on the command line
        quick = {"scales": "300", "apply_sizes": "100,300", "apply_changes": 50, "apply_seconds": 5.0, "settle": 1.0,
                 "idle_seconds": 5.0, "lag_idle_seconds": 1.0, "metadata_requests": 5}
        for k, v in quick.items():
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    scales = [int(s) for s in args.scales.split(",") if s]
    if args.single_node is None:
        args.single_node = max(scales)
    signal.signal(signal.SIGTERM, _interrupted)
    results: dict = {"host": socket.gethostname(), "cores": os.cpu_count(), "argv": sys.argv[1:],
                     "loadavg_start": os.getloadavg(), "scales": [], "overrides": OVERRIDES}
    say(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; scales {scales}, reference "
        f"{args.reference}, single node {args.single_node}, apply {args.apply_sizes or '-'}")
    sampler = LagSampler(args.lag_interval)
    sampler.start()
    status = 0
    try:
        with contextlib.ExitStack() as stack:
            tmp = tempfile.mkdtemp(prefix="odradek-bench-scale-", dir=args.dir)
            if args.keep:
                say(f"data and logs are kept in {tmp}")
            else:
                stack.callback(shutil.rmtree, tmp, True)
            for n in ([args.reference] if args.reference else []) + scales:
                r = run_cluster(Path(tmp) / f"cluster-{n}", n, args, sampler)
                results["scales"].append(r)
                status |= "error" in r
            if args.single_node:
                results["single_node"] = run_single(Path(tmp), args.single_node, args, sampler)
                status |= "error" in results["single_node"]
        if args.apply_sizes:
            results["apply"] = run_apply(args)
            status |= "error" in results["apply"]
    except KeyboardInterrupt:
        say("interrupted: every node has been stopped")
        results["interrupted"] = True
        status = 130
    finally:
        sampler.stop()
        results["loadavg_end"] = os.getloadavg()
        results["lag_scrape_ms_median"] = round(statistics.median(sampler.scrape_s) * 1000, 1) \
            if sampler.scrape_s else None
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    print("\n===== summary =====")
    for r in results["scales"]:
        print_scale(r)
    print_curve(results["scales"])
    if "single_node" in results:
        print_single(results["single_node"])
    if "apply" in results:
        print_apply(results["apply"])
    print(f"\nload average {results['loadavg_start'][0]:.2f} at the start, {results['loadavg_end'][0]:.2f} at the end; "
          f"a lag scrape took {results['lag_scrape_ms_median']} ms (median); total "
          f"{time.monotonic() - STARTED:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
