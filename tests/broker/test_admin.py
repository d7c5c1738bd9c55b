"""Admin APIs through the admin clients: partitions, records, configs, log dirs, producers."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions, NewTopic,
)

from broker import EmbeddedBroker


@pytest.fixture(scope="module")
def b(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("admin") / "d",
                        overrides={"log.retention.check.interval.ms": 200}) as broker:
        yield broker


@pytest.fixture(scope="module")
def admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def produce(b, topic, n, partition=None, key=None, **conf):
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, **conf})
    errors = []
    for i in range(n):
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, value=b"v%d" % i, key=key(i) if key else None,
                  on_delivery=lambda err, msg: err and errors.append(err), **kw)
    assert p.flush(20) == 0
    assert errors == []


def consume_all(b, topic, partition, offset, expected, timeout=20):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, offset)])
    out = []
    deadline = time.time() + timeout
    while len(out) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m)
    c.close()
    return out


def test_create_partitions_and_producers_use_them(b, admin):
    admin.create_topics([NewTopic("grow", 1, 1)])["grow"].result(10)
    fs = admin.create_partitions([NewPartitions("grow", 4)])
    fs["grow"].result(10)
    md = admin.list_topics("grow", timeout=10)
    assert sorted(md.topics["grow"].partitions) == [0, 1, 2, 3]
    produce(b, "grow", 200, key=lambda i: b"k%d" % i)
    used = [p for p in range(4) if b.broker.replicas.get("grow", p).log.log_end_offset > 0]
    assert len(used) >= 3  # keys spread over the new partitions
    # shrinking or keeping the count is INVALID_PARTITIONS; unknown topics fail alone
    fs = admin.create_partitions([NewPartitions("grow", 2), NewPartitions("nope", 3)])
    with pytest.raises(Exception, match="INVALID_PARTITIONS|increase|currently has"):
        fs["grow"].result(10)
    with pytest.raises(Exception, match="UNKNOWN_TOPIC|does not exist"):
        fs["nope"].result(10)


def test_delete_records_moves_log_start(b, admin):
    admin.create_topics([NewTopic("trim", 1, 1)])["trim"].result(10)
    produce(b, "trim", 50, partition=0)
    res = admin.delete_records([TopicPartition("trim", 0, 20)])
    assert res[TopicPartition("trim", 0, 20)].result(10).low_watermark == 20
    msgs = consume_all(b, "trim", 0, -2, 30)  # OFFSET_BEGINNING
    assert [m.offset() for m in msgs] == list(range(20, 50))
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE|out of range"):
        admin.delete_records([TopicPartition("trim", 0, 51)])[TopicPartition("trim", 0, 51)].result(10)


def test_describe_topic_configs_defaults_sources_synonyms(b, admin):
    admin.create_topics([NewTopic("cfg", 1, 1, config={"retention.ms": "3600000"})])["cfg"].result(10)
    res = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "cfg")])
    cfg = list(res.values())[0].result(10)
    # Kafka 4.x defaults (TopicConfig / ServerLogConfigs):
    assert cfg["segment.bytes"].value == "1073741824"  # log.segment.bytes default 1 GiB
    assert cfg["cleanup.policy"].value == "delete"  # log.cleanup.policy default
    assert cfg["max.message.bytes"].value == "1048588"  # message.max.bytes default
    assert cfg["min.cleanable.dirty.ratio"].value == "0.5"  # log.cleaner.min.cleanable.ratio
    assert cfg["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    syn = [(s.name, s.source) for s in cfg["retention.ms"].synonyms.values()]
    assert syn[0] == ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    seg = [(s.name, s.value, s.source) for s in cfg["segment.bytes"].synonyms.values()]
    assert seg == [("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG.value)]
    assert not cfg["retention.ms"].is_sensitive and not cfg["retention.ms"].is_read_only


def test_describe_broker_and_unknown_topic(b, admin):
    res = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1"),
                                  ConfigResource(ConfigResource.Type.TOPIC, "missing")])
    futs = list(res.values())
    broker_cfg = futs[0].result(10)
    assert broker_cfg["num.partitions"].value == "1"
    assert broker_cfg["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    with pytest.raises(Exception, match="UNKNOWN_TOPIC|does not exist"):
        futs[1].result(10)


def test_incremental_alter_retention_takes_effect_without_restart(b, admin):
    admin.create_topics([NewTopic("ret", 1, 1, config={"segment.bytes": "2048"})])["ret"].result(10)
    for _ in range(6):  # separate batches of ~1 KiB: several segments
        produce(b, "ret", 10, partition=0, key=lambda i: b"x" * 90)
    lg = b.broker.replicas.get("ret", 0).log
    assert lg.num_segments > 2
    res = admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, "ret", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])])
    list(res.values())[0].result(10)
    assert lg.config.retention_ms == 1
    deadline = time.time() + 15
    while lg.log_start_offset == 0 and time.time() < deadline:
        time.sleep(0.2)
    assert lg.log_start_offset > 0  # the retention pass deleted old segments, no restart
    # invalid values and unknown keys fail per resource, nothing changed
    res = admin.incremental_alter_configs([
        ConfigResource(ConfigResource.Type.TOPIC, "ret", incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)]),
        ConfigResource(ConfigResource.Type.TOPIC, "grow", incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)]),
    ])
    for f in res.values():
        with pytest.raises(Exception, match="INVALID_CONFIG|Invalid|Unknown"):
            f.result(10)
    assert lg.config.retention_ms == 1


def test_append_subtract_list_config(b, admin):
    admin.create_topics([NewTopic("pol", 1, 1)])["pol"].result(10)
    r = ConfigResource(ConfigResource.Type.TOPIC, "pol", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    list(admin.incremental_alter_configs([r]).values())[0].result(10)
    cfg = list(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "pol")]).values())[0].result(10)
    assert cfg["cleanup.policy"].value == "delete,compact"


def test_describe_log_dirs_and_producers_kafka_python(b):
    from kafka import KafkaAdminClient

    produce(b, "trim", 5, partition=0, **{"enable.idempotence": True})
    ka = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
    try:
        dirs = ka.describe_log_dirs()
        text = repr(dirs)
        assert "trim" in text and "grow" in text
        cluster = ka.describe_cluster()
        assert cluster["controller_id"] == 1
    finally:
        ka.close()
    part = b.broker.replicas.get("trim", 0)
    assert len(part.log.producer_state.producers) >= 1


def test_describe_producers_raw(b):
    from protocol.generated.messages import DescribeProducersRequest
    from protocol.generated.messages.describe_producers_request import TopicRequest
    from tests.kafka_wire import KafkaWire

    c = KafkaWire(b.port)
    resp = c.call(61, 0, DescribeProducersRequest(topics=[TopicRequest(name="trim", partition_indexes=[0, 9])]))
    c.close()
    p0, p9 = resp.topics[0].partitions
    assert p0.error_code == 0 and p0.active_producers and p0.active_producers[0].producer_id >= 0
    assert p9.error_code == 3


def test_aiokafka_admin_create_and_describe(b):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic as ANewTopic

    async def run():
        a = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
        await a.start()
        try:
            await a.create_topics([ANewTopic("aio", 2, 1)])
            meta = await a.describe_topics(["aio"])
            return meta
        finally:
            await a.close()

    meta = asyncio.run(asyncio.wait_for(run(), 30))
    assert "aio" in repr(meta)
    assert len(b.broker.image.topic("aio").partitions) == 2


def test_logger_levels_at_run_time(b):
    """BROKER_LOGGER (type 8) through IncrementalAlterConfigs: Kafka's run-time log level change."""
    import logging

    from protocol.generated.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
    from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
    from protocol.generated.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
    from tests.kafka_wire import KafkaWire

    c = KafkaWire(b.port)
    try:
        def alter(op, value, corr):
            req = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=8, resource_name="1",
                configs=[AlterableConfig(name="odradek.server", config_operation=op, value=value)])])
            return c.call(44, 1, req, corr=corr).responses[0]

        assert alter(0, "DEBUG", 1).error_code == 0
        assert logging.getLogger("odradek.server").level == logging.DEBUG
        desc = c.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=8, resource_name="1", configuration_keys=["odradek.server"])]), corr=2)
        assert [(x.name, x.value) for x in desc.results[0].configs] == [("odradek.server", "DEBUG")]
        assert alter(0, "LOUD", 3).error_code == 40  # INVALID_CONFIG
        assert alter(1, None, 4).error_code == 0
        assert logging.getLogger("odradek.server").level == logging.NOTSET
    finally:
        c.close()


def test_describe_configs_documentation_raw(b):
    """include_documentation (v3+) returns Kafka's documentation strings for topic and broker configs."""
    from protocol.generated.messages import DescribeConfigsRequest
    from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
    from tests.kafka_wire import KafkaWire

    c = KafkaWire(b.port)
    try:
        resp = c.call(32, 4, DescribeConfigsRequest(include_documentation=True, include_synonyms=False, resources=[
            DescribeConfigsResource(resource_type=2, resource_name="cfg", configuration_keys=["segment.bytes"]),
            DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=["num.partitions"])]))
    finally:
        c.close()
    topic, brk = resp.results
    assert topic.configs[0].documentation.startswith("This configuration controls the segment file size")
    assert topic.configs[0].config_type == 3  # INT
    assert brk.configs[0].documentation == "The default number of log partitions per topic"
