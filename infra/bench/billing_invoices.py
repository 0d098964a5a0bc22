"""Benchmark of invoicing: one month's invoices for many tenants, on SQLite and PostgreSQL.

    .venv/bin/python -m infra.bench.billing_invoices [--tenants 10000] [--backend sqlite|postgresql|both]

(as a module: run as a script, `infra/bench/` would shadow the `billing` package)

`invoices_10k()` seeds T tenants (default 10,000) on one plan, each with 24 hourly rollups
committed by one ledger run (as a rollup would), then times `billing.invoice.issue` for the month
twice: the first pass creates every invoice (drafts), the second recomputes them all (nothing
changes). Seeding is not timed. PostgreSQL is a throwaway server (`infra.postgres`) on a port from
PIER_PORT_RANGE. Prints one JSON document and writes it to
`infra/bench/results/billing_invoices.json`; progress on stderr. Run alone: the figures are
wall-clock on a shared machine, so report the load average with them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from billing.invoice.issue import issue
from billing.rollup import ledger
from billing.rollup.sums import RollupKey, RunOutput, Sums
from tenancy.domain import Plan, PlanDimension, PlanTier
from tenancy.models import TenantRow
from tenancy.store import TenantStore
from tenancy.usage import HOUR_MS, USAGE_TOPIC

RESULTS = Path(__file__).parent / "results" / "billing_invoices.json"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
PERIOD = "2026-01"
NOW = datetime(2026, 1, 20, tzinfo=UTC)  # the month is open: drafts
TIERS = (PlanTier(Decimal(100), Decimal("0.09")), PlanTier(None, Decimal("0.05")))
PLAN = Plan(
    "bench",
    "EUR",
    {
        "ingress_gib": PlanDimension(Decimal(1), TIERS),
        "requests": PlanDimension(Decimal(0), (PlanTier(None, Decimal("0.000001")),)),
    },
)
Issuer = Callable[..., list[Any]]


def log(message: str) -> None:
    print(f"[billing_invoices] {message}", file=sys.stderr, flush=True)


def seed(url: str, tenants: int) -> None:
    """T tenants on the bench plan with 24 hours of rollups each, in one ledger commit."""
    store = TenantStore.open(url)
    try:
        store.upgrade()
        store.put_plan(PLAN, actor="bench")
        now = datetime.now(UTC)
        rows = [
            {"id": f"t{i:05d}", "display_name": f"t{i:05d}", "plan": PLAN.name}
            for i in range(tenants)
        ]
        template = _tenant_columns(store, now)
        with store.database.write() as session:  # create_tenant one by one takes minutes
            session.execute(insert(TenantRow), [{**template, **row} for row in rows])
        out = RunOutput(USAGE_TOPIC, None, {0: 0}, {0: 1}, T0 + 24 * HOUR_MS)
        for i in range(tenants):
            for hour in range(24):
                key = RollupKey(f"t{i:05d}", "sa-1", "", "orders", T0 + hour * HOUR_MS)
                out.rollups[key] = Sums(bytes_in=(i + 1) * 2**27, requests=1000 + i)
        ledger.commit(store.database, out)
    finally:
        store.close()


def _tenant_columns(store: TenantStore, now: datetime) -> dict[str, Any]:
    """Every column of a tenant row as `create_tenant` writes it, from one real tenant."""
    store.create_tenant(display_name="probe", plan=PLAN.name, tenant_id="probe", actor="bench")
    with store.database.write() as session:
        probe = session.get(TenantRow, "probe")
        assert probe is not None
        columns = {c.key: getattr(probe, c.key) for c in TenantRow.__mapper__.column_attrs}
        session.delete(probe)
    columns.pop("id")
    columns.pop("display_name")
    for name in ("created_at", "updated_at"):
        if name in columns:
            columns[name] = now
    return columns


def time_issue(url: str, issuer: Issuer = issue) -> dict[str, Any]:
    """Seconds of the first issue (all new drafts) and of a second one (all unchanged)."""
    store = TenantStore.open(url)
    try:
        start = time.perf_counter()
        first = issuer(store, PERIOD, now=NOW)
        created = time.perf_counter() - start
        start = time.perf_counter()
        second = issuer(store, PERIOD, now=NOW)
        again = time.perf_counter() - start
    finally:
        store.close()
    assert len(first) == len(second) and not any(o.changed for o in second)
    return {"invoices": len(first), "first_s": round(created, 2), "again_s": round(again, 2)}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def invoices_10k(
    tenants: int = 10_000, backends: tuple[str, ...] = ("sqlite", "postgresql")
) -> dict[str, Any]:
    """Issue one month's invoices for `tenants` tenants on each backend; seconds per pass."""
    result: dict[str, Any] = {"tenants": tenants}
    with tempfile.TemporaryDirectory(prefix="pier-bench-invoices-") as folder:
        for backend in backends:
            url, server = _database(backend, Path(folder))
            try:
                log(f"{backend}: seeding {tenants} tenants")
                seed(url, tenants)
                log(f"{backend}: issuing (load {_load()})")
                timing = time_issue(url)
                timing["load"] = _load()
                result[backend] = timing
                log(f"{backend}: {timing}")
            finally:
                if server is not None:
                    server.stop()
    return result


def _database(backend: str, folder: Path) -> tuple[str, Any]:
    if backend == "sqlite":
        return f"sqlite:///{folder / 'invoices.db'}", None
    from infra.postgres import start_postgres

    server = start_postgres()
    return server.create_database("bench"), server


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tenants", type=int, default=10_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    args = parser.parse_args()
    backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    result = invoices_10k(args.tenants, backends)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
