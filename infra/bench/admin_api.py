"""Admin API throughput: requests/s for `GET /v1/tenants/{id}/quotas/effective`.

Owns: one benchmark run per store. A real `pier admin-api` process is started on a free port over
a fresh store (a SQLite file, and/or a PostgreSQL started by `infra.postgres`), seeded with one
tenant, one service account and quotas at four levels of the chain, so each lookup resolves
through the whole 8-level precedence. An aiohttp client then keeps `--concurrency` requests in
flight (default 16) for `--seconds` after a 1 s warm-up, cycling through a few client ids, and
counts responses (any non-200 is an error) and latencies. The server is stopped by PID at the end.
Client and server share the machine's CPUs, so the figure is a lower bound for the server alone.

Prints one JSON document and writes it to `infra/bench/results/admin_api.json`:
`{"runs": [{"store", "concurrency", "seconds", "requests", "errors", "requests_per_s", "p50_ms",
"p99_ms"}]}`. Run from the repository root: `.venv/bin/python infra/bench/admin_api.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from infra import process as proc
from infra.postgres import start_postgres
from tenancy.domain import QuotaEntity
from tenancy.store import TenantStore

RESULTS = Path(__file__).resolve().parent / "results"
READY = re.compile(r"pier admin-api ready url=(http://\S+)")
WARM_UP_S = 1.0
TENANT = "bench"


def seed(url: str) -> tuple[str, str]:
    """Schema, an operator, a tenant with quotas at four chain levels; (token, user)."""
    with TenantStore.open(url) as store:
        store.upgrade()
        token = store.create_operator("bench", actor="bench")
        store.create_tenant(display_name="Bench", plan="free", tenant_id=TENANT, actor="bench")
        user = store.create_service_account(TENANT, name="app", actor="bench").id
        levels = {
            QuotaEntity(user, "<default>"): {"producer_byte_rate": 1e6},
            QuotaEntity("<default>", None): {"consumer_byte_rate": 2e6},
            QuotaEntity(None, "c1"): {"request_percentage": 50.0},
            QuotaEntity(None, "<default>"): {"controller_mutation_rate": 10.0},
        }
        for entity, quotas in levels.items():
            store.set_quotas(TENANT, entity, quotas, actor="bench")
    return str(token), user


def start_api(url: str, log: Path) -> tuple[Any, str]:
    argv = [sys.executable, "-m", "pier", "admin-api", "--db", url, "--port", "0"]
    argv += ["--log-level", "WARNING"]  # no access log lines: they would cost the server time
    server = proc.spawn(argv, log)
    ready = lambda: READY.search(log.read_text()) is not None  # noqa: E731
    proc.wait_ready(server, ready, timeout=30, name="admin-api", log_path=log)
    match = READY.search(log.read_text())
    assert match is not None
    return server, match.group(1)


async def load(
    base: str, token: str, user: str, concurrency: int, seconds: float
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    paths = [f"/v1/tenants/{TENANT}/quotas/effective?user={user}&client_id=c{i}" for i in range(4)]
    latencies: list[float] = []
    errors = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base, headers=headers, connector=connector) as session:

        async def worker(index: int, until: float, record: bool) -> None:
            nonlocal errors
            count = index
            while time.perf_counter() < until:
                started = time.perf_counter()
                async with session.get(paths[count % len(paths)]) as response:
                    await response.read()
                    ok = response.status == 200
                count += 1
                if record:
                    latencies.append(time.perf_counter() - started)
                    errors += 0 if ok else 1

        warm = time.perf_counter() + WARM_UP_S
        await asyncio.gather(*(worker(i, warm, False) for i in range(concurrency)))
        started = time.perf_counter()
        await asyncio.gather(*(worker(i, started + seconds, True) for i in range(concurrency)))
        elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "concurrency": concurrency,
        "seconds": round(elapsed, 2),
        "requests": len(latencies),
        "errors": errors,
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 2),
    }


def run_one(store: str, url: str, work: Path, concurrency: int, seconds: float) -> dict[str, Any]:
    token, user = seed(url)
    server, base = start_api(url, work / f"admin-api-{store}.log")
    try:
        print(f"bench: {store}: {concurrency} in flight for {seconds:g}s", file=sys.stderr)
        result = asyncio.run(load(base, token, user, concurrency, seconds))
    finally:
        proc.terminate(server, timeout=15)
    return {"store": store, **result}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="admin API GET /quotas/effective requests/s")
    parser.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="pier-bench-admin-") as folder:
        work = Path(folder)
        if args.store in ("sqlite", "both"):
            url = f"sqlite:///{work / 'tenancy.db'}"
            runs.append(run_one("sqlite", url, work, args.concurrency, args.seconds))
        if args.store in ("postgresql", "both"):
            postgres = start_postgres()
            try:
                url = postgres.create_database("pier_bench")
                runs.append(run_one("postgresql", url, work, args.concurrency, args.seconds))
            finally:
                postgres.stop()
    report = {"endpoint": "GET /v1/tenants/{id}/quotas/effective", "runs": runs}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "admin_api.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
