"""odradek analytics: a PySpark data source over Kafka log directories (``kafka-log``) and batch jobs on it.

    import spark_jobs
    spark_jobs.register(spark)
    spark.read.format("kafka-log").load("/path/to/log.dir")

Jobs: ``python -m spark_jobs.compaction_report``, ``spark_jobs.retention_report``, ``spark_jobs.topic_profile``.
Layering: this package reads protocol/ and storage/ code, never broker/.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["register", "WorkerPythonError"]


class WorkerPythonError(RuntimeError):
    """Spark's Python workers run an interpreter that cannot import odradek."""


def register(spark) -> None:
    """Register the ``kafka-log`` format with ``spark`` (idempotent).

    On a local master the workers' interpreter is checked first: Spark starts ``python3`` from PATH
    unless told otherwise, and without odradek installed there the first read fails deep inside a
    worker with ``No module named 'crc32c'``.
    """
    from .datasource import KafkaLogDataSource

    master = spark.sparkContext.master or ""
    if master.startswith("local"):
        check_worker_python(worker_python(spark))
    spark.dataSource.register(KafkaLogDataSource)


def worker_python(spark) -> str:
    """The interpreter Spark starts for Python workers (spark.pyspark.python, PYSPARK_PYTHON, else python3)."""
    return (spark.conf.get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON") or "python3")


def check_worker_python(python: str) -> None:
    if os.path.realpath(_which(python) or python) == os.path.realpath(sys.executable):
        return
    try:
        probe = subprocess.run([python, "-c", "import crc32c, spark_jobs"], capture_output=True, text=True,
                               timeout=60)
        failure = None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]
    except OSError as exc:
        failure = str(exc)
    if failure is not None:
        raise WorkerPythonError(
            f"Spark's Python workers would run {python!r}, which cannot import odradek "
            f"({failure}). Start Spark with the interpreter odradek is "
            f"installed in: export PYSPARK_PYTHON={sys.executable} (or set spark.pyspark.python) before creating "
            "the session.")


def _which(python: str) -> str | None:
    from shutil import which

    return which(python)
