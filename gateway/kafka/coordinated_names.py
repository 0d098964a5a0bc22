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
the tenant holds fewer than its limit; at the limit the fleet is listed again (at most every
`relist_s`, so deleted groups and expired ids free their places) before the name is refused. The
first `admit` lists the fleet; a listing that fails (or takes longer than `listing_timeout_s`)
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
from gateway.kafka.namespace import tenant_of

log = logging.getLogger("pier.gateway.names")
RELIST_S = 5.0
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
    async def coordinated_names(self, kind: NameKind) -> tuple[set[str], bool]:
        """The fleet names of `kind` the brokers coordinate now, and whether every broker
        answered (raises ClientError when none did)."""
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
        if self._clock() - (census.listed_at or 0.0) >= self._relist_s:
            await self._list(kind)
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


def _by_tenant(fleet_names: Iterable[str]) -> dict[str, set[str]]:
    by_tenant: dict[str, set[str]] = {}
    for name in fleet_names:
        owner = tenant_of(name)
        if owner is not None:
            by_tenant.setdefault(owner[0], set()).add(name)
    return by_tenant
