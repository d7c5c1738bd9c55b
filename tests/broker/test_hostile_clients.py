"""Hostile clients on raw sockets: after each case the broker is alive, a healthy client still
produces and consumes, memory stays bounded, and the bad connection cost one log line.

The broker runs as a subprocess so its RSS and log are its own.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.generated.messages import ProduceRequest, RequestHeader
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.generated.messages.produce_response import ProduceResponse
from protocol.record_codec import Record, build_batch
from tests.harness import BrokerProcess

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("hostile") / "data"
    data.mkdir()
    b = BrokerProcess(data, {"socket.request.max.bytes": 1048576}).start()
    yield b
    b.close()


def healthy_round_trip(b: BrokerProcess, tag: str) -> None:
    """A well-behaved confluent-kafka client still produces and consumes normally."""
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    errors = []
    for i in range(10):
        p.produce("healthy", value=f"{tag}-{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(20) == 0 and errors == []
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "h", "enable.auto.commit": False})
    c.assign([TopicPartition("healthy", 0, 0)])
    values = []
    deadline = time.time() + 20
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            values.append(m.value().decode())
            if values[-1] == f"{tag}-9":
                break
    c.close()
    assert [v for v in values if v.startswith(tag + "-")] == [f"{tag}-{i}" for i in range(10)]


def connect(b: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", b.port), timeout=10)


def closed_by_peer(s: socket.socket, timeout: float = 10) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def after_case(b: BrokerProcess, tag: str, rss_limit_mb: float = 400) -> float:
    assert b.alive()
    healthy_round_trip(b, tag)
    rss = b.rss_mb()
    print(f"{tag}: broker RSS {rss:.1f} MB")
    assert rss < rss_limit_mb
    return rss


def test_garbage_bytes(broker):
    before = broker.log_lines("closing connection")
    s = connect(broker)
    s.sendall(os.urandom(64) + b"\x00\x00\x00\x10" + os.urandom(16))
    assert closed_by_peer(s)
    after_case(broker, "garbage")
    assert broker.log_lines("closing connection") == before + 1


@pytest.mark.parametrize("size", [2 ** 31 - 1, -1, -(2 ** 31)])
def test_huge_or_negative_frame_sizes(broker, size):
    before = broker.log_lines("closing connection")
    s = connect(broker)
    s.sendall(struct.pack(">i", size) + b"\x00" * 100)
    assert closed_by_peer(s)
    after_case(broker, f"size{size}")
    assert broker.log_lines("closing connection") == before + 1


def test_truncated_frame_then_disconnect(broker):
    for _ in range(20):
        s = connect(broker)
        s.sendall(struct.pack(">i", 500) + b"\x00\x12\x00\x03")
        s.close()
    after_case(broker, "truncated")


def test_unknown_api_key(broker):
    before = broker.log_lines("unsupported api key")
    s = connect(broker)
    s.sendall(struct.pack(">ihhih", 10, 4242, 0, 7, -1))
    assert closed_by_peer(s)
    after_case(broker, "unknown-key")
    assert broker.log_lines("unsupported api key") == before + 1


def test_corrupt_batch_is_rejected_and_not_appended(broker):
    healthy_round_trip(broker, "pre-corrupt")
    batch = bytearray(build_batch([Record(value=b"bad")]))
    batch[-1] ^= 0xFF  # inside the CRC-covered records
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        TopicProduceData(name="healthy", partition_data=[PartitionProduceData(index=0, records=bytes(batch))])])
    body = RequestHeader(0, 9, 1, "hostile").encode(2) + req.encode(9)
    s = connect(broker)
    s.sendall(struct.pack(">i", len(body)) + body)
    s.settimeout(10)
    head = s.recv(4)
    (n,) = struct.unpack(">i", head)
    data = b""
    while len(data) < n:
        data += s.recv(n - len(data))
    resp = ProduceResponse.decode(data[5:], 9)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 2  # CORRUPT_MESSAGE
    s.close()
    healthy_round_trip(broker, "post-corrupt")  # offsets continue with no gap: nothing was appended
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "h", "enable.auto.commit": False})
    c.assign([TopicPartition("healthy", 0, 0)])
    values = []
    deadline = time.time() + 20
    while time.time() < deadline and (not values or values[-1] != b"post-corrupt-9"):
        m = c.poll(0.2)
        if m is not None and not m.error():
            values.append(m.value())
    c.close()
    assert b"bad" not in values


def test_thousand_idle_connections(broker):
    socks = [connect(broker) for _ in range(1000)]
    try:
        after_case(broker, "idle1000")
    finally:
        for s in socks:
            s.close()


def test_half_frames_that_stall(broker):
    socks = []
    for _ in range(300):
        s = connect(broker)
        s.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x0c" + b"\x00" * 100)
        socks.append(s)
    try:
        after_case(broker, "stall300")
    finally:
        for s in socks:
            s.close()


def test_pipelining_client_that_never_reads(broker):
    """Backpressure: the broker stops reading a connection whose responses are not drained."""
    from protocol.generated.messages import MetadataRequest

    body = RequestHeader(3, 12, 1, "flood").encode(2) + MetadataRequest(topics=None).encode(12)
    frame = struct.pack(">i", len(body)) + body
    s = connect(broker)
    s.setblocking(False)
    sent = 0
    deadline = time.time() + 10
    while time.time() < deadline and sent < 200_000_000:
        try:
            sent += s.send(frame * 64)
        except BlockingIOError:
            time.sleep(0.05)
            try:
                sent += s.send(frame)
            except BlockingIOError:
                break  # the broker stopped reading: the socket buffers are full
    rss = after_case(broker, "flood")
    assert sent < 200_000_000  # the broker pushed back long before
    s.close()
    assert rss < 400
