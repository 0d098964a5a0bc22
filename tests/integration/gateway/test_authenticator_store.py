"""`Authenticator` on a real `TenantStore` (SQLite): PLAIN and SCRAM log in with an issued API key;
a wrong secret, a revoked key, a suspended tenant and an expired key all fail with the one
message; the key's expiry bounds the KIP-368 session lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import pytest

from gateway.auth import (
    FAILED_MESSAGE,
    Authenticated,
    AuthenticationFailed,
    Authenticator,
    session_lifetime_ms,
)
from gateway.auth.hashing import HashingPool
from tenancy.domain import ApiKey, Principal, Secret
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, key_for, tenant
from tests.tenancy_fixtures import (  # noqa: F401  (fixtures are found by name)
    TenancyClock,
    store,
    store_template,
    store_url,
    tenancy_clock,
)
from tests.unit.gateway.auth.scram_client import ScramClient

pytestmark = pytest.mark.integration
T = TypeVar("T")
Login = Callable[[Authenticator, ApiKey, str], Authenticated]


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the authenticator only calls the store's credential API, tested on both


def clock_ms(clock: TenancyClock) -> Callable[[], int]:
    return lambda: int(clock().timestamp() * 1000)


class Sleeps:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def plain(authenticator: Authenticator, key: ApiKey, secret: str) -> Authenticated:
    token = f"\0{key.key_id}\0{secret}".encode()
    step = asyncio.run(authenticator.exchange("PLAIN").evaluate(token))
    assert step.authenticated is not None
    return step.authenticated


def scram_with(mechanism: str) -> Login:
    def login(authenticator: Authenticator, key: ApiKey, secret: str) -> Authenticated:
        async def run() -> Authenticated:
            exchange = authenticator.exchange(mechanism)
            client = ScramClient(mechanism, key.key_id, secret)
            first = await exchange.evaluate(client.first())
            final = await exchange.evaluate(client.final(first.challenge))
            assert client.server_verified(final.challenge)
            assert final.authenticated is not None
            return final.authenticated

        return asyncio.run(run())

    return login


LOGINS = {
    "PLAIN": plain,
    "SCRAM-SHA-256": scram_with("SCRAM-SHA-256"),
    "SCRAM-SHA-512": scram_with("SCRAM-SHA-512"),
}


@pytest.fixture(params=list(LOGINS))
def mechanism(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def issued(store: TenantStore, **kwargs: object) -> tuple[ApiKey, Secret, Principal]:  # noqa: F811
    tenant(store, "acme")
    account, key, secret = key_for(store, "acme", **kwargs)
    return key, secret, Principal("acme", account.id, key.key_id)


def test_an_issued_key_logs_in(
    store: TenantStore,  # noqa: F811
    tenancy_clock: TenancyClock,  # noqa: F811
    mechanism: str,
) -> None:
    key, secret, principal = issued(store)
    authenticator = Authenticator(store, sleep=Sleeps(), clock_ms=clock_ms(tenancy_clock))
    authenticated = LOGINS[mechanism](authenticator, key, secret)
    assert authenticated == Authenticated(principal, mechanism, None)
    assert store.get_api_key(key.key_id).last_used_at == tenancy_clock()


def refused(login: Login, authenticator: Authenticator, key: ApiKey, secret: str) -> str:
    with pytest.raises(AuthenticationFailed) as failed:
        login(authenticator, key, secret)
    return str(failed.value)


@pytest.mark.parametrize("cause", ["wrong secret", "revoked", "suspended", "expired"])
def test_every_unusable_key_fails_alike(
    store: TenantStore,  # noqa: F811
    tenancy_clock: TenancyClock,  # noqa: F811
    mechanism: str,
    cause: str,
) -> None:
    expires_at = tenancy_clock() + timedelta(hours=1)
    key, secret, _ = issued(store, expires_at=expires_at)
    if cause == "wrong secret":
        secret = Secret(secret[:-1] + ("a" if secret[-1] != "a" else "b"))
    elif cause == "revoked":
        store.revoke_api_key(key.key_id, actor=OPERATOR)
    elif cause == "suspended":
        store.set_tenant_status("acme", "suspended", actor=OPERATOR)
    else:
        tenancy_clock.advance(3600)
    sleeps = Sleeps()
    authenticator = Authenticator(store, sleep=sleeps, clock_ms=clock_ms(tenancy_clock))
    assert refused(LOGINS[mechanism], authenticator, key, secret) == FAILED_MESSAGE
    assert sleeps.seconds == [1.0]


def test_the_key_expiry_bounds_the_session_lifetime(
    store: TenantStore,  # noqa: F811
    tenancy_clock: TenancyClock,  # noqa: F811
    mechanism: str,
) -> None:
    key, secret, _ = issued(store, expires_at=tenancy_clock() + timedelta(minutes=10))
    now = clock_ms(tenancy_clock)
    authenticator = Authenticator(store, sleep=Sleeps(), clock_ms=now)
    authenticated = LOGINS[mechanism](authenticator, key, secret)
    assert authenticated.key_expires_at_ms == now() + 600_000
    assert session_lifetime_ms(now(), 3_600_000, authenticated.key_expires_at_ms) == 600_000
    assert session_lifetime_ms(now(), 60_000, authenticated.key_expires_at_ms) == 60_000
    tenancy_clock.advance(540)
    assert session_lifetime_ms(now(), None, authenticated.key_expires_at_ms) == 60_000


class RevokingPool(HashingPool):
    """Hashing threads that revoke the key (through the store, which applies its own change to its
    verification cache) just before they check its secret: the race of attack 6."""

    def __init__(self, store: TenantStore, key_id: str) -> None:  # noqa: F811
        super().__init__()
        self._store, self._key_id = store, key_id

    async def run(self, check: Callable[[], T]) -> T:
        self._store.revoke_api_key(self._key_id, actor=OPERATOR)
        return await super().run(check)


def test_a_key_revoked_while_its_secret_is_checked_is_refused_and_not_cached(
    store_url: str,  # noqa: F811
    tenancy_clock: TenancyClock,  # noqa: F811
) -> None:
    with TenantStore.open(store_url, clock=tenancy_clock, verification_cache_ttl_s=60) as cached:
        key, secret, _ = issued(cached)
        authenticator = Authenticator(
            cached,
            sleep=Sleeps(),
            clock_ms=clock_ms(tenancy_clock),
            hashing=RevokingPool(cached, key.key_id),
        )
        assert refused(plain, authenticator, key, secret) == FAILED_MESSAGE
        assert cached.cached_plain(key.key_id, secret) is None
        assert cached.verify_api_key(key.key_id, secret) is None


def test_a_kept_login_goes_stale_with_its_key_or_tenant_and_is_never_kept_without_a_cache(
    store_url: str,  # noqa: F811
    tenancy_clock: TenancyClock,  # noqa: F811
) -> None:
    """`login_epoch` / `login_changed_since` (what an HTTP connection's reused login rests on,
    gateway/http/logins.py): with the verification cache off nothing may be kept; with it on, a
    login kept since an epoch is stale once its key is revoked or its tenant suspended, and not
    when another key of the tenant changes."""
    with TenantStore.open(store_url, clock=tenancy_clock, verification_cache_ttl_s=0) as off:
        assert (
            Authenticator(off, sleep=Sleeps(), clock_ms=clock_ms(tenancy_clock)).login_epoch()
            is None
        )
    with TenantStore.open(store_url, clock=tenancy_clock, verification_cache_ttl_s=60) as cached:
        authenticator = Authenticator(cached, sleep=Sleeps(), clock_ms=clock_ms(tenancy_clock))
        key, secret, principal = issued(cached)
        _, other, _ = key_for(cached, "acme", name="other")
        epoch = authenticator.login_epoch()
        assert epoch is not None
        assert plain(authenticator, key, secret).principal == principal
        assert not authenticator.login_changed_since(principal, epoch)
        cached.revoke_api_key(other.key_id, actor=OPERATOR)
        assert not authenticator.login_changed_since(principal, epoch)  # not this key's change
        cached.revoke_api_key(key.key_id, actor=OPERATOR)
        assert authenticator.login_changed_since(principal, epoch)

        account, fresh, fresh_secret = key_for(cached, "acme", name="fresh")
        fresh_principal = Principal("acme", account.id, fresh.key_id)
        epoch = authenticator.login_epoch()
        assert epoch is not None
        assert plain(authenticator, fresh, fresh_secret).principal == fresh_principal
        assert not authenticator.login_changed_since(fresh_principal, epoch)
        cached.set_tenant_status("acme", "suspended", actor=OPERATOR)
        assert authenticator.login_changed_since(fresh_principal, epoch)
