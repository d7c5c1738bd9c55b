"""An in-process broker for test suites: ``with EmbeddedBroker() as b: ... b.bootstrap``.

It runs the real server on its own event loop in a background thread, on 127.0.0.1 with an
ephemeral port and a temporary data directory unless told otherwise.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig
from broker.node import Broker, new_event_loop


class EmbeddedBroker:
    def __init__(self, data_dir: str | Path | None = None, overrides: dict[str, Any] | None = None,
                 event_loop: str = "uvloop") -> None:
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="odradek-")
            data_dir = self._tmp.name
        # one node: its __consumer_offsets has one replica (as config/single-node.yaml says)
        values = {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": None,
                  "log.dirs": str(data_dir), "event.loop": event_loop, "offsets.topic.replication.factor": 1,
                  "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
                  "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1}
        values.update(overrides or {})
        self.config = BrokerConfig(values)
        self.broker = Broker(self.config)
        self._loop = new_event_loop(event_loop)
        self._thread = threading.Thread(target=self._loop.run_forever, name="odradek-embedded", daemon=True)

    def start(self) -> "EmbeddedBroker":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        if not self._loop.is_running():
            self._loop.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    @property
    def port(self) -> int:
        return self.broker.bound_port()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    bootstrap_servers = bootstrap

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
