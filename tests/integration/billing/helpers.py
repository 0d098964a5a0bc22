"""Reading billing's results back for comparison with the generator's independent totals."""

from __future__ import annotations

import hashlib
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import select

from billing.rollup.job import RunHooks, RunOptions, RunReport, run_rollup
from tenancy.database import Database
from tenancy.models import UsageRollupRow
from tests.integration.billing.usage_gen import Key

MEASURES = (
    "bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms", "partition_ms",
    "storage_byte_ms", "records",
)  # fmt: skip


def rollups(url: str) -> dict[Key, dict[str, int]]:
    db = Database(url)
    try:
        with db.read() as session:
            rows = session.scalars(select(UsageRollupRow)).all()
            return {
                (r.tenant_id, r.principal, r.client_id, r.topic, r.hour_ms): {
                    m: int(getattr(r, m)) for m in MEASURES if int(getattr(r, m))
                }
                for r in rows
            }
    finally:
        db.dispose()


def versions(url: str) -> dict[Key, int]:
    db = Database(url)
    try:
        with db.read() as session:
            rows = session.scalars(select(UsageRollupRow)).all()
            return {
                (r.tenant_id, r.principal, r.client_id, r.topic, r.hour_ms): r.version for r in rows
            }
    finally:
        db.dispose()


def merge(*totals: dict[Key, dict[str, int]]) -> dict[Key, dict[str, int]]:
    out: dict[Key, dict[str, int]] = defaultdict(dict)
    for total in totals:
        for key, values in total.items():
            for name, value in values.items():
                if value:
                    out[key][name] = out[key].get(name, 0) + value
    return dict(out)


def state_dir(url: str) -> Path:
    """`pier billing run`'s default for a SQLite store (`billing-state` beside its file); for a
    PostgreSQL one (a fresh database per test) a folder named after its URL."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///")).parent / "billing-state"
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "pier-billing-state" / digest


def run(spark: Any, url: str, bootstrap: str, now_ms: int, **hooks: Any) -> RunReport:
    db = Database(url)
    try:
        options = RunOptions(bootstrap, state_dir(url))
        return run_rollup(spark, db, options, hooks=RunHooks(**hooks), now_ms=now_ms)
    finally:
        db.dispose()
