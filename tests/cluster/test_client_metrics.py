"""Client telemetry subscriptions and instances (cluster/client_metrics.py), against Kafka's ClientMetricsManagerTest
and ClientMetricsConfigsTest rules."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.client_metrics import (
    DEFAULT_INTERVAL_MS, ZERO_UUID, ClientInstanceMetadata, ClientMetricsError, ClientMetricsManager,
    subscription_id, uuid_hash, uuid_string, validate_configs,
)
from protocol.errors import ErrorCode


def uuids():
    counter = itertools.count(1)
    return lambda: next(counter).to_bytes(16, "big")


def metadata_for(client_id="producer-1", software="apache-kafka-java", version="3.7.0", host="127.0.0.1",
                 port="52000"):
    return lambda iid: ClientInstanceMetadata(uuid_string(iid), client_id, software, version, host, port)


def manager(subscriptions=None, **kw) -> ClientMetricsManager:
    m = ClientMetricsManager(uuids(), **kw)
    if subscriptions:
        m.update_subscriptions(subscriptions)
    return m


def test_uuid_hash_is_javas():
    """Uuid.hashCode(): (msb ^ lsb) folded to 32 bits, signed."""
    assert uuid_hash((1).to_bytes(8, "big") + (2).to_bytes(8, "big")) == 3
    assert uuid_hash(b"\xff" * 8 + b"\x00" * 8) == 0  # (-1 >> 32) ^ -1 == 0 in Java's long arithmetic
    assert uuid_hash(b"\x00" * 12 + b"\x80\x00\x00\x00") == -2**31


def test_no_subscription_gets_no_metrics_and_the_default_interval():
    """testGetTelemetryEmptySubscriptions"""
    m = manager()
    ans = m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 1000)
    assert ans.instance_id != ZERO_UUID
    assert ans.metrics == ()
    assert ans.push_interval_ms == DEFAULT_INTERVAL_MS


def test_matching_subscriptions_union_with_smallest_interval():
    """testGetTelemetry / createClientInstance: union of matching metrics, min interval, unmatched ignored."""
    m = manager({
        "a": {"metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.", "interval.ms": "5000"},
        "b": {"metrics": "org.apache.kafka.producer.record", "interval.ms": "2000",
              "match": "client_id=producer-.*,client_software_name=apache-kafka-java"},
        "c": {"metrics": "org.apache.kafka.admin.", "interval.ms": "100", "match": "client_id=other"},
    })
    ans = m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 1000)
    assert set(ans.metrics) == {"org.apache.kafka.producer.", "org.apache.kafka.consumer.",
                                "org.apache.kafka.producer.record"}
    assert ans.push_interval_ms == 2000


def test_all_metrics_collapses_to_star():
    m = manager({"a": {"metrics": "*"}, "b": {"metrics": "org.apache.kafka.producer."}})
    assert m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 0).metrics == ("*",)


def test_match_is_a_full_match_on_every_pattern():
    m = manager({"a": {"metrics": "x", "match": "client_id=prod"}})  # "producer-1" does not fully match "prod"
    assert m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 0).metrics == ()
    m = manager({"a": {"metrics": "x", "match": "client_source_address=127\\.0\\.0\\.1,client_source_port=52000"}})
    assert m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 0).metrics == ("x",)


def test_subscription_id_is_crc_of_metrics_and_interval_xor_instance_hash():
    iid = (7).to_bytes(16, "big")
    assert subscription_id({"b", "a"}, 1000, iid) == subscription_id(["a", "b"], 1000, iid)
    assert subscription_id({"a"}, 1000, iid) != subscription_id({"a"}, 2000, iid)
    assert subscription_id({"a"}, 1000, iid) != subscription_id({"a"}, 1000, (8).to_bytes(16, "big"))


def test_get_again_before_interval_is_throttled():
    """testGetTelemetrySameClientImmediateRetryFail"""
    m = manager({"a": {"metrics": "x", "interval.ms": "1000"}})
    ans = m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 10_000)
    with pytest.raises(ClientMetricsError) as e:
        m.get_subscriptions(ans.instance_id, metadata_for(), "c1", 10_500)
    assert e.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert m.get_subscriptions(ans.instance_id, metadata_for(), "c1", 11_000).instance_id == ans.instance_id


def test_subscription_change_reevaluates_immediately():
    """testGetTelemetryUpdateSubscription: a changed subscription is answered even inside the interval."""
    m = manager({"a": {"metrics": "x", "interval.ms": "1000"}})
    first = m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 10_000)
    m.update_subscriptions({"a": {"metrics": "y", "interval.ms": "1000"}})
    second = m.get_subscriptions(first.instance_id, metadata_for(), "c1", 10_100)
    assert second.metrics == ("y",) and second.subscription_id != first.subscription_id
    assert not m.update_subscriptions({"a": {"metrics": "y", "interval.ms": "1000"}})  # unchanged: no new version


def push(m, iid, sid, now, terminating=False, compression=0, size=10):
    return m.push(iid, sid, terminating, compression, size, metadata_for(), "c1", now)


def test_push_rules_in_kafkas_order():
    """testPushTelemetry*: first push after get accepted, then one per interval; bad subscription id,
    compression type and size rejected with Kafka's errors."""
    m = manager({"a": {"metrics": "x", "interval.ms": "1000"}}, telemetry_max_bytes=100)
    ans = m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 10_000)
    iid, sid = ans.instance_id, ans.subscription_id
    push(m, iid, sid, 10_001)  # right after the get: accepted
    with pytest.raises(ClientMetricsError) as e:
        push(m, iid, sid, 10_500)
    assert e.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    with pytest.raises(ClientMetricsError) as e:
        push(m, iid, sid + 1, 11_100)
    assert e.value.code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    with pytest.raises(ClientMetricsError) as e:
        push(m, iid, sid, 12_200, compression=9)
    assert e.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(ClientMetricsError) as e:
        push(m, iid, sid, 13_300, size=101)
    assert e.value.code == ErrorCode.TELEMETRY_TOO_LARGE
    push(m, iid, sid, 14_400, size=100)


def test_terminating_push_is_accepted_early_and_is_the_last():
    """testPushTelemetryTerminatingRequestAlreadyReceived"""
    m = manager({"a": {"metrics": "x", "interval.ms": "1000"}})
    ans = m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 10_000)
    push(m, ans.instance_id, ans.subscription_id, 10_001)
    push(m, ans.instance_id, ans.subscription_id, 10_002, terminating=True)  # inside the interval, but terminating
    with pytest.raises(ClientMetricsError) as e:
        push(m, ans.instance_id, ans.subscription_id, 20_000)
    assert e.value.code == ErrorCode.INVALID_REQUEST


def test_push_with_zero_or_reserved_instance_id_is_invalid():
    m = manager()
    for iid in (ZERO_UUID, b"\x00" * 15 + b"\x01"):
        with pytest.raises(ClientMetricsError) as e:
            push(m, iid, 0, 0)
        assert e.value.code == ErrorCode.INVALID_REQUEST
    assert not m.instances


def test_unknown_instance_id_pushing_gets_unknown_subscription():
    """A push from an instance this broker never saw (e.g. after a restart) creates it; its old
    subscription id does not match: UNKNOWN_SUBSCRIPTION_ID tells the client to ask again."""
    m = manager({"a": {"metrics": "x"}})
    with pytest.raises(ClientMetricsError) as e:
        push(m, (99).to_bytes(16, "big"), 12345, 0)
    assert e.value.code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID


def test_instances_expire_after_max_of_cache_expiry_and_three_intervals():
    m = manager({"a": {"metrics": "x", "interval.ms": "30000"}}, cache_expiry_ms=60_000)
    ans = m.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 0)
    assert m.expire(89_999) == []
    assert m.expire(90_000) == [ans.instance_id]  # 3 x 30 s > 60 s
    m2 = manager({"a": {"metrics": "x", "interval.ms": "1000"}}, cache_expiry_ms=60_000)
    ans2 = m2.get_subscriptions(ZERO_UUID, metadata_for(), "c1", 0)
    assert m2.expire(59_999) == [] and m2.expire(60_000) == [ans2.instance_id]


def test_connection_close_drops_the_instance():
    m = manager()
    ans = m.get_subscriptions(ZERO_UUID, metadata_for(), "conn-7", 0)
    assert m.connection_closed("conn-7") == ans.instance_id
    assert ans.instance_id not in m.instances and m.connection_closed("conn-7") is None


def test_instance_cache_is_capped_least_recently_used_first():
    m = manager(cache_max_size=3)
    ids = [m.get_subscriptions(ZERO_UUID, metadata_for(), f"c{i}", 0).instance_id for i in range(5)]
    assert m.evicted() == ids[:2]
    assert list(m.instances) == ids[2:]


@pytest.mark.parametrize("props,code", [
    ({"metrics": "x", "interval.ms": "99"}, ErrorCode.INVALID_REQUEST),
    ({"interval.ms": "3600001"}, ErrorCode.INVALID_REQUEST),
    ({"interval.ms": "abc"}, ErrorCode.INVALID_CONFIG),
    ({"unknown.key": "1"}, ErrorCode.INVALID_REQUEST),
    ({"match": "client_id"}, ErrorCode.INVALID_CONFIG),
    ({"match": "not_a_param=x"}, ErrorCode.INVALID_CONFIG),
    ({"match": "client_id=[unclosed"}, ErrorCode.INVALID_CONFIG),
])
def test_invalid_configs(props, code):
    """ClientMetricsConfigsTest: interval bounds, unknown keys, illegal match patterns."""
    with pytest.raises(ClientMetricsError) as e:
        validate_configs("sub", props)
    assert e.value.code == code


def test_empty_subscription_name_is_invalid():
    with pytest.raises(ClientMetricsError) as e:
        validate_configs("", {"metrics": "x"})
    assert e.value.code == ErrorCode.INVALID_REQUEST


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["get", "push", "push_term", "close", "expire", "tick"]),
                              st.integers(0, 3), st.integers(0, 5000)), max_size=60))
def test_manager_invariants_under_any_request_sequence(ops):
    """Whatever clients send: instance ids are never zero or reused by another instance, every instance is
    reachable from its connection, and a push that was accepted carried the current subscription id."""
    m = manager({"a": {"metrics": "x", "interval.ms": "1000"}}, cache_max_size=3, cache_expiry_ms=2000)
    now = 0
    known: dict[int, bytes] = {}
    for op, client, dt in ops:
        now += dt
        conn = f"c{client}"
        iid = known.get(client, ZERO_UUID)
        try:
            if op == "get":
                known[client] = m.get_subscriptions(iid, metadata_for(), conn, now).instance_id
            elif op.startswith("push") and iid != ZERO_UUID:
                inst = m.instances.get(iid)
                sid = inst.subscription_id if inst is not None else 0
                accepted = m.push(iid, sid, op == "push_term", 0, 1, metadata_for(), conn, now)
                assert accepted.subscription_id == sid
            elif op == "close":
                m.connection_closed(conn)
            elif op == "expire":
                m.expire(now)
        except ClientMetricsError as exc:
            assert exc.code in (ErrorCode.THROTTLING_QUOTA_EXCEEDED, ErrorCode.INVALID_REQUEST,
                                ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
        m.evicted()
        assert ZERO_UUID not in m.instances
        assert len(m.instances) <= 3
        for c, i in m.by_connection.items():
            assert i in m.instances and m.instances[i].connection_id == c
