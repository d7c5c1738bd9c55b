"""Progress lines of the CLI jobs (spark_jobs.progress): one per finished stage with what the scan read, through
a real Spark session, and the job's totals at the end."""

from __future__ import annotations

import io
import re

import pytest

from protocol.record_codec import Record
from spark_jobs.progress import StageProgress

from .builders import T0, write_storage_partition

pytestmark = pytest.mark.spark


def test_a_line_per_finished_stage_with_records_and_mb(spark, tmp_path):
    d = str(tmp_path / "log")
    write_storage_partition(d, "p", 0, [([Record(b"k%d" % i, b"v" * 200, timestamp=T0 + i)], {})
                                        for i in range(300)], {"segment.bytes": 8000})
    stats = str(tmp_path / "stats")
    out = io.StringIO()
    progress = StageProgress(spark.sparkContext, stats, "test-job", out=out, poll=0.05, min_stage_s=0.0).start()
    n = spark.read.format("kafka-log").option("statsPath", stats).load(d).count()
    progress.stop()
    lines = out.getvalue().splitlines()
    assert n == 300
    stage = [ln for ln in lines if re.search(r"stage \d+ done in [\d.]+ s \(\d+ tasks\): scanned [\d,]+ records", ln)]
    assert stage, lines
    assert re.fullmatch(r"\[test-job \d+:\d\d\] done in [\d.]+ s: scanned 300 records, [\d.]+ MB \([\d.]+ MB/s\)",
                        lines[-1]), lines
    # one scan stage: it read every record
    per_stage = [int(m.group(1).replace(",", "")) for ln in stage
                 for m in [re.search(r"scanned ([\d,]+) records", ln)]]
    assert per_stage == [300]


def test_stop_without_any_stage_prints_totals_only(spark, tmp_path):
    out = io.StringIO()
    StageProgress(spark.sparkContext, str(tmp_path / "none"), "idle", out=out, poll=0.05).start().stop()
    assert re.fullmatch(r"\[idle 0:00\] done in [\d.]+ s: scanned 0 records, 0.0 MB \([\d.]+ MB/s\)\n",
                        out.getvalue())
