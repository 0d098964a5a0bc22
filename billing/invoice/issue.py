"""Issuing invoices: one per (tenant, UTC month), a draft until the grace period after the month
ends, then final and immutable.

For each tenant, in one write transaction: a final invoice is left exactly as it is (its stored
JSON `document` never changes); otherwise the invoice is (re)computed from the rollups of its
month under the tenant's plan, plus adjustment lines for earlier months whose invoices are final
but whose rollups have grown since (late usage): the difference between the measure now and the
measure already billed on any other invoice, priced as `billing.invoice.pricing` states. The
provenance names the rollup runs (and their `__usage` offset ranges) that added to the month, and
the newest run at computation time. Two concurrent `invoice` commands serialise on the database
write lock (SQLite) or on the (tenant, period) unique key (PostgreSQL). Thread-safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from billing.invoice import periods, pricing
from tenancy.billing_store import period_measures
from tenancy.domain import Plan
from tenancy.errors import NotFoundError
from tenancy.models import (
    BillingRunHourRow,
    BillingRunRow,
    InvoiceLineRow,
    InvoiceRow,
    TenantRow,
)
from tenancy.plans import PlanCommands
from tenancy.store import TenantStore

DEFAULT_GRACE = timedelta(hours=72)


@dataclass(frozen=True)
class Line:
    kind: str  # usage | adjustment
    for_period: str
    dimension: str
    measure: Decimal
    amount: Decimal

    def json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "for_period": self.for_period,
            "dimension": self.dimension,
            "measure": format(self.measure, "f"),  # fixed-point, never 3.8E-8
            "quantity": format(pricing.shown(pricing.quantity(self.dimension, self.measure)), "f"),
            "amount": pricing.money(self.amount),
        }


@dataclass(frozen=True)
class Outcome:
    invoice_id: str
    tenant: str
    status: str
    total: str
    changed: bool
    error: str | None = None  # why no invoice could be computed (e.g. the plan does not exist)


def issue(
    store: TenantStore,
    period: str,
    *,
    tenant: str | None = None,
    grace: timedelta = DEFAULT_GRACE,
    now: datetime | None = None,
) -> list[Outcome]:
    """Invoices of `period` for `tenant` (or every tenant), oldest tenant first."""
    now = now or datetime.now(UTC)
    db, plans = store.database, _PlanCache(store)
    _, period_end = periods.bounds(period)
    final = now >= period_end + grace
    with db.read() as session:
        if tenant is not None and session.get(TenantRow, tenant) is None:
            raise NotFoundError(f"tenant {tenant!r} not found")
        tenants = (
            [tenant]
            if tenant
            else list(session.scalars(select(TenantRow.id).order_by(TenantRow.id)))
        )
    outcomes = []
    for tenant_id in tenants:
        with db.write() as session:
            outcomes.append(_one(session, plans, tenant_id, period, final, now))
    return outcomes


def _one(
    session: Session, plans: _PlanCache, tenant: str, period: str, final: bool, now: datetime
) -> Outcome:
    invoice_id = f"{tenant}-{period}"
    row = session.get(InvoiceRow, invoice_id)
    if row is not None and row.status == "final":
        return Outcome(invoice_id, tenant, "final", pricing.money(row.total), False)
    tenant_row = session.get(TenantRow, tenant)
    assert tenant_row is not None
    try:
        plan = plans.get_plan(tenant_row.plan)
    except NotFoundError as exc:  # one tenant's missing plan must not stop the others
        return Outcome(invoice_id, tenant, "none", "", False, str(exc))
    lines = _usage_lines(session, plan.dimensions, tenant, period)
    lines += _adjustments(session, plans, tenant, period, invoice_id)
    total = sum((line.amount for line in lines), Decimal(0))
    provenance = _provenance(session, tenant, period)
    status = "final" if final else "draft"
    document = {
        "id": invoice_id,
        "tenant": tenant,
        "period": period,
        "status": status,
        "plan": plan.name,
        "currency": plan.currency,
        "lines": [line.json() for line in lines],
        "total": pricing.money(total),
        "provenance": provenance,
        "finalized_at": _iso(now) if final else None,
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    if row is None:
        row = InvoiceRow(id=invoice_id, tenant_id=tenant, period=period, created_at=now)
        session.add(row)
    changed = row.document != text
    row.status, row.plan, row.currency, row.total = status, plan.name, plan.currency, total
    row.provenance = json.dumps(provenance, sort_keys=True)
    row.document, row.updated_at, row.finalized_at = text, now, now if final else None
    session.flush()
    session.execute(delete(InvoiceLineRow).where(InvoiceLineRow.invoice_id == invoice_id))
    session.add_all(
        InvoiceLineRow(
            invoice_id=invoice_id, position=i, kind=line.kind, for_period=line.for_period,
            dimension=line.dimension, measure=line.measure,
            quantity=pricing.shown(pricing.quantity(line.dimension, line.measure)),
            amount=line.amount,
        )
        for i, line in enumerate(lines)
    )  # fmt: skip
    return Outcome(invoice_id, tenant, status, pricing.money(total), changed)


def _usage_lines(session: Session, dimensions: Any, tenant: str, period: str) -> list[Line]:
    measures = period_measures(session, tenant, *periods.bounds_ms(period))
    lines = []
    for name in sorted(dimensions):
        if name in pricing.UNITS:
            measure = measures[pricing.UNITS[name][0]]
            lines.append(
                Line(
                    "usage", period, name, measure, pricing.amount(dimensions[name], name, measure)
                )
            )
    return lines


def _adjustments(
    session: Session, plans: _PlanCache, tenant: str, period: str, invoice_id: str
) -> list[Line]:
    earlier = session.scalars(
        select(InvoiceRow)
        .where(
            InvoiceRow.tenant_id == tenant, InvoiceRow.period < period, InvoiceRow.status == "final"
        )
        .order_by(InvoiceRow.period)
    ).all()
    lines = []
    for invoice in earlier:
        dimensions = plans.get_plan(invoice.plan).dimensions
        measures = period_measures(session, tenant, *periods.bounds_ms(invoice.period))
        billed = _billed(session, tenant, invoice.period, invoice_id)
        for name in sorted(dimensions):
            if name not in pricing.UNITS:
                continue
            measure = measures[pricing.UNITS[name][0]]
            billed_measure, billed_amount = billed.get(name, (Decimal(0), Decimal(0)))
            if measure != billed_measure:
                price = pricing.amount(dimensions[name], name, measure) - billed_amount
                lines.append(
                    Line("adjustment", invoice.period, name, measure - billed_measure, price)
                )
    return lines


def _billed(
    session: Session, tenant: str, for_period: str, except_invoice: str
) -> dict[str, tuple[Decimal, Decimal]]:
    """Per dimension, the measure and amount billed for `for_period` on the tenant's other invoices."""
    query = (
        select(InvoiceLineRow)
        .join(InvoiceRow, InvoiceRow.id == InvoiceLineRow.invoice_id)
        .where(
            InvoiceRow.tenant_id == tenant,
            InvoiceLineRow.for_period == for_period,
            InvoiceRow.id != except_invoice,
        )
    )
    billed: dict[str, tuple[Decimal, Decimal]] = {}
    for line in session.scalars(query):
        measure, amount = billed.get(line.dimension, (Decimal(0), Decimal(0)))
        billed[line.dimension] = (measure + Decimal(line.measure), amount + Decimal(line.amount))
    return billed


def _provenance(session: Session, tenant: str, period: str) -> dict[str, Any]:
    start_ms, end_ms = periods.bounds_ms(period)
    run_ids = session.scalars(
        select(BillingRunHourRow.run_id)
        .where(
            BillingRunHourRow.tenant_id == tenant,
            BillingRunHourRow.hour_ms >= start_ms,
            BillingRunHourRow.hour_ms < end_ms,
        )
        .distinct()
        .order_by(BillingRunHourRow.run_id)
    ).all()
    runs = session.scalars(select(BillingRunRow).where(BillingRunRow.id.in_(run_ids))).all()
    latest = session.scalar(select(func.max(BillingRunRow.id)))
    return {
        "latest_run": latest,
        "runs": [
            {
                "run": run.id,
                "topic": run.topic,
                "start_offsets": json.loads(run.start_offsets),
                "end_offsets": json.loads(run.end_offsets),
            }
            for run in sorted(runs, key=lambda r: r.id)
        ],
    }


class _PlanCache:
    """Plans read once per `issue` call (thousands of tenants share a few plans)."""

    def __init__(self, store: PlanCommands) -> None:
        self._store = store
        self._plans: dict[str, Plan | NotFoundError] = {}

    def get_plan(self, name: str) -> Plan:
        if name not in self._plans:
            try:
                self._plans[name] = self._store.get_plan(name)
            except NotFoundError as exc:
                self._plans[name] = exc
        found = self._plans[name]
        if isinstance(found, NotFoundError):
            raise found
        return found


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
