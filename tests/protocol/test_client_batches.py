"""Batches written by a real client (confluent-kafka, i.e. librdkafka) for every codec, captured by a minimal fake
broker on loopback and checked with our validator and decoder.

librdkafka is the independent source that matters most here: it writes *raw* snappy (no xerial framing), sets its
own timestamps, and with idempotence on fills in producer id / epoch / sequence. The fake broker speaks just enough
protocol (ApiVersions, Metadata, InitProducerId, Produce) through the generated message codec.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading

import confluent_kafka
import pytest

from protocol import records as R
from protocol.compression import XERIAL_MAGIC
from protocol.generated.api_keys import APIS
from protocol.generated.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.generated.messages.init_producer_id_response import InitProducerIdResponse
from protocol.generated.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.generated.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.response_header import ResponseHeader
from protocol.record_codec import decode_batch

TOPIC = "odradek-capture"
NODE_ID = 1
PRODUCER_ID = 4242
# ApiVersions, Metadata, Produce, InitProducerId are served. Fetch and FindCoordinator are only advertised: librdkafka
# writes magic 2 only if the broker has Fetch v4+ (its MSGVER2 feature; else magic 0 message sets), and uses lz4 only
# if it has FindCoordinator (its LZ4 feature; else it silently sends uncompressed batches).
ADVERTISED = {18: (0, 3), 3: (1, 12), 0: (3, 11), 22: (0, 4), 1: (4, 12), 10: (0, 4)}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(15)
        try:
            while True:
                size_bytes = _recv_exact(sock, 4)
                if size_bytes is None:
                    return
                (size,) = struct.unpack(">i", size_bytes)
                frame = _recv_exact(sock, size)
                if frame is None:
                    return
                reply = self.server.broker.respond(frame)  # type: ignore[attr-defined]
                if reply is not None:
                    sock.sendall(struct.pack(">i", len(reply)) + reply)
        except (ConnectionError, socket.timeout):
            return


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class FakeBroker:
    """One broker, one topic, one partition; records every Produce payload."""

    def __init__(self) -> None:
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.broker = self  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.payloads: list[bytes] = []
        self.produce_versions: list[int] = []
        self.lock = threading.Lock()
        self.next_offset = 0
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeBroker":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def respond(self, frame: bytes) -> bytes | None:
        api_key, version = struct.unpack_from(">hh", frame)
        spec = APIS[api_key]
        mv = memoryview(frame)
        header, pos = RequestHeader.decode_from(mv, 0, spec.request_header_version(version))
        if api_key == 18 and version > ADVERTISED[18][1]:
            body, version = ApiVersionsResponse(error_code=35, api_keys=self._api_versions()), 0
        else:
            request, _ = spec.request.decode_from(mv, pos, version)
            body = self._handle(api_key, version, request)
            if body is None:  # acks=0
                return None
        out = bytearray()
        ResponseHeader(correlation_id=header.correlation_id).encode_into(out, spec.response_header_version(version))
        body.encode_into(out, version)
        return bytes(out)

    @staticmethod
    def _api_versions() -> list:
        return [ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ADVERTISED.items()]

    def _handle(self, api_key: int, version: int, request):
        if api_key == 18:
            return ApiVersionsResponse(api_keys=self._api_versions())
        if api_key == 3:
            return MetadataResponse(
                brokers=[MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=self.port)],
                cluster_id="odradek-test", controller_id=NODE_ID,
                topics=[MetadataResponseTopic(name=TOPIC, topic_id=b"\x01" * 16, partitions=[
                    MetadataResponsePartition(partition_index=0, leader_id=NODE_ID, leader_epoch=0,
                                              replica_nodes=[NODE_ID], isr_nodes=[NODE_ID])])])
        if api_key == 22:
            return InitProducerIdResponse(producer_id=PRODUCER_ID, producer_epoch=0)
        if api_key == 0:
            responses = []
            for topic in request.topic_data:
                parts = []
                for p in topic.partition_data:
                    payload = bytes(p.records) if p.records is not None else b""
                    with self.lock:
                        self.payloads.append(payload)
                        self.produce_versions.append(version)
                        base = self.next_offset
                        self.next_offset += sum(h.records_count for h in R.validate_batches(payload))
                    parts.append(PartitionProduceResponse(index=p.index, base_offset=base))
                responses.append(TopicProduceResponse(name=topic.name, topic_id=topic.topic_id,
                                                      partition_responses=parts))
            return ProduceResponse(responses=responses) if request.acks != 0 else None
        raise AssertionError(f"fake broker got unexpected api key {api_key}")


MESSAGES = [
    (b"key-%d" % i if i % 4 else None,
     (b"value %d " % i) * 40 if i % 7 else None,
     [("trace", b"t-%d" % i), ("nil", None)] if i % 3 == 0 else None,
     1_700_000_000_000 + i)
    for i in range(60)
]


def produce(codec: str, idempotent: bool = False):
    with FakeBroker() as broker:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "broker.address.family": "v4",
            "compression.type": codec,
            "linger.ms": 50,
            "batch.num.messages": 25,  # several batches per run
            "enable.idempotence": idempotent,
            "acks": "all",
            "message.timeout.ms": 15000,
            "socket.timeout.ms": 10000,
        })
        delivered = []
        for key, value, headers, ts in MESSAGES:
            producer.produce(TOPIC, value=value, key=key, headers=headers, timestamp=ts, partition=0,
                             on_delivery=lambda err, msg: delivered.append(err))
        remaining = producer.flush(20)
        assert remaining == 0, "librdkafka did not deliver everything to the fake broker"
        assert delivered == [None] * len(MESSAGES)
        return list(broker.payloads), list(broker.produce_versions)


CODECS = {"none": R.NONE, "gzip": R.GZIP, "snappy": R.SNAPPY, "lz4": R.LZ4, "zstd": R.ZSTD}


@pytest.mark.parametrize("codec", list(CODECS))
def test_librdkafka_batches(codec):
    payloads, versions = produce(codec)
    assert payloads and all(v >= 3 for v in versions)
    got = []
    for payload in payloads:
        for pos, h in R.iter_batch_positions(payload):
            assert R.validate_batch(payload, pos) == h
            assert h.compression == CODECS[codec]
            R.check_client_batch(h)
            hh, recs = decode_batch(payload, pos)
            assert hh == h
            got.extend(recs)
            if codec == "snappy":
                section = payload[pos + R.RECORDS_OFFSET:pos + h.size]
                assert not section.startswith(XERIAL_MAGIC)  # librdkafka writes raw snappy
        assert len(R.validate_batches(payload)) >= 1
    expected = [(k, v, [] if hs is None else hs, ts) for k, v, hs, ts in MESSAGES]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == expected


def test_librdkafka_idempotent_batch_fields():
    payloads, _ = produce("lz4", idempotent=True)
    seq = 0
    for payload in payloads:
        for h in R.validate_batches(payload):
            R.check_client_batch(h)
            assert (h.producer_id, h.producer_epoch, h.base_sequence) == (PRODUCER_ID, 0, seq)
            assert h.last_sequence == seq + h.records_count - 1
            assert not h.is_transactional
            seq += h.records_count
    assert seq == len(MESSAGES)


def test_stamped_librdkafka_batch_still_valid():
    payloads, _ = produce("zstd")
    buf = bytearray(payloads[0])
    (h,) = R.validate_batches(buf)[:1]
    R.stamp_batch(buf, 0, 10_000, 5)
    R.set_max_timestamp(buf, 0, R.LOG_APPEND_TIME, 1_800_000_000_000)
    h2, recs = decode_batch(buf)
    assert (h2.base_offset, h2.partition_leader_epoch, h2.timestamp_type) == (10_000, 5, R.LOG_APPEND_TIME)
    assert recs[0].offset == 10_000 and all(r.timestamp == 1_800_000_000_000 for r in recs)
