"""Partition reservations on both stores: the limit holds under concurrent reservations from many
threads (each its own store, as gateways are), settling and deleting move the count, and
reconciliation with the fleet is fenced and expires what a crashed gateway left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from gateway.reservations import LedgerSettings, LedgerUnavailable, PartitionLedger
from tenancy.reservations import AllocationUnknown
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration
HOLDER = "gw-test"


def _limit(store: TenantStore, tenant_id: str, max_partitions: int) -> None:
    limits = replace(store.get_tenant(tenant_id).limits, max_partitions=max_partitions)
    store.update_tenant(tenant_id, limits=limits, actor=OPERATOR)


def _ready(store: TenantStore, tenant_id: str, max_partitions: int, in_fleet: int = 0) -> None:
    tenant(store, tenant_id)
    _limit(store, tenant_id, max_partitions)
    assert store.reconcile_partitions(tenant_id, in_fleet, None, quiet_s=0, stale_s=60)


def test_a_tenant_without_a_row_must_be_reconciled_first(store: TenantStore) -> None:
    tenant(store, "acme")
    with pytest.raises(AllocationUnknown):
        store.reserve_partitions("acme", [1], holder=HOLDER)
    assert store.partition_allocation("acme") is None
    assert store.reconcile_partitions("acme", 3, None, quiet_s=0, stale_s=60)
    assert not store.reconcile_partitions("acme", 9, None, quiet_s=0, stale_s=60)  # made already
    allocation = store.partition_allocation("acme")
    assert allocation is not None and (allocation.allocated, allocation.reserved) == (3, 0)


def test_sizes_are_granted_in_order_while_they_fit(store: TenantStore) -> None:
    _ready(store, "acme", 5, in_fleet=1)
    grant = store.reserve_partitions("acme", [2, 3, 1, 1], holder=HOLDER)
    assert grant.granted == (True, False, True, True)
    assert (grant.in_use, grant.limit) == (1, 5)
    refused = store.reserve_partitions("acme", [1], holder=HOLDER)
    assert refused.reservation_id is None and refused.granted == (False,)
    assert refused.in_use == 5


def test_concurrent_reservations_never_pass_the_limit(
    store: TenantStore, store_url: str, tenancy_clock: TenancyClock
) -> None:
    _ready(store, "acme", 5)
    stores = [TenantStore.open(store_url, clock=tenancy_clock) for _ in range(8)]
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            grants = list(
                pool.map(
                    lambda i: stores[i % 8].reserve_partitions("acme", [1], holder=HOLDER),
                    range(40),
                )
            )
    finally:
        for other in stores:
            other.close()
    assert sum(g.granted[0] for g in grants) == 5
    allocation = store.partition_allocation("acme")
    assert allocation is not None and allocation.in_use == 5


def test_settle_and_release_move_the_allocation(store: TenantStore) -> None:
    _ready(store, "acme", 10)
    grant = store.reserve_partitions("acme", [4, 3], holder=HOLDER)
    assert grant.reservation_id is not None
    store.settle_partitions("acme", grant.reservation_id, 4)  # the broker refused one topic
    allocation = store.partition_allocation("acme")
    assert allocation is not None and (allocation.allocated, allocation.reserved) == (4, 0)
    store.settle_partitions("acme", grant.reservation_id, 4)  # settled twice: counted twice,
    store.release_partitions("acme", 4)  # a reconcile would correct it; deleting gives back
    allocation = store.partition_allocation("acme")
    assert allocation is not None and (allocation.allocated, allocation.reserved) == (4, 0)


def test_reconcile_is_fenced_quiet_and_expires_a_crashed_gateways_reservation(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    _ready(store, "acme", 10)
    seen = store.partition_allocation("acme")
    assert seen is not None
    grant = store.reserve_partitions("acme", [6], holder=HOLDER)  # then the gateway dies
    assert grant.reservation_id is not None
    tenancy_clock.advance(5)
    # Changed since it was read: not applied. Read again: a live reservation, not applied.
    assert not store.reconcile_partitions("acme", 0, seen.version, quiet_s=1, stale_s=60)
    seen = store.partition_allocation("acme")
    assert seen is not None
    assert not store.reconcile_partitions("acme", 0, seen.version, quiet_s=1, stale_s=60)
    assert store.reserve_partitions("acme", [5], holder=HOLDER).granted == (False,)
    tenancy_clock.advance(60)
    assert store.reconcile_partitions("acme", 2, seen.version, quiet_s=1, stale_s=60)
    allocation = store.partition_allocation("acme")
    assert allocation is not None and (allocation.allocated, allocation.reserved) == (2, 0)
    assert store.reserve_partitions("acme", [8], holder=HOLDER).granted == (True,)


def test_reconcile_waits_for_the_row_to_be_quiet(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    _ready(store, "acme", 10)
    grant = store.reserve_partitions("acme", [3], holder=HOLDER)
    assert grant.reservation_id is not None
    store.settle_partitions("acme", grant.reservation_id, 3)
    seen = store.partition_allocation("acme")
    assert seen is not None
    # The fleet's metadata may not show the new topic yet: a fresh change is not overwritten.
    assert not store.reconcile_partitions("acme", 0, seen.version, quiet_s=30, stale_s=60)
    tenancy_clock.advance(31)
    assert store.reconcile_partitions("acme", 3, seen.version, quiet_s=30, stale_s=60)
    assert store.partition_tenants(reconciled_before_s=0) == ["acme"]
    assert store.partition_tenants(reconciled_before_s=10) == []


def test_a_lower_limit_applies_to_the_next_reservation(store: TenantStore) -> None:
    _ready(store, "acme", 10, in_fleet=4)
    _limit(store, "acme", 4)
    assert store.reserve_partitions("acme", [1], holder=HOLDER).granted == (False,)


def _fleet(count: int) -> Callable[[Sequence[str]], Awaitable[dict[str, int]]]:
    """The fleet's count of tenants' partitions, as `PartitionLedger` asks for it."""

    async def tenant_partitions(tenant_ids: Sequence[str]) -> dict[str, int]:
        return dict.fromkeys(tenant_ids, count)

    return tenant_partitions


def test_the_gateway_ledger_counts_from_the_fleet_and_sees_its_own_settlements(
    store: TenantStore,
) -> None:
    tenant(store, "acme")
    _limit(store, "acme", 5)
    ledger = PartitionLedger(store, _fleet(3), holder=HOLDER)

    async def scenario() -> None:
        first = await ledger.reserve("acme", [2, 1])  # no row yet: counted from the fleet first
        assert first.granted == (True, False) and first.in_use == 3
        ledger.settle("acme", first, 0)  # the broker refused it: the next reservation sees that
        again = await ledger.reserve("acme", [2])
        assert again.granted == (True,)
        ledger.settle("acme", again, 2)
        ledger.release("acme", 1)
        await ledger.stop()

    asyncio.run(scenario())
    allocation = store.partition_allocation("acme")
    assert allocation is not None and (allocation.allocated, allocation.reserved) == (4, 0)


def test_the_gateway_ledger_fails_closed_for_a_tenant_it_cannot_count(
    store: TenantStore,
) -> None:
    ledger = PartitionLedger(store, _fleet(0), holder=HOLDER)

    async def scenario() -> None:
        with pytest.raises(LedgerUnavailable):
            await ledger.reserve("ghost", [1])  # no tenant row: no allocation can be made

    asyncio.run(scenario())


def test_a_reconcile_round_reads_the_fleet_once_for_all_its_tenants(store: TenantStore) -> None:
    """Reading the fleet's every topic once per tenant made a round cost tenants × fleet."""
    for name in ("acme", "bolt", "cora"):
        tenant(store, name)
    asked: list[list[str]] = []

    async def fleet_count(tenant_ids: Sequence[str]) -> dict[str, int]:
        asked.append(list(tenant_ids))
        return {"acme": 3, "bolt": 1, "cora": 0}

    ledger = PartitionLedger(
        store, fleet_count, holder=HOLDER, settings=LedgerSettings(quiet_s=0.0)
    )
    applied = asyncio.run(ledger.reconcile_many(["acme", "bolt", "cora"]))
    assert applied == {"acme": True, "bolt": True, "cora": True}
    assert asked == [["acme", "bolt", "cora"]]
    counts = {t: store.partition_allocation(t) for t in ("acme", "bolt", "cora")}
    assert {t: a.allocated for t, a in counts.items() if a is not None} == {
        "acme": 3,
        "bolt": 1,
        "cora": 0,
    }
