"""KIP-599's controller mutation quota, pure (cluster/quotas.py): Kafka's TokenBucket and the strict and
permissive quotas of ControllerMutationQuotaManagerTest / StrictControllerMutationQuotaTest."""

import pytest

from cluster.quotas import (
    CONTROLLER_MUTATION_RATE, ControllerMutationQuota, ControllerMutationQuotaManager, ThrottlingQuotaExceeded,
    TokenBucket,
)

USER_ENTITY = (("user", "alice"),)


def manager(rate=10.0):
    m = ControllerMutationQuotaManager(window_num=10, window_size_s=1)
    m.update({USER_ENTITY: {CONTROLLER_MUTATION_RATE: rate}})
    return m


def test_token_bucket_refills_at_the_rate_up_to_the_burst():
    # TokenBucketTest.testRecord: quota 2/s, 2 samples of 1 s: burst 4
    bucket = TokenBucket()
    assert bucket.measure(2, 4, 0) == 0
    bucket.record(2, 4, 3, 0)
    assert bucket.measure(2, 4, 0) == -3
    assert bucket.measure(2, 4, 1000) == -1
    assert bucket.measure(2, 4, 10_000) == 4  # capped at the burst


def test_strict_quota_takes_one_request_past_zero_then_refuses_with_the_time_to_refill():
    m = manager(10.0)  # burst 100 partitions
    now = 1_000_000
    q = m.quota_for(19, 6, "alice", "c")
    q.record(100, now)  # the whole burst
    q.record(30, now)  # still allowed: the bucket was at 0, not below
    assert not q.is_exceeded
    q2 = m.quota_for(19, 6, "alice", "c")
    with pytest.raises(ThrottlingQuotaExceeded) as e:
        q2.record(1, now)
    assert e.value.throttle_ms == 3000  # -30 tokens at 10/s
    assert q2.is_exceeded and q2.throttle_time(now + 1000) == 2000
    # after 3 s the bucket is back at 0: accepted again
    m.quota_for(19, 6, "alice", "c").record(5, now + 3000)


def test_permissive_quota_accepts_and_notes_the_throttle():
    m = manager(10.0)
    now = 1_000_000
    q = m.quota_for(19, 5, "alice", "c")  # CreateTopics v5: permissive
    q.record(150, now)
    assert not q.is_exceeded and q.throttle_time(now) == 5000


def test_no_quota_is_unbounded_and_versions_follow_kafka():
    m = manager(10.0)
    q = m.quota_for(19, 7, "bob", "c")
    for _ in range(100):
        q.record(1000, 0)
    assert q.throttle_time(0) == 0 and not q.is_exceeded
    assert isinstance(ControllerMutationQuota(), ControllerMutationQuota)
    assert m.quota_for(20, 5, "alice", "c").strict and not m.quota_for(20, 4, "alice", "c").strict
    assert m.quota_for(37, 3, "alice", "c").strict and not m.quota_for(37, 2, "alice", "c").strict


def test_users_under_one_quota_level_share_the_bucket_per_client():
    m = ControllerMutationQuotaManager(10, 1)
    m.update({((("user", None),)): {CONTROLLER_MUTATION_RATE: 1.0}})  # default user: a bucket per user
    m.quota_for(19, 6, "alice", "c").record(20, 1_000_000)
    with pytest.raises(ThrottlingQuotaExceeded):
        m.quota_for(19, 6, "alice", "other-client").record(1, 1_000_000)
    m.quota_for(19, 6, "bob", "c").record(1, 1_000_000)  # bob's own bucket
