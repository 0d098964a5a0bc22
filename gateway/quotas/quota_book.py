"""The resolved client quotas of connections, per tenant, kept current by the change feed.

Owns: each loaded tenant's configured quota entities and its tenant-wide byte-rate caps (the
tenant's `max_producer_byte_rate` / `max_consumer_byte_rate` limits, read from the store in the
same worker-thread load), the `ClientQuotas` of every (tenant, user, client-id) asked for, and a
generation per tenant that changes whenever they are re-read, so a connection notices a stale copy
by comparing one int. Each quota name is resolved by `tenancy.quota_chain.resolve`; its sensor key
is what Kafka's `DefaultQuotaCallback.quotaMetricTags` gives for the matched entity: the
connection's user when the entity has a user part, its client id when it has a client part, and
("", client id) when no level sets the quota. Reads finish in any order, so each carries a ticket
and only the latest started read is kept; `forget` drops reads still in flight. Runs on the event
loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from gateway.quotas.client_quotas import SensorKey
from tenancy.domain import QuotaEntity, Tenant, TenantLimits
from tenancy.errors import NotFoundError
from tenancy.quota_chain import entity_path, precedence, resolve

MAX_CACHED_CLIENTS = 10_000  # per tenant; client ids are chosen by clients, so bound them
Entities = list[tuple[QuotaEntity, dict[str, float]]]  # what `QuotaSource.list_quotas` answers


class QuotaSource(Protocol):
    """What the book reads (`TenantStore` is one); called from a worker thread."""

    def list_quotas(self, tenant_id: str) -> Entities: ...

    def get_tenant(self, tenant_id: str) -> Tenant: ...


class QuotasNotLoaded(LookupError):
    """`quotas_for` before `load` of that tenant finished (or after `forget`)."""


@dataclass(frozen=True, slots=True)
class ClientQuotas:
    """A connection's quotas (None = unlimited) and, per quota, the sensor that measures it; plus
    its tenant's caps on the same byte rates over all the tenant's principals (None = no cap)."""

    producer_byte_rate: float | None
    consumer_byte_rate: float | None
    request_percentage: float | None
    controller_mutation_rate: float | None
    tenant_producer_byte_rate: float | None
    tenant_consumer_byte_rate: float | None
    producer_key: SensorKey
    consumer_key: SensorKey
    request_key: SensorKey
    mutation_key: SensorKey
    generation: int


def sensor_key(tenant_id: str, matched: QuotaEntity | None, user: str, client_id: str) -> SensorKey:
    """Kafka's metric tags for a quota matched at `matched` (None: no level sets it)."""
    if matched is None or matched.user is None:
        return SensorKey(tenant_id, "", client_id)
    return SensorKey(tenant_id, user, "" if matched.client_id is None else client_id)


def _cap(value: int | None) -> float | None:
    return None if value is None else float(value)


def client_quotas(
    tenant_id: str,
    configured: dict[QuotaEntity, dict[str, float]],
    limits: TenantLimits,
    user: str,
    client_id: str,
    generation: int,
) -> ClientQuotas:
    by_path = {entity_path(entity): entity for entity in precedence(user, client_id)}
    values: dict[str, float | None] = {}
    keys: dict[str, SensorKey] = {}
    for name, effective in resolve(configured, user, client_id).items():
        matched = None if effective.source is None else by_path[effective.source]
        values[name] = effective.value
        keys[name] = sensor_key(tenant_id, matched, user, client_id)
    return ClientQuotas(
        producer_byte_rate=values["producer_byte_rate"],
        consumer_byte_rate=values["consumer_byte_rate"],
        request_percentage=values["request_percentage"],
        controller_mutation_rate=values["controller_mutation_rate"],
        tenant_producer_byte_rate=_cap(limits.max_producer_byte_rate),
        tenant_consumer_byte_rate=_cap(limits.max_consumer_byte_rate),
        producer_key=keys["producer_byte_rate"],
        consumer_key=keys["consumer_byte_rate"],
        request_key=keys["request_percentage"],
        mutation_key=keys["controller_mutation_rate"],
        generation=generation,
    )


class QuotaBook:
    def __init__(self, source: QuotaSource) -> None:
        self._source = source
        self._configured: dict[str, dict[QuotaEntity, dict[str, float]]] = {}
        self._limits: dict[str, TenantLimits] = {}  # held exactly for the tenants in _configured
        self._cache: dict[str, dict[tuple[str, str], ClientQuotas]] = {}
        self._tickets = 0
        self._installed: dict[str, int] = {}  # ticket of the kept read (also the generation)
        self._in_flight: dict[str, int] = {}
        self._loading: dict[str, asyncio.Future[None]] = {}

    async def load(self, tenant_id: str) -> None:
        """Read the tenant's quotas unless they are held already; concurrent calls share a read."""
        if tenant_id in self._configured:
            return
        pending = self._loading.get(tenant_id)
        if pending is None:
            pending = self._loading[tenant_id] = asyncio.ensure_future(self._read(tenant_id))
            pending.add_done_callback(lambda done: self._loaded(tenant_id, done))
        await asyncio.shield(pending)

    async def refresh(self, tenant_id: str) -> None:
        """Re-read a held (or loading) tenant after a quota.* or tenant.* change; a tenant that
        no longer exists is forgotten. Tenants this gateway does not hold are left alone."""
        if tenant_id not in self._configured and tenant_id not in self._loading:
            return
        try:
            await self._read(tenant_id)
        except NotFoundError:
            self.forget(tenant_id)

    def quotas_for(self, tenant_id: str, user: str, client_id: str) -> ClientQuotas:
        configured = self._configured.get(tenant_id)
        if configured is None:
            raise QuotasNotLoaded(tenant_id)
        cache = self._cache.setdefault(tenant_id, {})
        quotas = cache.get((user, client_id))
        if quotas is None:
            generation = self._installed[tenant_id]
            limits = self._limits[tenant_id]
            quotas = client_quotas(tenant_id, configured, limits, user, client_id, generation)
            if len(cache) >= MAX_CACHED_CLIENTS:
                del cache[next(iter(cache))]  # the oldest entry
            cache[(user, client_id)] = quotas
        return quotas

    def generation(self, tenant_id: str) -> int:
        """Changes whenever the tenant's quotas are re-read; 0 while they are not held."""
        return self._installed.get(tenant_id, 0) if tenant_id in self._configured else 0

    def forget(self, tenant_id: str) -> None:
        self._configured.pop(tenant_id, None)
        self._limits.pop(tenant_id, None)
        self._cache.pop(tenant_id, None)
        if self._in_flight.get(tenant_id):
            self._installed[tenant_id] = self._tickets  # reads already started are dropped
        else:
            self._installed.pop(tenant_id, None)

    async def _read(self, tenant_id: str) -> None:
        self._tickets += 1
        ticket = self._tickets
        self._in_flight[tenant_id] = self._in_flight.get(tenant_id, 0) + 1
        try:
            rows, tenant = await asyncio.to_thread(self._fetch, tenant_id)
            if ticket > self._installed.get(tenant_id, 0):  # else a later read or a forget won
                self._installed[tenant_id] = ticket
                self._configured[tenant_id] = {entity: dict(quotas) for entity, quotas in rows}
                self._limits[tenant_id] = tenant.limits
                self._cache.pop(tenant_id, None)
        finally:
            self._in_flight[tenant_id] -= 1
            if not self._in_flight[tenant_id]:
                del self._in_flight[tenant_id]
                if tenant_id not in self._configured:
                    self._installed.pop(tenant_id, None)

    def _fetch(self, tenant_id: str) -> tuple[Entities, Tenant]:
        """In a worker thread: the tenant's quota entities, then the tenant (for its caps). Two
        reads, not one snapshot: a change between them comes with its own feed event and refresh."""
        return self._source.list_quotas(tenant_id), self._source.get_tenant(tenant_id)

    def _loaded(self, tenant_id: str, done: asyncio.Future[None]) -> None:
        if self._loading.get(tenant_id) is done:
            del self._loading[tenant_id]
        if not done.cancelled():
            done.exception()  # retrieved here; the awaiting callers still see it
