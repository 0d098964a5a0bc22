"""Invoices are computed in chunks of tenants (bulk reads and writes per chunk): with a chunk of
two, five tenants' invoices, adjustments and provenance are each tenant's own, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from billing.invoice import issue as issue_module
from billing.invoice.issue import issue
from tenancy.billing_store import get_invoice
from tenancy.models import InvoiceLineRow
from tenancy.store import TenantStore
from tests.integration.billing.test_invoice import FEB, GIB, HOUR, JAN, PLAN, Runs

pytestmark = pytest.mark.integration
TENANTS = ["ta1", "ta2", "ta3", "ta4", "ta5"]


def _lines(store: TenantStore, tenant: str, invoice_id: str) -> list[tuple[str, str, str, str]]:
    with store.database.read() as session:
        found = get_invoice(session, tenant, invoice_id)
    assert found is not None
    return [(x["kind"], x["for_period"], x["dimension"], x["measure"]) for x in found["lines"]]


def _line_rows(store: TenantStore) -> int:
    with store.database.read() as session:
        return int(session.scalar(select(func.count()).select_from(InvoiceLineRow)) or 0)


def test_chunks_keep_each_tenant_apart(store: TenantStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(issue_module, "CHUNK", 2)  # five tenants: chunks of 2, 2 and 1
    store.put_plan(PLAN, actor="op")
    runs = Runs(store)
    run_of = {}
    for i, tenant in enumerate(TENANTS):
        store.create_tenant(display_name=tenant, plan="pro", tenant_id=tenant, actor="op")
        run_of[tenant] = runs.add(tenant, JAN + i * HOUR, bytes_in=(i + 1) * GIB, requests=i)

    january = issue(store, "2026-01", now=datetime(2026, 2, 10, tzinfo=UTC))  # final
    assert [(o.tenant, o.status) for o in january] == [(t, "final") for t in TENANTS]
    for i, tenant in enumerate(TENANTS):
        assert _lines(store, tenant, f"{tenant}-2026-01") == [
            ("usage", "2026-01", "connection_hours", "0"),
            ("usage", "2026-01", "ingress_gib", str((i + 1) * GIB)),
            ("usage", "2026-01", "requests", str(i)),
            ("usage", "2026-01", "storage_gib_hours", "0"),
        ]
        with store.database.read() as session:
            found = get_invoice(session, tenant, f"{tenant}-2026-01")
        assert found is not None
        assert [r["run"] for r in found["provenance"]["runs"]] == [run_of[tenant]]

    late = {"ta2": 3 * GIB, "ta4": 5 * GIB}  # late January usage of two tenants in two chunks
    for tenant, extra in late.items():
        runs.add(tenant, JAN + 20 * HOUR, bytes_in=extra)
    runs.add("ta3", FEB + HOUR, bytes_in=7 * GIB)
    february = issue(store, "2026-02", now=datetime(2026, 2, 20, tzinfo=UTC))
    assert [(o.tenant, o.status, o.changed) for o in february] == [
        (t, "draft", True) for t in TENANTS
    ]
    for tenant in TENANTS:
        adjustments = [
            x for x in _lines(store, tenant, f"{tenant}-2026-02") if x[0] == "adjustment"
        ]
        expected = (
            [("adjustment", "2026-01", "ingress_gib", str(late[tenant]))] if tenant in late else []
        )
        assert adjustments == expected, tenant
    assert ("usage", "2026-02", "ingress_gib", str(7 * GIB)) in _lines(store, "ta3", "ta3-2026-02")

    rows = _line_rows(store)
    again = issue(store, "2026-02", now=datetime(2026, 2, 21, tzinfo=UTC))
    assert [o.changed for o in again] == [False] * len(TENANTS)
    assert _line_rows(store) == rows == 5 * 4 + 5 * 4 + len(late)
