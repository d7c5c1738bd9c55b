"""Group configs (GROUP config resources, type 32; Kafka's GroupConfig): validation against the broker's bounds,
the effective values the coordinator applies per group, and on the wire IncrementalAlterConfigs (forwarded to the
controller, ConfigRecords), DescribeConfigs and ListConfigResources, with confluent-kafka's admin client and raw
requests; a group's share/consumer session and heartbeat settings reach its members' heartbeats."""

from __future__ import annotations

import uuid

import pytest

from broker.testing.embedded import EmbeddedBroker
from cluster.groups.group_config import (
    GROUP_CONFIG_KEYS, DynamicGroupConfig, GroupConfig, GroupConfigError, parse_iso_duration_ms, validate_group_configs,
)
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    ConsumerGroupHeartbeatRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest, ShareGroupHeartbeatRequest,
)
from protocol.generated.messages import incremental_alter_configs_request as iac
from protocol.generated.messages.describe_configs_request import DescribeConfigsResource
from tests.groups.workload import create_topic
from tests.kafka_wire import KafkaWire

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
BROKER = GroupConfig.from_props({})


# ---- validation (GroupConfig.validate) -------------------------------------------------------------------------

@pytest.mark.parametrize("props", [
    {},
    {"share.auto.offset.reset": "earliest"}, {"share.auto.offset.reset": "LATEST"},
    {"share.auto.offset.reset": "by_duration:PT1H"}, {"share.auto.offset.reset": "by_duration:P1DT2H3M4.5S"},
    {"share.isolation.level": "read_committed"}, {"share.isolation.level": "READ_UNCOMMITTED"},
    {"share.record.lock.duration.ms": "15000"}, {"share.record.lock.duration.ms": "60000"},
    {"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "60000"},
    {"consumer.heartbeat.interval.ms": "5000", "consumer.session.timeout.ms": "45000"},
])
def test_valid_group_configs(props):
    validate_group_configs(props, BROKER)


@pytest.mark.parametrize("props, message", [
    ({"share.unknown": "1"}, "Unknown group config name: share.unknown"),
    ({"group.share.session.timeout.ms": "50000"}, "Unknown group config name: group.share.session.timeout.ms"),
    ({"share.auto.offset.reset": "none"}, "The value must be either 'earliest', 'latest' or of the format"),
    ({"share.auto.offset.reset": "by_duration:1h"}, "Unable to parse duration"),
    ({"share.auto.offset.reset": "by_duration:PT"}, "Unable to parse duration"),
    ({"share.auto.offset.reset": "by_duration:-PT1H"}, "Negative duration is not supported"),
    ({"share.isolation.level": "serializable"}, "String must be one of (case insensitive)"),
    ({"share.record.lock.duration.ms": "500"}, "Value must be at least 1000"),
    ({"share.record.lock.duration.ms": "14999"},
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"share.record.lock.duration.ms": "60001"},
     "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
    ({"share.session.timeout.ms": "44999"},
     "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"share.session.timeout.ms": "60001"},
     "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ({"share.heartbeat.interval.ms": "4999"},
     "share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ({"share.heartbeat.interval.ms": "abc"}, "Not a number of type INT"),
    ({"consumer.session.timeout.ms": "0"}, "Value must be at least 1"),
    ({"consumer.heartbeat.interval.ms": "15001"},
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
])
def test_invalid_group_configs(props, message):
    with pytest.raises(GroupConfigError) as exc:
        validate_group_configs(props, BROKER)
    assert message in str(exc.value)


@pytest.mark.parametrize("name", sorted(GROUP_CONFIG_KEYS))
def test_from_props_invalid(name):
    """GroupConfigTest.testFromPropsInvalid: the int keys refuse "not_a_number", "-0.1" and "1.2", the others
    "not_a_number" and "-1"."""
    bad = ("not_a_number", "-0.1", "1.2") if GROUP_CONFIG_KEYS[name].type == "int" else ("not_a_number", "-1")
    for value in bad:
        with pytest.raises(GroupConfigError):
            validate_group_configs({name: value}, BROKER)


@pytest.mark.parametrize("name, value", [
    ("consumer.session.timeout.ms", "1"), ("consumer.session.timeout.ms", "70000"),
    ("consumer.heartbeat.interval.ms", "1"), ("consumer.heartbeat.interval.ms", "70000"),
    ("share.session.timeout.ms", "1"), ("share.session.timeout.ms", "70000"),
    ("share.heartbeat.interval.ms", "1"), ("share.heartbeat.interval.ms", "70000"),
    ("share.record.lock.duration.ms", "10000"), ("share.record.lock.duration.ms", "70000"),
])
def test_invalid_props(name, value):
    """GroupConfigTest.testInvalidProps: each key outside the broker's bounds, the others valid
    (createValidGroupConfig)."""
    props = {"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000",
             "share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
             "share.record.lock.duration.ms": "30000"}
    validate_group_configs(props, BROKER)
    with pytest.raises(GroupConfigError):
        validate_group_configs({**props, name: value}, BROKER)


def test_invalid_config_name():
    """GroupConfigTest.testInvalidConfigName."""
    with pytest.raises(GroupConfigError, match="Unknown group config name: invalid.config.name"):
        validate_group_configs({"consumer.session.timeout.ms": "45000", "invalid.config.name": "10"}, BROKER)


def test_from_props_with_default_value():
    """GroupConfigTest.testFromPropsWithDefaultValue: unset keys take the defaults given (here the broker's)."""
    broker = GroupConfig(consumer_session_timeout_ms=10, consumer_heartbeat_interval_ms=10,
                         share_session_timeout_ms=10, share_heartbeat_interval_ms=10,
                         share_record_lock_duration_ms=2000)
    cfg = DynamicGroupConfig.of(broker, {"consumer.session.timeout.ms": "20"})
    assert (cfg.consumer_heartbeat_interval_ms, cfg.consumer_session_timeout_ms, cfg.share_heartbeat_interval_ms,
            cfg.share_session_timeout_ms, cfg.share_record_lock_duration_ms) == (10, 20, 10, 10, 2000)


def test_bounds_are_the_brokers_and_session_must_exceed_heartbeat():
    wide = GroupConfig.from_props({
        "group.share.min.session.timeout.ms": 1000, "group.share.session.timeout.ms": 2000,
        "group.share.min.heartbeat.interval.ms": 500, "group.share.heartbeat.interval.ms": 600,
        "group.share.min.record.lock.duration.ms": 1000})
    validate_group_configs({"share.session.timeout.ms": "2000", "share.heartbeat.interval.ms": "1000",
                            "share.record.lock.duration.ms": "1000"}, wide)
    with pytest.raises(GroupConfigError, match="share.session.timeout.ms must be greater than "
                                               "share.heartbeat.interval.ms"):
        validate_group_configs({"share.session.timeout.ms": "2000", "share.heartbeat.interval.ms": "2000"}, wide)


def test_broker_record_lock_bounds_are_checked():
    with pytest.raises(ValueError, match="group.share.record.lock.duration.ms must be greater than or equal to"):
        GroupConfig.from_props({"group.share.record.lock.duration.ms": 10000})
    with pytest.raises(ValueError, match="Value must be no more than 30000"):
        GroupConfig.from_props({"group.share.min.record.lock.duration.ms": 40000})


def test_iso_durations_as_java_reads_them():
    assert parse_iso_duration_ms("PT1H") == 3_600_000
    assert parse_iso_duration_ms("P2D") == 172_800_000
    assert parse_iso_duration_ms("pt0.25s") == 250
    assert parse_iso_duration_ms("-PT1M") == -60_000
    for bad in ("P", "PT", "P1W", "1H", "P1DT"):
        with pytest.raises(ValueError):
            parse_iso_duration_ms(bad)


def test_auto_offset_reset_strategies():
    from cluster.groups.group_config import auto_offset_reset

    assert auto_offset_reset("latest") == ("latest", 0)
    assert auto_offset_reset("EARLIEST") == ("earliest", 0)
    assert auto_offset_reset("by_duration:PT30M") == ("by_duration", 1_800_000)


def test_effective_values_override_the_brokers():
    cfg = DynamicGroupConfig.of(BROKER, {"share.session.timeout.ms": "50000", "share.isolation.level":
                                         "READ_COMMITTED", "consumer.heartbeat.interval.ms": "6000"})
    assert (cfg.share_session_timeout_ms, cfg.share_heartbeat_interval_ms, cfg.share_isolation_level) == (
        50000, 5000, "read_committed")
    assert (cfg.consumer_heartbeat_interval_ms, cfg.consumer_session_timeout_ms) == (6000, 45000)
    assert (cfg.share_record_lock_duration_ms, cfg.share_auto_offset_reset) == (30000, "latest")
    assert DynamicGroupConfig.of(BROKER, None) == DynamicGroupConfig.of(BROKER, {})


def test_a_groups_session_timeout_fences_its_silent_members():
    """GroupMetadataManager.shareGroupSessionTimeoutMs / consumerGroupSessionTimeoutMs: a member's session is the
    group's share.session.timeout.ms (consumer.session.timeout.ms) when set, else the broker's."""
    import dataclasses

    from tests.groups.test_share_state_machine import FOO, GID, M1, SCtx, image

    img = dataclasses.replace(image((FOO, "foo", 2)), configs={
        (GROUP, GID): {"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "6000"}})
    ctx = SCtx(img)
    assert ctx.join(M1, ["foo"]).response.heartbeat_interval_ms == 6000
    other = ctx.join(M1, ["foo"], gid="plain-group").response
    assert other.heartbeat_interval_ms == ctx.config.share_heartbeat_interval_ms == 5000
    fenced = ctx.sleep(45000)  # the broker's session ends for the group without a config only
    assert [r.records[0].key.group_id for r in fenced] == ["plain-group"]
    assert M1 in ctx.share_group().members
    assert ctx.sleep(4999) == []
    (gone,) = ctx.sleep(1)
    assert gone.records[0].key.group_id == GID and ctx.share_group().members == {}


# ---- on the wire ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cbroker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("group-configs"),
                        overrides={"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0}) as b:
        create_topic(b.bootstrap, "gc-topic", 2)
        yield b


def alter(wire, group, *ops, validate_only=False):
    req = IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
        resource_type=GROUP, resource_name=group,
        configs=[iac.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])],
        validate_only=validate_only)
    r = wire.call(44, 1, req).responses[0]
    return r.error_code, r.error_message


def described(wire, group, include_synonyms=False):
    r = wire.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=GROUP, resource_name=group)], include_synonyms=include_synonyms,
        include_documentation=True)).results[0]
    assert r.error_code == 0, r
    return {c.name: c for c in r.configs}


def test_alter_describe_and_list_group_configs_before_the_group_exists(cbroker):
    with KafkaWire(cbroker.port) as w:
        before = described(w, "gc-new")
        assert {n: (c.value, c.config_source, c.config_type) for n, c in before.items()} == {
            "consumer.heartbeat.interval.ms": ("5000", 5, 3), "consumer.session.timeout.ms": ("45000", 5, 3),
            "share.auto.offset.reset": ("latest", 5, 2), "share.heartbeat.interval.ms": ("5000", 5, 3),
            "share.isolation.level": ("read_uncommitted", 5, 2), "share.record.lock.duration.ms": ("30000", 5, 3),
            "share.session.timeout.ms": ("45000", 5, 3)}
        assert all(c.documentation for c in before.values())
        assert alter(w, "gc-new", ("share.auto.offset.reset", SET, "earliest"),
                     ("share.session.timeout.ms", SET, "50000"), validate_only=True) == (0, None)
        assert described(w, "gc-new")["share.auto.offset.reset"].value == "latest"  # validate_only wrote nothing
        assert alter(w, "gc-new", ("share.auto.offset.reset", SET, "by_duration:PT10M"),
                     ("share.isolation.level", SET, "read_committed"),
                     ("share.record.lock.duration.ms", SET, "20000")) == (0, None)
        after = described(w, "gc-new", include_synonyms=True)
        got = after["share.auto.offset.reset"]
        assert (got.value, got.config_source, [(s.name, s.value, s.source) for s in got.synonyms]) == (
            "by_duration:PT10M", 8, [("share.auto.offset.reset", "by_duration:PT10M", 8)])
        assert after["share.isolation.level"].value == "read_committed"
        assert after["share.record.lock.duration.ms"].value == "20000"
        assert after["share.session.timeout.ms"].config_source == 5
        listed = w.call(74, 1, ListConfigResourcesRequest(resource_types=[GROUP])).config_resources
        assert ("gc-new", GROUP) in [(r.resource_name, r.resource_type) for r in listed]
        # DELETE returns a key to the broker's value; a group whose last key is deleted is no longer listed
        assert alter(w, "gc-new", ("share.isolation.level", DELETE, None)) == (0, None)
        assert described(w, "gc-new")["share.isolation.level"].config_source == 5
        assert alter(w, "gc-new", ("share.auto.offset.reset", DELETE, None),
                     ("share.record.lock.duration.ms", DELETE, None)) == (0, None)
        assert "gc-new" not in [r.resource_name for r in
                                w.call(74, 1, ListConfigResourcesRequest(resource_types=[GROUP])).config_resources]


def test_bad_group_configs_answer_invalid_config_and_change_nothing(cbroker):
    with KafkaWire(cbroker.port) as w:
        assert alter(w, "gc-bad", ("share.heartbeat.interval.ms", SET, "6000"))[0] == 0
        for ops, code, message in [
            ((("share.unknown", SET, "1"),), E.INVALID_CONFIG, "Unknown group config name: share.unknown"),
            ((("share.auto.offset.reset", SET, "sometimes"),), E.INVALID_CONFIG, "share.auto.offset.reset"),
            ((("share.auto.offset.reset", SET, "by_duration:yesterday"),), E.INVALID_CONFIG, "Unable to parse"),
            ((("share.isolation.level", SET, "dirty"),), E.INVALID_CONFIG, "String must be one of"),
            ((("share.record.lock.duration.ms", SET, "61000"),), E.INVALID_CONFIG,
             "must be less than or equal to group.share.max.record.lock.duration.ms"),
            ((("share.session.timeout.ms", SET, "1000"),), E.INVALID_CONFIG,
             "must be greater than or equal to group.share.min.session.timeout.ms"),
            ((("consumer.session.timeout.ms", SET, "x"),), E.INVALID_CONFIG, "Not a number of type INT"),
            ((("share.isolation.level", APPEND, "read_committed"),), E.INVALID_CONFIG,
             "Config value append is not allowed for config key: share.isolation.level"),
            ((("share.isolation.level", SET, "read_committed"), ("share.isolation.level", SET, "read_committed")),
             E.INVALID_REQUEST, "duplicate config keys"),
        ]:
            got_code, got_message = alter(w, "gc-bad", *ops)
            assert got_code == code and message in got_message, (ops, got_code, got_message)
        empty = alter(w, "", ("share.isolation.level", SET, "read_committed"))
        assert empty == (E.INVALID_REQUEST, "Default group resources are not allowed.")
        after = described(w, "gc-bad")
        assert {n: c.value for n, c in after.items() if c.config_source == 8} == {"share.heartbeat.interval.ms": "6000"}
        r = w.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=GROUP,
                                                                                    resource_name="")])).results[0]
        assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Group name must not be empty")


def test_the_coordinator_uses_a_groups_heartbeat_interval(cbroker):
    """share.heartbeat.interval.ms and consumer.heartbeat.interval.ms of a group reach its members' heartbeats;
    other groups keep the broker's value."""
    with KafkaWire(cbroker.port) as w:
        assert alter(w, "gc-share", ("share.heartbeat.interval.ms", SET, "7000")) == (0, None)
        assert alter(w, "gc-consumer", ("consumer.heartbeat.interval.ms", SET, "8000")) == (0, None)

        def share(group):
            return w.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=str(uuid.uuid4()),
                                                            member_epoch=0, subscribed_topic_names=["gc-topic"]))

        def consumer(group):
            return w.call(68, 1, ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=10_000,
                subscribed_topic_names=["gc-topic"], topic_partitions=[]))
        assert share("gc-share").heartbeat_interval_ms == 7000
        assert share("gc-share-plain").heartbeat_interval_ms == 5000
        assert consumer("gc-consumer").heartbeat_interval_ms == 8000
        assert consumer("gc-consumer-plain").heartbeat_interval_ms == 5000
        # a later change applies to the next heartbeat of a live group
        assert alter(w, "gc-share", ("share.heartbeat.interval.ms", SET, "9000")) == (0, None)
        assert share("gc-share").heartbeat_interval_ms == 9000


def test_confluent_admin_alters_and_describes_group_configs(cbroker):
    """librdkafka's AdminClient with a GROUP ConfigResource (incremental_alter_configs, describe_configs)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cbroker.bootstrap})
    res = ConfigResource(ResourceType.GROUP, "gc-confluent", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.record.lock.duration.ms", "45000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=30)
    got = admin.describe_configs([ConfigResource(ResourceType.GROUP, "gc-confluent")])
    entries = next(iter(got.values())).result(timeout=30)
    assert entries["share.auto.offset.reset"].value == "earliest"
    assert entries["share.record.lock.duration.ms"].value == "45000"
    assert entries["share.isolation.level"].value == "read_uncommitted"
    bad = ConfigResource(ResourceType.GROUP, "gc-confluent", incremental_configs=[
        ConfigEntry("share.isolation.level", "maybe", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as exc:
        admin.incremental_alter_configs([bad])[bad].result(timeout=30)
    assert "INVALID_CONFIG" in str(exc.value) or "String must be one of" in str(exc.value)


def test_kafka_python_admin_alters_describes_and_lists_group_configs(cbroker):
    """kafka-python 3's KafkaAdminClient: IncrementalAlterConfigs, DescribeConfigs (the modified keys) and
    ListConfigResources with a GROUP ConfigResource."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cbroker.bootstrap, request_timeout_ms=30000)
    try:
        res = ConfigResource(ConfigResourceType.GROUP, "gc-kafka-python",
                             configs={"share.isolation.level": "read_committed", "share.session.timeout.ms": "50000"})
        assert admin.alter_configs([res]) == {"group": {"gc-kafka-python": "OK"}}
        bad = ConfigResource(ConfigResourceType.GROUP, "gc-kafka-python", configs={"share.isolation.level": "x"})
        assert "InvalidConfigurationError" in admin.alter_configs([bad])["group"]["gc-kafka-python"]
        described = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, "gc-kafka-python")])
        got = {k: v["value"] for k, v in described["group"]["gc-kafka-python"].items()}
        assert got == {"share.isolation.level": "read_committed", "share.session.timeout.ms": "50000"}
        assert "gc-kafka-python" in admin.list_config_resources([ConfigResourceType.GROUP])["group"]
    finally:
        admin.close()
