"""Benchmark: the kafka-log data source and the compaction report over a >= 2 GB log directory, next to a plain-Python
single-process reader over the same files and the raw read speed of the files, in one run.

    .venv/bin/python benchmarks/bench_spark.py [--size-gb 2.0] [--dir /tmp/odradek-bench-spark] [--keep]

The directory is generated under /tmp when the benchmark runs (never by the tests): four topics, one per
combination of record size (1 KiB and 100 bytes of value) and codec (none, lz4), each ``size/4`` bytes on disk in
two partitions, 128 MiB segments, written in Kafka's layout by :class:`spark_jobs.synth.PartitionWriter`. Values
are half random, half repetitive (lz4 compresses them about 2:1); keys repeat, so compaction has work to do.

Measured (wall clock): raw read of every .log file (64 MiB reads; files were just written, so this is page-cache
speed), the plain-Python reader (protocol.record_codec.decode_batch on every batch, one process), Spark ``count()``
and the compaction report (``spark_jobs.compaction_report.run``) on ``local[2]``. Records/s count records, MB/s
count on-disk bytes (10^6 bytes).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol.record_codec import Record, build_batch, decode_batch  # noqa: E402
from protocol.records import iter_batch_positions  # noqa: E402
from spark_jobs.synth import PartitionWriter  # noqa: E402

T0 = 1_700_000_000_000
TOPICS = [  # (topic, value bytes, codec id, records per batch, key space)
    ("bench-1k-none", 1024, 0, 16, 200_000),
    ("bench-1k-lz4", 1024, 3, 16, 200_000),
    ("bench-100b-none", 100, 0, 100, 1_000_000),
    ("bench-100b-lz4", 100, 3, 100, 1_000_000),
]
PARTITIONS = 2
SEGMENT_BYTES = 128 * 1024 * 1024


def _value_source(n: int, rng: random.Random):
    """Values of n bytes: half random, half a repeated pattern."""
    half = n // 2
    pool = rng.randbytes(half * 4096 + 64)
    filler = (b"odradek-" * (n // 8 + 1))[: n - half]

    def value(i: int) -> bytes:
        o = (i * 7919) % 4096 * half
        return pool[o:o + half] + filler

    return value


def generate(root: str, size_bytes: int) -> dict:
    """Write the benchmark directory; returns per-topic record and byte counts."""
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    with open(os.path.join(root, "meta.properties"), "w") as f:
        f.write("version=1\nnode.id=1\ncluster.id=bench\n")
    per_partition = size_bytes // (len(TOPICS) * PARTITIONS)
    stats = {}
    rng = random.Random(42)
    for topic, vsize, codec, per_batch, keyspace in TOPICS:
        value = _value_source(vsize, rng)
        records = 0
        for p in range(PARTITIONS):
            w = PartitionWriter(root, topic, p, segment_bytes=SEGMENT_BYTES, index_interval_bytes=4096)
            written = 0
            i = 0
            ts = T0
            while written < per_partition:
                recs = []
                for j in range(per_batch):
                    k = (i * 2654435761 + j) % keyspace
                    recs.append(Record(b"key-%08d" % k, value(i + j), timestamp=ts))
                    ts += 1
                batch = build_batch(recs, compression=codec)
                w.append(batch)
                written += len(batch)
                i += per_batch
            w.close()
            records += i
        stats[topic] = {"records": records}
    return stats


def log_files(root: str) -> list[str]:
    out = []
    for d in sorted(os.listdir(root)):
        full = os.path.join(root, d)
        if os.path.isdir(full):
            out += [os.path.join(full, f) for f in sorted(os.listdir(full)) if f.endswith(".log")]
    return out


def raw_read(files: list[str]) -> tuple[int, float]:
    t = time.perf_counter()
    n = 0
    buf = bytearray(64 * 1024 * 1024)
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while True:
                k = f.readinto(buf)
                if not k:
                    break
                n += k
    return n, time.perf_counter() - t


def plain_python(files: list[str]) -> tuple[int, float]:
    t = time.perf_counter()
    records = 0
    for p in files:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                continue
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
                for pos, _h in iter_batch_positions(mm):
                    _, recs = decode_batch(mm, pos)
                    records += len(recs)
    return records, time.perf_counter() - t


def spark_session(master: str):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master(master).appName("odradek-bench-spark")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.python.filterPushdown.enabled", "true")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "6g")
         .config("spark.sql.shuffle.partitions", "8")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import spark_jobs

    spark_jobs.register(s)
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--dir", default="/tmp/odradek-bench-spark")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep", action="store_true", help="keep the generated directory")
    ap.add_argument("--reuse", action="store_true", help="reuse an existing directory instead of generating")
    ap.add_argument("--skip-compaction", action="store_true")
    args = ap.parse_args()
    if not os.path.abspath(args.dir).startswith("/tmp/"):
        raise SystemExit("--dir must be under /tmp")
    t = time.perf_counter()
    if not (args.reuse and os.path.isdir(args.dir)):
        generate(args.dir, int(args.size_gb * 1e9))
    gen_s = time.perf_counter() - t
    files = log_files(args.dir)
    disk = sum(os.path.getsize(p) for p in files)
    print(f"directory {args.dir}: {disk / 1e9:.2f} GB in {len(files)} segments (generated in {gen_s:.0f}s)",
          flush=True)
    results = []

    def row(name, records, nbytes, secs):
        results.append({"what": name, "records": records, "bytes": nbytes, "seconds": round(secs, 2),
                        "records_per_s": round(records / secs) if records else None,
                        "MB_per_s": round(nbytes / 1e6 / secs, 1)})
        print(f"{name:<42} {secs:8.1f} s {records / secs if records else 0:12,.0f} rec/s "
              f"{nbytes / 1e6 / secs:9.1f} MB/s", flush=True)

    n, s = raw_read(files)
    row("raw read of the .log files (page cache)", 0, n, s)
    recs, s = plain_python(files)
    row("plain Python, 1 process (decode_batch)", recs, disk, s)
    spark = spark_session(args.master)
    spark.read.format("kafka-log").load(args.dir).limit(1).collect()      # JVM and worker warm-up
    t = time.perf_counter()
    c = spark.read.format("kafka-log").load(args.dir).count()
    row(f"Spark count() {args.master}", c, disk, time.perf_counter() - t)
    assert c == recs, (c, recs)
    if not args.skip_compaction:
        from spark_jobs import compaction_report
        from spark_jobs.common import JobContext, job_parser

        out = args.dir.rstrip("/") + "-report"
        a = job_parser("compaction_report", "").parse_args(
            ["--log-dirs", args.dir, "--out", out, "--config", "cleanup.policy=compact", "--now-ms",
             str(T0 + 86_400_000)])
        t = time.perf_counter()
        res = compaction_report.run(JobContext.create("compaction_report", a, spark))
        row(f"compaction report {args.master}", recs, disk, time.perf_counter() - t)
        removed = sum(r.pass_records_removed for r in res["rows"])
        print(f"  (one cleaning pass would remove {removed:,} of {recs:,} records; report in {out})")
    spark.stop()
    print(json.dumps({"dir": args.dir, "bytes_on_disk": disk, "cpus": os.cpu_count(),
                      "load_avg": os.getloadavg(), "results": results}, indent=1))
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
