"""How many consumer groups and transactional ids each tenant holds on the fleet, and whether a
request may make one more (the tenant's own `max_groups` / `max_transactional_ids`, from its plan
or set for it in the tenant store, else the gateway's `tenant.max.groups` and
`tenant.max.transactional.ids`).

Each is state a coordinator keeps for days whatever the tenant's plan: a group's metadata and
offsets until `offsets.retention.minutes` (7 days), a transactional id's metadata until
`transactional.id.expiration.ms` (7 days), ~0.7 KB of a coordinator's memory each and a record in
its log. Kafka bounds neither, so a client naming a new group or transactional id with every
request grew the coordinators without bound.

Owns `CoordinatedNames`: per kind, the fleet names of every tenant as the brokers last listed them
(ListGroups / ListTransactions to every broker, `NameLister`), plus the names this gateway let
through since. `admit` answers at once for a name already known; a new one is let through while
the tenant holds fewer than its limit; at the limit that tenant's names are listed again (at most
every `relist_s`, so deleted groups and expired ids free their places) before the name is
refused, with its prefix as the listings' name scope (`brokers.wire.headers`): the brokers build
that tenant's names only. The first `admit` lists the whole fleet once; a listing that fails (or takes longer than `listing_timeout_s`)
keeps what was known, and one a broker did
not answer adds to it (names the gateway let through still count), so a broker outage refuses
no group a tenant already has that this gateway has seen, and a flood stays bounded by what this
gateway counts. Several gateways each
start from the fleet's count: together they may let a tenant past its limit by what each admits
between two listings, no further. `forget` drops names a DeleteGroups removed. Runs on the event
loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from brokers.client.errors import ClientError
from gateway.kafka.namespace import TenantNamespace, tenant_of

log = logging.getLogger("pier.gateway.names")
RELIST_S = 5.0
MAX_TENANTS_LISTED = 100_000  # tenants whose last own listing is remembered
LISTING_TIMEOUT_S = 5.0  # a broker that does not answer delays no request longer than this
# The longest group or transactional id a request that makes coordinator state may name (Kafka
# has no bound: 10,000 ids of 32 KiB would hold 320 MB of a coordinator's memory).
MAX_COORDINATED_NAME = 255
DEFAULT_MAX_GROUPS = 10_000
DEFAULT_MAX_TRANSACTIONAL_IDS = 50_000  # Streams EOS v2: new ids at every instance restart


class NameKind(Enum):
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional id"


class NameLister(Protocol):
    async def coordinated_names(self, kind: NameKind, prefix: str = "") -> tuple[set[str], bool]:
        """The fleet names of `kind` the brokers coordinate now (those starting with `prefix`:
        the brokers build only those), and whether every broker answered (raises ClientError
        when none did)."""
        ...


@dataclass(frozen=True, slots=True)
class NameLimits:
    groups: int = DEFAULT_MAX_GROUPS
    transactional_ids: int = DEFAULT_MAX_TRANSACTIONAL_IDS

    def of(self, kind: NameKind) -> int:
        return self.groups if kind is NameKind.GROUP else self.transactional_ids


@dataclass(slots=True)
class _Census:
    by_tenant: dict[str, set[str]] = field(default_factory=dict)
    listed_at: float | None = None  # monotonic seconds of the last listing tried
    listing: asyncio.Future[None] | None = None
    ready: bool = False  # the first listing ended (answered or failed)
    # A tenant at its limit is listed again alone (its own names, its prefix as the listing's
    # scope): when, and the listing under way.
    tenant_listed_at: dict[str, float] = field(default_factory=dict)
    tenant_listing: dict[str, asyncio.Future[None]] = field(default_factory=dict)


class CoordinatedNames:
    def __init__(
        self,
        lister: NameLister,
        limits: NameLimits = NameLimits(),
        *,
        clock: Callable[[], float] = time.monotonic,
        relist_s: float = RELIST_S,
        listing_timeout_s: float = LISTING_TIMEOUT_S,
    ) -> None:
        self._lister = lister
        self.limits = limits
        self._clock = clock
        self._relist_s = relist_s
        self._listing_timeout_s = listing_timeout_s
        self._census = {kind: _Census() for kind in NameKind}
        self._logged: dict[tuple[NameKind, str], float] = {}  # last refusal logged

    async def admit(
        self, kind: NameKind, tenant_id: str, fleet_name: str, own: int | None = None
    ) -> bool:
        """Whether a request may name `fleet_name` (one of `tenant_id`'s): known, or within the
        tenant's limit (`own`, the tenant's; None: this gateway's)."""
        census = self._census[kind]
        limit = self.limit(kind, own)
        if not census.ready:  # the first listing, or wait for the one under way
            await self._list(kind)
        if self._fits(kind, tenant_id, fleet_name, limit):
            return True
        listed_at = max(census.listed_at or 0.0, census.tenant_listed_at.get(tenant_id, 0.0))
        if self._clock() - listed_at >= self._relist_s:
            await self._list_tenant(kind, tenant_id)
            if self._fits(kind, tenant_id, fleet_name, limit):
                return True
        self._log_refusal(kind, tenant_id, limit)
        return False

    def _log_refusal(self, kind: NameKind, tenant_id: str, limit: int) -> None:
        """At most one line per tenant and kind every `relist_s`: a tenant at its limit may
        send thousands of such requests a second."""
        now = self._clock()
        key = (kind, tenant_id)
        if now - self._logged.get(key, float("-inf")) < self._relist_s:
            return
        self._logged[key] = now
        log.info(
            "event=name_refused kind=%s tenant=%s limit=%d",
            kind.name.lower(), tenant_id, limit,
        )  # fmt: skip

    def limit(self, kind: NameKind, own: int | None = None) -> int:
        """A tenant's limit: its own (`own`, from its plan or the tenant store) or this
        gateway's."""
        return self.limits.of(kind) if own is None else own

    def forget(self, kind: NameKind, tenant_id: str, fleet_names: Iterable[str]) -> None:
        """Names the fleet no longer holds (a DeleteGroups answered)."""
        names = self._census[kind].by_tenant.get(tenant_id)
        if names is not None:
            names.difference_update(fleet_names)

    def count(self, kind: NameKind, tenant_id: str) -> int:
        return len(self._census[kind].by_tenant.get(tenant_id, ()))

    def _fits(self, kind: NameKind, tenant_id: str, fleet_name: str, limit: int) -> bool:
        names = self._census[kind].by_tenant.setdefault(tenant_id, set())
        if fleet_name in names:
            return True
        if len(names) < limit:
            names.add(fleet_name)
            return True
        return False

    async def _list(self, kind: NameKind) -> None:
        """One listing at a time per kind; callers during it wait for it."""
        census = self._census[kind]
        if census.listing is not None:
            await asyncio.shield(census.listing)
            return
        census.listing = asyncio.get_running_loop().create_future()
        census.listed_at = self._clock()
        try:
            listed, complete = await asyncio.wait_for(
                self._lister.coordinated_names(kind), self._listing_timeout_s
            )
        except (ClientError, TimeoutError) as exc:  # keep what is known (module doc)
            log.warning("event=names_not_listed kind=%s error=%r", kind.name.lower(), str(exc))
        else:
            fresh = _by_tenant(listed)
            if not complete:  # a broker did not answer: its names are only in what was known
                for tenant, names in census.by_tenant.items():
                    fresh.setdefault(tenant, set()).update(names)
            census.by_tenant = fresh
        finally:
            census.ready = True
            census.listing.set_result(None)
            census.listing = None

    async def _list_tenant(self, kind: NameKind, tenant_id: str) -> None:
        """List one tenant's names again (one listing at a time per tenant and kind): what a
        tenant at its limit costs the brokers is its own names, not every tenant's (a fleet
        listing of 33,000 groups a broker was 160 ms of its CPU and 59 ms of the gateway's)."""
        census = self._census[kind]
        under_way = census.tenant_listing.get(tenant_id)
        if under_way is not None:
            await asyncio.shield(under_way)
            return
        done = census.tenant_listing[tenant_id] = asyncio.get_running_loop().create_future()
        census.tenant_listed_at[tenant_id] = self._clock()
        if len(census.tenant_listed_at) > MAX_TENANTS_LISTED:  # oldest first: bounded
            del census.tenant_listed_at[next(iter(census.tenant_listed_at))]
        try:
            listed, complete = await asyncio.wait_for(
                self._lister.coordinated_names(kind, TenantNamespace(tenant_id).prefix),
                self._listing_timeout_s,
            )
        except (ClientError, TimeoutError) as exc:  # keep what is known (module doc)
            log.warning(
                "event=names_not_listed kind=%s tenant=%s error=%r",
                kind.name.lower(), tenant_id, str(exc),
            )  # fmt: skip
        else:
            fresh = _by_tenant(listed).get(tenant_id, set())
            if not complete:  # a broker did not answer: its names are only in what was known
                fresh |= census.by_tenant.get(tenant_id, set())
            census.by_tenant[tenant_id] = fresh
        finally:
            del census.tenant_listing[tenant_id]
            done.set_result(None)


def _by_tenant(fleet_names: Iterable[str]) -> dict[str, set[str]]:
    by_tenant: dict[str, set[str]] = {}
    for name in fleet_names:
        owner = tenant_of(name)
        if owner is not None:
            by_tenant.setdefault(owner[0], set()).add(name)
    return by_tenant
