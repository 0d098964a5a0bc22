"""What holding `max_connections` fleet-wide in the tenant store costs a login (issue 21, item 5).

Usage: `python -m infra.bench.limit_holdings [--logins N] [--out DIR]` from the repository root
(see infra/bench/README.md). For SQLite (a file in a temporary directory) and PostgreSQL (a
server started by `infra.postgres.start_postgres`), each migrated to head with one tenant:
1. `--logins` (400) connections admitted one after another through `gateway.connection_ledger.
   ConnectionLedger`, as the gateway admits a login: the time of each `acquire` (one store
   transaction) gives the added latency per login, p50 and p99;
2. churn: the same number of closes each followed by a new login, a release interval passing
   every 50: store writes per connection;
3. everything closed and flushed.
Prints one JSON document and writes it to `<out>/limit_holdings.json`. Every process is stopped
on exit. Runs on the main thread's asyncio loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway.connection_ledger import ConnectionLedger
from infra.postgres import create_database, start_postgres
from tenancy.store import TenantStore

TENANT, GATEWAY, OPERATOR = "bench", "bench-gateway/1", "op-bench"
RELEASE_S = 0.5  # connection.release.interval.ms


def _ready(url: str) -> TenantStore:
    store = TenantStore.open(url)
    store.upgrade()
    store.create_tenant(display_name=TENANT, plan="free", tenant_id=TENANT, actor=OPERATOR)
    limits = replace(store.get_tenant(TENANT).limits, max_connections=1_000_000)
    store.update_tenant(TENANT, limits=limits, actor=OPERATOR)
    store.report_gateway(GATEWAY, 0)
    return store


async def _measure(store: TenantStore, logins: int) -> dict[str, Any]:
    ledger = ConnectionLedger(store, GATEWAY, stale_s=10, flush_s=RELEASE_S)
    ledger.start()
    latencies = []
    for _ in range(logins):
        started = time.perf_counter()
        assert await ledger.acquire(TENANT) is None
        latencies.append((time.perf_counter() - started) * 1000)
    growing = ledger.store_writes
    for i in range(logins):
        ledger.release(TENANT)
        assert await ledger.acquire(TENANT) is None
        if i % 50 == 49:
            await asyncio.sleep(RELEASE_S * 1.2)
    for _ in range(logins):
        ledger.release(TENANT)
    await ledger.flush()
    churn = ledger.store_writes - growing
    await ledger.stop()
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "logins": logins,
        "acquire_ms_p50": round(cuts[49], 2),
        "acquire_ms_p99": round(cuts[98], 2),
        "store_writes_per_new_login": growing / logins,
        "store_writes_per_churned_connection": round(churn / (2 * logins), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logins", type=int, default=400)
    parser.add_argument("--out", type=Path, default=Path("infra/bench/results"))
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = _ready(f"sqlite:///{Path(folder) / 'tenancy.db'}")
        try:
            results["sqlite"] = asyncio.run(_measure(store, args.logins))
        finally:
            store.close()
    server = start_postgres()
    try:
        store = _ready(create_database(server.url(), f"bench_{uuid.uuid4().hex[:8]}"))
        try:
            results["postgresql"] = asyncio.run(_measure(store, args.logins))
        finally:
            store.close()
    finally:
        server.stop()
    text = json.dumps(results, indent=2)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "limit_holdings.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
