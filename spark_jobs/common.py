"""What the three jobs share: command line, SparkSession, loading, segment metadata, output (Parquet, report.md,
PNG charts). A job never writes into the log directory it analyses: ``--out`` inside a log dir is refused."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from .planning import ScanBounds, SegmentFile, _split_paths, list_partition_dirs, list_segments

__all__ = ["job_parser", "JobContext", "md_table", "fmt_bytes", "fmt_ms"]


def job_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m spark_jobs.{prog}", description=description)
    p.add_argument("--log-dirs", required=True, action="append",
                   help="Kafka log directory (repeat or comma-separate for several)")
    p.add_argument("--out", default=None, help=f"output directory (default ./{prog}-out)")
    p.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--config", action="append", default=[], metavar="[TOPIC:]KEY=VALUE",
                   help="topic config where the log dir's metadata log has none (repeatable)")
    p.add_argument("--topics", default=None, help="comma-separated topics to analyse (default all)")
    p.add_argument("--include-internal", action="store_true", help="also analyse __consumer_offsets etc.")
    p.add_argument("--ignore-corrupt-batches", action="store_true",
                   help="skip batches failing CRC/structure checks and count them in the report")
    p.add_argument("--now-ms", type=int, default=None, help="the clock for age-based rules (default: now)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress lines on stderr (by default: one per finished Spark stage, records and MB/s)")
    p.add_argument("--stats-dir", default=None,
                   help="where executors leave the scan's counters for the driver (default: a temporary directory on "
                        "the driver, which executors on other hosts do not see: on a spark:// cluster give a "
                        "directory on a filesystem every host shares, as the log dirs are)")
    return p


def get_spark(master: str | None, app_name: str):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app_name)
    if master:
        b = b.master(master)
    elif not SparkConf().contains("spark.master"):
        b = b.master("local[*]")
    conf = SparkConf()
    b = (b.config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.python.filterPushdown.enabled", "true")
         .config("spark.sql.session.timeZone", "UTC"))
    if not conf.contains("spark.sql.shuffle.partitions"):
        # the reports' aggregates are small: Spark's 200 shuffle partitions only cost task overhead
        b = b.config("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2))))
    spark = b.getOrCreate()
    from . import register

    register(spark)
    return spark


def _inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass
class JobContext:
    """One job run: parsed arguments, the Spark session, the scan options and the output directory."""

    name: str
    args: argparse.Namespace
    spark: object
    log_dirs: str
    out: str
    now_ms: int
    stats_dir: str
    progress: object = None     # StageProgress while the job runs, when the job started the Spark session

    @classmethod
    def create(cls, name: str, args: argparse.Namespace, spark=None) -> "JobContext":
        log_dirs = ",".join(p for item in args.log_dirs for p in _split_paths(item))
        out = os.path.abspath(args.out or f"./{name}-out")
        for root in _split_paths(log_dirs):
            if _inside(out, root):
                raise SystemExit(f"--out {out} lies inside the log directory {root}: a job never writes there")
        # fail early, with a clear message, on something that is not a log dir
        list_partition_dirs(log_dirs, ScanBounds(include_internal=True))
        os.makedirs(out, exist_ok=True)
        own_session = spark is None
        if own_session:
            spark = get_spark(args.master, f"odradek-{name}")
        else:
            from . import register

            register(spark)
        now_ms = args.now_ms if args.now_ms is not None else int(time.time() * 1000)
        stats_dir = tempfile.mkdtemp(prefix=f"odradek-{name}-stats-", dir=getattr(args, "stats_dir", None))
        if getattr(args, "stats_dir", None) is None and not spark.sparkContext.master.startswith("local"):
            print(f"odradek-{name}: executors on other hosts cannot write the scan counters into {stats_dir} on "
                  f"this host: the progress lines and the report's Scan section count only what local executors "
                  f"read (pass --stats-dir on a shared filesystem)", file=sys.stderr)
        progress = None
        if own_session and not getattr(args, "no_progress", False):
            from .progress import StageProgress

            progress = StageProgress(spark.sparkContext, stats_dir, name).start()
        return cls(name, args, spark, log_dirs, out, now_ms, stats_dir, progress)

    def topics_filter(self) -> set[str] | None:
        if not self.args.topics:
            return None
        return {t.strip() for t in self.args.topics.split(",") if t.strip()}

    def bounds(self) -> ScanBounds:
        t = self.topics_filter()
        return ScanBounds(topics=None if t is None else frozenset(t), include_internal=self.args.include_internal)

    def reader(self, **options):
        r = (self.spark.read.format("kafka-log")
             .option("statsPath", self.stats_dir)
             .option("includeInternal", str(bool(self.args.include_internal)).lower())
             .option("ignoreCorruptBatches", str(bool(self.args.ignore_corrupt_batches)).lower()))
        if self.args.topics:
            r = r.option("topics", self.args.topics)
        for k, v in options.items():
            r = r.option(k, v)
        return r

    def records(self, **options):
        return self.reader(**options).load(self.log_dirs)

    def segments(self) -> list[SegmentFile]:
        """Every segment file (metadata only, taken now), including empty ones, sorted."""
        out: list[SegmentFile] = []
        for pdir in list_partition_dirs(self.log_dirs, self.bounds()):
            out.extend(list_segments(pdir))
        return out

    def segments_df(self, segs: Sequence[SegmentFile]):
        from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

        schema = StructType([
            StructField("topic", StringType()), StructField("partition", IntegerType()),
            StructField("segment", LongType()), StructField("next_segment", LongType()),
            StructField("size", LongType()), StructField("mtime_ms", LongType()),
            StructField("is_last", BooleanType()),
        ])
        rows = [(s.topic, s.partition, s.base_offset, s.next_base_offset, s.size, s.mtime_ms, s.is_last)
                for s in segs]
        return self.spark.createDataFrame(rows, schema)

    def scan_stats(self):
        from .scan import collect_stats

        return collect_stats(self.stats_dir)

    def write_parquet(self, df, name: str) -> str:
        path = os.path.join(self.out, f"{name}.parquet")
        df.coalesce(1).write.mode("overwrite").parquet(path)
        return path

    def chart_path(self, name: str) -> str:
        return os.path.join(self.out, f"{name}.png")

    def write_report(self, title: str, sections: Iterable[str]) -> str:
        import shutil

        if self.progress is not None:
            self.progress.stop()
        st = self.scan_stats()
        shutil.rmtree(self.stats_dir, ignore_errors=True)     # per-task counter files: read, no longer needed
        lines = [f"# {title}", "",
                 f"Log dirs: `{self.log_dirs}`  ",
                 f"Clock (now): {self.now_ms} ({fmt_ms_date(self.now_ms)})  ",
                 f"Generated by `python -m spark_jobs.{self.name}` (PySpark, `kafka-log` data source).", ""]
        lines += list(sections)
        lines += ["", "## Scan", "",
                  (f"(Counters the executors left in `{self.args.stats_dir}`.)"
                   if getattr(self.args, "stats_dir", None) else
                   "(Counters from executors sharing this machine's /tmp: complete in local and local-cluster "
                   "mode; on a cluster of several hosts pass `--stats-dir` on a shared filesystem.)"), "",
                  f"Segments opened: {st.segments_opened}, batches decoded: {st.batches_decoded}, "
                  f"records decoded: {st.records_decoded}, torn tails ignored: {st.torn_tails}, "
                  f"corrupt batches skipped: {st.corrupt_batches}."]
        if st.corrupt:
            lines += ["", "Corrupt batches (file@position: reason):", ""]
            lines += [f"- `{c}`" for c in sorted(set(st.corrupt))[:50]]
        path = os.path.join(self.out, "report.md")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path


# -- formatting --------------------------------------------------------------------------------------------------

def fmt_bytes(n) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def fmt_ms(ms) -> str:
    if ms is None:
        return "-"
    ms = int(ms)
    neg = ms < 0
    ms = abs(ms)
    d, rem = divmod(ms, 86_400_000)
    h, rem = divmod(rem, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s = rem / 1000
    out = f"{d}d{h:02d}h" if d else (f"{h}h{m:02d}m" if h else (f"{m}m{s:04.1f}s" if m else f"{s:.1f}s"))
    return ("-" if neg else "") + out


def fmt_ms_date(ms) -> str:
    if ms is None or ms < 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def md_table(headers: Sequence[str], rows: Iterable[Sequence], limit: int = 200) -> str:
    def cell(v) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, (bytes, bytearray)):
            v = bytes(v)
            try:
                s = v.decode("utf-8")
                if s.isprintable():
                    return "`" + s[:40].replace("|", "\\|").replace("`", "'") + "`"
            except UnicodeDecodeError:
                pass
            return "0x" + v[:20].hex()
        return str(v).replace("|", "\\|")

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    n = 0
    for r in rows:
        if n >= limit:
            out.append(f"| ... ({limit} rows shown) |" + " |" * (len(headers) - 1))
            break
        out.append("| " + " | ".join(cell(v) for v in r) + " |")
        n += 1
    return "\n".join(out)


def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as _plt

    return _plt
