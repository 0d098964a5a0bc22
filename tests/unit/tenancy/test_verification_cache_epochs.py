"""`VerificationCache` change epochs: a check that read the store before a revocation (or a
suspension, or a feed gap) and ends after the cache applied it is neither cached nor valid; other
keys' and tenants' changes do not void it; entries carry the key's expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tenancy.domain import Change, Principal, ScramCredential
from tenancy.verification_cache import MAX_ENTRIES, VerificationCache

pytestmark = pytest.mark.unit
T0 = datetime(2025, 1, 1, tzinfo=UTC)
WHO = Principal("acme", "sa-1", "K1")


def cache(ttl_s: float = 60) -> VerificationCache:
    return VerificationCache(ttl_s, lambda: T0)


@pytest.mark.parametrize(
    "change",
    [
        Change(1, "api_key.revoked", "acme", "K1", T0),
        Change(1, "tenant.suspended", "acme", "acme", T0),
        Change(1, "tenant.deleted", "acme", "acme", T0),
    ],
)
def test_a_change_after_the_read_voids_the_check(change: Change) -> None:
    verification = cache()
    epoch = verification.epoch()
    verification.apply(change)
    assert verification.changed_since(WHO, epoch)
    key = verification.plain_key("K1", "s")
    assert verification.put(key, WHO, None, epoch=epoch) is False
    assert verification.get(key) is None
    assert verification.put(key, WHO, None, epoch=verification.epoch()) is True


@pytest.mark.parametrize("ttl_s", [60, 0])
def test_a_feed_gap_voids_every_check_under_way(ttl_s: float) -> None:
    verification = cache(ttl_s)
    epoch = verification.epoch()
    verification.clear()
    assert verification.changed_since(WHO, epoch)
    assert verification.put(b"k", WHO, None, epoch=epoch) is False


def test_other_keys_and_tenants_and_other_changes_do_not() -> None:
    verification = cache()
    epoch = verification.epoch()
    verification.apply(Change(1, "api_key.revoked", "acme", "K2", T0))
    verification.apply(Change(2, "tenant.suspended", "bolt", "bolt", T0))
    verification.apply(Change(3, "acl.created", "acme", "acl-1", T0))
    assert not verification.changed_since(WHO, epoch)
    assert verification.put(b"k", WHO, None, epoch=epoch) is True


def test_entries_carry_the_key_expiry() -> None:
    verification = cache()
    expires = T0 + timedelta(seconds=30)
    verification.put(b"k", WHO, expires)
    entry = verification.get(b"k")
    assert entry is not None and entry.expires_at == expires


def test_many_changed_keys_stay_bounded_and_void_older_checks() -> None:
    verification = cache()
    epoch = verification.epoch()
    for index in range(MAX_ENTRIES + 1):
        verification.apply(Change(index, "api_key.revoked", "bolt", f"B{index}", T0))
    assert len(verification._key_epochs) <= MAX_ENTRIES
    assert verification.changed_since(WHO, epoch), "details forgotten: older checks are void"
    assert not verification.changed_since(WHO, verification.epoch())


def test_a_cached_secret_marks_its_key_verified_until_the_entry_goes() -> None:
    now = [T0]
    verification = VerificationCache(60, lambda: now[0])
    assert not verification.has_verified_secret("K1")
    verification.put(verification.scram_key("K1", "SCRAM-SHA-256"), WHO, None, _credential())
    assert not verification.has_verified_secret("K1"), "a SCRAM verifier is no verified secret"
    verification.put(verification.plain_key("K1", "s"), WHO, None)
    assert verification.has_verified_secret("K1") and not verification.has_verified_secret("K2")
    verification.apply(Change(1, "api_key.revoked", "acme", "K1", T0))
    assert not verification.has_verified_secret("K1")
    verification.put(verification.plain_key("K1", "s"), WHO, T0 + timedelta(seconds=5))
    now[0] = T0 + timedelta(seconds=5)
    assert not verification.has_verified_secret("K1"), "not past the key's expiry"
    now[0] = T0
    verification.put(verification.plain_key("K1", "s"), WHO, None)
    verification.clear()
    assert not verification.has_verified_secret("K1")
    assert not VerificationCache(0, lambda: T0).has_verified_secret("K1")


def _credential() -> ScramCredential:
    return ScramCredential("SCRAM-SHA-256", b"s" * 16, 4096, b"k" * 32, b"v" * 32)
