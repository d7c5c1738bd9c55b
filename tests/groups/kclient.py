"""A bare Kafka protocol client over a blocking socket, for requests real clients never send (exact
versions, stale generations, concurrent joins, huge assignments)."""

from __future__ import annotations

import socket
import struct
import threading
import time

from protocol.generated.api_keys import APIS
from protocol.generated.messages import RequestHeader


class KClient:
    def __init__(self, port: int, client_id: str = "raw-test", timeout: float = 20.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self._corr = 0
        self._pending: dict[int, tuple[int, int]] = {}

    def send(self, api_key: int, version: int, body) -> int:
        spec = APIS[api_key]
        self._corr += 1
        payload = RequestHeader(api_key, version, self._corr, self.client_id).encode(
            spec.request_header_version(version)) + body.encode(version)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        self._pending[self._corr] = (api_key, version)
        return self._corr

    def recv(self):
        head = self._exact(4)
        if head is None:
            return None
        frame = self._exact(struct.unpack(">i", head)[0])
        if frame is None:
            return None
        (corr,) = struct.unpack_from(">i", frame)
        api_key, version = self._pending.pop(corr)
        spec = APIS[api_key]
        skip = 4 + (1 if spec.response_header_version(version) == 1 else 0)
        return spec.response.decode(frame[skip:], version)

    def call(self, api_key: int, version: int, body):
        self.send(api_key, version, body)
        return self.recv()

    def _exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def in_thread(fn, *args):
    """Run ``fn(*args)`` in a thread; ``.result()`` joins it (bounded) and returns or raises."""
    box: dict = {}

    def run():
        try:
            box["v"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001
            box["e"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()

    class R:
        def result(self, timeout: float = 30.0):
            t.join(timeout)
            assert not t.is_alive(), "thread did not finish in time"
            if "e" in box:
                raise box["e"]
            return box["v"]

    return R()


def wait_until(cond, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
