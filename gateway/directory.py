"""What the gateway holds of its tenants, and how tenancy changes reach it.

Owns: `TenantDirectory` — each tenant's record, namespace and ACLs, loaded on first use from the
tenant store (in a worker thread) and kept current by the change feed; the registry of live
authenticated sessions (per tenant and per API key), so that a revoked key, or a suspended or
deleted tenant, loses its open connections within the feed's latency (docs/security.md: within 1 s);
and the tenant's connection limit (`admit`: a slot reserved in the tenant store through the
`ConnectionSlots` ledger, so the limit holds across the fleet). `apply(change)` is what the change feed's follower
(`gateway.feed_follower`) calls for each change, in version order: ACL changes reload the tenant's
ACLs, tenant changes reload the tenant (closing its sessions unless it is active), quota changes
refresh the quota book; `resync()` after a feed gap reloads everything. When `apply` returns the
change is in force on every connection (sessions read `current()` per request), which is what
the follower reports to the store. The tenant's ACL mode is its explicit `authorization` ("acls"
unless it says "open"), never inferred from whether it has ACLs. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Protocol

from gateway.kafka.authorizer import Authorizer
from gateway.kafka.namespace import TenantNamespace
from gateway.kafka.services import Closable, TenantState
from tenancy.domain import Acl, ApiKey, Change, Page, Principal, Tenant
from tenancy.errors import NotFoundError

log = logging.getLogger("pier.gateway.directory")
ACL_PAGE = 500


class TenantSource(Protocol):
    def get_tenant(self, tenant_id: str) -> Tenant: ...

    def get_api_key(self, key_id: str) -> ApiKey: ...

    def list_acls(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[Acl]: ...


class ChangeFeedSource(Protocol):
    def watch(self, *, from_version: int | None = None, poll_interval_s: float = 0.2) -> object: ...


QuotaRefresh = Callable[[str], Awaitable[None]]


class ConnectionSlots(Protocol):
    """The tenant's connections held fleet-wide (`gateway.connection_ledger.ConnectionLedger`)."""

    async def acquire(self, tenant_id: str) -> str | None: ...

    def release(self, tenant_id: str) -> None: ...


class TenantDirectory:
    def __init__(
        self,
        source: TenantSource,
        *,
        on_quota_change: QuotaRefresh | None = None,
        connections: ConnectionSlots | None = None,
        on_admit: Callable[[Tenant], Awaitable[None]] | None = None,
    ) -> None:
        self._source = source
        self._on_quota_change = on_quota_change
        self._connections = connections
        self._on_admit = on_admit  # e.g. lease the tenant's storage headroom ahead of its writes
        self._states: dict[str, TenantState] = {}
        self._loading: dict[str, asyncio.Future[TenantState]] = {}
        self._generations: dict[str, int] = {}
        self._by_tenant: dict[str, set[Closable]] = defaultdict(set)
        self._tracked: dict[str, set[Closable]] = defaultdict(set)  # no slot: see `track`
        self._admitting: dict[Closable, Principal] = {}  # logins not yet admitted: `admitting`

    async def state(self, tenant_id: str) -> TenantState:
        state = self._states.get(tenant_id)
        if state is not None:
            return state
        return await self._fresh(tenant_id, share=True)

    def current(self, tenant_id: str) -> TenantState | None:
        return self._states.get(tenant_id)

    async def _fresh(self, tenant_id: str, *, share: bool) -> TenantState:
        """Load the tenant. `share`: join a load already under way (a login); a change must not
        (that load may have read the store before the change was committed)."""
        pending = self._loading.get(tenant_id) if share else None
        if pending is None:
            generation = self._generations.get(tenant_id, 0) + 1
            self._generations[tenant_id] = generation
            pending = asyncio.ensure_future(self._load(tenant_id, generation))
            self._loading[tenant_id] = pending
            pending.add_done_callback(lambda done: self._loaded(tenant_id, done))
        return await asyncio.shield(pending)

    def _loaded(self, tenant_id: str, done: asyncio.Future[TenantState]) -> None:
        if self._loading.get(tenant_id) is done:
            del self._loading[tenant_id]

    async def _load(self, tenant_id: str, generation: int) -> TenantState:
        tenant, acls = await asyncio.to_thread(self._read, tenant_id)
        authorizer = Authorizer(acls, required=tenant.authorization != "open")
        state = TenantState(tenant, TenantNamespace(tenant.id), authorizer)
        if self._generations.get(tenant_id) == generation:  # no newer load started meanwhile
            self._states[tenant_id] = state
        return state

    def _read(self, tenant_id: str) -> tuple[Tenant, list[Acl]]:
        tenant = self._source.get_tenant(tenant_id)
        acls: list[Acl] = []
        cursor: str | None = None
        while True:
            page = self._source.list_acls(tenant_id, cursor=cursor, limit=ACL_PAGE)
            acls.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                return tenant, acls

    # -- sessions ------------------------------------------------------------------------------
    async def admit(self, session: Closable, state: TenantState) -> str | None:
        """Count `session` (a Kafka session or an HTTP consumer instance) among its tenant's
        connections; the refusal's reason, or None. Without a ledger the limit is this process's
        own; with one, a slot is reserved in the tenant store (fleet-wide, fail closed)."""
        tenant = state.tenant
        if tenant.status != "active":
            return f"tenant {tenant.id} is {tenant.status}"
        live = self._by_tenant[tenant.id]
        if self._connections is None:
            if len(live) >= tenant.limits.max_connections:
                return f"tenant connection limit of {tenant.limits.max_connections} reached"
        else:
            refused = await self._connections.acquire(tenant.id)
            if refused is not None:
                return refused
        live.add(session)
        if self._on_admit is not None:
            await self._on_admit(tenant)
        return None

    @contextlib.contextmanager
    def admitting(self, session: Closable, principal: Principal) -> Iterator[None]:
        """A login between its key's check and its admission (a tenant load and a store round
        trip): a revocation of its key or a change of its tenant applied meanwhile closes it as
        it closes the admitted ones, which it is not among yet (the login then sees itself
        closed and gives back what it was granted)."""
        self._admitting[session] = principal
        try:
            yield
        finally:
            self._admitting.pop(session, None)

    def release(self, session: Closable) -> None:
        if session.principal is None:
            return
        tenant_id = session.principal.tenant_id
        live = self._by_tenant[tenant_id]
        if session in live:
            live.discard(session)
            if self._connections is not None:
                self._connections.release(tenant_id)

    def track(self, session: Closable, state: TenantState) -> str | None:
        """Close `session` with its key or tenant, as an admitted one, without holding one of
        the tenant's connection slots (an HTTP produce stream: it lives in one request of a
        connection that is not counted either); the refusal's reason, or None."""
        if state.tenant.status != "active":
            return f"tenant {state.tenant.id} is {state.tenant.status}"
        self._tracked[state.tenant.id].add(session)
        return None

    def untrack(self, session: Closable) -> None:
        if session.principal is not None:
            self._tracked[session.principal.tenant_id].discard(session)

    def sessions(self, tenant_id: str) -> set[Closable]:
        """The tenant's admitted and tracked sessions."""
        return set(self._by_tenant.get(tenant_id, ())) | set(self._tracked.get(tenant_id, ()))

    # -- the change feed -----------------------------------------------------------------------
    async def apply(self, change: Change) -> None:
        kind, tenant_id = change.kind, change.tenant_id
        if kind == "api_key.revoked":
            self._close_key(change.subject, "api key revoked")
        if tenant_id is None:
            return
        if kind.startswith("tenant."):
            state = await self._reload(tenant_id)
            if state is None or state.tenant.status != "active":
                self._close_tenant(tenant_id, "tenant is no longer active")
        elif kind.startswith("acl."):
            await self._reload(tenant_id)
        if kind.startswith(("quota.", "tenant.")) and self._on_quota_change is not None:
            await self._on_quota_change(tenant_id)

    async def resync(self) -> None:
        """After a gap in the feed: reload every tenant held or in use and re-check the key of
        every live session (the gap may have held revocations). Each state is replaced, never
        dropped first, so no session falls back to an older one meanwhile; a store error
        propagates (the follower retries from the version it had applied)."""
        tenants = set(self._states) | {t for t, live in self._live() if live}
        for tenant_id in tenants:
            await self.apply(Change(0, "tenant.resync", tenant_id, tenant_id, datetime.now(UTC)))
        keys = {s.principal.key_id for _tenant, live in self._live() for s in live if s.principal}
        for key_id in keys:
            if not await asyncio.to_thread(self._key_usable, key_id):
                self._close_key(key_id, "api key revoked or expired")

    async def key_usable(self, key_id: str) -> bool:
        """Whether the key is neither revoked nor expired, read from the store now; False when
        the store cannot say (fail closed)."""
        try:
            return await asyncio.to_thread(self._key_usable, key_id)
        except Exception as exc:  # the store's driver errors, OSError, a closed pool
            log.warning("event=key_check_failed key=%s error=%r", key_id, exc)
            return False

    def _key_usable(self, key_id: str) -> bool:
        try:
            key = self._source.get_api_key(key_id)
        except NotFoundError:
            return False
        now = datetime.now(UTC)
        return key.revoked_at is None and (key.expires_at is None or key.expires_at > now)

    async def _reload(self, tenant_id: str) -> TenantState | None:
        """The tenant reloaded; None (and its state dropped) when its row is gone. Any other
        error propagates: the change is then not applied, and the follower retries it."""
        try:
            return await self._fresh(tenant_id, share=False)
        except NotFoundError as exc:
            log.warning("event=tenant_reload_failed tenant=%s error=%r", tenant_id, exc)
            self._states.pop(tenant_id, None)
            return None

    def _live(self) -> list[tuple[str, set[Closable]]]:
        """Every tenant's admitted and tracked sessions (copies: closing may release them)."""
        tenants = set(self._by_tenant) | set(self._tracked)
        return [(t, self.sessions(t)) for t in tenants]

    def _close_tenant(self, tenant_id: str, reason: str) -> None:
        for session in self.sessions(tenant_id):
            session.close(reason)
        self._close_admitting(lambda principal: principal.tenant_id == tenant_id, reason)

    def _close_key(self, key_id: str, reason: str) -> None:
        self._close(lambda s: s.principal is not None and s.principal.key_id == key_id, reason)
        self._close_admitting(lambda principal: principal.key_id == key_id, reason)

    def _close_admitting(self, match: Callable[[Principal], bool], reason: str) -> None:
        for session, principal in list(self._admitting.items()):
            if match(principal):
                session.close(reason)

    def _close(self, match: Callable[[Closable], bool], reason: str) -> None:
        for _tenant, live in self._live():
            for session in [s for s in live if match(s)]:
                session.close(reason)
