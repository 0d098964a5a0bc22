"""A tenant's config changes paced (`gateway/quotas/tenant_pacing.py`): a burst goes through
unslowed, then each change earns its share of the rate as a throttle; past `MAX_BACKLOG_MS`
changes are refused (at once past the burst for a strict caller), so the throttle stays bounded;
tenants are apart; with many connections pipelining requests (each muted as soon as a throttle is
earned, refused ones answered at once) the tenant's changes follow the rate."""

from __future__ import annotations

import heapq

import pytest

from gateway.quotas.tenant_pacing import MAX_BACKLOG_MS, TenantPacing

pytestmark = pytest.mark.unit


def change(pacing: TenantPacing, tenant: str, now_ms: int, *, strict: bool = False) -> bool:
    """One topic change asked at `now_ms`: whether it was made (charged)."""
    budget = pacing.budget(tenant, now_ms, strict=strict)
    if budget.exceeded():
        return False
    budget.record(1)
    return True


def test_a_burst_then_the_rate_and_tenants_apart() -> None:
    pacing = TenantPacing(per_second=5, burst=10)
    assert all(change(pacing, "acme", 0) for _ in range(10))
    assert pacing.throttle_ms("acme", 0) == 0
    assert change(pacing, "acme", 0)
    assert pacing.throttle_ms("acme", 0) == 200  # one change past the burst: 1/5 s
    assert pacing.throttle_ms("bolt", 0) == 0 and change(pacing, "bolt", 0)
    assert pacing.throttle_ms("acme", 10_000) == 0, "ten seconds later the burst is back"


def test_past_the_backlog_changes_are_refused_and_the_throttle_stays_bounded() -> None:
    pacing = TenantPacing(per_second=5, burst=10)
    made = sum(change(pacing, "acme", 0) for _ in range(10_000))
    assert made == 10 + MAX_BACKLOG_MS // 200 + 1
    assert pacing.throttle_ms("acme", 0) <= MAX_BACKLOG_MS + 200
    strict = TenantPacing(per_second=5, burst=10)
    assert sum(change(strict, "acme", 0, strict=True) for _ in range(100)) == 11


@pytest.mark.parametrize("connections", [1, 4, 32])
def test_many_pipelining_connections_follow_the_rate(connections: int) -> None:
    """Each connection sends a request of one change as soon as it may: at once after a refusal
    or an unthrottled answer, after its mute otherwise."""
    pacing = TenantPacing(per_second=5, burst=50)
    events = [(0, k) for k in range(connections)]
    made = 0
    while True:
        now, k = heapq.heappop(events)
        if now > 60_000:
            break
        made += change(pacing, "acme", now)
        heapq.heappush(events, (now + 5 + pacing.throttle_ms("acme", now), k))
    assert 50 + 5 * 60 <= made <= 50 + 5 * 60 + MAX_BACKLOG_MS // 200 + 1


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TenantPacing(per_second=0, burst=10)
