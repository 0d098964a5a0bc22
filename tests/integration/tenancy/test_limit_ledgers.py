"""The gateway's connection and storage ledgers on both stores: two ledgers (two gateways) on one
store admit exactly the tenant's limit together, releases are batched and reused, a store that
cannot be asked refuses (fail closed), and storage headroom leased by both never passes the limit
and comes back with the next sample."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gateway.connection_ledger import UNAVAILABLE, ConnectionLedger
from gateway.storage_ledger import StorageLedger
from tenancy.limit_holdings import CONNECTIONS, STORAGE, Holding
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration
A, B = "gw-a/1", "gw-b/1"


def _ready(store: TenantStore, **limits: int) -> None:
    tenant(store, "acme")
    current = store.get_tenant("acme").limits
    store.update_tenant("acme", limits=replace(current, **limits), actor=OPERATOR)
    for gateway in (A, B):
        store.report_gateway(gateway, 0)


def test_two_gateways_admit_exactly_the_limit_together(store: TenantStore) -> None:
    _ready(store, max_connections=5)

    async def scenario() -> None:
        a = ConnectionLedger(store, A, stale_s=10, flush_s=60)
        b = ConnectionLedger(store, B, stale_s=10, flush_s=60)
        answers = await asyncio.gather(*(g.acquire("acme") for g in (a, b) * 6))
        assert answers.count(None) == 5
        assert set(answers) - {None} == {"tenant connection limit of 5 reached"}
        assert a.held("acme") + b.held("acme") == 5
        # A release is written back by the next flush; until then `a` reuses the slot itself.
        holder = a if a.held("acme") else b
        other = b if holder is a else a
        writes = holder.store_writes
        holder.release("acme")
        assert await holder.acquire("acme") is None and holder.store_writes == writes
        holder.release("acme")
        assert await other.acquire("acme") is not None  # not written back yet
        await holder.flush()
        assert await other.acquire("acme") is None
        assert store.limit_use("acme", CONNECTIONS)[1] == 5

    asyncio.run(scenario())


def test_a_store_that_cannot_be_asked_refuses_the_connection(tmp_path: Path) -> None:
    broken = TenantStore.open(f"sqlite:///{tmp_path / 'gone' / 'tenancy.db'}")  # cannot open

    async def scenario() -> None:
        registry = CollectorRegistry()
        ledger = ConnectionLedger(broken, A, stale_s=10, registry=registry)
        assert await ledger.acquire("acme") == UNAVAILABLE
        assert ledger.held("acme") == 0
        storage = StorageLedger(broken, A, clock_ms=Clock(), registry=registry)
        await storage.lease("acme", 100, 1_000)
        refused = storage.charge("acme", 100, 1_000)
        assert refused is not None and not refused.full  # nothing granted: retriable refusal
        for metric in ("pier_gateway_connection_holds_total", "pier_gateway_storage_leases_total"):
            assert registry.get_sample_value(metric, {"outcome": "failed"}) == 1

    try:
        asyncio.run(scenario())
    finally:
        broken.close()


def test_a_restarted_gateway_starts_from_zero(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    _ready(store, max_connections=2)

    async def scenario() -> None:
        old = ConnectionLedger(store, A, stale_s=10)
        assert [await old.acquire("acme") for _ in range(2)] == [None, None]
        store.forget_gateway(A)  # the process died; its successor has a new incarnation id
        store.report_gateway("gw-a/2", 0)
        new = ConnectionLedger(store, "gw-a/2", stale_s=10)
        assert await new.acquire("acme") is not None  # the old shares are fresh: still held
        tenancy_clock.advance(11)
        store.report_gateway("gw-a/2", 0)
        assert [await new.acquire("acme") for _ in range(2)] == [None, None]
        assert store.limit_use("acme", CONNECTIONS)[2] == {"gw-a/2": 2}

    asyncio.run(scenario())


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def test_two_gateways_never_charge_more_storage_than_the_limit(store: TenantStore) -> None:
    limit = 80_000
    _ready(store, max_storage_bytes=limit)
    clock = Clock()

    async def scenario() -> None:
        ledgers = [
            StorageLedger(store, g, clock_ms=clock, lease_bytes=4_000, settle_ms=5_000)
            for g in (A, B)
        ]
        charged = 0
        for _ in range(200):
            for ledger in ledgers:
                await ledger.lease("acme", 1_000, limit)
                if ledger.charge("acme", 1_000, limit) is None:
                    charged += 1_000
        assert charged <= limit
        base, held, _ = store.limit_use("acme", STORAGE)
        assert base + held <= limit and charged >= limit - 2 * limit // 8
        refused = ledgers[0].charge("acme", 1_000, limit)
        assert refused is not None and refused.full
        assert f"of {limit} bytes" in refused.message
        # A sample taken 5 s later counts what was written (half of it was deleted meanwhile):
        # the shares drop to nothing charged since, and headroom is leased again.
        clock.now_ms += 10_000
        for ledger in ledgers:
            await ledger.settle(clock.now_ms, {"acme": charged // 2})
        base, held, _ = store.limit_use("acme", STORAGE)
        assert base == charged // 2 and base + held <= limit
        assert ledgers[0].charge("acme", 1_000, limit) is None or ledgers[0].headroom("acme") == 0
        await ledgers[1].lease("acme", 1_000, limit)
        assert ledgers[1].charge("acme", 1_000, limit) is None

    asyncio.run(scenario())


def test_an_idle_tenant_keeps_its_headroom_a_while_then_gives_it_back(store: TenantStore) -> None:
    _ready(store, max_storage_bytes=1_000_000)
    clock = Clock()

    async def scenario() -> None:
        ledger = StorageLedger(store, A, clock_ms=clock, lease_bytes=10_000, settle_ms=0)
        await ledger.warm("acme", 1_000_000)
        assert ledger.headroom("acme") == 10_000
        writes = ledger.store_writes
        for round_ in range(1, 6):  # idle, far from its limit: no store write for 4 rounds
            clock.now_ms += 1_000
            await ledger.settle(clock.now_ms, {})
            assert ledger.store_writes == writes + (round_ == 5)
        assert ledger.headroom("acme") == 0 and store.limit_use("acme", STORAGE)[2] == {A: 0}

    asyncio.run(scenario())


def test_a_lowered_limit_is_not_charged_against_older_headroom(store: TenantStore) -> None:
    _ready(store, max_storage_bytes=1_000_000)
    clock = Clock()

    async def scenario() -> None:
        ledger = StorageLedger(store, A, clock_ms=clock, lease_bytes=100_000)
        await ledger.warm("acme", 1_000_000)
        assert ledger.charge("acme", 10, 1_000_000) is None
        store.update_tenant(
            "acme",
            limits=replace(store.get_tenant("acme").limits, max_storage_bytes=50),
            actor=OPERATOR,
        )
        assert ledger.charge("acme", 100, 50) is not None  # the old headroom is not used
        await ledger.lease("acme", 100, 50)
        refused = ledger.charge("acme", 100, 50)
        assert refused is not None and refused.full

    asyncio.run(scenario())


def test_a_lowered_storage_limit_applies_at_the_next_sample(store: TenantStore) -> None:
    _ready(store, max_storage_bytes=1_000_000)
    clock = Clock()

    async def scenario() -> None:
        ledger = StorageLedger(store, A, clock_ms=clock, lease_bytes=100_000, settle_ms=0)
        await ledger.lease("acme", 10, 1_000_000)
        assert ledger.charge("acme", 10, 1_000_000) is None
        assert ledger.headroom("acme") > 50_000
        store.update_tenant(
            "acme",
            limits=replace(store.get_tenant("acme").limits, max_storage_bytes=5_000),
            actor=OPERATOR,
        )
        await ledger.settle(clock.now_ms, {"acme": 4_990})
        assert ledger.headroom("acme") <= 10  # what is left under the new limit
        refused = ledger.charge("acme", 100, 5_000)
        assert refused is not None and refused.full

    asyncio.run(scenario())


def test_a_busy_tenants_lease_follows_its_rate(store: TenantStore) -> None:
    """At line rate a lease covers about a second of the tenant's bytes (within an eighth of its
    limit), so 64 MiB charged in one second cost a few store transactions, not one per
    `storage.lease.bytes` / 2; a slow tenant keeps `storage.lease.bytes`."""
    limit = 1 << 40
    _ready(store, max_storage_bytes=limit)
    clock = Clock()

    async def scenario() -> None:
        ledger = StorageLedger(store, A, clock_ms=clock, lease_bytes=1 << 20)
        await ledger.warm("acme", limit)
        assert ledger.headroom("acme") == 1 << 20
        for _second in range(2):  # 32 MiB a second, 1 KiB at a time
            for _ in range(32 * 1024):
                while ledger.charge("acme", 1024, limit) is not None:
                    await asyncio.sleep(0)  # a top-up under way: a client would retry
            clock.now_ms += 1_000
        assert ledger.store_writes <= 12  # 1 MiB leases would have taken ~128
        await ledger.lease("acme", 1, limit)  # the top-up under way, if any, has landed
        assert ledger.headroom("acme") >= 16 << 20

    asyncio.run(scenario())


def test_past_half_its_limit_a_busy_tenant_leases_the_fixed_size(store: TenantStore) -> None:
    """Near the limit, headroom one gateway holds unused refuses the tenant's other gateways
    until the next sample: a tenant past half its limit leases `storage.lease.bytes` whatever
    its rate."""
    limit = 512 << 20
    _ready(store, max_storage_bytes=limit)
    clock = Clock()

    async def scenario() -> None:
        ledger = StorageLedger(store, A, clock_ms=clock, lease_bytes=1 << 20, settle_ms=0)
        await ledger.settle(clock.now_ms, {"acme": 300 << 20})  # past half the limit
        await ledger.warm("acme", limit)
        for _ in range(16 * 1024):  # 16 MiB in one second
            while ledger.charge("acme", 1024, limit) is not None:
                await asyncio.sleep(0)
        await ledger.lease("acme", 1, limit)
        assert ledger.headroom("acme") <= 1 << 20

    asyncio.run(scenario())


class HeldStore:
    """A store whose next `hold_connections` waits until `go` is set (on the ledger's worker
    thread), so a connection can close while a new one's slot is being asked for."""

    def __init__(self, store: TenantStore) -> None:
        self.store = store
        self.asked = threading.Event()
        self.go = threading.Event()
        self.hold_next = False

    def hold_connections(
        self, tenant_id: str, gateway_id: str, held: int, *, stale_s: float
    ) -> Holding:
        if self.hold_next:
            self.hold_next = False
            self.asked.set()
            self.go.wait(10)
        return self.store.hold_connections(tenant_id, gateway_id, held, stale_s=stale_s)

    def drop_holdings(self, gateway_id: str) -> int:
        return self.store.drop_holdings(gateway_id)


def test_a_connection_closed_while_another_is_admitted_gives_its_slot_back(
    store: TenantStore,
) -> None:
    _ready(store, max_connections=5)

    async def scenario() -> None:
        held = HeldStore(store)
        ledger = ConnectionLedger(held, A, stale_s=10, flush_s=60)
        for _ in range(2):
            assert await ledger.acquire("acme") is None
        held.hold_next = True
        admitting = asyncio.create_task(ledger.acquire("acme"))  # asks the store for 3
        assert await asyncio.to_thread(held.asked.wait, 10)
        ledger.release("acme")  # one of the two closes meanwhile
        held.go.set()
        assert await admitting is None
        assert ledger.held("acme") == 2  # open here: one of the first two and the new one
        await ledger.flush()
        assert store.limit_use("acme", CONNECTIONS)[1] == 2  # the store agrees after the flush

    asyncio.run(scenario())
