"""Pytest fixtures for users' own suites: ``pytest_plugins = ["broker.testing.pytest_plugin"]``, then
``def test_x(odradek): producer = Producer({"bootstrap.servers": odradek.bootstrap_servers})``, or
``def test_y(odradek_cluster): ...`` for a replicated cluster with faults on demand."""

from __future__ import annotations

import pytest

from broker.testing.embedded import EmbeddedBroker
from broker.testing.embedded_cluster import EmbeddedCluster


@pytest.fixture
def odradek(tmp_path):
    """A fresh broker on 127.0.0.1 (ephemeral port) with its data under the test's tmp_path."""
    with EmbeddedBroker(data_dir=tmp_path / "odradek-data") as b:
        yield b


@pytest.fixture
def odradek_cluster(request, tmp_path):
    """A fresh ``EmbeddedCluster`` (broker/testing/embedded_cluster.py) of 3 combined broker+controller processes on
    127.0.0.1, ready (every broker unfenced), its data and node logs under the test's tmp_path
    (``odradek-cluster/``), killed after the test. ``c.bootstrap_servers``, ``c.kill(n)``, ``c.restart(n)``,
    ``c.pause(n)``/``c.resume(n)``, ``c.isolate(n)``/``c.heal()``, ``c.leader_of(topic, p)``, ``c.controller()``.

    Another shape: pass ``EmbeddedCluster``'s keyword arguments as an indirect parameter, one dict per
    cluster (the test runs once for each)::

        @pytest.mark.parametrize("odradek_cluster", [
            {"brokers": 5},
            {"controllers": 3, "brokers": 2, "overrides": {"min.insync.replicas": 2}},
        ], indirect=True)
        def test_failover(odradek_cluster): ...

    For a cluster shared by several tests, or more than one per test, use ``EmbeddedCluster`` itself in a
    fixture of your own (``with EmbeddedCluster(...) as c: yield c``).
    """
    options = dict(getattr(request, "param", None) or {})
    options.setdefault("data_dir", tmp_path / "odradek-cluster")
    with EmbeddedCluster(**options) as c:
        yield c
