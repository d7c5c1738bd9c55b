"""cluster/quotas.py: Kafka's ClientQuotaManagerTest (the eight levels' precedence, throttle times, quota changes on
live sensors, sensor expiry), ClientRequestQuotaManager's bounded throttle, and Rate's window arithmetic."""

from __future__ import annotations

import pytest

from cluster.metadata_image import quota_entity
from cluster.quotas import (
    PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, ClientQuotaManager, Rate, quota_for,
)

SAMPLES = 11  # quota.window.num


class Quotas:
    """The image's client_quotas, edited as Kafka's updateQuota does (a None name is the default entity)."""

    def __init__(self) -> None:
        self.values: dict = {}

    def set(self, user=False, client=False, value=None, key=PRODUCER_BYTE_RATE) -> dict:
        parts = ([("user", user)] if user is not False else []) + \
            ([("client-id", client)] if client is not False else [])
        entity = quota_entity(parts)
        self.values = dict(self.values)
        if value is None:
            self.values.pop(entity, None)
        else:
            self.values[entity] = {key: float(value)}
        return self.values


def check(m: ClientQuotaManager, user, client, bound, value, throttled, now=0):
    """ClientQuotaManagerTest.checkQuota."""
    assert m.bound(user, client) == bound
    assert m.max_value_in_window(user, client) == pytest.approx(bound * (SAMPLES - 1) * 1.0)
    t = m.record(user, client, value * SAMPLES, now)
    assert (t > 0) == throttled, f"throttle {t}"


def test_quota_config_precedence():
    q, m = Quotas(), ClientQuotaManager(PRODUCER_BYTE_RATE)
    q.set(user=None, value=1000)
    q.set(client=None, value=2000)
    q.set(user=None, client=None, value=3000)
    q.set(user="userA", value=4000)
    q.set(user="userA", client="client1", value=5000)
    q.set(user="userB", value=6000)
    q.set(user="userB", client="client1", value=7000)
    q.set(user="userB", client=None, value=8000)
    q.set(user="userC", value=10000)
    m.update(q.set(client="client1", value=9000))

    check(m, "userA", "client1", 5000, 4500, False)  # <user, client> over <user>
    check(m, "userA", "client2", 4000, 4500, True)  # <user> over <client> and defaults
    check(m, "userA", "client3", 4000, 0, True)  # <user> shared across the user's clients
    check(m, "userA", "client1", 5000, 0, False)  # <user, client> is exclusive
    check(m, "userB", "client1", 7000, 8000, True)
    check(m, "userB", "client2", 8000, 7000, False)  # default per-client quota of <user, client>: exclusive
    check(m, "userB", "client3", 8000, 7000, False)
    check(m, "userD", "client1", 3000, 3500, True)  # default <user, client>
    check(m, "userD", "client2", 3000, 2500, False)
    check(m, "userE", "client1", 3000, 2500, False)

    m.update(q.set(user=None, client=None))  # back to the <user> default
    check(m, "userD", "client1", 1000, 0, False)  # other tags: a new sensor
    check(m, "userE", "client4", 1000, 1500, True)
    check(m, "userF", "client4", 1000, 800, False)  # the <user> default is shared by the user's clients
    check(m, "userF", "client5", 1000, 800, True)

    m.update(q.set(user=None))  # back to the <client-id> default
    check(m, "userF", "client4", 2000, 0, False)  # shared by a client id across users
    check(m, "userF", "client5", 2000, 0, False)
    check(m, "userF", "client5", 2000, 2500, True)
    check(m, "userG", "client5", 2000, 0, True)

    q.set(user="userA", value=8000)
    m.update(q.set(user="userA", client="client1", value=10000))
    check(m, "userA", "client2", 8000, 0, False)
    check(m, "userA", "client2", 8000, 4500, True)  # the sum of the new and earlier values
    check(m, "userA", "client1", 10000, 0, False)
    check(m, "userA", "client1", 10000, 6000, True)
    m.update(q.set(user="userA", client="client1"))
    check(m, "userA", "client6", 8000, 0, True)  # the shared user quota
    m.update(q.set(user="userA", client="client6", value=11000))
    check(m, "userA", "client6", 11000, 8500, False)
    q.set(user="userA", client=None, value=12000)
    m.update(q.set(user="userA", client="client6"))
    check(m, "userA", "client6", 12000, 4000, True)


def test_quota_violation():
    """testQuotaViolation: 400 B/s for 10 s under a 500 B/s default, then a 2,300 B spike half a window later:
    (6300 / 10.5 - 500) / 500 * 10.5 s = 2,100 ms; unthrottled once the spike's sample has rolled over."""
    m = ClientQuotaManager(PRODUCER_BYTE_RATE)
    m.update(Quotas().set(client=None, value=500))
    now = 0
    for _ in range(10):
        assert m.record("ANONYMOUS", "unknown", 400, now) == 0
        now += 1000
    now += 500
    assert m.record("ANONYMOUS", "unknown", 2300, now) == 2100
    now += 2100
    for _ in range(10):
        m.record("ANONYMOUS", "unknown", 400, now)
        now += 1000
    assert m.record("ANONYMOUS", "unknown", 0, now) == 0


@pytest.mark.parametrize("user_part, client_part", [(False, "p1"), ("User1", False), ("User1", "p1")])
def test_quota_parsing(user_part, client_part):
    """testClientIdQuotaParsing / testUserQuotaParsing / testUserClientIdQuotaParsing: an override throttles, a
    raised override does not, a lowered one does again, the default applies once the override goes."""
    q, m = Quotas(), ClientQuotaManager(PRODUCER_BYTE_RATE)
    user, client = user_part or "ANONYMOUS", client_part or "p1"
    q.set(user=user_part, client=client_part, value=2000)
    m.update(q.set(user=user_part and "User2", client=client_part and "p2", value=4000))
    assert m.bound("RandomUser", "random-client-id") is None
    assert m.bound(user, client) == 2000
    assert m.record(user, client, 2500 * SAMPLES, 0) > 0
    m.update(q.set(user=user_part, client=client_part, value=3000))
    assert m.bound(user, client) == 3000 and m.record(user, client, 0, 0) == 0
    m.update(q.set(user=user_part, client=client_part, value=500))
    assert m.record(user, client, 0, 0) > 0
    q.set(user=user_part, client=client_part)
    m.update(q.set(user=user_part and None, client=client_part and None, value=4000))
    assert m.bound(user, client) == 4000
    assert m.record(user, client, 1000 * SAMPLES, 0) == 0


def test_no_quota_means_no_sensor_work_and_no_throttle():
    m = ClientQuotaManager(PRODUCER_BYTE_RATE)
    assert not m.enabled and m.record("u", "c", 1e12, 0) == 0
    assert m.max_value_in_window("u", "c") == float("inf")


def test_request_quotas_bound_the_throttle_by_one_window():
    """ClientRequestQuotaManager: boundedThrottleTime(e, quotaWindowSizeSeconds * 1000)."""
    m = ClientQuotaManager(REQUEST_PERCENTAGE)
    m.update(Quotas().set(user=None, value=1.0, key=REQUEST_PERCENTAGE))
    assert m.record("u", "c", 10_000.0, 0) == 1000


def test_idle_sensors_expire_after_an_hour():
    """testExpireQuotaSensors."""
    m = ClientQuotaManager(PRODUCER_BYTE_RATE)
    m.update(Quotas().set(client=None, value=500))
    m.record("u", "c", 10, 1_000)
    assert m.expire(1_000 + 3600 * 1000 - 1) == 0
    assert m.expire(1_000 + 3600 * 1000) == 1


def test_rate_counts_at_least_n_minus_1_windows_and_forgets_old_samples():
    r = Rate(11, 1000)
    r.record(1000, 0)
    assert r.window_size(0) == 10_000 and r.measure(0) == 100.0
    r.record(1000, 10_500)
    assert r.window_size(10_500) == 10_500
    assert r.measure(10_500) == pytest.approx(2000 / 10.5)
    assert r.measure(10_500 + 11_000) == 0.0  # both samples expired


def test_quota_for_names_the_level_and_the_shared_sensor():
    q = Quotas()
    q.set(user="alice", value=1)
    values = q.set(client=None, value=2)
    assert quota_for(values, PRODUCER_BYTE_RATE, "alice", "app") == (1.0, ("alice", ""))
    assert quota_for(values, PRODUCER_BYTE_RATE, "bob", "app") == (2.0, ("", "app"))
    assert quota_for({}, PRODUCER_BYTE_RATE, "bob", "app") == (None, ("", "app"))
