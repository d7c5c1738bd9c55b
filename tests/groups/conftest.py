"""Group test fixtures: an embedded broker with shrunk group timers.

Kafka's defaults (initial rebalance delay 3 s, classic minimum session 6 s, consumer-protocol heartbeat
5 s / session 45 s, 50 __consumer_offsets partitions) would make every group test wait seconds per
rebalance; these overrides keep the suite fast. test_kafka_defaults.py runs once with the defaults.
"""

from __future__ import annotations

import pytest

from broker.testing.embedded import EmbeddedBroker

FAST_GROUPS = {
    "group.initial.rebalance.delay.ms": 100,
    "group.min.session.timeout.ms": 500,
    "group.consumer.heartbeat.interval.ms": 300,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 3000,
    "group.consumer.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 4,
    "num.partitions": 1,
}


def make_broker(data_dir, **overrides) -> EmbeddedBroker:
    return EmbeddedBroker(data_dir=data_dir, overrides={**FAST_GROUPS, **overrides})


@pytest.fixture
def gbroker(tmp_path):
    with make_broker(tmp_path / "data") as b:
        yield b
