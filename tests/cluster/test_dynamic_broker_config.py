"""Which BROKER configs can be dynamic (DynamicBrokerConfig.validateConfigs, as far as odradek applies them) and the
ConfigRecords that set them (ConfigurationControlManager, KAFKA-14136)."""

from __future__ import annotations

import pytest

from cluster.dynamic_broker_config import (
    DynamicConfigError, applicable, broker_config_records, check_broker_name, check_keys, connection_quota_configs,
    listener_ssl_key,
)
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode

KEYSTORE = "listener.name.ssl.ssl.keystore.location"


def error(fn, *args, **kwargs) -> tuple[int, str]:
    with pytest.raises(DynamicConfigError) as e:
        fn(*args, **kwargs)
    return e.value.code, e.value.message


def test_listener_prefixed_store_settings_are_per_broker_dynamic_configs():
    check_keys([KEYSTORE, "listener.name.ssl.ssl.keystore.password", "listener.name.ssl.ssl.truststore.certificates"],
               per_broker=True)
    assert listener_ssl_key(KEYSTORE) == ("ssl", "ssl.keystore.location")
    assert listener_ssl_key("listener.name.ssl.ssl.client.auth") is None  # SslConfigs.NON_RECONFIGURABLE_CONFIGS
    assert error(check_keys, [KEYSTORE], per_broker=False) == (
        ErrorCode.INVALID_REQUEST,
        f"Cannot update these configs at default cluster level, broker id must be specified: Set({KEYSTORE})")
    assert error(check_keys, ["ssl.truststore.location", KEYSTORE], per_broker=True) == (
        ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener using the "
                                   "listener prefix: Set(ssl.truststore.location)")


def test_a_key_odradek_cannot_apply_is_refused_by_the_controller_only():
    assert error(check_keys, ["log.cleaner.threads", KEYSTORE], per_broker=True) == (
        ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: Set(log.cleaner.threads)")
    check_keys(["log.cleaner.threads"], per_broker=True, refuse_unsupported=False)  # the broker leaves it
    check_keys(["listener.name.ssl.max.connections"], per_broker=False, refuse_unsupported=False)  # cluster level


def test_connection_quotas_are_dynamic_at_both_levels_and_the_broker_own_win():
    keys = ["max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
            "max.connection.creation.rate", "listener.name.ssl.max.connections",
            "listener.name.ssl.max.connection.creation.rate"]
    for per_broker in (True, False):
        check_keys(keys, per_broker=per_broker)
    assert error(check_keys, ["listener.name.ssl.max.connections.per.ip"], per_broker=True) == (
        ErrorCode.INVALID_CONFIG,
        "Cannot update these configs dynamically: Set(listener.name.ssl.max.connections.per.ip)")
    assert connection_quota_configs({"max.connections": "5", "max.connections.per.ip": "2", "log.cleaner.threads": "2"},
                                    {"max.connections": "7", KEYSTORE: "x"}) == {
        "max.connections": "7", "max.connections.per.ip": "2"}
    assert connection_quota_configs(None, None) == {}


def test_broker_names():
    check_broker_name("")
    check_broker_name("3")
    assert error(check_broker_name, "x") == (ErrorCode.INVALID_REQUEST,
                                             "Unable to parse broker name as a base 10 number.")
    assert error(check_broker_name, "-1") == (ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")


def test_a_named_key_gets_its_record_even_unchanged_and_each_record_makes_a_new_mapping_in_the_image():
    old = {KEYSTORE: "/a.p12", "listener.name.ssl.ssl.keystore.password": "pw"}
    records = broker_config_records("1", old, {KEYSTORE: "/a.p12"}, [KEYSTORE])
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r in records] == [
        (4, "1", KEYSTORE, "/a.p12"), (4, "1", "listener.name.ssl.ssl.keystore.password", None)]
    assert broker_config_records("1", {KEYSTORE: "/a.p12"}, {KEYSTORE: "/a.p12"}, []) == []
    image = MetadataImage().apply(broker_config_records("1", {}, {KEYSTORE: "/a.p12"}, [KEYSTORE]), 0)
    again = image.apply(broker_config_records("1", image.configs[(4, "1")], {KEYSTORE: "/a.p12"}, [KEYSTORE]), 1)
    # the broker reads its stores again when its resource's mapping is a new one (broker/node.py)
    assert again.configs[(4, "1")] == image.configs[(4, "1")] and again.configs[(4, "1")] is not image.configs[(4, "1")]
    assert image.apply([], 2).configs[(4, "1")] is image.configs[(4, "1")]
    assert applicable({KEYSTORE: "/a", "log.cleaner.threads": "2"}, per_broker=True) == {KEYSTORE: "/a"}
    assert applicable({KEYSTORE: "/a"}, per_broker=False) == {}
