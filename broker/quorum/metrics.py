"""The quorum's and the controller's metrics under Kafka's names, read at scrape time:
``kafka.server:type=raft-metrics`` (current-leader, current-epoch, high-watermark, log-end-offset,
commit-latency-avg/max) and, on nodes with the controller role, ``kafka.controller:type=KafkaController``
(ActiveControllerCount, OfflinePartitionsCount, FencedBrokerCount, ActiveBrokerCount, GlobalTopicCount,
GlobalPartitionCount), as the JMX exporter names them."""

from __future__ import annotations

import collections
import threading

from prometheus_client.core import GaugeMetricFamily

from broker.clock import Clock

COMMIT_LATENCY_WINDOW_S = 60.0  # Kafka's metrics: two 30 s samples


class LatencyWindow:
    """Recent latencies (ms) for an average and a maximum over the last minute; thread-safe for the scraper."""

    def __init__(self, clock: Clock, window_s: float = COMMIT_LATENCY_WINDOW_S) -> None:
        self.clock = clock
        self.window_s = window_s
        self._samples: collections.deque[tuple[float, float]] = collections.deque(maxlen=100_000)
        self._lock = threading.Lock()

    def record(self, ms: float) -> None:
        with self._lock:
            self._samples.append((self.clock.monotonic(), ms))

    def avg_max(self) -> tuple[float, float]:
        """(avg, max) over the window; NaN when nothing was recorded (as Kafka's Avg/Max report)."""
        cutoff = self.clock.monotonic() - self.window_s
        with self._lock:
            while self._samples and self._samples[0][0] < cutoff:
                self._samples.popleft()
            values = [ms for _, ms in self._samples]
        if not values:
            return float("nan"), float("nan")
        return sum(values) / len(values), max(values)


class QuorumCollector:
    """``quorum`` is the node's RaftQuorum (``raft_status``, ``is_active``, ``image``,
    ``commit_latency``); ``contacts``: the controller's BrokerHeartbeatTracker if this node runs the controller
    role (None otherwise)."""

    def __init__(self, quorum, contacts) -> None:
        self.quorum = quorum
        self.contacts = contacts

    def describe(self):
        return []

    def collect(self):
        q = self.quorum
        leader, epoch, high_watermark, end_offset = q.raft_status()
        avg, max_ = q.commit_latency.avg_max()
        for name, doc, value in (
                ("current_leader", "The current quorum leader's id; -1 means unknown", leader),
                ("current_epoch", "The current quorum epoch", epoch),
                ("high_watermark", "The high watermark of the metadata log; -1 if unknown", high_watermark),
                ("log_end_offset", "The current metadata log end offset", end_offset),
                ("commit_latency_avg", "The average time in ms to commit an entry in the raft log", avg),
                ("commit_latency_max", "The maximum time in ms to commit an entry in the raft log", max_)):
            g = GaugeMetricFamily(f"kafka_server_raft_metrics_{name}", doc)
            g.add_metric([], value)
            yield g
        if self.contacts is None:
            return
        image = q.image
        brokers = image.brokers.values()
        partitions = [p for t in image.topics_by_name.values() for p in t.partitions.values()]
        for name, doc, value in (
                ("activecontrollercount", "1 on the active controller, 0 elsewhere", int(q.is_active)),
                ("offlinepartitionscount", "Partitions without a leader", sum(p.leader < 0 for p in partitions)),
                ("fencedbrokercount", "Registered brokers that are fenced", sum(b.fenced for b in brokers)),
                ("activebrokercount", "Registered brokers that are not fenced", sum(not b.fenced for b in brokers)),
                ("globaltopiccount", "Topics in the cluster", len(image.topics_by_name)),
                ("globalpartitioncount", "Partitions in the cluster", len(partitions))):
            g = GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", doc)
            g.add_metric([], value)
            yield g
        gap = GaugeMetricFamily("odradek_controller_broker_contact_gap_max_ms", "The largest time between two "
                                "heartbeats of one broker incarnation, as they arrived at this controller")
        gap.add_metric([], self.contacts.max_gap_ms)
        yield gap
