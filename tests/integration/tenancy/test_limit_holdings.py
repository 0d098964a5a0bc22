"""Connection and storage holdings on both stores: threads racing from many store handles (as
gateways are) never pass the tenant's limit together, a dead gateway's share expires in the next
reservation's transaction, releases always apply, and a storage sample is fenced by its time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from tenancy.limit_holdings import CONNECTIONS, STORAGE
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration
GATEWAYS = [f"gw-{i}/inc" for i in range(4)]
STALE_S = 10.0


def _ready(store: TenantStore, tenant_id: str, **limits: int) -> None:
    tenant(store, tenant_id)
    current = store.get_tenant(tenant_id).limits
    store.update_tenant(tenant_id, limits=replace(current, **limits), actor=OPERATOR)
    for gateway in GATEWAYS:
        store.report_gateway(gateway, 0)


def _racers(store: TenantStore, count: int) -> list[str]:
    """`count` live gateways, one per racing call (a gateway's own calls are serialised)."""
    racers = [f"racer-{i}/inc" for i in range(count)]
    for racer in racers:
        store.report_gateway(racer, 0)
    return racers


def _race(store_url: str, clock: TenancyClock, calls: int, call: object) -> list[object]:
    stores = [TenantStore.open(store_url, clock=clock) for _ in range(8)]
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda i: call(stores[i % 8], i), range(calls)))  # type: ignore[operator]
    finally:
        for other in stores:
            other.close()


def test_concurrent_connection_holds_never_pass_the_limit(
    store: TenantStore, store_url: str, tenancy_clock: TenancyClock
) -> None:
    _ready(store, "acme", max_connections=5)
    racers = _racers(store, 40)

    def one(handle: TenantStore, i: int) -> bool:
        return handle.hold_connections("acme", racers[i], 1, stale_s=STALE_S).granted

    granted = _race(store_url, tenancy_clock, 40, one)
    base, held, shares = store.limit_use("acme", CONNECTIONS)
    assert sum(map(bool, granted)) == held == sum(shares.values()) == 5
    assert base == 0 and all(shares[racers[i]] == 1 for i, ok in enumerate(granted) if ok)


def test_a_release_always_applies_and_frees_a_slot_for_another_gateway(store: TenantStore) -> None:
    _ready(store, "acme", max_connections=2)
    a, b = GATEWAYS[:2]
    assert store.hold_connections("acme", a, 2, stale_s=STALE_S).granted
    refused = store.hold_connections("acme", b, 1, stale_s=STALE_S)
    assert not refused.granted and (refused.in_use, refused.limit) == (2, 2)
    assert store.hold_connections("acme", a, 1, stale_s=STALE_S).granted
    assert store.hold_connections("acme", b, 1, stale_s=STALE_S).granted
    assert store.limit_use("acme", CONNECTIONS)[2] == {a: 1, b: 1}


def test_a_dead_gateways_connections_expire_with_its_heartbeat(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    _ready(store, "acme", max_connections=3)
    a, b = GATEWAYS[:2]
    assert store.hold_connections("acme", a, 3, stale_s=STALE_S).granted  # then `a` is killed
    assert not store.hold_connections("acme", b, 1, stale_s=STALE_S).granted
    tenancy_clock.advance(STALE_S / 2)
    store.report_gateway(b, 0)  # `b` keeps reporting, `a` has stopped
    assert not store.hold_connections("acme", b, 1, stale_s=STALE_S).granted
    tenancy_clock.advance(STALE_S / 2 + 1)
    store.report_gateway(b, 0)
    assert store.hold_connections("acme", b, 3, stale_s=STALE_S).granted
    assert store.limit_use("acme", CONNECTIONS)[2] == {b: 3}


def test_a_stopping_gateway_gives_everything_back(store: TenantStore) -> None:
    _ready(store, "acme", max_connections=3, max_storage_bytes=1000)
    a = GATEWAYS[0]
    assert store.hold_connections("acme", a, 2, stale_s=STALE_S).granted
    assert store.lease_storage("acme", a, 0, 600, stale_s=STALE_S).held == 600
    assert store.drop_holdings(a) == 2
    assert store.limit_use("acme", CONNECTIONS)[1:] == (0, {})
    assert store.limit_use("acme", STORAGE)[1:] == (0, {})


def test_concurrent_storage_leases_never_pass_the_limit(
    store: TenantStore, store_url: str, tenancy_clock: TenancyClock
) -> None:
    _ready(store, "acme", max_storage_bytes=10_000)
    store.lease_storage("acme", GATEWAYS[0], 0, 0, stale_s=STALE_S, sample=(2_500, 1_000))

    racers = _racers(store, 60)

    def lease(handle: TenantStore, i: int) -> int:
        return handle.lease_storage("acme", racers[i], 0, 300, stale_s=STALE_S).held

    granted = _race(store_url, tenancy_clock, 60, lease)
    base, held, shares = store.limit_use("acme", STORAGE)
    assert base == 2_500 and held == sum(shares.values())
    assert base + held <= 10_000
    assert sum(granted) == held == 7_500  # type: ignore[arg-type]
    # What is left is granted in part: the limit is reached exactly.
    gateway = GATEWAYS[0]
    last = store.lease_storage("acme", gateway, shares.get(gateway, 0), 10_000, stale_s=STALE_S)
    assert last.in_use == 10_000 and last.limit == 10_000
    assert not store.lease_storage("acme", gateway, last.held, 1, stale_s=STALE_S).granted


def test_a_newer_sample_replaces_the_base_and_headroom_goes_back(store: TenantStore) -> None:
    _ready(store, "acme", max_storage_bytes=1_000)
    a, b = GATEWAYS[:2]
    assert store.lease_storage("acme", a, 0, 700, stale_s=STALE_S).held == 700
    assert store.lease_storage("acme", b, 0, 700, stale_s=STALE_S).held == 300
    # `a` wrote 500 of its 700 and a sample taken at 2000 counts them: its share drops to 200.
    settled = store.lease_storage("acme", a, 200, 0, stale_s=STALE_S, sample=(500, 2_000))
    assert (settled.held, settled.in_use) == (200, 1_000)
    assert store.limit_use("acme", STORAGE) == (500, 500, {a: 200, b: 300})
    older = store.lease_storage("acme", b, 300, 1, stale_s=STALE_S, sample=(100, 1_500))
    assert not older.granted and store.limit_use("acme", STORAGE)[0] == 500  # base kept
    # An idle gateway gives its headroom back; what it frees another may lease.
    assert store.lease_storage("acme", b, 0, 0, stale_s=STALE_S).held == 0
    assert store.lease_storage("acme", a, 200, 900, stale_s=STALE_S).held == 500


def test_bad_amounts_are_refused(store: TenantStore) -> None:
    _ready(store, "acme")
    with pytest.raises(Exception, match="non-negative"):
        store.hold_connections("acme", GATEWAYS[0], -1, stale_s=STALE_S)
    with pytest.raises(Exception, match="not found"):
        store.hold_connections("nobody", GATEWAYS[0], 1, stale_s=STALE_S)
