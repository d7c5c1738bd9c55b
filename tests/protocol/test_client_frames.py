"""Request frames written by real clients (librdkafka via confluent-kafka, kafka-python, aiokafka), captured by a
minimal fake broker on loopback and read with our framing and codec.

The fake broker is a plain threaded TCP server. It reads size-prefixed frames with ``FrameReader``, splits every header
with ``parse_request``, decodes each body with ``decode_body`` and answers with *our* codec via
``encode_response``: ApiVersions, Metadata, Produce, InitProducerId, FindCoordinator, ListOffsets and Fetch, just
enough for each client to do what the test asks. Every request is recorded, and the tests assert that the decoded
fields are what the client was configured to send (client id, acks, timeout, topic, partition, transactional id,
isolation level, fetch sizes, software name and version...). Since the clients check the responses they parse, a
client that gets through (delivers, or consumes the record batch we served) also vouches for our response encoding.

Record batches: librdkafka's batches for every codec are decoded in test_client_batches.py; here only the codec bit
of librdkafka's batches is checked, and kafka-python's and aiokafka's batches (not covered there) are decoded whole.

Every wait is bounded: socket timeouts, ``flush(timeout)``, ``poll(timeout)``, ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import re
import socket
import socketserver
import threading
import time

import pytest

from protocol import records as R
from protocol.connection import Request, encode_response, parse_request
from protocol.framing import FrameReader
from protocol.generated.api_keys import APIS
from protocol.generated.messages import (
    ApiVersionsResponse,
    FetchResponse,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ProduceResponse,
)
from protocol.generated.messages.api_versions_response import ApiVersion
from protocol.generated.messages.fetch_response import FetchableTopicResponse, PartitionData
from protocol.generated.messages.find_coordinator_response import Coordinator
from protocol.generated.messages.list_offsets_response import ListOffsetsPartitionResponse, ListOffsetsTopicResponse
from protocol.generated.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.generated.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from protocol.record_codec import Record, build_batch, decode_batch

NODE_ID = 1
PRODUCER_ID = 777
CLUSTER_ID = "odradek-frames"
UNSUPPORTED_VERSION = 35

# What the fake broker lists in ApiVersions: Kafka 4.x's ranges for what it answers (Produce from v0 and Metadata from
# v0, as the real broker does: librdkafka only compresses when Produce v0 is listed, KAFKA-18659).
HANDLED = (0, 1, 2, 3, 10, 18, 22)
ADVERTISED = {k: (0 if k in (0, 3) else APIS[k].served_min, APIS[k].stable_max) for k in HANDLED}

# Kafka's pattern for ClientSoftwareName / ClientSoftwareVersion (KIP-511)
SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class Captured:
    """One request as the fake broker saw it."""

    def __init__(self, req: Request, body, raw: bytes) -> None:
        self.req = req
        self.body = body
        self.raw = raw  # the frame, size prefix excluded

    @property
    def api_key(self) -> int:
        return self.req.api_key

    def __repr__(self) -> str:
        return f"<{APIS[self.api_key].name} v{self.req.api_version} client_id={self.req.client_id!r}>"


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        broker: FakeBroker = self.server.broker  # type: ignore[attr-defined]
        sock: socket.socket = self.request
        sock.settimeout(20)
        frames = FrameReader()
        try:
            while not broker.closing:
                data = sock.recv(65536)
                if not data:
                    return
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    for part in broker.respond(frame):
                        sock.sendall(part)
        except OSError:
            return
        except Exception as exc:  # noqa: BLE001 - reported by the fixture, not lost in a server thread
            broker.errors.append(exc)


class FakeBroker:
    """One broker (node 1) that leads every partition of every topic it is asked about."""

    def __init__(self, partitions: int = 1, fetch_records: list[Record] | None = None,
                 api_versions_max: int | None = None) -> None:
        self.advertised = dict(ADVERTISED)
        if api_versions_max is not None:
            self.advertised[18] = (0, api_versions_max)
        self.partitions = partitions
        self.fetch_records = fetch_records or []
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.broker = self  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.captured: list[Captured] = []
        self.errors: list[Exception] = []
        self.lock = threading.Lock()
        self.topic_ids: dict[str, bytes] = {}
        self.next_offset: dict[tuple[str, int], int] = {}
        self.closing = False
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "FakeBroker":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing = True
        self.server.shutdown()
        self.server.server_close()

    # -- capture --

    def requests(self, api_key: int) -> list[Captured]:
        with self.lock:
            return [c for c in self.captured if c.api_key == api_key]

    def wait_for(self, api_key: int, timeout: float = 10.0, count: int = 1) -> list[Captured]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.requests(api_key)
            if len(got) >= count:
                return got
            time.sleep(0.02)
        raise AssertionError(f"no {APIS[api_key].name} request within {timeout}s; got {self.captured}")

    # -- answering --

    def topic_id(self, name: str) -> bytes:
        with self.lock:
            if name not in self.topic_ids:
                self.topic_ids[name] = bytes([len(self.topic_ids) + 1]) * 16
            return self.topic_ids[name]

    def topic_name(self, topic_id: bytes) -> str:
        with self.lock:
            return next(n for n, i in self.topic_ids.items() if i == bytes(topic_id))

    def respond(self, frame: bytes) -> list[bytes]:
        req = parse_request(frame)
        if req.api_key == 18 and req.api_version > self.advertised[18][1]:
            # KIP-511: an ApiVersions version we don't know gets UNSUPPORTED_VERSION in a v0 body listing our range
            with self.lock:
                self.captured.append(Captured(req, None, frame))
            lo, hi = self.advertised[18]
            return encode_response(req, ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=[
                ApiVersion(api_key=18, min_version=lo, max_version=hi)]), version=0)
        body = req.decode_body()
        with self.lock:
            self.captured.append(Captured(req, body, frame))
        handler = getattr(self, f"_k{req.api_key}", None)
        if handler is None:
            raise AssertionError(f"fake broker got unexpected {APIS[req.api_key].name} v{req.api_version}")
        resp = handler(req, body)
        return [] if resp is None else encode_response(req, resp)

    def _k18(self, req, body):
        return ApiVersionsResponse(api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                             for k, (lo, hi) in sorted(self.advertised.items())])

    def _k3(self, req, body):
        names = [t.name for t in body.topics] if body.topics is not None else list(self.topic_ids)
        topics = [MetadataResponseTopic(name=n, topic_id=self.topic_id(n), partitions=[
            MetadataResponsePartition(partition_index=p, leader_id=NODE_ID, leader_epoch=0, replica_nodes=[NODE_ID],
                                      isr_nodes=[NODE_ID]) for p in range(self.partitions)]) for n in names]
        return MetadataResponse(brokers=[MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=self.port)],
                                cluster_id=CLUSTER_ID, controller_id=NODE_ID, topics=topics)

    def _k22(self, req, body):
        return InitProducerIdResponse(producer_id=PRODUCER_ID, producer_epoch=0)

    def _k10(self, req, body):
        keys = body.coordinator_keys if req.api_version >= 4 else [body.key]
        return FindCoordinatorResponse(node_id=NODE_ID, host="127.0.0.1", port=self.port, coordinators=[
            Coordinator(key=k, node_id=NODE_ID, host="127.0.0.1", port=self.port) for k in keys])

    def _k0(self, req, body):
        topics = []
        for t in body.topic_data:
            name = t.name if req.api_version < 13 else self.topic_name(t.topic_id)
            parts = []
            for p in t.partition_data:
                n = sum(h.records_count for h in R.validate_batches(p.records)) if p.records is not None else 0
                with self.lock:
                    base = self.next_offset.get((name, p.index), 0)
                    self.next_offset[(name, p.index)] = base + n
                parts.append(PartitionProduceResponse(index=p.index, base_offset=base))
            topics.append(TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=parts))
        return None if body.acks == 0 else ProduceResponse(responses=topics)

    def _k2(self, req, body):
        end = len(self.fetch_records)
        return ListOffsetsResponse(topics=[ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=0 if p.timestamp == -2 else end,
                                         old_style_offsets=[0 if p.timestamp == -2 else end], leader_epoch=0,
                                         timestamp=-1)
            for p in t.partitions]) for t in body.topics])

    def _k1(self, req, body):
        topics = []
        served = False
        end = len(self.fetch_records)
        for t in body.topics:
            parts = []
            for p in t.partitions:
                records = b""
                if p.fetch_offset < end:
                    records = build_batch(self.fetch_records[p.fetch_offset:], base_offset=p.fetch_offset,
                                          partition_leader_epoch=0)
                    served = True
                parts.append(PartitionData(partition_index=p.partition, high_watermark=end, last_stable_offset=end,
                                           log_start_offset=0, records=records))
            topics.append(FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts))
        if not served:  # an empty fetch waits (bounded) like a broker would, so clients don't spin
            time.sleep(min(body.max_wait_ms, 200) / 1000)
        return FetchResponse(responses=topics)


@pytest.fixture
def broker():
    with FakeBroker() as b:
        yield b
        assert not b.errors, b.errors


# ---------------------------------------------------------------------------------------------------------------
# checks every captured request gets


def check_frames(broker: FakeBroker) -> None:
    """Every frame a client sent: the header version follows the API's flexibility, and our codec gives back the
    exact bytes (header and body) from what it decoded, so nothing was skipped or misread."""
    from protocol.generated.messages import RequestHeader

    assert not broker.errors, broker.errors
    assert broker.captured
    for c in broker.captured:
        if c.body is None:
            continue  # an ApiVersions version above our range, answered from the header alone
        spec = APIS[c.api_key]
        assert c.req.header_version == (2 if spec.is_flexible(c.req.api_version) else 1), c
        header = RequestHeader(request_api_key=c.api_key, request_api_version=c.req.api_version,
                               correlation_id=c.req.correlation_id, client_id=c.req.client_id)
        assert header.encode(c.req.header_version) + c.body.encode(c.req.api_version) == c.raw, c


def produce_requests(broker: FakeBroker):
    out = broker.requests(0)
    assert out, broker.captured
    return out


def batches_of(captured) -> list[tuple[str, int, bytes]]:
    out = []
    for c in captured:
        for t in c.body.topic_data:
            for p in t.partition_data:
                out.append((t.name, p.index, bytes(p.records)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# librdkafka (confluent-kafka)

import confluent_kafka  # noqa: E402 - a declared test dependency: a broken install fails here

RDK_BASE = {"broker.address.family": "v4", "socket.timeout.ms": 10000, "message.timeout.ms": 15000,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500}


def rdk_produce(broker: FakeBroker, conf: dict, messages) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, **RDK_BASE, **conf})
    errors = []
    for topic, partition, key, value in messages:
        producer.produce(topic, value=value, key=key, partition=partition,
                         on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(15) == 0, f"librdkafka did not deliver; fake broker saw {broker.captured}"
    assert errors == [None] * len(messages)
    del producer


def test_librdkafka_api_versions(broker):
    rdk_produce(broker, {"client.id": "rdk-apiv"}, [("frames-apiv", 0, None, b"x")])
    check_frames(broker)
    (first, *_) = broker.requests(18)
    req = first.req
    assert req.client_id == "rdk-apiv"
    assert req.api_version >= 3  # KIP-511: client software name and version, flexible body
    assert req.header_version == 2
    # header v2: ClientId stays a classic int16-length string, then an (empty) tagged-field section
    assert first.raw[8:10] == len(b"rdk-apiv").to_bytes(2, "big") and first.raw[10:18] == b"rdk-apiv"
    assert first.raw[18] == 0
    body = first.body
    assert body.client_software_name == "confluent-kafka-python"
    assert body.client_software_version.startswith(confluent_kafka.version()[0])
    assert confluent_kafka.libversion()[0] in body.client_software_version
    assert SOFTWARE.fullmatch(body.client_software_name) and SOFTWARE.fullmatch(body.client_software_version)
    assert body.unknown_tagged_fields is None


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
def test_api_versions_fallback(client):
    """A broker that knows ApiVersions only up to v2: the client's v3/v4 request gets UNSUPPORTED_VERSION in a v0
    body (response header v0) and the client retries with a version from the range we listed, then gets on."""
    with FakeBroker(api_versions_max=2) as broker:
        if client == "librdkafka":
            rdk_produce(broker, {"client.id": "fallback"}, [("frames-fallback", 0, None, b"x")])
        else:
            from kafka import KafkaProducer

            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="fallback", acks=1,
                                     max_block_ms=10000, bootstrap_timeout_ms=10000, enable_idempotence=False)
            try:
                producer.send("frames-fallback", b"x", partition=0).get(timeout=10)
            finally:
                producer.close(timeout=5)
        check_frames(broker)
        versions = [c.req.api_version for c in broker.requests(18)]
        assert produce_requests(broker)
    assert versions[0] >= 3, versions
    assert any(v <= 2 for v in versions[1:]), versions
    assert all(c.body is not None for c in broker.requests(18) if c.req.api_version <= 2)


CODECS = {"none": R.NONE, "gzip": R.GZIP, "snappy": R.SNAPPY, "lz4": R.LZ4, "zstd": R.ZSTD}


@pytest.mark.parametrize("codec", list(CODECS))
def test_librdkafka_produce(codec):
    topic = f"frames-rdk-{codec}"
    acks = 1 if codec == "none" else -1
    with FakeBroker(partitions=2) as broker:
        messages = [(topic, i % 2, b"k%d" % i, b"value %d " % i * 20) for i in range(30)]
        rdk_produce(broker, {"client.id": f"rdk-{codec}", "compression.type": codec, "linger.ms": 20,
                             "acks": "1" if acks == 1 else "all", "request.timeout.ms": 7000}, messages)
        check_frames(broker)
        meta = broker.requests(3)
        assert any(t.name == topic for m in meta for t in (m.body.topics or []))
        assert all(m.body.allow_auto_topic_creation for m in meta if m.req.api_version >= 4)
        produced = produce_requests(broker)
    counts = {0: 0, 1: 0}
    for c in produced:
        assert c.req.client_id == f"rdk-{codec}"
        assert c.body.transactional_id is None
        assert c.body.acks == acks
        assert c.body.timeout_ms == 7000  # librdkafka sends request.timeout.ms as the broker-side ack timeout
        assert c.req.api_version >= 3
    for name, partition, payload in batches_of(produced):
        assert name == topic and partition in (0, 1)
        for h in R.validate_batches(payload):
            R.check_client_batch(h)
            assert h.compression == CODECS[codec]
            assert h.producer_id == -1 and not h.is_transactional
            counts[partition] += h.records_count
    assert counts == {0: 15, 1: 15}


def test_librdkafka_transactional_init():
    """init_transactions: FindCoordinator for the transactional id, then InitProducerId on the coordinator."""
    with FakeBroker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, **RDK_BASE,
                                             "client.id": "rdk-txn", "transactional.id": "txn-frames",
                                             "transaction.timeout.ms": 45000})
        producer.init_transactions(15)
        del producer
        check_frames(broker)
        (fc, *_) = broker.requests(10)
        (ip, *_) = broker.requests(22)
    if fc.req.api_version >= 4:
        assert fc.body.coordinator_keys == ["txn-frames"]
    else:
        assert fc.body.key == "txn-frames"
    assert fc.body.key_type == 1  # TRANSACTION
    assert ip.body.transactional_id == "txn-frames"
    assert ip.body.transaction_timeout_ms == 45000
    if ip.req.api_version >= 3:
        assert (ip.body.producer_id, ip.body.producer_epoch) == (-1, -1)


def test_librdkafka_idempotent_init():
    with FakeBroker() as broker:
        rdk_produce(broker, {"client.id": "rdk-idem", "enable.idempotence": True},
                    [("frames-idem", 0, None, b"v%d" % i) for i in range(5)])
        check_frames(broker)
        (ip, *_) = broker.requests(22)
        produced = produce_requests(broker)
    assert ip.body.transactional_id is None
    assert all(c.body.acks == -1 for c in produced)  # idempotence forces acks=all
    (h,) = [h for _, _, p in batches_of(produced) for h in R.validate_batches(p)][:1]
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (PRODUCER_ID, 0, 0)


FETCHED = [Record(b"key-%d" % i, b"fetched value %d" % i, timestamp=1_700_000_000_000 + i) for i in range(5)]


def test_librdkafka_consumer_list_offsets_and_fetch():
    topic = "frames-consume"
    with FakeBroker(fetch_records=FETCHED) as broker:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": broker.bootstrap, **{k: v for k, v in RDK_BASE.items() if k != "message.timeout.ms"},
            "group.id": "frames-group", "client.id": "rdk-consumer", "enable.auto.commit": False,
            "isolation.level": "read_committed", "fetch.wait.max.ms": 150, "fetch.min.bytes": 3,
            "fetch.max.bytes": 5_000_000, "max.partition.fetch.bytes": 300_000,
        })
        try:
            consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
            got = []
            deadline = time.monotonic() + 15
            while len(got) < len(FETCHED) and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
        finally:
            consumer.close()
        check_frames(broker)
        lo = broker.requests(2)
        fetches = broker.requests(1)
    assert got == [(i, r.key, r.value, r.timestamp) for i, r in enumerate(FETCHED)]
    (first_lo, *_) = lo
    assert first_lo.req.client_id == "rdk-consumer"
    assert first_lo.body.replica_id == -1
    assert first_lo.body.isolation_level == 1  # read_committed
    (t,) = first_lo.body.topics
    assert t.name == topic and [(p.partition_index, p.timestamp) for p in t.partitions] == [(0, -2)]
    f = fetches[0]
    assert f.req.client_id == "rdk-consumer"
    assert (f.body.max_wait_ms, f.body.min_bytes, f.body.isolation_level) == (150, 3, 1)
    assert f.body.replica_id == -1 or f.req.api_version >= 15
    (ft,) = f.body.topics
    assert (ft.topic if f.req.api_version < 13 else broker.topic_name(ft.topic_id)) == topic
    (fp,) = ft.partitions
    assert (fp.partition, fp.fetch_offset, fp.partition_max_bytes) == (0, 0, 300_000)
    assert f.body.max_bytes == 5_000_000


# ---------------------------------------------------------------------------------------------------------------
# kafka-python


def test_kafka_python_producer():
    from kafka import KafkaProducer

    topic = "frames-kp"
    with FakeBroker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="kp-frames", acks=1,
                                 compression_type="gzip", request_timeout_ms=6000, max_block_ms=10000,
                                 linger_ms=20, enable_idempotence=False, bootstrap_timeout_ms=10000)
        try:
            futures = [producer.send(topic, key=b"k%d" % i, value=b"kafka-python %d" % i, partition=0,
                                     timestamp_ms=1_700_000_000_000 + i) for i in range(10)]
            producer.flush(timeout=10)
            for fut in futures:
                fut.get(timeout=5)
        finally:
            producer.close(timeout=5)
        check_frames(broker)
        (apiv, *_) = broker.requests(18)
        produced = produce_requests(broker)
    assert apiv.req.client_id == "kp-frames"
    if apiv.req.api_version >= 3:
        assert apiv.body.client_software_name == "kafka-python"
        assert SOFTWARE.fullmatch(apiv.body.client_software_version)
    records = []
    for c in produced:
        assert c.req.client_id == "kp-frames"
        assert (c.body.acks, c.body.timeout_ms, c.body.transactional_id) == (1, 6000, None)
    for name, partition, payload in batches_of(produced):
        assert (name, partition) == (topic, 0)
        for pos, h in R.iter_batch_positions(payload):
            assert R.validate_batch(payload, pos) == h and h.compression == R.GZIP
            R.check_client_batch(h)
            hh, recs = decode_batch(payload, pos)
            assert hh == h
            records.extend(recs)
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"k%d" % i, b"kafka-python %d" % i, 1_700_000_000_000 + i) for i in range(10)]


def test_kafka_python_consumer():
    from kafka import KafkaConsumer, TopicPartition

    topic = "frames-kp-consume"
    with FakeBroker(fetch_records=FETCHED) as broker:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, client_id="kp-consumer", group_id=None,
                                 fetch_max_wait_ms=120, fetch_min_bytes=2, fetch_max_bytes=4_000_000,
                                 max_partition_fetch_bytes=200_000, isolation_level="read_committed",
                                 request_timeout_ms=10000, bootstrap_timeout_ms=10000,
                                 enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got = []
            deadline = time.monotonic() + 15
            while len(got) < len(FETCHED) and time.monotonic() < deadline:
                for recs in consumer.poll(timeout_ms=200).values():
                    got.extend((r.offset, r.key, r.value, r.timestamp) for r in recs)
        finally:
            consumer.close()
        check_frames(broker)
        (lo, *_) = broker.requests(2)
        (f, *_) = broker.requests(1)
    assert got == [(i, r.key, r.value, r.timestamp) for i, r in enumerate(FETCHED)]
    assert lo.req.client_id == "kp-consumer" and lo.body.isolation_level == 1
    (t,) = lo.body.topics
    assert t.name == topic and [(p.partition_index, p.timestamp) for p in t.partitions] == [(0, -2)]
    assert (f.body.max_wait_ms, f.body.min_bytes, f.body.max_bytes, f.body.isolation_level) == (120, 2, 4_000_000, 1)
    (ft,) = f.body.topics
    (fp,) = ft.partitions
    assert (fp.partition, fp.fetch_offset, fp.partition_max_bytes) == (0, 0, 200_000)


# ---------------------------------------------------------------------------------------------------------------
# aiokafka


def test_aiokafka_produce_and_consume():
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = "frames-aio"

    async def run(broker: FakeBroker):
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, client_id="aio-frames", acks=1,
                                    compression_type="gzip", request_timeout_ms=5000, linger_ms=10)
        await asyncio.wait_for(producer.start(), 10)
        try:
            for i in range(4):
                await asyncio.wait_for(producer.send_and_wait(topic, b"aio %d" % i, key=b"a%d" % i, partition=0,
                                                              timestamp_ms=1_700_000_000_000 + i), 10)
        finally:
            await asyncio.wait_for(producer.stop(), 10)
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, client_id="aio-consumer", group_id=None,
                                    fetch_max_wait_ms=110, fetch_min_bytes=4, max_partition_fetch_bytes=100_000,
                                    isolation_level="read_committed", request_timeout_ms=10000,
                                    enable_auto_commit=False)
        await asyncio.wait_for(consumer.start(), 10)
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await asyncio.wait_for(consumer.seek_to_beginning(tp), 10)
            return [await asyncio.wait_for(consumer.getone(), 10) for _ in FETCHED]
        finally:
            await asyncio.wait_for(consumer.stop(), 10)

    with FakeBroker(fetch_records=FETCHED) as broker:
        msgs = asyncio.run(run(broker))
        check_frames(broker)
        produced = produce_requests(broker)
        (lo, *_) = broker.requests(2)
        (f, *_) = broker.requests(1)
    assert [(m.offset, m.key, m.value, m.timestamp) for m in msgs] == [
        (i, r.key, r.value, r.timestamp) for i, r in enumerate(FETCHED)]
    records = []
    for c in produced:
        assert c.req.client_id == "aio-frames"
        assert (c.body.acks, c.body.timeout_ms, c.body.transactional_id) == (1, 5000, None)
    for name, partition, payload in batches_of(produced):
        assert (name, partition) == (topic, 0)
        for pos, h in R.iter_batch_positions(payload):
            R.check_client_batch(h)
            assert h.compression == R.GZIP
            records.extend(decode_batch(payload, pos)[1])
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"a%d" % i, b"aio %d" % i, 1_700_000_000_000 + i) for i in range(4)]
    assert lo.req.client_id == "aio-consumer" and lo.body.isolation_level == 1
    assert [(p.partition_index, p.timestamp) for t in lo.body.topics for p in t.partitions] == [(0, -2)]
    assert (f.body.max_wait_ms, f.body.min_bytes, f.body.isolation_level) == (110, 4, 1)
    (fp,) = [p for t in f.body.topics for p in t.partitions]
    assert (fp.partition, fp.fetch_offset, fp.partition_max_bytes) == (0, 0, 100_000)
