"""A tenant's config changes paced (`gateway/quotas/config_changes.py`): a burst goes through
unslowed, then each request waits its share of the rate; tenants are apart; with many connections
(each sending again as soon as its throttle ends) the tenant's changes follow the rate, plus at
most one per connection."""

from __future__ import annotations

import heapq

import pytest

from gateway.quotas.config_changes import ConfigChangePacing

pytestmark = pytest.mark.unit


def test_a_burst_then_the_rate_and_tenants_apart() -> None:
    pacing = ConfigChangePacing(per_second=5, burst=10)
    assert [pacing.charge("acme", 1, 0) for _ in range(10)] == [0] * 10
    assert pacing.charge("acme", 1, 0) == 200  # one change past the burst: 1/5 s
    assert pacing.charge("bolt", 1, 0) == 0
    assert pacing.charge("acme", 0, 0) == 0, "validate_only and empty requests cost nothing"
    assert pacing.charge("acme", 1, 10_000) == 0, "ten seconds later the burst is back"


def test_a_request_of_many_resources_counts_each() -> None:
    pacing = ConfigChangePacing(per_second=5, burst=10)
    assert pacing.charge("acme", 30, 0) == 4_000  # 20 past the burst


@pytest.mark.parametrize("connections", [1, 4, 32])
def test_many_connections_follow_the_rate(connections: int) -> None:
    pacing = ConfigChangePacing(per_second=5, burst=50)
    events = [(0, k) for k in range(connections)]
    changed = 0
    while True:
        now, k = heapq.heappop(events)
        if now > 60_000:
            break
        changed += 1
        heapq.heappush(events, (now + 5 + pacing.charge("acme", 1, now), k))
    # the burst, then 5 a second, and at most one more per connection (sent before its first
    # throttle came back)
    assert 50 + 5 * 60 <= changed <= 50 + 5 * 60 + connections


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ConfigChangePacing(per_second=0)
