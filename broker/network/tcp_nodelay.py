"""TCP_NODELAY on a connection's socket: requests and responses are whole frames written at once, so Nagle's
delay (waiting for the peer's ACK of a previous small segment) only adds latency."""

from __future__ import annotations

import socket


def set_nodelay(transport) -> None:
    """Best effort: a transport without a TCP socket (a test double, a Unix socket) is left as it is."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass
