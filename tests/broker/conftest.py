"""Fixtures: an embedded broker on 127.0.0.1 with an ephemeral port and a temp data dir."""

from __future__ import annotations

import socket
import struct

import pytest

from broker.embedded import EmbeddedBroker


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "data") as b:
        yield b


class RawClient:
    """A bare socket speaking size-prefixed frames, for the cases real clients never send."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes | None:
        head = self._recv_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(broker):
    clients = []

    def connect() -> RawClient:
        c = RawClient(broker.port)
        clients.append(c)
        return c

    yield connect
    for c in clients:
        c.close()
