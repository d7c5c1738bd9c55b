"""Fixtures: an embedded broker on 127.0.0.1 with an ephemeral port and a temp data dir, and raw connections to it
(tests/kafka_wire.py)."""

from __future__ import annotations


import pytest

from broker.testing.embedded import EmbeddedBroker
from tests.kafka_wire import KafkaWire


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "data") as b:
        yield b


@pytest.fixture
def raw(broker):
    clients = []

    def connect() -> KafkaWire:
        c = KafkaWire(broker.port)
        clients.append(c)
        return c

    yield connect
    for c in clients:
        c.close()
