"""cluster/connection_quotas.py, written anew after the behaviours Kafka's ConnectionQuotasTest checks: counts per
IP and overrides, listener and broker-wide limits with the inter-broker exemption, creation rates and their
delays, the IP ``connection_creation_rate`` quota with its un-recording, dynamic changes, the config parsing and
checks."""

from __future__ import annotations

import math

import pytest

from cluster.connection_quotas import (
    INT_MAX, Avg, ConnectionQuotas, ConnectionThrottled, TooManyConnections, listener_limits, normalise_ip,
    parse_overrides, validate,
)

IP1, IP2 = "10.0.0.1", "10.0.0.2"


def quotas(values=None, listeners=("EXTERNAL", "REPLICATION"), inter_broker="REPLICATION", window_num=2,
           overrides=None) -> ConnectionQuotas:
    values = values or {}
    q = ConnectionQuotas(inter_broker, window_num=window_num, window_size_s=1)
    for name in listeners:
        q.add_listener(name, values)
    q.configure(values, overrides or {})
    return q


def test_per_ip_limit_and_override():
    q = quotas({"max.connections.per.ip": 2}, overrides={IP2: 3})
    for _ in range(2):
        q.inc("EXTERNAL", IP1, 0)
    with pytest.raises(TooManyConnections) as exc:
        q.inc("EXTERNAL", IP1, 0)
    assert (exc.value.ip, exc.value.count) == (IP1, 2)
    assert q.get(IP1) == 2 and q.total == 2  # the refused one is not counted
    for _ in range(3):
        q.inc("EXTERNAL", IP2, 0)
    with pytest.raises(TooManyConnections):
        q.inc("REPLICATION", IP2, 0)  # per IP across listeners, the inter-broker one too
    q.dec("EXTERNAL", IP1)
    q.inc("EXTERNAL", IP1, 0)  # a closed one frees its place
    assert q.get(IP1) == 2 and q.get(IP2) == 3 and q.total == 5


def test_zero_per_ip_with_overrides_admits_only_the_overridden():
    q = quotas({"max.connections.per.ip": 0, "max.connections.per.ip.overrides": f"{IP1}:1"}, overrides={IP1: 1})
    q.inc("EXTERNAL", IP1, 0)
    with pytest.raises(TooManyConnections):
        q.inc("EXTERNAL", IP2, 0)


def test_broker_limit_spares_the_inter_broker_listener_which_keeps_its_own():
    q = quotas({"max.connections": 2})
    q.inc("EXTERNAL", IP1, 0)
    q.inc("EXTERNAL", IP1, 0)
    assert not q.slot_available("EXTERNAL")
    assert q.slot_available("REPLICATION")  # protected: the broker-wide count does not apply
    q.inc("REPLICATION", IP2, 0)
    assert q.max_connections_exceeded("EXTERNAL") and not q.max_connections_exceeded("REPLICATION")
    q.inc("REPLICATION", IP2, 0)
    # the listener's own limit is the broker-wide value unless prefixed (valuesWithPrefixOverride)
    assert not q.slot_available("REPLICATION")
    q.dec("EXTERNAL", IP1)
    q.dec("EXTERNAL", IP1)
    assert q.slot_available("EXTERNAL") is False  # 2 inter-broker ones still fill the broker
    q.dec("REPLICATION", IP2)
    assert q.slot_available("EXTERNAL") and not q.max_connections_exceeded("EXTERNAL")


def test_only_listener_is_not_protected():
    q = quotas({"max.connections": 1}, listeners=("REPLICATION",))
    q.inc("REPLICATION", IP1, 0)
    assert not q.slot_available("REPLICATION") and not q.protected("REPLICATION")


def test_listener_prefixed_limits():
    values = {"max.connections": 10, "listener.name.external.max.connections": 1,
              "listener.name.replication.max.connection.creation.rate": 7}
    assert listener_limits(values, "EXTERNAL") == (1, INT_MAX)
    assert listener_limits(values, "REPLICATION") == (10, 7)
    q = quotas(values)
    q.inc("EXTERNAL", IP1, 0)
    assert not q.slot_available("EXTERNAL") and q.slot_available("REPLICATION")


def test_broker_creation_rate_delays_and_spares_the_inter_broker_listener():
    # 2 samples of 1 s: the rate is connections / 1 s within the first window
    q = quotas({"max.connection.creation.rate": 2})
    assert q.record_connection("EXTERNAL", 0) == 0
    assert q.record_connection("EXTERNAL", 0) == 0
    assert q.record_connection("EXTERNAL", 0) == 500  # 3/s over 2/s: (3 - 2) / 2 * 1000 ms
    # the inter-broker listener counts only against its own listener rate (here the broker-wide value, apart)
    assert q.record_connection("REPLICATION", 0) == 0
    assert q.record_connection("REPLICATION", 0) == 0
    assert q.record_connection("REPLICATION", 0) == 500
    assert q.broker_accept_rate(0) == 3.0
    rates = q.listener_metrics(0)
    assert rates["EXTERNAL"][:2] == (3.0, 500.0) and math.isnan(rates["EXTERNAL"][2])


def test_creation_rate_delay_is_capped_at_one_quota_window():
    q = quotas({"listener.name.external.max.connection.creation.rate": 1})
    for _ in range(50):
        delay = q.record_connection("EXTERNAL", 0)
    assert delay == 1000  # quota.window.size.seconds


def test_listener_rate_is_reconfigured():
    q = quotas({"listener.name.external.max.connection.creation.rate": 1})
    q.record_connection("EXTERNAL", 0)
    assert q.record_connection("EXTERNAL", 0) > 0
    q.configure({"listener.name.external.max.connection.creation.rate": 100}, {})
    assert q.record_connection("EXTERNAL", 0) == 0


def test_ip_rate_quota_throttles_and_unrecords():
    q = quotas({})
    q.update_ip_quotas({(("ip", IP1),): {"connection_creation_rate": 1.0}})
    q.inc("EXTERNAL", IP1, 0)
    q.record_connection("EXTERNAL", 0)
    with pytest.raises(ConnectionThrottled) as exc:
        q.record_connection("EXTERNAL", 10)
        q.inc("EXTERNAL", IP1, 10)
    # 2 connections in a window of 1010 ms: (2 / 1.01 - 1) / 1 * 1010 ms
    assert (exc.value.start_ms, exc.value.throttle_ms) == (10, 990)
    assert q.get(IP1) == 1  # not counted
    assert q.listener_metrics(10)["EXTERNAL"][0] == pytest.approx(1 / 1.01)  # taken back from the listener's rate
    assert q.broker_accept_rate(10) == pytest.approx(1 / 1.01)
    assert q.listener_metrics(10)["EXTERNAL"][2] == 990.0  # ip-connection-accept-throttle-time
    q.inc("EXTERNAL", IP2, 10)  # another IP has no quota
    assert q.ip_accept_rates(10) == {IP1: pytest.approx(1 / 1.01)}
    # after the windows pass, the IP may connect again
    q.inc("EXTERNAL", IP1, 2500)
    assert q.get(IP1) == 2


def test_ip_default_quota_and_specific_override_and_removal():
    q = quotas({})
    q.update_ip_quotas({(("ip", None),): {"connection_creation_rate": 1.0},
                        (("ip", IP2),): {"connection_creation_rate": 5.0}})
    assert q.connection_rate_for_ip(IP1) == 1 and q.connection_rate_for_ip(IP2) == 5
    q.inc("EXTERNAL", IP1, 0)
    with pytest.raises(ConnectionThrottled):
        q.inc("EXTERNAL", IP1, 0)
    for _ in range(5):
        q.inc("EXTERNAL", IP2, 0)
    q.update_ip_quotas({})  # removed: the IP quota is off again
    q.inc("EXTERNAL", IP1, 0)
    assert q.get(IP1) == 2


def test_ip_quota_on_another_entity_shape_is_ignored():
    q = quotas({})
    q.update_ip_quotas({(("user", "a"),): {"producer_byte_rate": 1.0}})
    assert q.connection_rate_for_ip(IP1) == INT_MAX


def test_lowered_max_connections_makes_the_excess_visible():
    q = quotas({})
    for _ in range(3):
        q.inc("EXTERNAL", IP1, 0)
    q.configure({"max.connections": 1}, {})
    assert q.max_connections_exceeded("EXTERNAL") and not q.slot_available("EXTERNAL")


def test_ip_sensors_expire_after_an_hour():
    q = quotas({})
    q.update_ip_quotas({(("ip", IP1),): {"connection_creation_rate": 10.0}})
    q.inc("EXTERNAL", IP1, 0)
    assert q.expire(1000) == 0 and q.expire(3600 * 1000) == 1 and q.ip_accept_rates(3600 * 1000) == {}


def test_parse_overrides_and_normalise():
    assert parse_overrides("hostName:100, 127.0.0.1:200,::1:3") == {"hostName": 100, "127.0.0.1": 200, "::1": 3}
    assert parse_overrides("") == {} and parse_overrides(None) == {}
    for bad in ("127.0.0.1", "h:x", ":5"):
        with pytest.raises(ValueError):
            parse_overrides(bad)
    assert normalise_ip("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalise_ip("0:0:0:0:0:0:0:1") == "::1"
    with pytest.raises(ValueError):
        normalise_ip("localhost")


@pytest.mark.parametrize("values, message", [
    ({"max.connections": -1}, "Value must be at least 0"),
    ({"max.connection.creation.rate": -1}, "Value must be at least 0"),
    ({"max.connections.per.ip": 0}, "can be set to zero only if"),
    ({"listener.name.external.max.connections": 0}, "Invalid max.connections 0"),
    ({"max.connection.creation.rate": 0}, "Invalid max.connection.creation.rate 0"),
    ({"max.connections.per.ip.overrides": "a:b"}, "is not an integer"),
])
def test_validate_refuses(values, message):
    with pytest.raises(ValueError, match=message):
        validate(values, ["EXTERNAL"], current={})


def test_listener_limits_are_checked_only_when_they_change():
    validate({"max.connections": 0}, ["EXTERNAL"])  # static: Kafka starts with it (nothing is accepted)
    validate({"max.connections": 0, "max.connections.per.ip": 5}, ["EXTERNAL"], current={"max.connections": 0})
    with pytest.raises(ValueError, match="Invalid max.connections 0"):
        validate({"max.connections": 0}, ["EXTERNAL"], current={})


def test_validate_accepts():
    validate({"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "h:1", "max.connections": 5,
              "listener.name.external.max.connection.creation.rate": 3}, ["EXTERNAL"], current={})


def test_avg_is_nan_without_values_and_forgets_old_samples():
    a = Avg(2, 1000)
    assert math.isnan(a.measure(0))
    a.record(10, 0)
    a.record(20, 500)
    a.record(30, 1500)
    assert a.measure(1500) == 20.0
    assert a.measure(2600) == 30.0 and math.isnan(a.measure(4000))


def test_shared_sensors_count_apart():
    brokers, controllers = quotas({"max.connection.creation.rate": 2}), quotas(
        {"max.connection.creation.rate": 2}, listeners=("CONTROLLER",), inter_broker=None)
    controllers.share_sensors(brokers)
    brokers.record_connection("EXTERNAL", 0)
    controllers.record_connection("CONTROLLER", 0)
    assert brokers.record_connection("EXTERNAL", 0) == 500  # the broker-wide rate is one sensor
    brokers.update_ip_quotas({(("ip", IP1),): {"connection_creation_rate": 10.0}})
    controllers.update_ip_quotas({(("ip", IP1),): {"connection_creation_rate": 10.0}})
    brokers.inc("EXTERNAL", IP1, 0)
    controllers.inc("CONTROLLER", IP1, 0)
    assert brokers.ip_accept_rates(0) == {IP1: 2.0}
    assert (brokers.total, controllers.total) == (1, 1)
