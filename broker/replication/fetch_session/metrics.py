"""The fetch session cache's metrics, as Kafka names them (``FetchSessionCache`` gauges and the eviction meter)."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from broker.replication.fetch_session.contexts import FetchManager


class FetchSessionCacheCollector:
    """kafka.server:type=FetchSessionCache (NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached,
    IncrementalFetchSessionEvictionsPerSec), named as broker/observability/metrics.py names Kafka's metrics."""

    def __init__(self, manager: FetchManager) -> None:
        self.manager = manager

    def describe(self):
        return []

    def collect(self):
        cache = self.manager.cache
        sessions = GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                     "Incremental fetch sessions in the cache (NumIncrementalFetchSessions)")
        sessions.add_metric([], cache.size)
        yield sessions
        parts = GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                  "Partitions in incremental fetch sessions (NumIncrementalFetchPartitionsCached)")
        parts.add_metric([], cache.total_partitions)
        yield parts
        evictions = CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                                        "Fetch sessions evicted (IncrementalFetchSessionEvictionsPerSec)")
        evictions.add_metric([], cache.evictions)
        yield evictions


# ---- the client side (the replica fetcher) -----------------------------------------------------------------------
