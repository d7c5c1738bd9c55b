"""cluster/quotas.py: Kafka's ClientQuotaManagerTest (the eight levels' precedence, throttle times, quota changes on
live sensors, sensor expiry), ClientRequestQuotaManager's bounded throttle, and Rate's window arithmetic."""

from __future__ import annotations

import pytest

from cluster.metadata_image import quota_entity
from cluster.quotas import (
    CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, ClientQuotaManager, Rate, quota_for,
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


# ---- Kafka's RateTest, SampledStatTest and QuotaUtilsTest (clients/.../metrics, server-common/.../quota) -------------

@pytest.mark.parametrize("samples, window_s", [(1, 1), (1, 11), (11, 1), (11, 11)])
def test_rate_with_no_prior_available_samples(samples, window_s):
    """testRateWithNoPriorAvailableSamples: measured just before the first window ends, the rate assumes the
    ``samples - 1`` windows before it, empty."""
    r = Rate(samples, window_s * 1000)
    r.record(50.0, 0)
    now = window_s * 1000 - 1
    assert r.measure(now) == pytest.approx(50.0 / (now / 1000 + (samples - 1) * window_s), abs=1e-6)


def test_rate_is_consistent_after_the_first_window():
    """testRateIsConsistentAfterTheFirstWindow: an event every ~100 ms over 2 x 1 s windows measures 10-11/s from
    the second window on, the same when measured again at the same instant."""
    r = Rate(2, 1000)
    steps = [0, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100]
    now = 0
    for step in steps:
        now += step
        r.record(1, now)
    now += 101
    for step in steps:
        now += step
        r.record(1, now)
        observed = r.measure(now)
        assert 10 <= observed <= 11
        assert r.measure(now) == observed


def _complete_sample(r: Rate, now: int) -> int:
    """SampledStatTest.completeSample: events at a sample's start and end; the time just after it."""
    r.record(1, now)
    now += r.window_ms - 1
    r.record(1, now)
    return now + 1


def _total(r: Rate, now: int) -> float:
    return r.measure(now) * r.window_size(now) / 1000.0


def test_a_sample_is_purged_once_it_does_not_overlap_the_window():
    """testSampleIsPurgedIfDoesntOverlap: 2 x 1 s monitored; a sample whose last event is 2.5 s old is gone."""
    r = Rate(2, 1000)
    now = _complete_sample(r, 0) + 2500
    assert _total(r, now) == 0


def test_a_sample_overlapping_the_window_is_kept():
    """testSampleIsKeptIfOverlaps and testSampleIsKeptIfOverlapsAndExtra: the overlapping sample is the (n+1)th."""
    r = Rate(2, 1000)
    assert _total(r, _complete_sample(r, 0) + 1500) == pytest.approx(2)
    r = Rate(2, 1000)
    now = _complete_sample(r, 0) + 100
    now = _complete_sample(r, now) + 100
    r.record(1, now)
    assert _total(r, now) == pytest.approx(5)  # three samples: 2 + 2 + 1 events


def _over(bound: float, observed: float, samples: int, key: str = CONSUMER_BYTE_RATE) -> int:
    """The throttle time of a fresh client whose first record measures ``observed`` (window: samples - 1 s)."""
    m = ClientQuotaManager(key, window_num=samples)
    m.update(Quotas().set(client=None, value=bound, key=key))
    return m.record("u", "c", observed * (samples - 1), 0)


def test_throttle_time_is_the_time_back_to_the_bound():
    """QuotaUtilsTest.testThrottleTimeObservedRateAboveQuota / ...EqualsQuota: (O - T) / T x W."""
    assert _over(50.0, 100.0, 3) == 2000
    assert _over(16.5, 16.5, 10) == 0 and _over(16.5, 16.5, 11) == 0
    assert _over(20.4, 16.5, 10) == 0


def test_throttle_time_rounds_halves_up_as_java():
    """QuotaUtils.throttleTime is Math.round: 2.5 ms -> 3 (Python's round would give 2)."""
    m = ClientQuotaManager(CONSUMER_BYTE_RATE)
    m.update(Quotas().set(client=None, value=1000, key=CONSUMER_BYTE_RATE))
    assert m.record("u", "c", 10_002.5, 0) == 3  # 1000.25 B/s over 10 s: 0.25 / 1000 x 10,000 ms = 2.5


def test_max_value_in_quota_window_with_non_default_windows():
    """testGetMaxValueInQuotaWindowWithNonDefaultQuotaWindow: 3 full windows -> 3 x the quota; no quota: no cap."""
    m = ClientQuotaManager(CONSUMER_BYTE_RATE, window_num=4)
    m.update(Quotas().set(user="other", value=1, key=CONSUMER_BYTE_RATE))
    assert m.max_value_in_window("userA", "client1") == float("inf")
    m.update(Quotas().set(user=None, value=10, key=CONSUMER_BYTE_RATE))
    assert m.max_value_in_window("userA", "client1") == 30


def test_a_greedy_fetcher_gets_its_quota_in_bursts_of_the_whole_window():
    """KafkaApis' fetch quota (KIP-219) for a consumer that fetches again as soon as it is answered: a throttled
    fetch is answered empty and its bytes are taken back, so nothing of it stays in the rate. With Kafka's
    windows (11 x 1 s, at least 10 s assumed) a fresh client takes 10 s of quota in its first second, then every
    fetch is throttled until that burst's sample has expired, 11 s after its last event, and the next burst
    comes: a sawtooth of ~12 s, at most the quota over whole periods. (benchmarks/bench_quotas.py's consumer.)"""
    m = ClientQuotaManager(CONSUMER_BYTE_RATE)
    m.update(Quotas().set(client="c", value=1_000_000, key=CONSUMER_BYTE_RATE))
    fetch, now, accepted, throttles = 1_000_000, 0, [], []
    for _ in range(1000):
        if now >= 36_000:
            break
        ms = m.record("", "c", fetch, now)
        if ms:
            m.unrecord("", "c", fetch, now)
            throttles.append(ms)
            now += ms
        else:
            accepted.append(now)
            now += 10  # the next fetch 10 ms after the answer
    per_second = [sum(1 for t in accepted if s * 1000 <= t < (s + 1) * 1000) for s in range(36)]
    assert per_second[0] == 10 and sum(per_second[1:11]) == 0  # 10 MB at once, then nothing for 10 s
    assert per_second[12] >= 8 and per_second[24] >= 8  # the next bursts, each when the last one's sample expired
    assert sum(per_second[13:22]) == 0 and sum(per_second[25:33]) == 0
    assert max(throttles) <= 1000  # each throttled fetch is told to wait at most one fetch's worth of quota
    assert sum(per_second) * fetch <= 1_000_000 * (36 + 10)  # never over the quota plus the assumed windows
    # an 18 s cut of this sawtooth holds one burst or two, depending on its phase
    cut = [sum(per_second[s:s + 18]) / 18 for s in (12, 13)]  # from just before a burst, from just after it
    assert cut[1] < 0.8 < 1.0 < cut[0], cut


def test_the_measured_rate_is_the_sensors_and_an_unrecord_takes_a_value_back():
    """A fetch over its quota answered empty (KafkaApis: unrecordQuotaSensor) leaves the rate as before it."""
    m = ClientQuotaManager(CONSUMER_BYTE_RATE)
    assert m.rate("u", "c", 0) is None  # no quota: no sensor
    m.update(Quotas().set(client="c", value=1000, key=CONSUMER_BYTE_RATE))
    assert m.rate("u", "c", 0) is None  # nothing recorded yet
    assert m.record("u", "c", 5000, 0) == 0 and m.rate("u", "c", 0) == 500.0  # over the 10 s minimum window
    assert m.record("u", "c", 20_000, 0) > 0
    m.unrecord("u", "c", 20_000, 0)
    assert m.rate("u", "c", 0) == 500.0 and m.record("u", "c", 0, 0) == 0
    assert m.rate("u", "other", 0) is None  # another client's own sensor
