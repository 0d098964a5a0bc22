"""Benchmark of billing: the rollup end to end, reading `__usage` with Spark's Kafka source against
Spark's JSON reader over a file, and invoices for many tenants.

    .venv/bin/python -m infra.bench.billing [--records N] [--tenants N] [--quick]

(as a module: run as a script, `infra/bench/` would shadow the `billing` package)

- `rollup`: N usage records (traffic windows of 1,000 tenants over 24 hours, 1 % duplicates, plus
  storage samples) produced to a 12-partition `__usage` on one local broker with the project's
  client, then one `run_rollup` on `local[2]` into a SQLite tenancy database: seconds end to end
  and per phase (resolving offsets, reading and checking, de-duplicating against the counted ids
  and summing, writing the ids and the commit).
- `source_vs_json`: the same records read from the broker by Spark's Kafka source and checked by
  `billing.source.usage` and, written as JSON lines to a file, by `spark.read.json` with the same
  schema and no checks; both summed over `bytes_in` (forces every row): rows/s.
- `invoices`: T tenants (default 10,000) on one plan, each with 24 hourly rollups, then
  `billing.invoice.issue` for the month: seconds and invoices/s.
Prints one JSON document and writes it to `infra/bench/results/billing.json`; progress on stderr.
Run alone: the broker and the Spark JVM share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from billing.invoice.issue import issue
from billing.rollup import ledger
from billing.rollup.job import RunOptions, run_rollup
from billing.rollup.sums import RollupKey, RunOutput, Sums
from billing.source.usage import COLUMNS, read_usage, usage_rows
from billing.spark import spark_session
from brokers.client import Cluster, TopicPartition
from brokers.client.producer import produce
from brokers.client.topics import NewTopic, create_topics
from brokers.records.builder import build_batch
from infra.stack import start_broker
from tenancy.database import Database
from tenancy.domain import Plan, PlanDimension, PlanTier
from tenancy.store import TenantStore
from tenancy.usage import (
    HOUR_MS,
    USAGE_TOPIC,
    TrafficRecord,
    encode,
    partition_for,
    traffic_id,
)

RESULTS = Path(__file__).parent / "results" / "billing.json"
T0 = 1_767_225_600_000
PARTITIONS = 12


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def records(count: int) -> list[tuple[int, bytes, bytes]]:
    rng = random.Random(1)
    tenants = [f"t{i:04d}" for i in range(1000)]
    out = []
    for i in range(count):
        tenant = tenants[i % len(tenants)]
        start = T0 + rng.randrange(24) * HOUR_MS + rng.randrange(HOUR_MS - 5000)
        sequence = i - 1 if i % 100 == 99 else i  # 1 % duplicates
        record = TrafficRecord(
            traffic_id("gw", "bench", sequence), tenant, "sa-1", "app", "orders", start,
            start + 5000, bytes_in=1000 + sequence, bytes_out=2000, requests=3,
        )  # fmt: skip
        key, value = encode(record)
        out.append((partition_for(tenant, PARTITIONS), key, value))
    return out


async def produce_all(bootstrap: str, items: list[tuple[int, bytes, bytes]]) -> None:
    async with Cluster(bootstrap) as cluster:
        result = await create_topics(cluster, [NewTopic(USAGE_TOPIC, PARTITIONS, 1)])
        assert result[USAGE_TOPIC] is None, result
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for partition, key, value in items:
            by_partition.setdefault(partition, []).append((key, value))
        for partition, pairs in by_partition.items():
            for start in range(0, len(pairs), 4000):
                batch = build_batch(pairs[start : start + 4000], base_timestamp=T0, compression=4)
                await produce(cluster, TopicPartition(USAGE_TOPIC, partition), batch)


def bench_rollup(spark: Any, bootstrap: str, folder: Path, count: int) -> dict[str, Any]:
    url = f"sqlite:///{folder / 'tenancy.db'}"
    with TenantStore.open(url) as store:
        store.upgrade()
    db = Database(url)
    start = time.perf_counter()
    options = RunOptions(bootstrap, folder / "billing-state")
    report = run_rollup(spark, db, options, now_ms=T0 + 48 * HOUR_MS)
    elapsed = time.perf_counter() - start
    db.dispose()
    log(f"rollup: {report.line()} in {elapsed:.1f} s")
    return {
        "records": count,
        "seconds": round(elapsed, 1),
        "records_per_second": round(count / elapsed),
        "counted": report.records,
        "duplicates": report.duplicates,
        "rollup_rows": report.rollups,
        "phases_seconds": report.seconds,
    }


def bench_read(
    spark: Any, bootstrap: str, items: list[tuple[int, bytes, bytes]], folder: Path
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    path = folder / "usage.jsonl"
    with path.open("wb") as out:
        for _, _, value in items:
            out.write(value + b"\n")
    ends: dict[int, int] = {}
    for partition, _, _ in items:
        ends[partition] = ends.get(partition, 0) + 1
    kafka = read_usage(spark, bootstrap, USAGE_TOPIC, dict.fromkeys(ends, 0), ends)
    schema = ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)
    timings = {}
    for name, frame in (
        ("kafka_source", usage_rows(kafka)),
        ("spark_json", spark.read.schema(schema).json(str(path))),
    ):
        start = time.perf_counter()
        first = frame.agg(F.sum("bytes_in")).first()
        total = first[0] if first is not None else None
        elapsed = time.perf_counter() - start
        timings[name] = {
            "seconds": round(elapsed, 1),
            "rows_per_second": round(len(items) / elapsed),
        }
        log(f"read {name}: {elapsed:.1f} s (sum {total})")
    return timings


def bench_invoices(folder: Path, tenants: int) -> dict[str, Any]:
    url = f"sqlite:///{folder / 'invoices.db'}"
    store = TenantStore.open(url)
    store.upgrade()
    tiers = (PlanTier(Decimal(100), Decimal("0.09")), PlanTier(None, Decimal("0.05")))
    store.put_plan(Plan("bench", "EUR", {"ingress_gib": PlanDimension(Decimal(1), tiers),
                                          "requests": PlanDimension(Decimal(0), (PlanTier(None, Decimal("0.000001")),))}), actor="bench")  # fmt: skip
    out = RunOutput(USAGE_TOPIC, None, {0: 0}, {0: 1}, T0)
    for i in range(tenants):
        tenant = f"t{i:05d}"
        store.create_tenant(display_name=tenant, plan="bench", tenant_id=tenant, actor="bench")
        for hour in range(24):
            out.rollups[RollupKey(tenant, "sa-1", "", "orders", T0 + hour * HOUR_MS)] = Sums(
                bytes_in=(i + 1) * 2**30, requests=1000
            )
    ledger.commit(store.database, out)
    start = time.perf_counter()
    outcomes = issue(store, "2026-01", now=datetime(2026, 2, 10, tzinfo=UTC))
    elapsed = time.perf_counter() - start
    store.close()
    log(f"invoices: {len(outcomes)} in {elapsed:.1f} s")
    return {
        "tenants": tenants,
        "seconds": round(elapsed, 1),
        "per_second": round(len(outcomes) / elapsed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--tenants", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="200,000 records, 1,000 tenants")
    args = parser.parse_args()
    count, tenants = (200_000, 1_000) if args.quick else (args.records, args.tenants)
    with tempfile.TemporaryDirectory(prefix="pier-bench-billing-") as tmp:
        folder = Path(tmp)
        broker = start_broker(folder / "broker")
        try:
            log(f"generating and producing {count:,} records")
            items = records(count)
            start = time.perf_counter()
            asyncio.run(produce_all(broker.bootstrap, items))
            log(f"produced in {time.perf_counter() - start:.1f} s")
            spark = spark_session("local[2]", shuffle_partitions=4)
            result = {
                "machine_cpus": __import__("os").cpu_count(),
                "rollup": bench_rollup(spark, broker.bootstrap, folder, count),
                "source_vs_json": bench_read(spark, broker.bootstrap, items, folder),
            }
            spark.stop()
        finally:
            broker.stop()
        result["invoices"] = bench_invoices(folder, tenants)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
