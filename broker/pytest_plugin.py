"""A pytest fixture for users' own suites: ``pytest_plugins = ["broker.pytest_plugin"]``, then
``def test_x(odradek): producer = Producer({"bootstrap.servers": odradek.bootstrap_servers})``."""

from __future__ import annotations

import pytest

from broker.embedded import EmbeddedBroker


@pytest.fixture
def odradek(tmp_path):
    """A fresh broker on 127.0.0.1 (ephemeral port) with its data under the test's tmp_path."""
    with EmbeddedBroker(data_dir=tmp_path / "odradek-data") as b:
        yield b
