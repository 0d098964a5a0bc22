"""`ClientQuotaManager`: throttle times as Kafka computes them, a throttle-obeying producer
converging to its quota (fake clock), un-recording a throttled fetch, the fetch cap, the
request-percentage cap, the tenant aggregate, and idle sensor expiry."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.quotas.client_quotas import ClientQuotaManager, SensorKey, TenantAggregate

pytestmark = pytest.mark.unit

MB = 1_000_000
KEY = SensorKey("acme", "sa-1", "app")


def obeying_producer(
    quota: float, size: float, interval_ms: int, until_ms: int
) -> list[tuple[int, float]]:
    """A producer offering `size` bytes every `interval_ms` that waits out each throttle (as a
    muted channel makes it): the (time, bytes) of every request it gets through."""
    manager = ClientQuotaManager("producer_byte_rate")
    sends: list[tuple[int, float]] = []
    now = 0
    while now < until_ms:
        throttle = manager.record_and_throttle_ms(KEY, size, quota, now)
        sends.append((now, size))
        now += max(interval_ms, throttle)
    return sends


def delivered_rate(sends: list[tuple[int, float]], start_ms: int, span_ms: int) -> float:
    sent = sum(size for at, size in sends if start_ms <= at < start_ms + span_ms)
    return sent * 1000 / span_ms


def test_no_throttle_while_the_rate_is_within_quota() -> None:
    manager = ClientQuotaManager("producer_byte_rate")
    assert manager.record_and_throttle_ms(KEY, 10 * MB, MB, 0) == 0  # exactly 1 MB/s over 10 s
    assert manager.record_and_throttle_ms(KEY, 1, MB, 0) == 0  # rounds to 0 ms
    assert manager.record_and_throttle_ms(KEY, 10 * MB, MB, 0) == 10_000  # (2 − 1) / 1 × 10 s


def test_without_a_quota_nothing_is_recorded() -> None:
    manager = ClientQuotaManager("producer_byte_rate")
    assert manager.record_and_throttle_ms(KEY, 10**12, None, 0) == 0
    assert len(manager.sensors) == 0


def test_a_producer_at_ten_times_its_quota_converges_to_it() -> None:
    # 1 MB every 100 ms against 1 MB/s. Kafka's window lets the first ~10 MB through at once
    # (quota × (samples − 1) windows of padding), then holds the producer at the quota; each time
    # that burst leaves the 11-sample window a smaller one is let through, so any 30 s span
    # delivers 0.9–1.17 × the quota while the long-run rate converges to it.
    sends = obeying_producer(MB, MB, 100, 400_000)
    assert delivered_rate(sends, 0, 1000) >= 10 * MB  # the initial burst
    assert delivered_rate(sends, 0, 30_000) <= MB + 10 * MB / 30 + MB / 30  # + burst + 1 request
    spans = [delivered_rate(sends, start, 30_000) for start in range(20_000, 300_000, 500)]
    assert min(spans) >= 0.85 * MB and max(spans) <= 1.2 * MB
    assert delivered_rate(sends, 30_000, 300_000) == pytest.approx(MB, rel=0.05)


@settings(max_examples=40, deadline=None)
@given(
    quota=st.floats(100_000, 10_000_000),
    fraction=st.floats(0.01, 1.0),
    interval_ms=st.integers(1, 1000),
)
def test_any_throttle_obeying_producer_converges_to_its_quota(
    quota: float, fraction: float, interval_ms: int
) -> None:
    size = quota * fraction  # requests of 1 % to 100 % of a second's quota
    if size * 1000 / interval_ms < 2 * quota:
        interval_ms = max(1, int(size * 1000 / (2 * quota)))  # offer at least twice the quota
    sends = obeying_producer(quota, size, interval_ms, 220_000)
    assert delivered_rate(sends, 20_000, 200_000) == pytest.approx(quota, rel=0.1)


def test_a_throttled_fetch_is_taken_back() -> None:
    manager = ClientQuotaManager("consumer_byte_rate")
    assert manager.record_and_throttle_ms(KEY, 8 * MB, MB, 0) == 0
    throttle = manager.record_and_throttle_ms(KEY, 4 * MB, MB, 100)
    assert throttle == round((12 * MB / 10.1 - MB) / MB * 10_100)
    manager.unrecord(KEY, 4 * MB, 100)  # the fetch goes out empty
    assert manager.rate(KEY, 100) == pytest.approx(8 * MB / 10.1)
    assert manager.record_and_throttle_ms(KEY, MB, MB, 200) == 0


def test_record_no_throttle_is_paid_by_the_next_checked_record() -> None:
    manager = ClientQuotaManager("request_percentage")
    manager.record_no_throttle(KEY, 500.0, 0)  # 500 % over the padded 10 s = 50 %
    assert manager.rate(KEY, 0) == pytest.approx(50.0)
    assert (
        manager.record_and_throttle_ms(KEY, 0.0, 25.0, 0) == 1000
    )  # (50 − 25) / 25 × 10 s, capped


def test_the_fetch_cap_is_quota_times_samples_minus_one_windows() -> None:
    assert ClientQuotaManager("consumer_byte_rate").max_value_in_window(MB) == 10 * MB
    manager = ClientQuotaManager("consumer_byte_rate", samples=5, window_s=2)
    assert manager.max_value_in_window(MB) == 8 * MB
    assert manager.max_value_in_window(None) == 2**31 - 1


def test_request_time_throttle_is_capped_at_one_window() -> None:
    requests = ClientQuotaManager("request_percentage", window_s=2)
    # 3 s of handling in one request: 300 % over a padded 20 s = 15 % against a 1 % quota.
    assert requests.record_and_throttle_ms(KEY, 300.0, 1.0, 0) == 2000
    uncapped = ClientQuotaManager("producer_byte_rate", window_s=2)
    assert uncapped.record_and_throttle_ms(KEY, 300.0, 1.0, 0) == 280_000


def test_only_rate_quotas_have_a_manager() -> None:
    with pytest.raises(ValueError, match="controller_mutation_rate"):
        ClientQuotaManager("controller_mutation_rate")


def test_sensors_are_per_key_and_per_tenant() -> None:
    manager = ClientQuotaManager("producer_byte_rate")
    other_tenant = SensorKey("globex", "", "app")
    manager.record_and_throttle_ms(SensorKey("acme", "", "app"), 11 * MB, MB, 0)
    assert manager.record_and_throttle_ms(other_tenant, 10 * MB, MB, 0) == 0
    assert len(manager.sensors) == 2


def test_the_tenant_cap_throttles_all_principals_together() -> None:
    manager = ClientQuotaManager("producer_byte_rate")
    alice, bob = SensorKey("acme", "sa-1", ""), SensorKey("acme", "sa-2", "")
    assert manager.record_and_throttle_ms(alice, 6 * MB, MB, 0, tenant_cap=MB) == 0
    # Bob is within his own quota, but the tenant is at 12 MB / 10 s against 1 MB/s.
    assert manager.record_and_throttle_ms(bob, 6 * MB, MB, 0, tenant_cap=MB) == 2000
    assert manager.rate(bob, 0) == pytest.approx(0.6 * MB)
    assert manager.tenants.rate("acme", 0) == pytest.approx(1.2 * MB)
    manager.unrecord(bob, 6 * MB, 0)
    assert manager.tenants.rate("acme", 0) == pytest.approx(0.6 * MB)


def test_the_larger_of_client_and_tenant_throttle_wins() -> None:
    manager = ClientQuotaManager("producer_byte_rate")
    # 30 MB: 3 MB/s against the client's 1 MB/s (20 s) and the tenant's 2 MB/s (5 s).
    assert manager.record_and_throttle_ms(KEY, 30 * MB, MB, 0, tenant_cap=2 * MB) == 20_000
    aggregate = TenantAggregate()
    assert aggregate.record_and_throttle_ms("acme", 30 * MB, 2 * MB, 0) == 5000


def test_idle_sensors_expire_after_an_hour() -> None:
    manager = ClientQuotaManager("producer_byte_rate")
    manager.record_and_throttle_ms(KEY, 1, MB, 0, tenant_cap=MB)
    busy = SensorKey("acme", "sa-2", "")
    for minute in range(0, 61, 5):
        manager.record_and_throttle_ms(busy, 1, MB, minute * 60_000)
    assert manager.sensors.get(KEY) is not None  # idle exactly one hour: not yet
    manager.record_and_throttle_ms(busy, 1, MB, 3_600_001 + 30_000)  # a sweep is due
    assert manager.sensors.get(KEY) is None
    assert manager.sensors.get(busy) is not None
    assert len(manager.tenants.sensors) == 1  # acme's aggregate was fed only with KEY's record
    assert manager.expire(3_600_001 + 30_000) == 1
    assert len(manager.tenants.sensors) == 0
