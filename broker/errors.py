"""Broker-level outcomes that are not Kafka error codes."""


class CloseConnection(Exception):
    """The request cannot be answered; Kafka closes the connection (and logs why)."""


class StartupError(RuntimeError):
    """The node cannot start as configured; the message says why and names the file (printed, exit 1)."""
