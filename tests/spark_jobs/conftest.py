"""One local SparkSession for the whole test run (JVM start-up is the expensive part), and test log directories.

Spark settings this machine needs (shared/notes/machine-facts.md): SPARK_LOCAL_IP=127.0.0.1, PYSPARK_PYTHON = this
interpreter, spark.ui.enabled=false.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    import pyarrow  # noqa: F401 - the spark extra is installed by `make test`: a broken install fails here
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("odradek-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.default.parallelism", "2")
         .config("spark.sql.python.filterPushdown.enabled", "true")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "1g")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import spark_jobs

    spark_jobs.register(s)
    yield s
    s.stop()
