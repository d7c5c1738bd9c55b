"""Broker-level outcomes that are not Kafka error codes."""


class CloseConnection(Exception):
    """The request cannot be answered; Kafka closes the connection (and logs why)."""
