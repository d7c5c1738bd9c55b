"""odradek: spark_jobs."""
