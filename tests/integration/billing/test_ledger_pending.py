"""The ledger's pending storage samples on both stores: a commit inserts the partitions it has not
seen, replaces the newest sample of those it has, and leaves the others alone, for more tenants
than one lookup chunk holds (`ledger._store_pending` writes them in bulk)."""

from __future__ import annotations

import pytest

from billing.rollup import ledger
from billing.rollup.sums import Cursor, PendingSample, RunOutput
from tenancy.store import TenantStore

pytestmark = pytest.mark.integration
TENANTS = 1_201  # over two chunks of 500 tenants


def _commit(
    store: TenantStore, cursor: Cursor | None, offset: int, pending: list[PendingSample]
) -> Cursor:
    end = {0: offset + 10}
    out = RunOutput("__usage", cursor, {0: offset}, end, 1_767_225_600_000)
    out.pending = pending
    run_id = ledger.commit(store.database, out)
    return Cursor(run_id, end)


def _sample(i: int, at_ms: int, settled: bool = False) -> PendingSample:
    return PendingSample(f"t{i:05d}", "orders", i % 3, at_ms, 1000 + i + at_ms, settled)


def test_pending_samples_inserted_replaced_and_kept(store: TenantStore) -> None:
    first = [_sample(i, 60_000) for i in range(TENANTS)]
    cursor = _commit(store, None, 0, first)
    assert sorted(ledger.pending_samples(store.database), key=repr) == sorted(first, key=repr)

    moved = [_sample(i, 120_000, settled=i % 2 == 0) for i in range(0, TENANTS, 2)]
    new = [_sample(i, 90_000) for i in range(TENANTS, TENANTS + 700)]
    _commit(store, cursor, 10, [*moved, *new])

    expected = {(s.tenant, s.topic, s.partition): s for s in [*first, *moved, *new]}
    got = ledger.pending_samples(store.database)
    assert len(got) == TENANTS + 700
    assert sorted(got, key=repr) == sorted(expected.values(), key=repr)
