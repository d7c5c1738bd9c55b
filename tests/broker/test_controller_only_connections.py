"""A controller-only node's connections (issue 26): closing one never touches the broker role's parts (a
controller-only node has no client telemetry, replicas or groups). Each closed connection used to raise in
``connection_lost`` (an AttributeError logged by asyncio per connection), leaving it in ``server.connections``,
the connections gauge up, and its writer task running."""

from __future__ import annotations

import logging
import socket
import struct
import time

from broker.testing.embedded import EmbeddedBroker
from protocol.generated.messages import ApiVersionsRequest, RequestHeader
from tests.harness import reserve_ports, wait_until


def _api_versions_frame(correlation_id: int) -> bytes:
    payload = RequestHeader(18, 3, correlation_id, "leaver").encode(2) + ApiVersionsRequest(
        client_software_name="leaver", client_software_version="1").encode(3)
    return struct.pack(">i", len(payload)) + payload


def test_a_hundred_connections_to_a_controller_only_node_close_cleanly(tmp_path, caplog):
    port = reserve_ports(1)[0]
    overrides = {"process.roles": "controller", "node.id": 1, "listeners": f"CONTROLLER://127.0.0.1:{port}",
                 "controller.listener.names": "CONTROLLER", "controller.quorum.voters": f"1@127.0.0.1:{port}",
                 "cluster.id": "b2RyYWRlay10ZXN0LWNsdQ"}
    caplog.set_level(logging.INFO)
    with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides) as node:
        server = node.broker.server
        gauge = node.broker.metrics.connections.labels("CONTROLLER")
        start = gauge._value.get()
        for i in range(100):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                frame = _api_versions_frame(i)
                if i % 3 == 0:
                    s.sendall(frame[:len(frame) // 2])  # leaves mid-request: half a frame
                elif i % 3 == 1:
                    s.sendall(frame)  # leaves before reading the answer
                    if i % 2:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
        wait_until(lambda: not server.connections, 10, 0.05, "every connection gone from server.connections")
        time.sleep(0.2)  # what a leftover writer task or callback would still log
        assert gauge._value.get() == start
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # still serving
            s.sendall(_api_versions_frame(1000))
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            assert size > 0 and struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0] == 1000
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
