"""The group timers with Kafka's defaults, and the first-assignment latency.

A new group's first assignment arrives within group.initial.rebalance.delay.ms plus one heartbeat
interval (not after half a session timeout): once with Kafka's defaults (3 s delay, 50
__consumer_offsets partitions, classic session timeout 45 s / heartbeat 3 s in librdkafka), once
with the shrunk test timers.
"""

from __future__ import annotations

import threading
import time

from broker.testing.embedded import EmbeddedBroker
from tests.groups.conftest import FAST_GROUPS
from tests.groups.helpers import wait_until
from tests.groups.runners import ConfluentRunner, KafkaPythonRunner
from tests.groups.workload import create_topic, produce


def first_assignment(broker, runner_cls, group, **conf) -> float:
    consumed: list = []
    r = runner_cls(broker.bootstrap, group, "first", consumed, threading.Lock(), group, **conf).start()
    try:
        wait_until(lambda: r.assign_times, timeout=20, what="the first assignment")
        took = r.assign_times[0] - r.started_at
        wait_until(lambda: len(consumed) == 10, timeout=20, what="the records")
        return took
    finally:
        r.stop()


def test_kafka_default_group_timers(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "data") as b:  # no group overrides at all
        cfg = b.broker.groups.config
        assert (cfg.initial_rebalance_delay_ms, cfg.min_session_timeout_ms, cfg.max_session_timeout_ms) == (
            3000, 6000, 1800000)
        assert b.broker.groups.num_partitions() == 50
        create_topic(b.bootstrap, "first", 2)
        produce(b.bootstrap, "first", 0, 10, 2)
        t0 = time.monotonic()
        took = first_assignment(b, ConfluentRunner, "defaults", **{"session.timeout.ms": 45000,
                                                                   "heartbeat.interval.ms": 3000})
        assert 3.0 <= took <= 3.0 + 3.0, took  # the initial delay, then at most one heartbeat
        assert len(b.broker.image.topic("__consumer_offsets").partitions) == 50
        assert time.monotonic() - t0 < 15


def test_first_assignment_with_shrunk_timers(gbroker):
    create_topic(gbroker.bootstrap, "first", 2)
    produce(gbroker.bootstrap, "first", 0, 10, 2)
    delay, heartbeat = FAST_GROUPS["group.initial.rebalance.delay.ms"] / 1000, 0.3
    # + slack for client start-up (metadata, FindCoordinator, MEMBER_ID_REQUIRED round trip)
    assert first_assignment(gbroker, ConfluentRunner, "fast-c") <= delay + heartbeat + 1.0
    assert first_assignment(gbroker, KafkaPythonRunner, "fast-k") <= delay + heartbeat + 1.5
