"""Client quotas enforced (issue 29): AlterClientQuotas (forwarded, ClientQuotaRecords) and DescribeClientQuotas
through confluent-kafka's and kafka-python's admin clients; a producer and a consumer over their byte rates are
answered with throttle_time_ms and held to their quota (Kafka's windowed rate: at most the quota over the elapsed
windows, plus one window); a client id without a quota beside them is not throttled; bad alterations get Kafka's
errors and change nothing. The rates' long figures (12-30 s, two clients) are benchmarks/bench_quotas.py's."""

from __future__ import annotations

import time

import pytest

from broker import EmbeddedBroker
from protocol.generated.messages import ProduceRequest
from tests.kafka_wire import KafkaWire

QUOTA = 100_000  # bytes/s
WINDOWS = {"quota.window.num": 3, "quota.window.size.seconds": 1}  # a quota's rate is measured over >= 2 s


@pytest.fixture
def quota_broker(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=WINDOWS) as b:
        yield b


def applied(broker, manager: str, client_id: str, value) -> None:
    """Wait (bounded, 15 s) until the broker's ``manager`` quota of ``client_id`` is ``value`` (None: removed): the
    broker applies an AlterClientQuotas once its metadata image has the record, which a fixed sleep under load may
    not cover."""
    quotas = getattr(broker.broker.quotas, manager)
    deadline = time.monotonic() + 15
    while quotas.bound("", client_id) != value:
        assert time.monotonic() < deadline, f"{manager} quota of {client_id} not {value} after 15 s"
        time.sleep(0.02)


def alter(bootstrap: str, entity: dict, ops: dict) -> list:
    """AlterClientQuotas over the wire (kafka-python's admin client has no quota API)."""
    from protocol.generated.messages import AlterClientQuotasRequest
    from protocol.generated.messages.alter_client_quotas_request import EntityData, EntryData, OpData

    host, port = bootstrap.split(":")
    with KafkaWire(int(port)) as w:
        response = w.call(49, 1, AlterClientQuotasRequest(entries=[EntryData(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
            ops=[OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])],
            validate_only=False))
    return [(e.error_code, e.error_message) for e in response.entries]


def describe(bootstrap: str) -> dict:
    from protocol.generated.messages import DescribeClientQuotasRequest
    from protocol.generated.messages.describe_client_quotas_request import ComponentData

    host, port = bootstrap.split(":")
    with KafkaWire(int(port)) as w:
        response = w.call(48, 1, DescribeClientQuotasRequest(components=[ComponentData(
            entity_type="client-id", match_type=2, match=None)], strict=False))
    return {tuple((e.entity_type, e.entity_name) for e in x.entity): {v.key: v.value for v in x.values}
            for x in response.entries}


def produce_flat_out(bootstrap: str, client_id: str, topic: str, seconds: float) -> tuple[int, list[int]]:
    """(bytes acknowledged within ``seconds``, throttle times seen) of a confluent-kafka producer sending 1 KiB
    records as fast as it can for ``seconds``."""
    import json

    from confluent_kafka import Producer

    throttles: list[int] = []
    acked = [0]

    def stats(text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            if broker.get("throttle", {}).get("max"):
                throttles.append(broker["throttle"]["max"])

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  "batch.size": 16384,
                  "statistics.interval.ms": 500, "stats_cb": stats, "queue.buffering.max.kbytes": 2048})
    value = b"q" * 1024
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            p.produce(topic, value, partition=0, on_delivery=lambda err, msg: err is None and
                      acked.__setitem__(0, acked[0] + len(msg.value())))
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    in_time = acked[0]  # what the broker took within the window (the queue left behind is purged, not counted)
    p.purge()
    p.flush(30)
    return in_time, throttles


def test_quotas_are_altered_described_and_refused_as_kafka(quota_broker):
    b = quota_broker.bootstrap
    assert alter(b, {"client-id": "slow"}, {"producer_byte_rate": QUOTA, "consumer_byte_rate": QUOTA}) == \
        [(0, None)]
    assert alter(b, {"client-id": "bad"}, {"producer_byte_rate": 1.5})[0][0] == 42  # INVALID_REQUEST
    assert alter(b, {"group": "g"}, {"producer_byte_rate": 1})[0][0] == 42
    assert alter(b, {"client-id": "bad"}, {"no_such_key": 1})[0][0] == 42
    deadline = time.monotonic() + 10
    while describe(b) != {(("client-id", "slow"),): {"consumer_byte_rate": QUOTA, "producer_byte_rate": QUOTA}}:
        assert time.monotonic() < deadline, describe(b)
        time.sleep(0.1)


def test_a_producer_over_its_byte_rate_is_throttled_and_held_to_it_while_another_is_not(quota_broker):
    b = quota_broker.bootstrap
    assert alter(b, {"client-id": "slow"}, {"producer_byte_rate": QUOTA}) == [(0, None)]
    applied(quota_broker, "produce", "slow", QUOTA)
    seconds = 6.0
    slow, slow_throttles = produce_flat_out(b, "slow", "quota-slow", seconds)
    fast, fast_throttles = produce_flat_out(b, "fast", "quota-fast", 2.0)
    # at most the quota over the elapsed time and the minimum window (2 s), plus the requests already in flight
    # when the throttle began (librdkafka pipelines 5 of at most 16 KiB)
    assert slow <= QUOTA * (seconds + 2) + 5 * 16384, slow
    assert slow_throttles and max(slow_throttles) > 0
    assert not fast_throttles and fast > slow, (fast, slow)


def test_a_consumer_over_its_byte_rate_gets_empty_throttled_answers_and_reads_everything_in_the_end(quota_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = quota_broker.bootstrap
    p = Producer({"bootstrap.servers": b, "linger.ms": 5, "batch.size": 16384})
    total = 400_000
    for i in range(total // 1000):
        p.produce("quota-read", b"r" * 1000, partition=0)
    p.flush(30)
    assert alter(b, {"client-id": "reader"}, {"consumer_byte_rate": QUOTA}) == [(0, None)]
    applied(quota_broker, "fetch", "reader", QUOTA)
    c = Consumer({"bootstrap.servers": b, "group.id": "quota-readers", "client.id": "reader",
                  "enable.auto.commit": False, "fetch.max.bytes": 50_000, "max.partition.fetch.bytes": 50_000,
                  "message.max.bytes": 50_000})
    c.assign([TopicPartition("quota-read", 0, 0)])
    got, started = 0, time.monotonic()
    while got < total and time.monotonic() - started < 30:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += len(m.value())
    elapsed = time.monotonic() - started
    c.close()
    assert got == total
    assert got <= QUOTA * (elapsed + 2) + 50_000, (got, elapsed)  # held to the quota (one fetch of slack)
    assert quota_broker.broker.metrics.throttled.labels("fetch")._value.get() > 0


def test_a_consumer_fetch_is_capped_by_its_quota_and_one_over_it_is_answered_as_kafka_does(quota_broker):
    """KafkaApis.handleFetchRequest: a consumer's max_bytes is capped at what its quota allows one fetch with empty
    windows (getMaxValueInQuotaWindow: 10,000 B/s x 2 windows = 20,000 B, so its first fetch of a 120 KB log is
    throttled a few ms for the answer's own bytes, not 10 s); a fetch over the quota is answered with no partitions
    and throttle_time_ms, leaving the fetch context as it was (getThrottledResponse): a full fetch creates no
    session (id 0), an incremental one keeps its session (its epoch moves on) and later answers from its offset."""
    import struct

    from protocol.generated.messages import FetchRequest
    from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic
    from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
    from protocol.record_codec import Record, build_batch
    from tests.integration.test_transactions import _create

    b = quota_broker.bootstrap
    _create(b, "quota-fetch", partitions=1)
    with KafkaWire(quota_broker.port) as w:
        for i in range(20):
            batch = bytes(build_batch([Record(value=b"f" * 6000, timestamp=int(time.time() * 1000))]))
            r = w.call(0, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                TopicProduceData(name="quota-fetch", partition_data=[PartitionProduceData(index=0, records=batch)])]))
            assert r.responses[0].partition_responses[0].error_code == 0
    assert alter(b, {"client-id": "raw-reader"}, {"consumer_byte_rate": QUOTA // 10}) == [(0, None)]
    applied(quota_broker, "fetch", "raw-reader", QUOTA // 10)

    def fetch(session_id: int, epoch: int, offset: int | None):
        topics = [] if offset is None else [FetchTopic(topic="quota-fetch", partitions=[FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1,
            log_start_offset=-1, last_fetched_epoch=-1)])]
        return w.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                          isolation_level=0, session_id=session_id, session_epoch=epoch,
                                          topics=topics, forgotten_topics_data=[], rack_id=""))

    def next_offset(records: bytes) -> int:
        """After the last whole batch (base offset at 0, length at 8, last offset delta at 23)."""
        pos, end = 0, 0
        while pos + 12 <= len(records):
            base, length = struct.unpack_from(">qi", records, pos)
            if pos + 12 + length > len(records):
                break  # the tail cut at the byte limit
            end = base + struct.unpack_from(">i", records, pos + 23)[0] + 1
            pos += 12 + length
        return end

    session_id, epoch, offset, held = 0, 0, 0, None  # held: the offset the session holds
    throttles: list[tuple[int, int]] = []  # (throttle ms, session id answered) of the throttled answers
    reads: list[tuple[int, int]] = []  # (bytes, session id) of the answers with records
    with KafkaWire(quota_broker.port, client_id="raw-reader") as w:
        for _ in range(12):  # each waits out the last throttle first (the connection is muted)
            asked = offset
            r = fetch(session_id, epoch, None if session_id and asked == held else asked)
            assert r.error_code == 0
            if r.throttle_time_ms > 0:
                assert r.responses == [] and r.session_id == session_id, r
                throttles.append((r.throttle_time_ms, r.session_id))
            else:
                records = bytes(r.responses[0].partitions[0].records)
                assert 0 < len(records) <= 20_000  # the cap, though the request asked 1 MiB
                reads.append((len(records), r.session_id))
                offset = next_offset(records)
                session_id = session_id or r.session_id
                assert session_id != 0
            if session_id:  # the session holds what was asked, throttled or not (newContext), at its next epoch
                held, epoch = asked, epoch + 1
            if len(reads) >= 2:
                break
    assert throttles and throttles[0] == (throttles[0][0], 0) and throttles[0][0] < 1000, throttles
    assert len(reads) == 2 and reads[0][1] == reads[1][1] != 0, reads
    assert any(sid == reads[0][1] for _, sid in throttles), throttles  # an incremental fetch throttled


def _produce_raw(port: int, topic: str, sizes: list[int]) -> None:
    """One batch of one record of each size, acks=1 (client id ``test``: no quota)."""
    from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
    from protocol.record_codec import Record, build_batch

    with KafkaWire(port) as w:
        for size in sizes:
            batch = bytes(build_batch([Record(value=b"s" * size, timestamp=int(time.time() * 1000))]))
            r = w.call(0, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]))
            assert r.responses[0].partition_responses[0].error_code == 0


def _full_fetch(w: KafkaWire, topic: str, offset: int = 0):
    """A full fetch (session epoch 0) of 1 MiB, answered at once."""
    from protocol.generated.messages import FetchRequest
    from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic

    return w.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                      isolation_level=0, session_id=0, session_epoch=0, rack_id="",
                                      forgotten_topics_data=[], topics=[FetchTopic(topic=topic, partitions=[
                                          FetchPartition(partition=0, fetch_offset=offset,
                                                         partition_max_bytes=1 << 20, current_leader_epoch=-1,
                                                         log_start_offset=-1, last_fetched_epoch=-1)])]))


def test_a_consumer_over_its_request_percentage_gets_an_empty_throttled_fetch_and_no_session(quota_broker):
    """KafkaApis.handleFetchRequest records the request quota in the fetch's response callback: over it (any fetch
    is over 0.000001% of a thread), the answer has no partitions, throttle_time_ms (bounded by one quota window)
    and session id 0, and no session is cached (getThrottledResponse); the quota removed, the same full fetch reads
    the records and creates its session."""
    from tests.integration.test_transactions import _create

    b = quota_broker
    _create(b.bootstrap, "quota-busy", partitions=1)
    _produce_raw(b.port, "quota-busy", [500, 500])
    assert alter(b.bootstrap, {"client-id": "busy"}, {"request_percentage": 0.000001}) == [(0, None)]
    applied(b, "request", "busy", 0.000001)
    sessions = b.broker.fetch_sessions.cache
    with KafkaWire(b.port, client_id="busy") as w:
        r = _full_fetch(w, "quota-busy")
        assert r.error_code == 0 and r.responses == [] and r.session_id == 0
        assert 0 < r.throttle_time_ms <= 1000  # ClientRequestQuotaManager: at most quota.window.size.seconds
        assert sessions.size == 0
        assert b.broker.metrics.throttled.labels("request")._value.get() >= 1
        assert alter(b.bootstrap, {"client-id": "busy"}, {"request_percentage": None}) == [(0, None)]
        applied(b, "request", "busy", None)
        r = _full_fetch(w, "quota-busy")  # sent once the mute has passed
        assert r.throttle_time_ms == 0 and r.session_id != 0 and sessions.size == 1
        assert len(r.responses[0].partitions[0].records) > 1000  # both batches


def test_broker_fetch_max_bytes_caps_a_fetch_but_for_one_whole_first_batch(tmp_path):
    """KafkaApis: fetchMaxBytes = min(request.maxBytes, config.fetchMaxBytes); ReplicaManager.readFromLog reads the
    first batch whole however large (minOneMessage). fetch.max.bytes is static: described read-only."""
    from protocol.generated.messages import DescribeConfigsRequest
    from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
    from tests.integration.test_transactions import _create

    with EmbeddedBroker(data_dir=tmp_path / "d", overrides={"fetch.max.bytes": 1024}) as b:
        _create(b.bootstrap, "capped", partitions=1)
        _produce_raw(b.port, "capped", [600, 600, 600, 3000])
        with KafkaWire(b.port, client_id="reader") as w:
            r = _full_fetch(w, "capped")
            assert len(r.responses[0].partitions[0].records) == 1024  # the first batch whole, the second cut
            r = _full_fetch(w, "capped", offset=3)
            records = bytes(r.responses[0].partitions[0].records)
            assert len(records) > 3000 and len(records) == 12 + int.from_bytes(records[8:12], "big")  # one batch
            r = w.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
                resource_type=4, resource_name=str(b.broker.config.node_id), configuration_keys=["fetch.max.bytes"])],
                include_synonyms=False, include_documentation=False))
            entry = r.results[0].configs[0]
            assert (entry.name, entry.value, entry.read_only, entry.config_source) == \
                ("fetch.max.bytes", "1024", True, 4)  # STATIC_BROKER_CONFIG


def test_a_raw_produce_over_quota_carries_throttle_time_and_the_connection_waits_it_out(quota_broker):
    from protocol.generated.messages import ApiVersionsRequest
    from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
    from protocol.record_codec import Record, build_batch
    from tests.integration.test_transactions import _create

    b = quota_broker.bootstrap
    _create(b, "quota-raw", partitions=1)
    assert alter(b, {"client-id": "raw"}, {"producer_byte_rate": 10_000}) == [(0, None)]
    applied(quota_broker, "produce", "raw", 10_000)
    with KafkaWire(quota_broker.port, client_id="raw") as w:
        throttled = None
        for i in range(20):
            batch = bytes(build_batch([Record(value=b"x" * 5000, timestamp=int(time.time() * 1000))]))
            r = w.call(0, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                TopicProduceData(name="quota-raw", partition_data=[PartitionProduceData(index=0, records=batch)])]))
            assert r.responses[0].partition_responses[0].error_code == 0
            if r.throttle_time_ms > 0:
                throttled = r.throttle_time_ms
                break
        assert throttled is not None
        started = time.monotonic()
        w.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert time.monotonic() - started >= throttled / 1000.0 * 0.8  # muted until the throttle time passed


def test_a_request_pipelined_behind_a_produce_over_quota_waits_out_its_throttle(quota_broker):
    """KafkaApis records a produce's bytes in its response callback, after the append, and the connection's next
    request is read only after it (the Processor handles one request of a connection at a time). Here two requests
    are sent at once and the first awaits its append (a topic recompressing to gzip appends in a thread): the
    second, read ahead and to a plain topic it could be appended to at once, is held until the first has recorded
    its bytes and muted the connection, so when the first's throttled answer arrives the second's topic is still
    empty; the second is answered once the throttle has passed."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
    from protocol.record_codec import Record, build_batch

    b = quota_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for name, result in admin.create_topics([NewTopic("quota-gzip", 1, 1, config={"compression.type": "gzip"}),
                                             NewTopic("quota-plain", 1, 1)]).items():
        result.result(15)
    assert alter(b.bootstrap, {"client-id": "piped"}, {"producer_byte_rate": 1250}) == [(0, None)]
    applied(b, "produce", "piped", 1250)
    plain = b.broker.replicas.get("quota-plain", 0).log
    with KafkaWire(b.port, client_id="piped") as w:
        corrs = [w.send(0, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=bytes(
                build_batch([Record(value=b"v" * 5000, timestamp=int(time.time() * 1000))])))])]))
            for topic in ("quota-gzip", "quota-plain")]
        first = w.recv(corr=corrs[0])
        # 5 KB over the 2 s minimum window at 1,250 B/s: about 2 s
        assert first.responses[0].partition_responses[0].error_code == 0 and first.throttle_time_ms > 1000
        assert plain.log_end_offset == 0  # the second held
        second = w.recv(corr=corrs[1])
        assert second.responses[0].partition_responses[0].base_offset == 0 and second.throttle_time_ms > 0


def test_controller_mutation_rate_refuses_strict_requests_and_throttles_older_ones(quota_broker):
    """KIP-599 at the controller: ``controller_mutation_rate`` (partitions a second; a bucket of quota.window.num x
    window seconds' worth) lets one request drive the bucket below zero, then refuses CreateTopics v6+,
    CreatePartitions v3+ and DeleteTopics v5+ with THROTTLING_QUOTA_EXCEEDED and the time to refill, per topic and
    nothing changed; older versions are accepted and answered with that throttle time. A client id without a quota
    is not limited."""
    from protocol.errors import ErrorCode
    from protocol.generated.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
    from protocol.generated.messages.create_partitions_request import CreatePartitionsTopic
    from protocol.generated.messages.create_topics_request import CreatableTopic
    from protocol.generated.messages.delete_topics_request import DeleteTopicState

    b = quota_broker
    for client in ("strict", "permissive"):  # 1 partition/s: a bucket of 3
        assert alter(b.bootstrap, {"client-id": client}, {"controller_mutation_rate": 1}) == [(0, None)]
    time.sleep(0.5)

    def create(client: str, version: int, topics: dict[str, int]):
        with KafkaWire(b.port, client_id=client) as w:
            r = w.call(19, version, CreateTopicsRequest(timeout_ms=10000, validate_only=False, topics=[
                CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
                for n, p in topics.items()]))
        return r.throttle_time_ms, {t.name: t.error_code for t in r.topics}

    throttle, codes = create("strict", 7, {"m-a": 3, "m-b": 20, "m-c": 1})  # a: to 0, b: to -20, c: refused
    assert codes == {"m-a": 0, "m-b": 0, "m-c": ErrorCode.THROTTLING_QUOTA_EXCEEDED} and throttle > 15_000
    # the broker applies the controller's throttle on the request quota (RequestHandlerHelper.sendForwardedResponse)
    assert b.broker.metrics.throttle_time.labels("request")._value.get() >= throttle
    throttle, codes = create("strict", 7, {"m-d": 1})
    assert codes == {"m-d": ErrorCode.THROTTLING_QUOTA_EXCEEDED} and throttle > 15_000
    with KafkaWire(b.port, client_id="strict") as w:
        r = w.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="m-a", count=4, assignments=None)],
                                                  timeout_ms=10000, validate_only=False))
        assert r.results[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED and r.throttle_time_ms > 15_000
    with KafkaWire(b.port, client_id="strict") as w:
        r = w.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="m-a", topic_id=bytes(16))],
                                              timeout_ms=10000))
        assert r.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    throttle, codes = create("permissive", 5, {"m-e": 30})  # below v6: accepted, throttled
    assert codes == {"m-e": 0} and throttle > 20_000
    throttle, codes = create("permissive", 5, {"m-f": 1})
    assert codes == {"m-f": 0} and throttle > 20_000
    assert create("free", 7, {"m-g": 50}) == (0, {"m-g": 0})
    with KafkaWire(b.port) as w:  # what was refused was not made
        from protocol.generated.messages import MetadataRequest
        names = {t.name for t in w.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)).topics}
    assert {"m-a", "m-b", "m-e", "m-f", "m-g"} <= names and not {"m-c", "m-d"} & names
