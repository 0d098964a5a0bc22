"""gateway.http.usage's window parsing: the caller's tenant, RFC 3339 bounds, the span cap."""

from __future__ import annotations

import pytest

from gateway.http.errors import ApiError
from gateway.http.usage import DAY_MS, MAX_SPAN_DAYS, usage_filter

pytestmark = pytest.mark.unit


def test_a_window_is_the_callers_tenant_in_epoch_ms() -> None:
    wanted = usage_filter(
        "acme", {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00+00:00", "topic": "t"}
    )
    assert (wanted.tenant, wanted.start_ms, wanted.end_ms) == ("acme", 1767225600000, 1767312000000)
    assert (wanted.topic, wanted.granularity, wanted.principal) == ("t", "hour", None)
    assert usage_filter("acme", {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z", "granularity": "day"}).granularity == "day"  # fmt: skip


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"to": "2026-01-02T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z"},
        {"from": "yesterday", "to": "2026-01-02T00:00:00Z"},
        {"from": "2026-01-01T00:00:00", "to": "2026-01-02T00:00:00"},  # no offset
        {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z", "to": "2026-12-01T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "granularity": "minute"},
    ],
)
def test_a_bad_window_is_a_400(query: dict[str, str]) -> None:
    with pytest.raises(ApiError) as refused:
        usage_filter("acme", query)
    assert refused.value.status == 400 and refused.value.error_code == 40002


def test_the_span_cap_is_inclusive() -> None:
    end = 1767225600000 + MAX_SPAN_DAYS * DAY_MS
    to = "2026-03-04T00:00:00Z"
    assert usage_filter("acme", {"from": "2026-01-01T00:00:00Z", "to": to}).end_ms == end
