"""Issuing invoices: one per (tenant, UTC month), a draft until the grace period after the month
ends, then final and immutable.

Tenants are invoiced in chunks of `CHUNK`, each chunk in one write transaction with a few bulk
reads (invoices, plans, summed rollups, provenance) and bulk writes, so 10,000 tenants cost tens of
statements, not tens of thousands. For each tenant: a final invoice is left exactly as it is (its stored
JSON `document` never changes); otherwise the invoice is (re)computed from the rollups of its
month under the tenant's plan, plus adjustment lines for earlier months whose invoices are final
but whose rollups have grown since (late usage): the difference between the measure now and the
measure already billed on any other invoice, priced as `billing.invoice.pricing` states. The
provenance names the rollup runs (and their `__usage` offset ranges) that added to the month, and
the newest run at computation time. An unchanged draft keeps its lines (only `updated_at` moves).
Two concurrent `invoice` commands serialise on the database write lock (SQLite) or on the
(tenant, period) unique key (PostgreSQL: the chunk that loses is recomputed once, over the
winner's rows). Thread-safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from billing.invoice import periods, pricing
from tenancy.billing_store import tenant_measures
from tenancy.database import Database
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
CHUNK = 500  # tenants per write transaction (and per IN list)


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
    runs = _Runs()
    outcomes: list[Outcome] = []
    for first in range(0, len(tenants), CHUNK):
        chunk = tenants[first : first + CHUNK]
        try:
            outcomes += _write_chunk(db, plans, runs, chunk, period, final, now)
        except IntegrityError:  # a concurrent `invoice` created some of them first: recompute
            outcomes += _write_chunk(db, plans, runs, chunk, period, final, now)
    return outcomes


def _write_chunk(
    db: Database,
    plans: _PlanCache,
    runs: _Runs,
    tenants: list[str],
    period: str,
    final: bool,
    now: datetime,
) -> list[Outcome]:
    with db.write() as session:
        return _chunk(session, plans, runs, tenants, period, final, now)


@dataclass
class _Chunk:
    """What one chunk's invoices are computed from, read with a few queries for all its tenants."""

    existing: dict[str, Any]  # invoice id -> (id, status, total, document, created_at)
    plan_of: dict[str, str]
    measures: dict[str, dict[str, Decimal]]
    provenance: dict[str, dict[str, Any]]
    earlier: _Earlier
    inserts: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    lines: dict[str, list[Line]] = field(default_factory=dict)


def _chunk(
    session: Session,
    plans: _PlanCache,
    runs: _Runs,
    tenants: list[str],
    period: str,
    final: bool,
    now: datetime,
) -> list[Outcome]:
    """Every tenant's invoice of `period` in one transaction: bulk reads, then bulk writes."""
    start_ms, end_ms = periods.bounds_ms(period)
    ids = [f"{tenant}-{period}" for tenant in tenants]
    invoices = select(InvoiceRow.id, InvoiceRow.status, InvoiceRow.total, InvoiceRow.document)
    existing = {row.id: row for row in session.execute(invoices.where(InvoiceRow.id.in_(ids)))}
    plans_of = select(TenantRow.id, TenantRow.plan).where(TenantRow.id.in_(tenants))
    work = _Chunk(
        existing,
        {tenant: plan for tenant, plan in session.execute(plans_of)},
        tenant_measures(session, tenants, start_ms, end_ms),
        runs.provenance(session, tenants, start_ms, end_ms),
        _Earlier(session, tenants, period),
    )
    outcomes = [_compute(plans, work, tenant, period, final, now) for tenant in tenants]
    _write(session, work)
    return outcomes


def _compute(
    plans: _PlanCache,
    work: _Chunk,
    tenant: str,
    period: str,
    final: bool,
    now: datetime,
) -> Outcome:
    invoice_id = f"{tenant}-{period}"
    row = work.existing.get(invoice_id)
    if row is not None and row.status == "final":
        return Outcome(invoice_id, tenant, "final", pricing.money(row.total), False)
    try:
        plan = plans.get_plan(work.plan_of[tenant])
    except NotFoundError as exc:  # one tenant's missing plan must not stop the others
        return Outcome(invoice_id, tenant, "none", "", False, str(exc))
    lines = _usage_lines(plan.dimensions, work.measures[tenant], period)
    lines += work.earlier.lines(plans, tenant)
    total = sum((line.amount for line in lines), Decimal(0))
    provenance = work.provenance[tenant]
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
    changed = row is None or row.document != text
    values = {
        "id": invoice_id,
        "status": status,
        "plan": plan.name,
        "currency": plan.currency,
        "total": total,
        "provenance": json.dumps(provenance, sort_keys=True),
        "document": text,
        "updated_at": now,
        "finalized_at": now if final else None,
    }
    if row is None:
        work.inserts.append({**values, "tenant_id": tenant, "period": period, "created_at": now})
    else:
        work.updates.append(values)
    if changed:  # an unchanged document has unchanged lines: they are left as they are
        work.lines[invoice_id] = lines
    return Outcome(invoice_id, tenant, status, pricing.money(total), changed)


def _write(session: Session, work: _Chunk) -> None:
    if work.inserts:
        session.execute(insert(InvoiceRow), work.inserts)
    if work.updates:
        session.execute(update(InvoiceRow), work.updates)  # by primary key, one statement
    if not work.lines:
        return
    session.execute(delete(InvoiceLineRow).where(InvoiceLineRow.invoice_id.in_(list(work.lines))))
    session.execute(
        insert(InvoiceLineRow),
        [
            {
                "invoice_id": invoice_id, "position": i, "kind": line.kind,
                "for_period": line.for_period, "dimension": line.dimension,
                "measure": line.measure,
                "quantity": pricing.shown(pricing.quantity(line.dimension, line.measure)),
                "amount": line.amount,
            }
            for invoice_id, lines in work.lines.items()
            for i, line in enumerate(lines)
        ],
    )  # fmt: skip


def _usage_lines(dimensions: Any, measures: dict[str, Decimal], period: str) -> list[Line]:
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


class _Earlier:
    """Adjustments of a chunk: its tenants' final invoices of earlier periods, those periods'
    measures now, and what the tenants' other invoices already billed for them (a few queries per
    chunk: one per earlier period for the measures)."""

    def __init__(self, session: Session, tenants: list[str], period: str) -> None:
        self.finals: dict[
            str, list[tuple[str, str]]
        ] = {}  # tenant -> [(period, plan)], oldest first
        query = (
            select(InvoiceRow.tenant_id, InvoiceRow.period, InvoiceRow.plan)
            .where(
                InvoiceRow.tenant_id.in_(tenants),
                InvoiceRow.period < period,
                InvoiceRow.status == "final",
            )
            .order_by(InvoiceRow.tenant_id, InvoiceRow.period)
        )
        for tenant, earlier, plan in session.execute(query):
            self.finals.setdefault(tenant, []).append((earlier, plan))
        by_period: dict[str, list[str]] = {}
        for tenant, finals in self.finals.items():
            for earlier, _ in finals:
                by_period.setdefault(earlier, []).append(tenant)
        self.measures = {
            earlier: tenant_measures(session, owners, *periods.bounds_ms(earlier))
            for earlier, owners in by_period.items()
        }
        self.billed = self._billed(session, list(self.finals), period) if self.finals else {}

    @staticmethod
    def _billed(
        session: Session, tenants: list[str], period: str
    ) -> dict[tuple[str, str], dict[str, tuple[Decimal, Decimal]]]:
        """Per (tenant, earlier period) and dimension, the measure and amount billed for it on the
        tenant's invoices other than this period's."""
        query = (
            select(
                InvoiceRow.tenant_id,
                InvoiceLineRow.for_period,
                InvoiceLineRow.dimension,
                InvoiceLineRow.measure,
                InvoiceLineRow.amount,
            )
            .join(InvoiceRow, InvoiceRow.id == InvoiceLineRow.invoice_id)
            .where(
                InvoiceRow.tenant_id.in_(tenants),
                InvoiceLineRow.for_period < period,
                InvoiceRow.period != period,
            )
        )
        billed: dict[tuple[str, str], dict[str, tuple[Decimal, Decimal]]] = {}
        for tenant, for_period, dimension, line_measure, line_amount in session.execute(query):
            of_period = billed.setdefault((tenant, for_period), {})
            measure, amount = of_period.get(dimension, (Decimal(0), Decimal(0)))
            of_period[dimension] = (measure + Decimal(line_measure), amount + Decimal(line_amount))
        return billed

    def lines(self, plans: _PlanCache, tenant: str) -> list[Line]:
        lines = []
        for earlier, plan in self.finals.get(tenant, []):
            dimensions = plans.get_plan(plan).dimensions
            measures = self.measures[earlier][tenant]
            billed = self.billed.get((tenant, earlier), {})
            for name in sorted(dimensions):
                if name not in pricing.UNITS:
                    continue
                measure = measures[pricing.UNITS[name][0]]
                billed_measure, billed_amount = billed.get(name, (Decimal(0), Decimal(0)))
                if measure != billed_measure:
                    price = pricing.amount(dimensions[name], name, measure) - billed_amount
                    lines.append(Line("adjustment", earlier, name, measure - billed_measure, price))
        return lines


class _Runs:
    """Provenance: which committed runs added to each tenant's month. A run's row never changes
    once committed, so each is read once per `issue` call."""

    def __init__(self) -> None:
        self._runs: dict[int, dict[str, Any]] = {}

    def provenance(
        self, session: Session, tenants: list[str], start_ms: int, end_ms: int
    ) -> dict[str, dict[str, Any]]:
        pairs = session.execute(
            select(BillingRunHourRow.tenant_id, BillingRunHourRow.run_id)
            .where(
                BillingRunHourRow.tenant_id.in_(tenants),
                BillingRunHourRow.hour_ms >= start_ms,
                BillingRunHourRow.hour_ms < end_ms,
            )
            .distinct()
        ).all()
        by_tenant: dict[str, set[int]] = {tenant: set() for tenant in tenants}
        for tenant, run_id in pairs:
            by_tenant[tenant].add(run_id)
        self._load(session, {run_id for _, run_id in pairs})
        latest = session.scalar(select(func.max(BillingRunRow.id)))
        return {
            tenant: {"latest_run": latest, "runs": [self._runs[r] for r in sorted(run_ids)]}
            for tenant, run_ids in by_tenant.items()
        }

    def _load(self, session: Session, wanted: set[int]) -> None:
        missing = sorted(wanted - self._runs.keys())
        for first in range(0, len(missing), CHUNK):
            query = select(BillingRunRow).where(
                BillingRunRow.id.in_(missing[first : first + CHUNK])
            )
            for run in session.scalars(query):
                self._runs[run.id] = {
                    "run": run.id,
                    "topic": run.topic,
                    "start_offsets": json.loads(run.start_offsets),
                    "end_offsets": json.loads(run.end_offsets),
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
