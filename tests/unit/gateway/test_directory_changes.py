"""`TenantDirectory.apply` / `resync`: what a change does to the gateway's view of a tenant.

The store is an in-memory fake of the two reads the directory makes; the sessions are fakes that
record being closed. Checked: the tenant's explicit `authorization` decides (never its ACL count);
a reload that fails on a store error propagates and keeps the state in force (the follower then
retries the change), instead of dropping it; a resync after a feed gap closes the sessions of
keys revoked in the gap and never leaves a tenant without a state meanwhile."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pytest

from gateway.directory import TenantDirectory
from tenancy.domain import DEFAULT_LIMITS, Acl, ApiKey, Change, Page, Principal, Tenant
from tenancy.errors import NotFoundError

pytestmark = pytest.mark.unit
NOW = datetime(2026, 11, 28, tzinfo=UTC)
APP = "User:sa-app"


def change(kind: str, subject: str = "acme") -> Change:
    return Change(1, kind, "acme", subject, NOW)


@dataclass
class FakeStore:
    tenant: Tenant = field(
        default_factory=lambda: Tenant(
            "acme", "Acme", "free", "active", DEFAULT_LIMITS, NOW, NOW, "acls"
        )
    )
    acls: list[Acl] = field(default_factory=list)
    keys: dict[str, ApiKey] = field(default_factory=dict)
    down: bool = False

    def get_tenant(self, tenant_id: str) -> Tenant:
        if self.down:
            raise ConnectionError("the store went away")
        if tenant_id != self.tenant.id:
            raise NotFoundError(tenant_id)
        return self.tenant

    def list_acls(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[Acl]:
        return Page(list(self.acls), None)

    def get_api_key(self, key_id: str) -> ApiKey:
        if self.down:
            raise ConnectionError("the store went away")
        if key_id not in self.keys:
            raise NotFoundError(key_id)
        return self.keys[key_id]


@dataclass(eq=False)
class FakeSession:
    principal: Principal | None
    closed: str | None = None

    def close(self, reason: str) -> None:
        self.closed = reason


def key(key_id: str, revoked: bool = False) -> ApiKey:
    return ApiKey(key_id, "acme", "sa-app", "", NOW, None, NOW if revoked else None, None)


def write_allowed(directory: TenantDirectory) -> bool:
    state = directory.current("acme")
    assert state is not None
    return bool(state.access.allowed(APP, "10.0.0.1", "WRITE", "TOPIC", "orders"))


def grant(store: FakeStore) -> None:
    store.acls = [Acl("acl-1", "acme", "TOPIC", "literal", "orders", "WRITE", "allow", APP, "*")]


def test_the_tenants_setting_decides_not_its_acl_count() -> None:
    async def scenario() -> None:
        store = FakeStore()
        directory = TenantDirectory(store)
        await directory.state("acme")
        assert not write_allowed(directory)  # acls required, none granted
        grant(store)
        await directory.apply(change("acl.created", "acl-1"))
        assert write_allowed(directory)
        store.acls = []
        await directory.apply(change("acl.deleted", "acl-1"))  # the last ACL
        assert not write_allowed(directory)
        store.tenant = replace(store.tenant, authorization="open")
        await directory.apply(change("tenant.updated"))
        assert write_allowed(directory)

    asyncio.run(scenario())


def test_a_reload_that_fails_keeps_the_state_in_force_and_propagates() -> None:
    async def scenario() -> None:
        store = FakeStore()
        grant(store)
        directory = TenantDirectory(store)
        before = await directory.state("acme")
        store.down = True
        with pytest.raises(ConnectionError):
            await directory.apply(change("acl.created", "acl-2"))
        assert directory.current("acme") is before  # not dropped: no session falls back

    asyncio.run(scenario())


def test_resync_closes_the_sessions_of_keys_revoked_in_the_gap() -> None:
    async def scenario() -> None:
        store = FakeStore(keys={"k-live": key("k-live"), "k-gone": key("k-gone", revoked=True)})
        directory = TenantDirectory(store)
        state = await directory.state("acme")
        live = FakeSession(Principal("acme", "sa-app", "k-live"))
        gone = FakeSession(Principal("acme", "sa-app", "k-gone"))
        for session in (live, gone):
            assert await directory.admit(session, state) is None
        await directory.resync()
        assert (live.closed, gone.closed) == (None, "api key revoked or expired")
        assert directory.current("acme") is not None

    asyncio.run(scenario())


def test_a_suspension_closes_the_tenants_sessions() -> None:
    async def scenario() -> None:
        store = FakeStore(keys={"k": key("k")})
        directory = TenantDirectory(store)
        state = await directory.state("acme")
        session = FakeSession(Principal("acme", "sa-app", "k"))
        assert await directory.admit(session, state) is None
        store.tenant = replace(store.tenant, status="suspended")
        await directory.apply(change("tenant.suspended"))
        assert session.closed == "tenant is no longer active"

    asyncio.run(scenario())


def test_a_revocation_or_suspension_while_a_login_is_admitted_closes_it_too() -> None:
    """A login between its key's check and its admission is not among the admitted sessions
    yet; a revocation or a suspension applied then closes it all the same (it would otherwise
    be admitted on a revoked key and live until its re-authentication, an hour by default)."""

    async def scenario() -> None:
        store = FakeStore(keys={"k": key("k"), "other": key("other")})
        directory = TenantDirectory(store)
        await directory.state("acme")
        principal = Principal("acme", "sa-app", "k")
        login, bystander = FakeSession(None), FakeSession(None)
        other = Principal("acme", "sa-app", "other")
        with directory.admitting(login, principal), directory.admitting(bystander, other):
            await directory.apply(Change(1, "api_key.revoked", "acme", "k", NOW))
            assert (login.closed, bystander.closed) == ("api key revoked", None)
            store.tenant = replace(store.tenant, status="suspended")
            await directory.apply(change("tenant.suspended"))
            assert bystander.closed == "tenant is no longer active"
        late = FakeSession(None)
        await directory.apply(Change(2, "api_key.revoked", "acme", "k", NOW))
        assert late.closed is None and directory._admitting == {}  # forgotten once admitted

    asyncio.run(scenario())


def test_a_key_read_again_is_usable_only_when_the_store_says_so() -> None:
    async def scenario() -> None:
        store = FakeStore(keys={"live": key("live"), "gone": key("gone", revoked=True)})
        directory = TenantDirectory(store)
        assert await directory.key_usable("live")
        assert not await directory.key_usable("gone")
        assert not await directory.key_usable("never-made")
        store.down = True
        assert not await directory.key_usable("live")  # the store cannot say: fail closed

    asyncio.run(scenario())
