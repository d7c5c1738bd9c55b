"""odradek analytics: a PySpark data source over Kafka log directories (``kafka-log``) and batch jobs on it.

    import spark_jobs
    spark_jobs.register(spark)
    spark.read.format("kafka-log").load("/path/to/log.dir")

Jobs: ``python -m spark_jobs.compaction_report``, ``spark_jobs.retention_report``, ``spark_jobs.topic_profile``.
Layering: this package reads protocol/ and storage/ code, never broker/.
"""

from __future__ import annotations

__all__ = ["register"]


def register(spark) -> None:
    """Register the ``kafka-log`` format with ``spark`` (idempotent)."""
    from .datasource import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
