"""Invoices on both stores: lines to the cent against an independent pricing, drafts until the
grace period ends, final invoices byte-identical after late usage, which lands as adjustments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any

import pytest
from sqlalchemy import update

from billing.invoice.issue import issue
from billing.rollup import ledger
from billing.rollup.sums import Cursor, RollupKey, RunOutput, Sums
from tenancy.billing_store import get_invoice, list_invoices
from tenancy.domain import Plan, PlanDimension, PlanTier
from tenancy.models import InvoiceRow, TenantRow
from tenancy.store import TenantStore

pytestmark = pytest.mark.integration
GIB, HOUR = 2**30, 3_600_000
JAN = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
FEB = int(datetime(2026, 2, 1, tzinfo=UTC).timestamp() * 1000)
D = Decimal
PLAN = Plan(
    "pro",
    "EUR",
    {
        "ingress_gib": PlanDimension(
            D(10), (PlanTier(D(100), D("0.09")), PlanTier(None, D("0.05")))
        ),
        "storage_gib_hours": PlanDimension(D(0), (PlanTier(None, D("0.000137")),)),
        "requests": PlanDimension(D(1000), (PlanTier(None, D("0.0000004")),)),
        "connection_hours": PlanDimension(D(0), (PlanTier(None, D("0.015")),)),
    },
)


def _expected(dimension: str, quantity: Decimal) -> Decimal:
    """Graduated pricing written out independently of billing's code, rounded half-even."""
    prices = PLAN.dimensions[dimension]
    with localcontext() as ctx:
        ctx.prec = 80
        left, total, floor = max(D(0), quantity - prices.included), D(0), D(0)
        for tier in prices.tiers:
            top = left if tier.up_to is None else min(left, tier.up_to)
            total += max(D(0), top - floor) * tier.unit_price
            floor = top if tier.up_to is None else tier.up_to
        return total.quantize(D("0.01"), rounding=ROUND_HALF_EVEN)


class Runs:
    """Commits rollups through the ledger as a rollup run would (no Spark needed here)."""

    def __init__(self, store: TenantStore) -> None:
        self.store, self.cursor, self.offset = store, None, 0

    def add(self, tenant: str, hour_ms: int, **measures: Any) -> int:
        end = {0: self.offset + 10}
        sums = Sums(**measures)
        out = RunOutput("__usage", self.cursor, {0: self.offset}, end, hour_ms + HOUR)
        out.rollups = {RollupKey(tenant, "sa-1", "", "orders", hour_ms): sums}
        run_id = ledger.commit(self.store.database, out)
        self.cursor, self.offset = Cursor(run_id, end), end[0]
        return run_id


def _invoice(store: TenantStore, invoice_id: str) -> dict[str, Any]:
    with store.database.read() as session:
        found = get_invoice(session, invoice_id.rsplit("-", 2)[0], invoice_id)
        assert found is not None
        return found


def _document(store: TenantStore, invoice_id: str) -> str | None:
    with store.database.read() as session:
        row = session.get(InvoiceRow, invoice_id)
        assert row is not None
        return row.document


def test_lines_to_the_cent_drafts_finals_and_adjustments(store: TenantStore) -> None:
    store.put_plan(PLAN, actor="op")
    store.create_tenant(display_name="Acme", plan="pro", tenant_id="acme", actor="op")
    runs = Runs(store)
    ingress = 150 * GIB + 12_345
    storage_byte_ms = D(7 * GIB) * 90 * HOUR + 1
    first = runs.add(
        "acme", JAN + 5 * HOUR, bytes_in=ingress, requests=1_234_567, connection_ms=3 * HOUR + 7,
        storage_byte_ms=storage_byte_ms,
    )  # fmt: skip
    runs.add("acme", FEB + HOUR, bytes_in=GIB)  # February usage stays out of January

    draft = issue(store, "2026-01", now=datetime(2026, 1, 20, tzinfo=UTC))
    assert [(o.invoice_id, o.status) for o in draft] == [("acme-2026-01", "draft")]
    january = _invoice(store, "acme-2026-01")
    amounts = {line["dimension"]: D(line["amount"]) for line in january["lines"]}
    assert amounts == {
        "ingress_gib": _expected("ingress_gib", D(ingress) / GIB),
        "storage_gib_hours": _expected("storage_gib_hours", storage_byte_ms / (GIB * HOUR)),
        "requests": _expected("requests", D(1_234_567)),
        "connection_hours": _expected("connection_hours", D(3 * HOUR + 7) / HOUR),
    }
    assert amounts["ingress_gib"] == D("11.00")  # 10 GiB free, 100 at 0.09, 40 at 0.05 (+ 12 KiB)
    assert D(january["total"]) == sum(amounts.values())
    assert january["provenance"]["runs"][0] == {
        "run": first, "topic": "__usage", "start_offsets": {"0": 0}, "end_offsets": {"0": 10},
    }  # fmt: skip

    grace_over = datetime(2026, 2, 4, tzinfo=UTC)  # Feb 1 + 72 h
    assert issue(store, "2026-01", now=grace_over - timedelta(seconds=1))[0].status == "draft"
    assert issue(store, "2026-01", now=grace_over)[0].status == "final"
    final_document = _document(store, "acme-2026-01")

    runs.add("acme", JAN + 7 * HOUR, bytes_in=40 * GIB, requests=10)  # late January usage
    again = issue(store, "2026-01", now=grace_over + timedelta(days=5))
    assert (again[0].status, again[0].changed) == ("final", False)
    assert _document(store, "acme-2026-01") == final_document

    issue(store, "2026-02", now=datetime(2026, 2, 10, tzinfo=UTC))
    february = _invoice(store, "acme-2026-02")
    adjustments = [line for line in february["lines"] if line["kind"] == "adjustment"]
    assert [(a["for_period"], a["dimension"], a["measure"]) for a in adjustments] == [
        ("2026-01", "ingress_gib", str(40 * GIB)),
        ("2026-01", "requests", "10"),
    ]
    new_ingress = _expected("ingress_gib", D(ingress + 40 * GIB) / GIB)
    assert D(adjustments[0]["amount"]) == new_ingress - amounts["ingress_gib"] == D("2.00")
    assert D(adjustments[1]["amount"]) == D("0.00")  # 10 requests × 0.0000004 rounds to 0
    usage = {line["dimension"]: line for line in february["lines"] if line["kind"] == "usage"}
    assert D(usage["ingress_gib"]["quantity"]) == 1
    assert D(february["total"]) == sum(D(line["amount"]) for line in february["lines"])

    # February final; more late January usage goes to March, counted once
    issue(store, "2026-02", now=datetime(2026, 3, 5, tzinfo=UTC))
    runs.add("acme", JAN + 9 * HOUR, bytes_in=20 * GIB)
    issue(store, "2026-03", now=datetime(2026, 3, 6, tzinfo=UTC))
    march = _invoice(store, "acme-2026-03")
    [adjustment] = [line for line in march["lines"] if line["kind"] == "adjustment"]
    assert adjustment["measure"] == str(20 * GIB) and D(adjustment["amount"]) == D("1.00")
    with store.database.read() as session:
        assert [i["status"] for i in list_invoices(session, "acme")] == ["final", "final", "draft"]


def test_one_invoice_per_tenant_and_period(store: TenantStore) -> None:
    store.put_plan(PLAN, actor="op")
    for name in ("acme", "globex"):
        store.create_tenant(display_name=name, plan="pro", tenant_id=name, actor="op")
    now = datetime(2026, 1, 10, tzinfo=UTC)
    assert [o.invoice_id for o in issue(store, "2026-01", now=now)] == [
        "acme-2026-01",
        "globex-2026-01",
    ]
    assert [o.changed for o in issue(store, "2026-01", now=now)] == [False, False]
    with store.database.read() as session:
        assert session.query(InvoiceRow).count() == 2
    # A tenant whose plan is missing (the store now refuses unknown plans, so as a store from
    # before that rule could hold one).
    store.create_tenant(display_name="No plan", plan="pro", tenant_id="initech", actor="op")
    with store.database.write() as session:
        session.execute(update(TenantRow).where(TenantRow.id == "initech").values(plan="gone"))
    outcomes = issue(store, "2026-01", now=now)
    assert [o.error for o in outcomes] == [None, None, "plan 'gone' not found"]
