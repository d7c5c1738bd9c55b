"""A TCP proxy that can drop a Produce response after the broker appended (the idempotence fault)."""

from __future__ import annotations

import socket
import struct
import threading


class DropAckProxy:
    """Forwards 127.0.0.1 traffic to the broker; the ``drop``-th Produce response (counting from 1,
    and every ``drop``-th after it when ``repeat``) is swallowed and the client connection closed."""

    def __init__(self, drop: int = 3, repeat: bool = False, broker_port: int = 0) -> None:
        self.broker_port = broker_port  # may be set after the broker started (it advertises the proxy)
        self.drop = drop
        self.repeat = repeat
        self.produce_responses = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.port = self._server.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def advertise(self) -> dict:
        """Broker overrides that make clients reach the broker through this proxy."""
        return {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}"}

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.broker_port), timeout=10)
            except OSError:
                client.close()
                continue
            api_keys: dict[int, int] = {}
            threading.Thread(target=self._pump_requests, args=(client, upstream, api_keys), daemon=True).start()
            threading.Thread(target=self._pump_responses, args=(upstream, client, api_keys), daemon=True).start()

    @staticmethod
    def _read_frame(sock: socket.socket) -> bytes | None:
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        (n,) = struct.unpack(">i", head)
        body = b""
        while len(body) < n:
            chunk = sock.recv(min(65536, n - len(body)))
            if not chunk:
                return None
            body += chunk
        return head + body

    def _pump_requests(self, src, dst, api_keys) -> None:
        try:
            while (frame := self._read_frame(src)) is not None:
                api_key, _, corr = struct.unpack_from(">hhi", frame, 4)
                api_keys[corr] = api_key
                dst.sendall(frame)
        except OSError:
            pass
        finally:
            _close(src, dst)

    def _pump_responses(self, src, dst, api_keys) -> None:
        try:
            while (frame := self._read_frame(src)) is not None:
                (corr,) = struct.unpack_from(">i", frame, 4)
                if api_keys.pop(corr, None) == 0:
                    with self._lock:
                        self.produce_responses += 1
                        n = self.produce_responses
                        hit = n == self.drop or (self.repeat and n % self.drop == 0)
                        if hit:
                            self.dropped += 1
                    if hit:
                        return  # the broker appended; the client never hears of it
                dst.sendall(frame)
        except OSError:
            pass
        finally:
            _close(src, dst)

    def close(self) -> None:
        self._closed = True
        self._server.close()


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
