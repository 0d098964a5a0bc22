"""Cursors and limits, the verification cache, and store URL checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tenancy.database import normalise_url
from tenancy.domain import Change, Principal
from tenancy.errors import ValidationError
from tenancy.pagination import check_limit, decode_cursor, encode_cursor
from tenancy.verification_cache import VerificationCache

pytestmark = pytest.mark.unit
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_cursor_round_trip_and_rejections() -> None:
    cursor = encode_cursor("2025-01-01T00:00:00+00:00", "acme")
    assert decode_cursor(cursor, (str, str)) == ["2025-01-01T00:00:00+00:00", "acme"]
    assert decode_cursor(encode_cursor(7), (int,)) == [7]
    for bad in ("", "!!!", encode_cursor(7), encode_cursor("a", 1)):
        with pytest.raises(ValidationError):
            decode_cursor(bad, (str, str))


@pytest.mark.parametrize("limit", [0, 1001, True, 2.0])
def test_limits(limit: object) -> None:
    with pytest.raises(ValidationError):
        check_limit(limit)  # type: ignore[arg-type]
    assert check_limit(1) == 1 and check_limit(1000) == 1000


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def test_cache_hits_expire_and_respect_key_expiry() -> None:
    clock = _Clock()
    cache = VerificationCache(60, clock)
    who = Principal("acme", "sa-1", "KEY")
    key = cache.plain_key("KEY", "secret")
    assert key != cache.plain_key("KEY", "secreT") and b"secret" not in key
    cache.put(key, who, None)
    assert cache.get(key) is not None and cache.get(key).principal == who  # type: ignore[union-attr]
    clock.now += timedelta(seconds=60)
    assert cache.get(key) is None
    cache.put(key, who, expires_at=clock.now + timedelta(seconds=5))
    clock.now += timedelta(seconds=5)
    assert cache.get(key) is None


def test_cache_invalidation_by_change() -> None:
    cache = VerificationCache(60, _Clock())
    for tenant, key_id in (("acme", "K1"), ("acme", "K2"), ("beta", "K3")):
        cache.put(cache.plain_key(key_id, "s"), Principal(tenant, "sa", key_id), None)
    cache.apply(Change(1, "api_key.revoked", "acme", "K1", T0))
    assert cache.get(cache.plain_key("K1", "s")) is None and len(cache) == 2
    cache.apply(Change(2, "quota.set", "beta", "/config/clients/<default>", T0))
    assert len(cache) == 2
    cache.apply(Change(3, "tenant.suspended", "acme", "acme", T0))
    assert len(cache) == 1 and cache.get(cache.plain_key("K3", "s")) is not None
    cache.clear()
    assert len(cache) == 0


def test_disabled_cache_stores_nothing() -> None:
    cache = VerificationCache(0, _Clock())
    cache.put(b"k", Principal("a", "b", "c"), None)
    assert cache.get(b"k") is None and len(cache) == 0


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "mysql://x/y", "not a url"])
def test_store_urls_are_checked(url: str) -> None:
    with pytest.raises(ValidationError):
        normalise_url(url)
    assert normalise_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
