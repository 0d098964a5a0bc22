"""The gateway's side of `max_storage_bytes`: headroom leased from the tenant store, charged locally.

Owns `StorageLedger`. Per tenant this gateway holds a share of the tenant's storage limit in the
store (`tenancy.limit_holdings`): `share` = bytes charged here that no sample has counted yet,
plus headroom not used yet. A lease is one store transaction: the share grows by as much of
`wanted` as `stored (newest sample) + every gateway's share` leaves under the limit, so the fleet
together never admits more than the limit beyond the newest sample.
- `charge(tenant, bytes)`, synchronous, on every produce the policy stage forwards (Kafka and
  HTTP): the request's size is taken from the local headroom, no store call. Below half a lease
  left, a top-up is started in the background. Not enough left: refused: `full` when the store's
  last answer left no room (POLICY_VIOLATION), otherwise the top-up under way (retriable).
- `warm(tenant)` at login and `lease(tenant, bytes)` on the HTTP produce path wait for headroom
  before anything is charged. A lease asks for `storage.lease.bytes` or, for a tenant writing
  faster and under half its limit, about `LEASE_SECONDS` of the bytes it charged here in its
  busiest recent second (past half, headroom unused here would refuse its other gateways); at
  most an eighth of the limit, at least the request. So a tenant at line rate costs a few store
  transactions a second, not one per `storage.lease.bytes` / 2 (a third of the gateway's produce
  CPU at 1 KiB records).
- `settle(started_ms, stored)` after each sampler round, one lease transaction per tenant held
  here: the sample's real size replaces the store's `stored` (fenced: a newer sample only), this
  gateway's share drops to the bytes it charged since `started_ms - settle_ms` (older ones are in
  the sample: a produce lands within `storage.lease.settle.ms`) plus, for a tenant still
  writing, a fresh lease under its current limit. An idle tenant's headroom goes back once it
  is past half its limit or idle for `IDLE_ROUNDS` samples (no store write until then).
The local share shrinks before its write and grows only after the store granted it, so a failed
write can only make the store hold more than needed (refusing early), never less; what is
charged while a renewal is in flight (one store round trip) is the only charge not covered by a
grant at that moment. A store that
cannot be asked grants nothing (fail closed). `pier_gateway_storage_leases_total{outcome}` counts
leases granted, found full and failed. Runs on the event loop; store calls in threads.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from tenancy.limit_holdings import Holding

log = logging.getLogger("pier.gateway.storage")
RETRY_FULL_S = 1.0  # a tenant found full asks the store again at most this often
IDLE_ROUNDS = 5  # sampler rounds an idle tenant keeps its headroom (when far from its limit)
LEASE_SECONDS = 1  # a busy tenant's lease covers about this long of its recent rate


class StorageStore(Protocol):
    """The part of `TenantStore` the ledger uses (`tenancy.limit_holdings`)."""

    def lease_storage(
        self,
        tenant_id: str,
        gateway_id: str,
        held: int,
        wanted: int,
        *,
        stale_s: float,
        sample: tuple[int, int] | None = None,
    ) -> Holding: ...


@dataclass(frozen=True, slots=True)
class StorageRefusal:
    full: bool  # the tenant is at its limit (else: headroom is being leased, retry)
    message: str


@dataclass(slots=True)
class _Lease:
    share: int = 0
    charged: int = 0
    buckets: deque[tuple[int, int]] = field(default_factory=deque)  # (second, bytes) charged
    full: bool = False
    asked_ms: int = 0
    in_use: int = 0
    limit: int = 0
    idle_rounds: int = 0  # sampler rounds since the tenant last wrote here
    task: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def left(self) -> int:
        return self.share - self.charged


class StorageLedger:
    def __init__(
        self,
        store: StorageStore,
        gateway_id: str,
        *,
        clock_ms: Callable[[], int],
        lease_bytes: int = 8 << 20,
        stale_s: float = 10.0,
        settle_ms: int = 5_000,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._store = store
        self._gateway_id = gateway_id
        self._stored: dict[str, int] = {}  # per tenant, at the newest sampler round
        self._sampled_ms = 0  # when that round started
        self._clock_ms = clock_ms
        self._lease_bytes = lease_bytes
        self._stale_s = stale_s
        self._settle_ms = settle_ms
        self._leases: dict[str, _Lease] = {}
        self.store_writes = 0
        self._leases_total = Counter(
            "pier_gateway_storage_leases",
            "Storage headroom asked of the tenant store, by outcome (granted: some; full: none "
            "left under the tenant's limit; failed: the store could not be asked)",
            ["outcome"],
            registry=registry or CollectorRegistry(),
        )

    def stored_bytes(self, tenant_id: str) -> int:
        """The tenant's size at this gateway's newest sample."""
        return self._stored.get(tenant_id, 0)

    def headroom(self, tenant_id: str) -> int:
        lease = self._leases.get(tenant_id)
        return 0 if lease is None else lease.left

    # -- the produce path ---------------------------------------------------------------------------
    def charge(self, tenant_id: str, request_bytes: int, limit: int) -> StorageRefusal | None:
        """Take `request_bytes` of the tenant's leased headroom; None when they fit."""
        lease = self._leases.setdefault(tenant_id, _Lease())
        if limit < lease.limit:  # lowered since the store granted: its headroom is not trusted
            lease.share = min(lease.share, lease.charged)
        lease.limit = limit
        if lease.left >= request_bytes:
            lease.charged += request_bytes
            second = self._clock_ms() // 1000
            if lease.buckets and lease.buckets[-1][0] == second:
                lease.buckets[-1] = (second, lease.buckets[-1][1] + request_bytes)
            else:
                lease.buckets.append((second, request_bytes))
            if lease.left < self._wanted(lease, 0) // 2:
                self._top_up(tenant_id, lease, 0)
            return None
        self._top_up(tenant_id, lease, request_bytes)
        if lease.full:
            in_use, most = max(lease.in_use, self.stored_bytes(tenant_id)), lease.limit or limit
            return StorageRefusal(True, f"storage limit reached: {in_use} of {most} bytes stored")
        return StorageRefusal(False, "storage headroom is being reserved in the tenant store")

    async def warm(self, tenant_id: str, limit: int) -> None:
        """A connection of the tenant's is being admitted: lease headroom now unless enough is
        held here, so its first produce finds it (a produce cannot wait for the store)."""
        lease = self._leases.setdefault(tenant_id, _Lease())
        lease.limit = limit
        if lease.left < self._wanted(lease, 0) // 2:
            await self._ask(tenant_id, lease, 0)

    async def lease(self, tenant_id: str, request_bytes: int, limit: int) -> None:
        """Make sure the tenant has `request_bytes` of headroom here, if the store grants it."""
        lease = self._leases.setdefault(tenant_id, _Lease())
        lease.limit = limit
        if lease.left < max(request_bytes, 1):
            await self._ask(tenant_id, lease, request_bytes)

    def _sample(self, tenant_id: str) -> tuple[int, int] | None:
        return (self.stored_bytes(tenant_id), self._sampled_ms) if self._sampled_ms else None

    def _wanted(self, lease: _Lease, request_bytes: int) -> int:
        usual = self._lease_bytes
        if lease.in_use <= lease.limit // 2:  # near the limit, headroom held here starves others
            usual = max(usual, LEASE_SECONDS * _busiest_recent_second(lease.buckets))
        return max(min(usual, lease.limit // 8), request_bytes, 1)

    def _top_up(self, tenant_id: str, lease: _Lease, request_bytes: int) -> None:
        if lease.task is not None and not lease.task.done():
            return
        now = self._clock_ms()
        if lease.full and now - lease.asked_ms < RETRY_FULL_S * 1000:
            return
        lease.task = asyncio.get_running_loop().create_task(
            self._ask(tenant_id, lease, request_bytes)
        )

    async def _ask(self, tenant_id: str, lease: _Lease, request_bytes: int) -> None:
        async with lease.lock:
            if lease.left >= max(request_bytes, 1) and lease.left >= self._wanted(lease, 0) // 2:
                return  # another top-up got it meanwhile
            lease.asked_ms = self._clock_ms()
            try:
                answer = await asyncio.to_thread(
                    self._store.lease_storage,
                    tenant_id,
                    self._gateway_id,
                    lease.share,
                    self._wanted(lease, request_bytes),
                    stale_s=self._stale_s,
                    sample=self._sample(tenant_id),
                )
            except Exception as exc:  # fail closed: nothing granted
                log.warning("event=storage_lease_failed tenant=%s error=%r", tenant_id, exc)
                self._leases_total.labels("failed").inc()
                return
            self.store_writes += 1
            self._leases_total.labels("granted" if answer.granted else "full").inc()
            lease.share, lease.in_use, lease.limit = answer.held, answer.in_use, answer.limit
            lease.full = lease.left < max(request_bytes, 1)
            if lease.full:
                log.info(
                    "event=storage_limit_reached tenant=%s in_use=%d limit=%d",
                    tenant_id,
                    answer.in_use,
                    answer.limit,
                )

    # -- the sampler's rounds -----------------------------------------------------------------------
    async def settle(self, started_ms: int, stored: Mapping[str, int]) -> None:
        """A sampler round that started at `started_ms` measured `stored` (bytes per tenant):
        per tenant with a share here, one lease transaction applies the sample (fenced), forgets
        the bytes it counted and renews the headroom under the tenant's current limit."""
        self._stored, self._sampled_ms = dict(stored), started_ms
        cutoff_s = (started_ms - self._settle_ms) // 1000
        for tenant_id, lease in list(self._leases.items()):
            async with lease.lock:
                counted = 0
                while lease.buckets and lease.buckets[0][0] < cutoff_s:
                    counted += lease.buckets.popleft()[1]
                lease.charged -= counted
                lease.share -= counted
                active = bool(lease.buckets)
                lease.idle_rounds = 0 if active else lease.idle_rounds + 1
                if active or counted:
                    await self._renew(tenant_id, lease, self._wanted(lease, 0) if active else 0)
                elif lease.share and self._give_back(lease):
                    await self._renew(tenant_id, lease, 0)
            if not active and lease.share == 0 and lease.charged == 0:
                self._leases.pop(tenant_id, None)

    @staticmethod
    def _give_back(lease: _Lease) -> bool:
        """An idle tenant's headroom goes back when others may need it (the tenant is past half
        its limit) or it has been idle for `IDLE_ROUNDS` samples; until then nothing changed
        and no store write is needed, and its next produce needs no lease."""
        return lease.in_use > lease.limit // 2 or lease.idle_rounds >= IDLE_ROUNDS

    async def _renew(self, tenant_id: str, lease: _Lease, wanted: int) -> None:
        """The share becomes what is charged and not yet counted plus up to `wanted` (unused
        headroom goes back: a lowered limit applies here within one sample interval)."""
        charged = lease.charged
        try:
            answer = await asyncio.to_thread(
                self._store.lease_storage,
                tenant_id,
                self._gateway_id,
                charged,
                wanted,
                stale_s=self._stale_s,
                sample=self._sample(tenant_id),
            )
        except Exception as exc:  # the store keeps the larger share: refuses early
            log.warning("event=storage_settle_failed tenant=%s error=%r", tenant_id, exc)
            return
        self.store_writes += 1
        lease.share, lease.in_use, lease.limit = answer.held, answer.in_use, answer.limit
        lease.full = wanted > 0 and not answer.granted
        lease.asked_ms = 0


def _busiest_recent_second(buckets: deque[tuple[int, int]]) -> int:
    """Bytes charged in the busier of the last two seconds with charges (the current one may
    have just begun)."""
    if not buckets:
        return 0
    if len(buckets) == 1:
        return buckets[-1][1]
    return max(buckets[-1][1], buckets[-2][1])
