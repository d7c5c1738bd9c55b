"""Prometheus metrics named after Kafka's JMX metrics (kafka.server / kafka.network / kafka.log groups).

Kafka's MBean ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T`` becomes
``kafka_server_brokertopicmetrics_messagesin_total{topic="T"}`` (the JMX exporter's lower-cased form;
meters are counters, Prometheus derives the rate). Counting is per batch (its header's record count
and size), never per record. Per-partition log gauges are read at scrape time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from broker.replication.replica_manager import ReplicaManager
    from broker.network.sendfile import SendStats

log = logging.getLogger("odradek.metrics")

_MS_BUCKETS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class BrokerMetrics:
    """``replicas`` returns the node's ReplicaManager (None before the logs are opened); read at scrape time."""

    def __init__(self, replicas: Callable[[], "ReplicaManager | None"], send_stats: "SendStats") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages_in = Counter("kafka_server_brokertopicmetrics_messagesin", "Records appended (MessagesInPerSec)",
                                   ["topic"], registry=r)
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytesin", "Bytes appended (BytesInPerSec)",
                                ["topic"], registry=r)
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytesout", "Bytes served to fetches (BytesOutPerSec)",
                                 ["topic"], registry=r)
        self.bytes_rejected = Counter("kafka_server_brokertopicmetrics_bytesrejected",
                                      "Bytes of rejected produce batches (BytesRejectedPerSec)", ["topic"], registry=r)
        self.failed_produce = Counter("kafka_server_brokertopicmetrics_failedproducerequests",
                                      "Failed produce partition appends (FailedProduceRequestsPerSec)", ["topic"],
                                      registry=r)
        # KIP-1103's share meters of BrokerTopicMetrics: per topic of a request, failed when one of its partitions
        # was answered with an error
        self.share_fetch = Counter("kafka_server_brokertopicmetrics_totalsharefetchrequests",
                                   "ShareFetch requests reading the topic (TotalShareFetchRequestsPerSec)", ["topic"],
                                   registry=r)
        self.failed_share_fetch = Counter("kafka_server_brokertopicmetrics_failedsharefetchrequests",
                                          "ShareFetch requests failed on the topic (FailedShareFetchRequestsPerSec)",
                                          ["topic"], registry=r)
        self.share_ack = Counter("kafka_server_brokertopicmetrics_totalshareacknowledgementrequests",
                                 "Acknowledgements of the topic's records, in ShareFetch or ShareAcknowledge "
                                 "(TotalShareAcknowledgementRequestsPerSec)", ["topic"], registry=r)
        self.failed_share_ack = Counter("kafka_server_brokertopicmetrics_failedshareacknowledgementrequests",
                                        "Acknowledgements refused on the topic "
                                        "(FailedShareAcknowledgementRequestsPerSec)", ["topic"], registry=r)
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests (RequestsPerSec)",
                                ["request", "version"], registry=r)
        self.total_time = Histogram("kafka_network_requestmetrics_totaltimems", "TotalTimeMs per request",
                                    ["request"], buckets=_MS_BUCKETS, registry=r)
        self.queue_time = Histogram("kafka_network_requestmetrics_requestqueuetimems", "RequestQueueTimeMs",
                                    ["request"], buckets=_MS_BUCKETS, registry=r)
        self.errors = Counter("kafka_network_requestmetrics_errors", "Responses by error (ErrorsPerSec)",
                              ["request", "error"], registry=r)
        self.connections = Gauge("kafka_server_socketservermetrics_connection_count", "Open connections",
                                 ["listener"], registry=r)
        # Kafka's socket-server-metrics of authentication (Selector's SelectorMetrics), per listener
        self.auth_successes = Counter("kafka_server_socketservermetrics_successful_authentication",
                                      "Connections authenticated (successful-authentication-total)", ["listener"],
                                      registry=r)
        self.auth_failures = Counter("kafka_server_socketservermetrics_failed_authentication",
                                     "Authentications failed (failed-authentication-total)", ["listener"], registry=r)
        self.reauth_successes = Counter("kafka_server_socketservermetrics_successful_reauthentication",
                                        "Re-authentications (successful-reauthentication-total)", ["listener"],
                                        registry=r)
        self.reauth_failures = Counter("kafka_server_socketservermetrics_failed_reauthentication",
                                       "Re-authentications failed (failed-reauthentication-total)", ["listener"],
                                       registry=r)
        self.expired_killed = Counter("kafka_server_socketservermetrics_expired_connections_killed",
                                      "Connections closed because their session expired "
                                      "(expired-connections-killed-count)", ["listener"], registry=r)
        self.connection_creations = Counter("kafka_server_socketservermetrics_connection_creation",
                                            "Connections made (connection-creation-total)", ["listener"], registry=r)
        # Acceptor's AcceptorBlockedPercent meter: nanoseconds an acceptor waited for the connection quotas (the
        # rate of this counter / 1e9 is the fraction of time blocked)
        self.acceptor_blocked = Counter("kafka_network_acceptor_acceptorblockedpercent",
                                        "Nanoseconds the acceptor was blocked by connection quotas "
                                        "(AcceptorBlockedPercent)", ["listener"], registry=r)
        # client quotas (Kafka's per-quota-type throttle-time sensors), per quota type
        self.throttle_time = Counter("kafka_server_clientquota_throttle_time_ms",
                                     "Throttle time imposed by client quotas (throttle-time)", ["quota"], registry=r)
        self.throttled = Counter("kafka_server_clientquota_throttled_requests",
                                 "Requests answered with a throttle time", ["quota"], registry=r)
        self.loop_lag = Gauge("kafka_network_socketserver_event_loop_lag_ms",
                              "Event loop scheduling lag (stands in for NetworkProcessorAvgIdlePercent)", registry=r)
        # every measurement, so a phase's worst stall shows however rarely the gauge is scraped
        self.loop_lag_histogram = Histogram("odradek_event_loop_lag_ms", "Event loop scheduling lag per 250 ms sleep",
                                            buckets=_MS_BUCKETS, registry=r)
        self.loop_idle = Gauge("kafka_network_socketserver_networkprocessoravgidlepercent",
                               "Share of the last interval the event loop was not late (1.0 = idle)", registry=r)
        r.register(_LogCollector(replicas, send_stats))
        self._request_children: dict = {}
        self._topic_children: dict = {}
        self._http = None
        self._lag_task: asyncio.Task | None = None
        self.port: int | None = None

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self, listener: str | None) -> None:
        self._lag_task = asyncio.ensure_future(self._watch_loop_lag())
        if not listener:
            return
        host, _, port = listener.rpartition(":")
        host = host.replace("http://", "") or "0.0.0.0"
        server, _thread = start_http_server(int(port), addr=host, registry=self.registry)
        self._http = server
        self.port = server.server_address[1]
        log.info("metrics on http://%s:%d/metrics", host, self.port)

    def stop(self) -> None:
        if self._lag_task is not None:
            self._lag_task.cancel()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    async def _watch_loop_lag(self, interval: float = 0.25) -> None:
        """The event loop's own lag: measured on the loop's clock, the one its timers run on (the one time
        read in broker/ not through broker/clock.py, and meant to be)."""
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(interval)
            lag = max(0.0, loop.time() - start - interval)
            self.loop_lag.set(lag * 1000)
            self.loop_lag_histogram.observe(lag * 1000)
            self.loop_idle.set(max(0.0, 1.0 - lag / interval))

    # ---- events ------------------------------------------------------------------------------------

    def request_done(self, name: str, version: int, received: float, started: float, now: float,
                     error: int = 0) -> None:
        """One answered request; times from the node's monotonic clock, in seconds."""
        children = self._request_children.get((name, version))
        if children is None:  # labels() lookups cost ~10% of a produce request: resolve them once
            children = (self.requests.labels(name, str(version)), self.total_time.labels(name),
                        self.queue_time.labels(name))
            self._request_children[(name, version)] = children
        requests, total, queue = children
        requests.inc()
        total.observe((now - received) * 1000)
        queue.observe((started - received) * 1000)
        if error:
            self.errors.labels(name, str(error)).inc()

    def produced(self, topic: str, records: int, size: int) -> None:
        children = self._topic_children.get(topic)
        if children is None:
            children = (self.messages_in.labels(topic), self.bytes_in.labels(topic))
            self._topic_children[topic] = children
        children[0].inc(records)
        children[1].inc(size)

    def rejected(self, topic: str, size: int) -> None:
        self.bytes_rejected.labels(topic).inc(size)
        self.failed_produce.labels(topic).inc()

    def fetched(self, topic: str, size: int) -> None:
        self.bytes_out.labels(topic).inc(size)

    def share_fetched(self, topics: dict[str, bool]) -> None:
        """One ShareFetch: ``{topic: failed}`` of the topics it read."""
        self._share_requests(topics, "fetch", self.share_fetch, self.failed_share_fetch)

    def share_acknowledged(self, topics: dict[str, bool]) -> None:
        """One request's acknowledgements: ``{topic: failed}``."""
        self._share_requests(topics, "ack", self.share_ack, self.failed_share_ack)

    def _share_requests(self, topics: dict[str, bool], kind: str, total: Counter, failed: Counter) -> None:
        cache = self._topic_children
        for topic, bad in topics.items():
            children = cache.get((kind, topic))
            if children is None:  # resolved once per topic, as produced() does
                children = cache[(kind, topic)] = (total.labels(topic), failed.labels(topic))
            children[0].inc()
            if bad:
                children[1].inc()


class _LogCollector:
    """Per-partition gauges (kafka.log:type=Log,name=Size|LogStartOffset|LogEndOffset) and
    kafka.server:type=ReplicaManager / DelayedOperationPurgatory, computed at scrape time."""

    def __init__(self, replicas: Callable[[], "ReplicaManager | None"], send_stats: "SendStats") -> None:
        self.replicas = replicas
        self.send_stats = send_stats

    def describe(self):
        return []

    def collect(self):
        size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes", labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=["topic", "partition"])
        replicas = self.replicas()
        parts = dict(replicas.partitions) if replicas is not None else {}
        under = under_min = at_min = 0
        lag = GaugeMetricFamily("kafka_server_fetcherlagmetrics_consumerlag",
                                "Follower lag behind the leader's high watermark (ReplicaFetcherThread)",
                                labels=["topic", "partition"])
        for (topic, p), part in sorted(parts.items()):
            labels = [topic, str(p)]
            lg = part.log
            size.add_metric(labels, lg.size)
            start.add_metric(labels, lg.log_start_offset)
            end.add_metric(labels, lg.log_end_offset)
            if replicas is not None and part.is_leader(replicas.node_id):  # Partition's leader-only gauges
                isr, min_isr = len(part.info.isr), lg.config.min_insync_replicas
                under += isr < len(part.info.replicas)
                under_min += isr < min_isr
                at_min += isr == min_isr
            elif part.follower_lag >= 0:
                lag.add_metric(labels, part.follower_lag)
        yield size
        yield start
        yield end
        yield lag
        for name, doc, value in (
                ("underreplicatedpartitions", "Led partitions whose ISR is smaller than the replica set", under),
                ("underminisrpartitioncount", "Led partitions whose ISR is below min.insync.replicas", under_min),
                ("atminisrpartitioncount", "Led partitions whose ISR is exactly min.insync.replicas", at_min)):
            g = GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc)
            g.add_metric([], value)
            yield g
        for name, doc, attr in (
                ("kafka_server_replicamanager_isrshrinks", "ISR shrinks committed (IsrShrinksPerSec)", "isr_shrinks"),
                ("kafka_server_replicamanager_isrexpands", "ISR expansions committed (IsrExpandsPerSec)",
                 "isr_expands"),
                ("kafka_server_replicamanager_failedisrupdates", "ISR changes answered with an error "
                 "(FailedIsrUpdatesPerSec)", "failed_isr_updates"),
                ("odradek_server_alterpartition_requests", "AlterPartition requests this broker sent",
                 "alter_partition_requests"),
                ("odradek_server_alterpartition_changes", "Partition ISR changes those requests carried",
                 "alter_partition_changes")):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], getattr(replicas, attr) if replicas is not None else 0)
            yield c
        count = GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions hosted")
        count.add_metric([], len(parts))
        yield count
        purg = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize", "Delayed operations waiting",
                                 labels=["delayedOperation"])
        purg.add_metric(["Fetch"], len(replicas.fetch_waiters) if replicas is not None else 0)
        purg.add_metric(["Produce"], len(replicas.commit_waiters) if replicas is not None else 0)
        yield purg
        stats = self.send_stats
        sf = GaugeMetricFamily("odradek_network_sendfile_bytes", "Record bytes sent with sendfile(2)")
        sf.add_metric([], stats.bytes)
        yield sf
        cp = GaugeMetricFamily("odradek_network_copied_record_bytes", "Record bytes read into memory to send")
        cp.add_metric([], stats.copied_bytes)
        yield cp
