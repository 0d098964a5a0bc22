"""Usage rows and invoices for the console tests, written as the billing job writes them.

`seed_usage` commits one rollup run through the billing ledger (`billing.rollup.ledger`, the path
a Spark rollup run ends in, as tests/integration/billing does) holding each (tenant, hour)'s sums,
then issues the invoice of the last hour's month (a draft until the grace period ends) for each tenant.
Blocking; opens and closes its own store handle.
"""

from __future__ import annotations

from datetime import UTC, datetime

from billing.invoice.issue import issue
from billing.rollup import ledger
from billing.rollup.sums import RollupKey, RunOutput, Sums
from tests.gateway_stack import GatewayStack

HOUR_MS = 3_600_000


def this_hour_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000) // HOUR_MS * HOUR_MS


def hour_iso(hour_ms: int) -> str:
    return datetime.fromtimestamp(hour_ms / 1000, UTC).strftime("%Y-%m-%dT%H:00:00Z")


def seed_usage(stack: GatewayStack, rows: list[tuple[str, int, Sums]]) -> str:
    """One rollup run with `rows` (tenant, hour in epoch ms, sums), then each tenant's invoice for
    the month of the last hour; returns that month (YYYY-MM)."""
    with stack.store() as store:
        until = max(hour for _, hour, _ in rows) + HOUR_MS
        out = RunOutput("__usage", None, {0: 0}, {0: len(rows)}, until)
        out.rollups = {
            RollupKey(tenant, "sa-app", "console", "orders", hour): sums
            for tenant, hour, sums in rows
        }
        ledger.commit(store.database, out)
        period = hour_iso(until - HOUR_MS)[:7]
        for tenant in sorted({tenant for tenant, _, _ in rows}):
            issue(store, period, tenant=tenant)
    return period
