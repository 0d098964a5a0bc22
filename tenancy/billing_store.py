"""Reading billing's tables (written by `billing/`): hourly usage, period totals, invoices.

The read side shared by the billing job (invoices read the rollups), the `pier billing usage`
command and the admin API, which must not import `billing`. JSON keys of usage are the usage
record's field names (`bytes_in`, `bytes_out`, …) plus the rollup's own (`partition_ms`,
`storage_byte_ms`, `hour`). Storage byte-milliseconds are exact decimals and are summed in Python
(SQLite keeps them as text). Functions take a session; thread-safe as long as sessions are not
shared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tenancy.errors import NotFoundError, ValidationError
from tenancy.models import InvoiceRow, UsageRollupRow
from tenancy.store_base import StoreCore

HOUR_MS: Final = 3_600_000
DAY_MS: Final = 24 * HOUR_MS
INT_MEASURES: Final = (
    "bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms", "partition_ms", "records",
)  # fmt: skip
MEASURES: Final = (*INT_MEASURES, "storage_byte_ms")
USAGE_COLUMNS: Final = ("hour", "tenant", "principal", "client_id", "topic", *MEASURES)


@dataclass(frozen=True)
class UsageFilter:
    tenant: str
    start_ms: int
    end_ms: int
    principal: str | None = None
    topic: str | None = None
    granularity: str = "hour"  # hour | day


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def usage_rows(session: Session, wanted: UsageFilter) -> Iterator[dict[str, Any]]:
    """Rollups of a tenant in [start, end), by hour (or summed by UTC day), oldest first."""
    query = select(UsageRollupRow).where(
        UsageRollupRow.tenant_id == wanted.tenant,
        UsageRollupRow.hour_ms >= wanted.start_ms,
        UsageRollupRow.hour_ms < wanted.end_ms,
    )
    if wanted.principal is not None:
        query = query.where(UsageRollupRow.principal == wanted.principal)
    if wanted.topic is not None:
        query = query.where(UsageRollupRow.topic == wanted.topic)
    query = query.order_by(
        UsageRollupRow.hour_ms,
        UsageRollupRow.principal,
        UsageRollupRow.client_id,
        UsageRollupRow.topic,
    )
    rows = (_usage(r) for r in session.scalars(query))
    if wanted.granularity == "day":
        yield from _by_day(rows)
    else:
        yield from rows


def _usage(row: UsageRollupRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "hour": iso(row.hour_ms),
        "tenant": row.tenant_id,
        "principal": row.principal,
        "client_id": row.client_id,
        "topic": row.topic or None,
    }
    out.update((name, int(getattr(row, name))) for name in INT_MEASURES)
    out["storage_byte_ms"] = str(Decimal(row.storage_byte_ms))
    out["_ms"] = row.hour_ms
    return out


def _by_day(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    days: dict[tuple[int, str, str, str | None], dict[str, Any]] = {}
    for row in rows:
        day_ms = row["_ms"] - row["_ms"] % DAY_MS
        key = (day_ms, row["principal"], row["client_id"], row["topic"])
        total = days.get(key)
        if total is None:
            days[key] = {**row, "hour": iso(day_ms), "_ms": day_ms}
            continue
        for name in INT_MEASURES:
            total[name] += row[name]
        total["storage_byte_ms"] = str(
            Decimal(total["storage_byte_ms"]) + Decimal(row["storage_byte_ms"])
        )
    for key in sorted(days, key=lambda k: (k[0], k[1], k[2], k[3] or "")):
        yield days[key]


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A usage row without its internal sort key."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


def period_measures(
    session: Session, tenant: str, start_ms: int, end_ms: int
) -> dict[str, Decimal]:
    """Each measure summed over a tenant's rollups in [start, end), as exact decimals."""
    totals = dict.fromkeys(MEASURES, Decimal(0))
    query = select(UsageRollupRow).where(
        UsageRollupRow.tenant_id == tenant,
        UsageRollupRow.hour_ms >= start_ms,
        UsageRollupRow.hour_ms < end_ms,
    )
    for row in session.scalars(query):
        for name in MEASURES:
            totals[name] += Decimal(getattr(row, name))
    return totals


def tenant_measures(
    session: Session, tenants: list[str], start_ms: int, end_ms: int
) -> dict[str, dict[str, Decimal]]:
    """`period_measures` of many tenants with two queries: the integer measures summed by the
    database (exact: 64-bit sums in SQLite, numeric in PostgreSQL), the decimal storage byte-ms
    summed here, as `period_measures` does."""
    totals = {tenant: dict.fromkeys(MEASURES, Decimal(0)) for tenant in tenants}
    window = (
        UsageRollupRow.tenant_id.in_(tenants),
        UsageRollupRow.hour_ms >= start_ms,
        UsageRollupRow.hour_ms < end_ms,
    )
    sums = [func.sum(getattr(UsageRollupRow, name)) for name in INT_MEASURES]
    query = select(UsageRollupRow.tenant_id, *sums).where(*window)
    for tenant, *values in session.execute(query.group_by(UsageRollupRow.tenant_id)):
        totals[tenant].update(
            (name, Decimal(0) + Decimal(value))
            for name, value in zip(INT_MEASURES, values, strict=True)
        )
    storage = select(UsageRollupRow.tenant_id, UsageRollupRow.storage_byte_ms).where(*window)
    for tenant, value in session.execute(storage):
        totals[tenant]["storage_byte_ms"] += value
    return totals


def invoice_json(row: InvoiceRow) -> dict[str, Any]:
    """The invoice as billing wrote it: the final document never changes; a draft's is current."""
    document: dict[str, Any] = json.loads(row.document or "{}")
    return document


def list_invoices(session: Session, tenant: str) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(InvoiceRow).where(InvoiceRow.tenant_id == tenant).order_by(InvoiceRow.period)
    )
    return [
        {
            "id": r.id,
            "period": r.period,
            "status": r.status,
            "currency": r.currency,
            "total": _money(r.total),
        }
        for r in rows
    ]


def _money(value: Decimal) -> str:
    """Two places, as the invoice document writes money (the column drops trailing zeros)."""
    return format(Decimal(value).quantize(Decimal("0.01")), "f")


def get_invoice(session: Session, tenant: str, invoice_id: str) -> dict[str, Any] | None:
    row = session.get(InvoiceRow, invoice_id)
    if row is None or row.tenant_id != tenant:
        return None
    return invoice_json(row)


MAX_SPAN_MS: Final = 366 * DAY_MS


class BillingReads(StoreCore):
    """The store's billing reads (mixin of `TenantStore`): a tenant's usage and invoices."""

    def usage(self, wanted: UsageFilter) -> list[dict[str, Any]]:
        if not 0 < wanted.end_ms - wanted.start_ms <= MAX_SPAN_MS:
            raise ValidationError("to", "must be after from, at most 366 days later")
        if wanted.granularity not in ("hour", "day"):
            raise ValidationError("granularity", "must be hour or day")
        with self._db.read() as session:
            self._tenant(session, wanted.tenant)
            return [public(row) for row in usage_rows(session, wanted)]

    def invoices(self, tenant: str) -> list[dict[str, Any]]:
        with self._db.read() as session:
            self._tenant(session, tenant)
            return list_invoices(session, tenant)

    def invoice(self, tenant: str, invoice_id: str) -> dict[str, Any]:
        with self._db.read() as session:
            self._tenant(session, tenant)
            found = get_invoice(session, tenant, invoice_id)
            if found is None:
                raise NotFoundError(f"invoice {invoice_id!r} of tenant {tenant!r} not found")
            return found
