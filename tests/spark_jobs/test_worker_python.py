"""register() says how to fix a Spark whose Python workers cannot import odradek, instead of failing later
inside a worker with ``No module named 'crc32c'``."""

from __future__ import annotations

import sys

import pytest

from spark_jobs import WorkerPythonError, check_worker_python, worker_python


def test_this_interpreter_is_accepted():
    check_worker_python(sys.executable)


def test_an_interpreter_without_odradek_is_refused_with_the_fix(tmp_path):
    bare = tmp_path / "python3"
    bare.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'crc32c'\" >&2\nexit 1\n")
    bare.chmod(0o755)
    with pytest.raises(WorkerPythonError) as exc:
        check_worker_python(str(bare))
    assert "No module named 'crc32c'" in str(exc.value)
    assert f"PYSPARK_PYTHON={sys.executable}" in str(exc.value)
    with pytest.raises(WorkerPythonError):
        check_worker_python(str(tmp_path / "missing-python"))


def test_worker_python_follows_spark_conf_then_environment(monkeypatch):
    class Conf:
        def __init__(self, value):
            self.value = value

        def get(self, key, default=None):
            return self.value if key == "spark.pyspark.python" else default

    class Session:
        def __init__(self, value):
            self.conf = Conf(value)

    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/py/bin/python")
    assert worker_python(Session("/x/python")) == "/x/python"
    assert worker_python(Session(None)) == "/opt/py/bin/python"
    monkeypatch.delenv("PYSPARK_PYTHON")
    assert worker_python(Session(None)) == "python3"
