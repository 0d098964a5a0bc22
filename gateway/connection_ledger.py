"""The gateway's side of `max_connections`: each connection holds a slot reserved in the tenant store,
so the fleet together never admits more than the tenant's limit.

Owns `ConnectionLedger`. `acquire(tenant)` before a Kafka session or an HTTP consumer instance is
admitted: one store transaction (`tenancy.limit_holdings.hold_connections`) raises this gateway's
share of the tenant's connections by one, unless the fleet's total would pass the limit. Slots are
not leased in blocks: a spare slot held here would refuse a connection on another gateway while the
tenant is under its limit. `release(tenant)` when one closes only counts down; the shares are
written back within `flush_s` (batched: one write per tenant per flush, the absolute count held
here, so a lost write is corrected by the next). A connection admitted while a release is still
unwritten takes that slot without a store call. The share is keyed by this gateway's id in the
`gateways` heartbeat table: a gateway that dies holds its slots until its heartbeat is older than
`stale_s`, then the next reservation on any gateway expires them; `stop()` gives them back.
A store that cannot be asked refuses the connection (fail closed; logged key=value;
`pier_gateway_connection_holds_total{outcome}` counts granted, refused and failed asks).
Runs on the event loop (store calls in worker threads); not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from tenancy.limit_holdings import Holding

log = logging.getLogger("pier.gateway.connections")
UNAVAILABLE = "tenant connection limit cannot be checked: the tenant store is unavailable"


class ConnectionStore(Protocol):
    """The part of `TenantStore` the ledger uses (`tenancy.limit_holdings`)."""

    def hold_connections(
        self, tenant_id: str, gateway_id: str, held: int, *, stale_s: float
    ) -> Holding: ...

    def drop_holdings(self, gateway_id: str) -> int: ...


class ConnectionLedger:
    def __init__(
        self,
        store: ConnectionStore,
        gateway_id: str,
        *,
        stale_s: float,
        flush_s: float = 0.5,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._store = store
        self._gateway_id = gateway_id
        self._stale_s = stale_s
        self._flush_s = flush_s
        self._held: dict[str, int] = defaultdict(int)  # connections open here, per tenant
        self._written: dict[str, int] = defaultdict(int)  # the share last written to the store
        self._locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._dirty: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self.store_writes = 0
        self._holds = Counter(
            "pier_gateway_connection_holds",
            "Connection slots asked of the tenant store, by outcome (granted, refused: the "
            "tenant's limit; failed: the store could not be asked, the connection refused)",
            ["outcome"],
            registry=registry or CollectorRegistry(),
        )

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_flushed(), name="connection-ledger")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._store.drop_holdings, self._gateway_id)

    def held(self, tenant_id: str) -> int:
        return self._held.get(tenant_id, 0)

    async def acquire(self, tenant_id: str) -> str | None:
        """Take a slot of the tenant's; the refusal's reason, or None when admitted."""
        async with self._locks[tenant_id]:
            wanted = self._held[tenant_id] + 1
            if wanted <= self._written[tenant_id]:  # a slot released here, not yet written back
                self._held[tenant_id] = wanted
                return None
            try:
                answer = await asyncio.to_thread(
                    self._store.hold_connections,
                    tenant_id,
                    self._gateway_id,
                    wanted,
                    stale_s=self._stale_s,
                )
            except Exception as exc:  # the store's driver errors, OSError, a closed pool
                log.warning("event=connection_hold_failed tenant=%s error=%r", tenant_id, exc)
                self._holds.labels("failed").inc()
                return UNAVAILABLE
            self.store_writes += 1
            if not answer.granted:
                self._holds.labels("refused").inc()
                self._written[tenant_id] = answer.held
                return f"tenant connection limit of {answer.limit} reached"
            self._holds.labels("granted").inc()
            self._written[tenant_id] = wanted
            self._held[tenant_id] += 1  # not `= wanted`: a release may have come meanwhile
            if self._held[tenant_id] != wanted:  # ... then the store holds one too many here
                self._dirty.add(tenant_id)
            return None

    def release(self, tenant_id: str) -> None:
        """A connection of the tenant's closed here; the store hears of it within `flush_s`."""
        if self._held.get(tenant_id, 0) > 0:
            self._held[tenant_id] -= 1
            self._dirty.add(tenant_id)

    async def flush(self) -> None:
        """Write back the share of every tenant whose connections closed since the last flush."""
        dirty, self._dirty = self._dirty, set()
        for tenant_id in dirty:
            async with self._locks[tenant_id]:
                held = self._held[tenant_id]
                if held == self._written[tenant_id]:
                    continue
                try:
                    answer = await asyncio.to_thread(
                        self._store.hold_connections,
                        tenant_id,
                        self._gateway_id,
                        held,
                        stale_s=self._stale_s,
                    )
                except Exception as exc:
                    log.warning(
                        "event=connection_release_failed tenant=%s error=%r", tenant_id, exc
                    )
                    self._dirty.add(tenant_id)
                    continue
                self.store_writes += 1
                self._written[tenant_id] = held if answer.granted else answer.held
                if held == 0 == self._written[tenant_id]:  # nothing of the tenant's here
                    del self._held[tenant_id], self._written[tenant_id]

    async def _keep_flushed(self) -> None:
        while True:
            await asyncio.sleep(self._flush_s)
            await self.flush()
