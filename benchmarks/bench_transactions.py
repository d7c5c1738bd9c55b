"""Transactions against baselines measured in the same run (issue 28), with confluent-kafka (librdkafka).

Run:  .venv/bin/python benchmarks/bench_transactions.py --json txn.json        # RF 1 and RF 3, ~3 min
      .venv/bin/python benchmarks/bench_transactions.py --rf 1 --seconds 3     # a quick look

Per replication factor (RF 1: one ``odradek serve`` as config/single-node.yaml; RF 3: three nodes,
``broker.testing.EmbeddedCluster``, min.insync.replicas 2, acks=all), on a fresh topic of 3 partitions:

* **commit**: transactions of 1, 10 and 100 records of 100 B, one after another for ``--seconds``: transactions
  per second and the commit call's latency (p50, p99); beside them the round trip of the same records sent by an
  idempotent producer and flushed (acks=all): the baseline a commit adds to (targets: 1 record >= 40 txn/s at RF 1,
  >= 25 at RF 3; RF 1 commit p99 <= the round trip's p99 + 50 ms);
* **throughput**: 1 KiB records at full speed, committed every 100 ms, against an idempotent producer at full
  speed, ABBA (idempotent, transactional, transactional, idempotent) for half of ``--seconds`` each: MB/s (the
  mean of each arm's two) and the ratio (target >= 0.7);
* **read_committed**: ``--consume-records`` 100-byte records in transactions of 1,000, every tenth aborted, read
  from the start by a read_committed and a read_uncommitted consumer, four times each, interleaved (ABBA twice,
  after one untimed read): records/s of the records returned and the ratio (target >= 0.9).

The load average is printed at the start and the end: the figures mean little on a busy machine. Nothing is
asserted; ``--json`` keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import bench_broker  # noqa: E402
from broker.testing.embedded_cluster import EmbeddedCluster  # noqa: E402

PARTITIONS = 3


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def create(bootstrap: str, rf: int) -> str:
    name = f"txn-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    config = {"min.insync.replicas": "2"} if rf == 3 else {}
    admin.create_topics([NewTopic(name, PARTITIONS, rf, config=config)])[name].result(30)
    time.sleep(0.5)
    return name


def commit_case(bootstrap: str, rf: int, records: int, seconds: float) -> dict:
    topic = create(bootstrap, rf)
    value = b"x" * 100
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", "acks": "all",
                  "linger.ms": 0, "log_level": 4})
    p.init_transactions(60)
    commits, started, n = [], time.monotonic(), 0
    while time.monotonic() - started < seconds:
        p.begin_transaction()
        for i in range(records):
            p.produce(topic, value, partition=i % PARTITIONS)
        t0 = time.monotonic()
        p.commit_transaction(60)
        commits.append((time.monotonic() - t0) * 1000)
        n += 1
    elapsed = time.monotonic() - started
    idem = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 0,
                     "log_level": 4})
    trips, started = [], time.monotonic()
    while time.monotonic() - started < min(seconds, 5):
        t0 = time.monotonic()
        for i in range(records):
            idem.produce(topic, value, partition=i % PARTITIONS)
        idem.flush(60)
        trips.append((time.monotonic() - t0) * 1000)
    return {"rf": rf, "records": records, "txn_per_s": n / elapsed, "commit_p50_ms": pct(commits, 0.5),
            "commit_p99_ms": pct(commits, 0.99), "round_trip_p50_ms": pct(trips, 0.5),
            "round_trip_p99_ms": pct(trips, 0.99)}


def throughput_case(bootstrap: str, rf: int, seconds: float) -> dict:
    value = b"y" * 1024

    def run(transactional: bool) -> float:
        seconds_ = seconds / 2
        topic = create(bootstrap, rf)
        conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 4}
        conf.update({"transactional.id": f"bench-{topic}"} if transactional else {"enable.idempotence": True})
        p = Producer(conf)
        if transactional:
            p.init_transactions(60)
            p.begin_transaction()
        sent, started, last_commit = 0, time.monotonic(), time.monotonic()
        while time.monotonic() - started < seconds_:
            try:
                p.produce(topic, value, partition=sent % PARTITIONS)
                sent += 1
            except BufferError:
                p.poll(0.01)
            if transactional and time.monotonic() - last_commit >= 0.1:
                p.commit_transaction(60)
                p.begin_transaction()
                last_commit = time.monotonic()
        if transactional:
            p.commit_transaction(60)
        else:
            p.flush(60)
        return sent * len(value) / (time.monotonic() - started) / 1e6

    # ABBA, half the time each: neither arm always runs first (or on a machine that just got busier)
    rates: dict[bool, list[float]] = {False: [], True: []}
    for transactional in (False, True, True, False):
        rates[transactional].append(run(transactional))
    idem, txn = statistics.mean(rates[False]), statistics.mean(rates[True])
    return {"rf": rf, "idempotent_mb_s": idem, "transactional_mb_s": txn, "ratio": txn / idem}


def consume_case(bootstrap: str, rf: int, n: int) -> dict:
    topic = create(bootstrap, rf)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", "acks": "all",
                  "linger.ms": 5, "log_level": 4})
    p.init_transactions(60)
    value, per_txn, committed = b"z" * 100, 1000, 0
    for t in range(n // per_txn):
        p.begin_transaction()
        for i in range(per_txn):
            p.produce(topic, value, partition=i % PARTITIONS)
        p.flush(60)  # an abort drops what the client has not sent yet: every record is written
        if t % 10 == 9:
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += per_txn

    def read(isolation: str, expect: int) -> float:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                      "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                      "fetch.queue.backoff.ms": 10, "log_level": 4})
        c.assign([TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
        got, started = 0, time.monotonic()
        while got < expect and time.monotonic() - started < 120:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    got += 1
        elapsed = time.monotonic() - started
        c.close()
        return got / elapsed

    expect = {"read_committed": committed, "read_uncommitted": (n // per_txn) * per_txn}
    # a first read pays for what the ones after it find warm (the first connection, the log's pages just written):
    # one untimed read first, then the two isolations in turn, ABBA, so neither is always first
    read("read_uncommitted", expect["read_uncommitted"])
    rates = {"read_committed": [], "read_uncommitted": []}
    for isolation in ("read_committed", "read_uncommitted", "read_uncommitted", "read_committed") * 2:
        rates[isolation].append(read(isolation, expect[isolation]))
    rc, ru = statistics.median(rates["read_committed"]), statistics.median(rates["read_uncommitted"])
    return {"rf": rf, "records": n, "read_committed_rps": rc, "read_uncommitted_rps": ru, "ratio": rc / ru}


def run_rf(rf: int, args, workdir: str) -> dict:
    if rf == 1:
        b = bench_broker.start_odradek(workdir, "odradek-rf1")
        bootstrap, stop = b.bootstrap, b.stop
    else:
        c = EmbeddedCluster(brokers=3, data_dir=os.path.join(workdir, "rf3")).start()
        bootstrap, stop = c.bootstrap_servers, c.stop
    try:
        out = {"commit": [], "throughput": None, "consume": None}
        for records in (1, 10, 100):
            r = commit_case(bootstrap, rf, records, args.seconds)
            out["commit"].append(r)
            print(f"RF {rf}, {records:>3} records per transaction: {r['txn_per_s']:7.1f} txn/s, commit p50 "
                  f"{r['commit_p50_ms']:.1f} ms p99 {r['commit_p99_ms']:.1f} ms; idempotent round trip p50 "
                  f"{r['round_trip_p50_ms']:.1f} ms p99 {r['round_trip_p99_ms']:.1f} ms", flush=True)
        r = out["throughput"] = throughput_case(bootstrap, rf, args.seconds)
        print(f"RF {rf}, 1 KiB at full speed: idempotent {r['idempotent_mb_s']:.1f} MB/s, committed every 100 ms "
              f"{r['transactional_mb_s']:.1f} MB/s, ratio {r['ratio']:.2f}", flush=True)
        r = out["consume"] = consume_case(bootstrap, rf, args.consume_records)
        print(f"RF {rf}, consume {r['records']} records (10 % aborted): read_committed {r['read_committed_rps']:,.0f}"
              f" rec/s, read_uncommitted {r['read_uncommitted_rps']:,.0f} rec/s, ratio {r['ratio']:.2f}", flush=True)
        return out
    finally:
        stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rf", default="1,3", help="replication factors to run (1, 3 or both)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per commit and throughput case")
    ap.add_argument("--consume-records", type=int, default=100_000)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    print(f"load average {loadavg()} at the start", flush=True)
    results = {"load_start": loadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as workdir:
        for rf in (int(x) for x in args.rf.split(",")):
            results[f"rf{rf}"] = run_rf(rf, args, workdir)
    results["load_end"] = loadavg()
    print(f"load average {results['load_end']} at the end", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
