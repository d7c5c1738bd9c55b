"""Jepsen-style history recording and checking for Kafka workloads: record what clients saw, then judge it."""
