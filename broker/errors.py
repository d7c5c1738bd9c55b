"""Broker-level outcomes that are not Kafka error codes."""


class CloseConnection(Exception):
    """The request cannot be answered; Kafka closes the connection (and logs why)."""


class StartupError(RuntimeError):
    """The node cannot start as configured; the message says why and names the file (printed, exit 1)."""


class QuorumFailed(RuntimeError):
    """The node's metadata quorum core raised: the node stops (exit 1), as Kafka's fatal fault handler does."""
