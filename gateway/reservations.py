"""The gateway's side of partition limits: reserve in the tenant store before a creation is
forwarded, settle when the broker answers, and keep the store's count true to the fleet.

Owns `PartitionLedger`, the one way any path (Kafka CreateTopics / CreatePartitions / Metadata
auto-creation, HTTP v3 topic creation, the request-policy stage) checks `max_partitions`:
- `reserve(tenant, sizes)` reserves each size in order while it fits (one store transaction:
  `tenancy.reservations`), so concurrent creations on any number of gateways never pass the limit
  together. A tenant the store has no count for yet is first counted from the fleet.
- `settle(tenant, grant, created)` after the broker answered (what it really created is added, the
  rest given back); `release(tenant, partitions)` after a deletion. Both are called from
  synchronous response rewrites, so they schedule their store write; the tenant's next `reserve`
  on this gateway, and `stop()`, wait for them.
- A background task reconciles, every `interval_s`, the tenants whose count is older than that
  with the fleet's real partition count (one read of the fleet for the round, not one a tenant) (fenced in the store: a creation under way or a change
  younger than `quiet_s` is never overwritten), and expires reservations older than `stale_s`:
  a gateway that died between reserve and create, or an answer that never came, holds nothing for
  ever.
A store that cannot be reached fails closed: `LedgerUnavailable`, and nothing is created.
Runs on the event loop (store calls in worker threads); not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tenancy.reservations import AllocationUnknown, PartitionAllocation, PartitionGrant

log = logging.getLogger("pier.gateway.reservations")


class LedgerUnavailable(Exception):
    """The tenant store could not be asked: the creation is refused (fail closed)."""


class ReservationStore(Protocol):
    """The part of `TenantStore` the ledger uses (`tenancy.reservations`)."""

    def partition_allocation(self, tenant_id: str) -> PartitionAllocation | None: ...

    def reserve_partitions(
        self, tenant_id: str, sizes: Sequence[int], *, holder: str
    ) -> PartitionGrant: ...

    def settle_partitions(self, tenant_id: str, reservation_id: str, created: int) -> None: ...

    def release_partitions(self, tenant_id: str, partitions: int) -> None: ...

    def reconcile_partitions(
        self,
        tenant_id: str,
        fleet_count: int,
        seen_version: int | None,
        *,
        quiet_s: float,
        stale_s: float,
    ) -> bool: ...

    def partition_tenants(self, *, reconciled_before_s: float, limit: int = 100) -> list[str]: ...


class PartitionBudget(Protocol):
    """What a filter or the policy stage holds of the tenant's `max_partitions` (`FilterContext.
    partitions`); `PartitionLedger` is the real one."""

    async def reserve(self, tenant_id: str, sizes: Sequence[int]) -> PartitionGrant:
        """Reserve each size in order while it fits; raises `LedgerUnavailable` (fail closed)."""
        ...

    def settle(self, tenant_id: str, grant: PartitionGrant, created: int) -> None:
        """The broker answered: `created` of the granted partitions exist (the rest go back)."""
        ...

    def release(self, tenant_id: str, partitions: int) -> None:
        """`partitions` of the tenant's were deleted."""
        ...


# tenant ids -> each one's partitions on the fleet now (one read of the fleet for all of them)
FleetCount = Callable[[Sequence[str]], Awaitable[dict[str, int]]]


@dataclass(frozen=True, slots=True)
class LedgerSettings:
    """`partition.reconcile.interval.ms`, `partition.reconcile.quiet.ms`,
    `partition.reservation.timeout.ms` (seconds here)."""

    interval_s: float = 60.0
    quiet_s: float = 30.0
    stale_s: float = 120.0


def refusal_message(limit: int, in_use: int, requested: int) -> str:
    """The POLICY_VIOLATION message for a size a grant refused."""
    return f"tenant partition limit {limit} reached: {in_use} in use, {requested} requested"


class PartitionLedger:
    def __init__(
        self,
        store: ReservationStore,
        fleet_count: FleetCount,
        *,
        holder: str,
        settings: LedgerSettings | None = None,
    ) -> None:
        self._store = store
        self._fleet_count = fleet_count
        self._holder = holder
        self._settings = settings or LedgerSettings()
        self._writes: dict[str, set[asyncio.Task[None]]] = {}  # per tenant, under way
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_reconciled(), name="partition-reconcile")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(
            *(t for ts in self._writes.values() for t in ts), return_exceptions=True
        )

    # -- what filters and the policy stage call --------------------------------------------------
    async def reserve(self, tenant_id: str, sizes: Sequence[int]) -> PartitionGrant:
        """Reserve `sizes` (partitions per topic, in request order) for the tenant. The tenant's
        settlements and releases under way on this gateway are written first, so a creation that
        follows a refused or deleted one sees its partitions given back."""
        pending = self._writes.get(tenant_id)
        if pending:
            await asyncio.gather(*list(pending), return_exceptions=True)
        try:
            try:
                return await self._reserve(tenant_id, sizes)
            except AllocationUnknown:
                await self.reconcile(tenant_id)
                return await self._reserve(tenant_id, sizes)
        except (AllocationUnknown, OSError, RuntimeError) as exc:
            raise LedgerUnavailable(str(exc)) from None
        except Exception as exc:  # the store's driver errors (SQLAlchemy's) are not OSErrors
            log.warning("event=partition_reserve_failed tenant=%s error=%r", tenant_id, exc)
            raise LedgerUnavailable(type(exc).__name__) from None

    async def _reserve(self, tenant_id: str, sizes: Sequence[int]) -> PartitionGrant:
        return await asyncio.to_thread(
            self._store.reserve_partitions, tenant_id, list(sizes), holder=self._holder
        )

    def settle(self, tenant_id: str, grant: PartitionGrant, created: int) -> None:
        """The broker answered: `created` of the granted partitions exist now."""
        if grant.reservation_id is not None:
            self._write(
                tenant_id, self._store.settle_partitions, tenant_id, grant.reservation_id, created
            )

    def release(self, tenant_id: str, partitions: int) -> None:
        """`partitions` of the tenant's were deleted."""
        if partitions > 0:
            self._write(tenant_id, self._store.release_partitions, tenant_id, partitions)

    def _write(self, tenant_id: str, call: object, *args: object) -> None:
        async def run() -> None:
            try:
                await asyncio.to_thread(call, *args)  # type: ignore[arg-type]
            except Exception as exc:  # the reconcile corrects the count later
                log.warning("event=partition_ledger_write_failed error=%r", exc)

        task = asyncio.create_task(run())
        tasks = self._writes.setdefault(tenant_id, set())
        tasks.add(task)
        task.add_done_callback(lambda done: self._written(tenant_id, done))

    def _written(self, tenant_id: str, task: asyncio.Task[None]) -> None:
        tasks = self._writes.get(tenant_id)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del self._writes[tenant_id]

    # -- keeping the store's count true ----------------------------------------------------------
    async def reconcile(self, tenant_id: str) -> bool:
        """Set the tenant's count to the fleet's, unless a change is under way (see module doc)."""
        return (await self.reconcile_many([tenant_id]))[tenant_id]

    async def reconcile_many(self, tenant_ids: Sequence[str]) -> dict[str, bool]:
        """`reconcile` for several tenants over one read of the fleet, taken after every
        tenant's store row was read (what the store's fence needs of each count)."""
        seen = {t: await asyncio.to_thread(self._store.partition_allocation, t) for t in tenant_ids}
        counts = await self._fleet_count(list(seen))
        return {t: await self._apply(t, seen[t], counts[t]) for t in seen}

    async def _apply(self, tenant_id: str, seen: PartitionAllocation | None, count: int) -> bool:
        settings = self._settings
        applied = await asyncio.to_thread(
            self._store.reconcile_partitions,
            tenant_id,
            count,
            None if seen is None else seen.version,
            quiet_s=settings.quiet_s,
            stale_s=settings.stale_s,
        )
        if applied and seen is not None and seen.allocated != count:
            log.info(
                "event=partitions_reconciled tenant=%s store=%d fleet=%d",
                tenant_id,
                seen.allocated,
                count,
            )
        return applied

    async def _keep_reconciled(self) -> None:
        while True:
            try:
                due = await asyncio.to_thread(
                    self._store.partition_tenants, reconciled_before_s=self._settings.interval_s
                )
                if due:
                    await self.reconcile_many(due)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event=partition_reconcile_failed error=%r", exc)
            await asyncio.sleep(self._settings.interval_s / 2)
