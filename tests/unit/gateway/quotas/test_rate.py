"""`SampledRate` and the throttle arithmetic against hand-computed Kafka examples (11 × 1 s)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.quotas.rate import SampledRate
from gateway.quotas.throttle import (
    INT32_MAX,
    bounded_throttle_time_ms,
    java_round,
    max_value_in_window,
    request_percentage,
    throttle_time_ms,
    token_throttle_time_ms,
)

pytestmark = pytest.mark.unit


def test_a_first_record_is_spread_over_ten_padded_windows() -> None:
    rate = SampledRate()
    rate.record(1000, 0)
    assert rate.window_ms(0) == 10_000  # 0 elapsed + (11 − 1) × 1000 padding
    assert rate.measure(0) == pytest.approx(100.0)
    assert rate.window_ms(500) == 10_500  # still under 10 full windows: padded by 10 more
    assert rate.measure(500) == pytest.approx(1000 / 10.5)


def test_past_ten_full_windows_the_window_is_the_elapsed_time() -> None:
    rate = SampledRate()
    rate.record(1000, 0)
    assert rate.window_ms(10_500) == 10_500  # 10 full windows: no padding
    assert rate.measure(10_999) == pytest.approx(1000 / 10.999)


def test_a_sample_without_events_for_eleven_windows_is_purged() -> None:
    rate = SampledRate()
    rate.record(1000, 0)
    assert rate.total(10_999) == 1000
    assert rate.total(11_000) == 0  # now − last event ≥ 11 × 1000
    assert rate.window_ms(11_000) == 10_000  # the reset sample starts now: padded again


def test_one_record_per_window_keeps_eleven_live_samples() -> None:
    rate = SampledRate()
    for second in range(12):  # 12 samples: one more slot than samples, as Kafka keeps
        rate.record(10, second * 1000)
    # At 11 s the sample of 0 s is obsolete; 1 s … 11 s remain: 110 over 11 s − 1 s = 10 s.
    assert rate.total(11_000) == 110
    assert rate.window_ms(11_000) == 10_000
    assert rate.measure(11_000) == pytest.approx(11.0)


def test_the_overlapping_sample_counts_until_its_last_event_is_old() -> None:
    rate = SampledRate()
    rate.record(5, 0)
    rate.record(5, 900)  # same sample (started at 0), last event at 900
    for second in range(1, 12):
        rate.record(1, second * 1000)
    # At 11 500 the first sample started 11.5 s ago but its last event was 10.6 s ago: kept.
    assert rate.total(11_500) == 10 + 11
    assert rate.window_ms(11_500) == 11_500
    assert rate.total(11_900) == 11  # now its last event is 11 s old


def test_a_sample_completes_after_one_window_and_reuses_the_oldest_slot() -> None:
    rate = SampledRate(samples=2, window_ms=1000)
    for at in (0, 1000, 2000, 3000):  # three slots: 0, 1000, 2000, then 3000 reuses slot 0
        rate.record(1, at)
    assert rate.total(3000) == 2  # 2000 and 3000; 1000's last event is 2 × 1000 old
    assert rate.window_ms(3000) == 1000


def test_unrecord_takes_a_value_back() -> None:
    rate = SampledRate()
    rate.record(700, 0)
    rate.record(300, 400)
    rate.unrecord(300, 450)
    assert rate.total(500) == 700
    assert rate.measure(500) == pytest.approx(700 / 10.5)


def test_the_window_is_at_least_one_millisecond() -> None:
    rate = SampledRate(samples=1, window_ms=1000)
    rate.record(3, 0)
    assert rate.window_ms(0) == 1  # no padding with one sample; 0 ms becomes 1 ms
    assert rate.measure(0) == pytest.approx(3000.0)


def test_a_rate_needs_a_sample_and_a_window() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        SampledRate(samples=0)


def test_throttle_time_is_the_delay_that_brings_the_rate_back_to_quota() -> None:
    # 20 MB recorded at once, quota 1 MB/s: O = 2 MB/s over W = 10 s → X = (2 − 1) / 1 × 10 s.
    rate = SampledRate()
    rate.record(20_000_000, 0)
    observed, window = rate.measure(0), rate.window_ms(0)
    assert throttle_time_ms(observed, 1_000_000, window) == 10_000
    assert observed * window / (window + 10_000) == pytest.approx(1_000_000)
    assert bounded_throttle_time_ms(observed, 1_000_000, window, 1000) == 1000


def test_rounding_is_javas_half_up() -> None:
    assert [java_round(x) for x in (0.5, 1.5, 2.5, -0.5, 2.4999)] == [1, 2, 3, 0, 2]
    assert throttle_time_ms(1.25, 1.0, 2) == 1  # 0.5 ms rounds up, not to even


def test_token_throttle_is_the_time_to_refill_to_zero() -> None:
    assert token_throttle_time_ms(-5.0, 2.0) == 2500
    assert token_throttle_time_ms(-1e12, 1e-3) == INT32_MAX


def test_fetch_cap_is_quota_times_ten_windows() -> None:
    assert max_value_in_window(1_048_576, 11, 1) == 10_485_760
    assert max_value_in_window(1_000.9, 11, 2) == 20_018  # Java's double → int truncates
    assert max_value_in_window(None, 11, 1) == INT32_MAX
    assert max_value_in_window(1e12, 11, 1) == INT32_MAX


def test_request_percentage_is_a_share_of_one_thread_second() -> None:
    assert request_percentage(10.0) == pytest.approx(1.0)
    assert request_percentage(1000.0) == pytest.approx(100.0)


@given(
    st.lists(st.tuples(st.integers(0, 1_000_000), st.integers(0, 3_000)), min_size=1, max_size=60),
    st.integers(0, 30_000),
)
def test_the_window_is_never_shorter_than_ten_windows_nor_the_sum_of_stale_values(
    records: list[tuple[int, int]], later: int
) -> None:
    rate = SampledRate()
    now = 0
    for value, step in records:
        now += step
        rate.record(value, now)
    now += later
    assert rate.window_ms(now) >= 10_000
    recent = sum(v for v, _ in records)  # an upper bound: only values can be purged
    assert 0 <= rate.total(now) <= recent
