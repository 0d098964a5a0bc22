"""`controller_mutation_rate` (KIP-599): the token bucket, strict and permissive budgets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.quotas.client_quotas import SensorKey
from gateway.quotas.mutation_quota import (
    THROTTLING_QUOTA_EXCEEDED,
    ControllerMutationQuota,
    TokenBucket,
    is_strict,
)

pytestmark = pytest.mark.unit

KEY = SensorKey("acme", "sa-1", "")


def test_strictness_follows_the_kip_599_versions() -> None:
    assert THROTTLING_QUOTA_EXCEEDED == 89
    assert [is_strict(19, v) for v in (5, 6)] == [False, True]  # CreateTopics
    assert [is_strict(20, v) for v in (4, 5)] == [False, True]  # DeleteTopics
    assert [is_strict(37, v) for v in (2, 3)] == [False, True]  # CreatePartitions
    assert not is_strict(0, 99)


def test_the_burst_is_samples_times_window_times_rate() -> None:
    quota = ControllerMutationQuota()
    assert quota.burst(2.0) == 22.0
    assert quota.tokens(KEY, 2.0, 1000) == 22.0  # a new bucket is full


def test_the_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    bucket = TokenBucket()
    assert bucket.record(30, 2.0, 22.0, 0) == -8.0
    assert bucket.measure(2.0, 22.0, 1500) == pytest.approx(-5.0)
    assert bucket.measure(2.0, 22.0, 60_000) == 22.0


def test_strict_takes_what_it_needs_then_refuses_below_zero() -> None:
    quota = ControllerMutationQuota()
    budget = quota.budget(KEY, 2.0, strict=True, now_ms=0)
    assert not budget.exceeded()
    budget.record(30)  # 22 tokens: accepted, the bucket goes to −8
    assert budget.throttle_time_ms(0) == 0  # strict requests are not throttled for going under
    assert budget.exceeded()  # the next topic is refused with THROTTLING_QUOTA_EXCEEDED
    assert budget.throttle_time_ms(0) == 4000  # −(−8) / 2 per second
    assert budget.throttle_time_ms(1500) == 2500  # less the time since it was earned
    later = quota.budget(KEY, 2.0, strict=True, now_ms=4000)
    assert not later.exceeded()  # back to 0 tokens: accepted again
    assert quota.tokens(KEY, 2.0, 4000) == pytest.approx(0.0)


def test_permissive_accepts_and_throttles_until_the_bucket_is_back_to_zero() -> None:
    quota = ControllerMutationQuota()
    budget = quota.budget(KEY, 1.0, strict=False, now_ms=0)
    budget.record(5)
    assert budget.throttle_time_ms(0) == 0  # 6 tokens left
    budget.record(10)
    assert not budget.exceeded()  # never refuses
    assert budget.throttle_time_ms(0) == 4000  # at −4 tokens, 1 per second
    assert quota.throttle_time_ms(KEY, 1.0, 1000) == 3000


def test_without_a_quota_the_budget_is_unbounded() -> None:
    quota = ControllerMutationQuota()
    budget = quota.budget(KEY, None, strict=True, now_ms=0)
    budget.record(10**6)
    assert not budget.exceeded()
    assert budget.throttle_time_ms(0) == 0
    assert quota.throttle_time_ms(KEY, None, 0) == 0
    assert len(quota.buckets) == 0


def test_buckets_are_per_key() -> None:
    quota = ControllerMutationQuota()
    quota.budget(KEY, 1.0, strict=True, now_ms=0).record(20)
    other = quota.budget(SensorKey("acme", "sa-2", ""), 1.0, strict=True, now_ms=0)
    assert not other.exceeded()


def test_idle_buckets_expire() -> None:
    quota = ControllerMutationQuota(expire_after_ms=1000)
    quota.budget(KEY, 1.0, strict=False, now_ms=0).record(1)
    assert quota.buckets.expire(1001) == 1


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5000)), max_size=40))
def test_strict_admits_at_most_the_burst_plus_what_refilled_plus_one_request(
    requests: list[tuple[int, int]],
) -> None:
    quota, rate, now, admitted = ControllerMutationQuota(), 1.0, 0, 0
    largest = max((partitions for partitions, _ in requests), default=0)
    for partitions, step in requests:
        now += step
        budget = quota.budget(KEY, rate, strict=True, now_ms=now)
        if not budget.exceeded():
            budget.record(partitions)
            admitted += partitions
    assert admitted <= quota.burst(rate) + rate * now / 1000 + largest
