"""Benchmark of billing: the rollup end to end, reading `__usage` with Spark's Kafka source against
Spark's JSON reader over a file, and invoices for many tenants.

    .venv/bin/python -m infra.bench.billing [--records N[,N...]] [--tenants N] [--quick]

(as a module: run as a script, `infra/bench/` would shadow the `billing` package)

- `rollups`: for each N (default 1 M and 10 M), N usage records (traffic windows of 1,000 tenants
  over 24 hours, 1 % duplicates) produced to a 12-partition topic of its own on one local broker
  by `--producers` processes (each encodes its share and sends whole compressed batches), then one
  `run_rollup` on `local[2]` into a fresh SQLite tenancy database: seconds end to end and per
  phase, the Spark JVM's CPU seconds (what the run costs whatever else the machine runs) and the
  load average; a chart of the phases goes to `infra/bench/results/billing.png`.
- `source_vs_json`: the reading path taken apart on the first size's records: Spark's Kafka
  source alone and the same values from a text file alone, each also through the checks of
  `billing.source.usage` (the Java scan, and its reference `FAST_RECORD` + `from_json`), and
  `spark.read.json` with the schema and no checks; each forced by one
  aggregate over every row: seconds, rows/s, the JVM's and the broker's CPU seconds, the load.
- `invoices`: T tenants (default 10,000) on one plan, each with 24 hourly rollups, then
  `billing.invoice.issue` for the month: seconds and invoices/s.
- `--cluster-workers W`: the rollups of at least `--cluster-from` records (default: all) run on a
  Spark standalone cluster of W workers instead (`infra.spark_cluster`; the machine's cores split
  between them, `--executor-memory` each), the issue's linearity check (100 M in at most 10 times
  the time of 10 M: `--records 10000000,100000000 --cluster-workers 2 --cluster-from 100000000`
  runs both in one run); the JVM CPU seconds are then the driver's and the executors' together
  (the workers' child processes). Each rollup names its master.
Prints one JSON document and writes it to `infra/bench/results/billing.json`; progress on stderr.
Run alone: the broker and the Spark JVM share the machine. Record timestamps are the time of the
run, so the broker's retention keeps them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from billing.invoice.issue import issue
from billing.rollup import ledger
from billing.rollup.job import RunOptions, run_rollup
from billing.rollup.sums import RollupKey, RunOutput, Sums
from billing.source.usage import COLUMNS, fast_stage, read_usage
from billing.spark import spark_session
from brokers.client import Cluster, TopicPartition
from brokers.client.producer import produce
from brokers.client.topics import NewTopic, create_topics
from brokers.records.builder import build_batch
from infra.spark_cluster import SparkCluster, start_spark_cluster
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


def records(first: int, count: int) -> list[tuple[int, bytes, bytes]]:
    """Records `first`..`first + count - 1` of the workload (the same whatever the split)."""
    tenants = [f"t{i:04d}" for i in range(1000)]
    out = []
    for i in range(first, first + count):
        sequence = i - 1 if i % 100 == 99 else i  # 1 % duplicates: record i - 1 written again
        rng = random.Random(sequence)
        tenant = tenants[sequence % len(tenants)]
        start = T0 + rng.randrange(24) * HOUR_MS + rng.randrange(HOUR_MS - 5000)
        record = TrafficRecord(
            traffic_id("gw", "bench", sequence), tenant, "sa-1", "app",
            "orders", start, start + 5000, bytes_in=1000 + sequence, bytes_out=2000, requests=3,
        )  # fmt: skip
        key, value = encode(record)
        out.append((partition_for(tenant, PARTITIONS), key, value))
    return out


async def create_topic(bootstrap: str, topic: str) -> None:
    async with Cluster(bootstrap) as cluster:
        result = await create_topics(cluster, [NewTopic(topic, PARTITIONS, 1)])
        assert result[topic] is None, result


async def produce_all(bootstrap: str, topic: str, items: list[tuple[int, bytes, bytes]]) -> None:
    """Whole zstd batches of 4,000 records per partition, stamped now (retention keeps them)."""
    now = int(time.time() * 1000)
    async with Cluster(bootstrap) as cluster:
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for partition, key, value in items:
            by_partition.setdefault(partition, []).append((key, value))
        for partition, pairs in by_partition.items():
            for start in range(0, len(pairs), 4000):
                batch = build_batch(pairs[start : start + 4000], base_timestamp=now, compression=4)
                await produce(cluster, TopicPartition(topic, partition), batch)


_CHUNK = 100_000  # records a producer process encodes and sends at once (a multiple of 100)


def _produce_chunk(job: tuple[str, str, int, int]) -> int:
    bootstrap, topic, first, count = job
    asyncio.run(produce_all(bootstrap, topic, records(first, count)))
    return count


async def records_in(bootstrap: str, topic: str) -> int | None:
    """How many records `topic` holds (None: it does not exist)."""
    from brokers.client import UnknownTopicError
    from brokers.client.offsets import list_offsets

    async with Cluster(bootstrap) as cluster:
        metadata = await cluster.metadata(refresh=True)
        info = metadata.topics.get(topic)
        if info is None or not info.partitions:
            return None
        tps = [TopicPartition(topic, p) for p in info.partitions]
        try:
            ends = await list_offsets(cluster, dict.fromkeys(tps, -1))
        except UnknownTopicError:
            return None
        return sum(ends[tp].offset for tp in tps)


def produce_parallel(bootstrap: str, topic: str, count: int, processes: int) -> float:
    """Produce `count` records to a new `topic` with `processes` processes; seconds taken (0: a
    kept broker, `--broker-dir`, already holds them)."""
    held = asyncio.run(records_in(bootstrap, topic))
    if held == count:
        log(f"{topic} already holds {count:,} records")
        return 0.0
    if held is not None:
        raise SystemExit(f"{topic} holds {held:,} records, not {count:,}: use a new --broker-dir")
    asyncio.run(create_topic(bootstrap, topic))
    jobs = [(bootstrap, topic, a, min(_CHUNK, count - a)) for a in range(0, count, _CHUNK)]
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        for _ in pool.imap_unordered(_produce_chunk, jobs):
            pass
    return time.perf_counter() - started


def jvm_cpu_seconds(spark: Any, workers: tuple[int, ...] = ()) -> float | None:
    """User + system CPU seconds of the Spark JVM so far (local masters: the whole job), plus
    those of the executors, the processes below the cluster's `workers` (their pids)."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
    except AttributeError:
        return None
    driver = process_cpu_seconds(pid)
    executors = [process_cpu_seconds(child) for child in _descendants(workers)]
    return None if driver is None else driver + sum(c for c in executors if c is not None)


def _descendants(roots: tuple[int, ...]) -> list[int]:
    """Every live process below `roots` (from /proc's parent ids)."""
    if not roots:
        return []
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def bench_rollup(
    spark: Any, bootstrap: str, folder: Path, topic: str, count: int, workers: tuple[int, ...] = ()
) -> dict[str, Any]:
    url = f"sqlite:///{folder / 'tenancy.db'}"
    with TenantStore.open(url) as store:
        store.upgrade()
    db = Database(url)
    cpu, load = jvm_cpu_seconds(spark, workers), os.getloadavg()[0]
    start = time.perf_counter()
    options = RunOptions(bootstrap, folder / "billing-state", topic=topic)
    report = run_rollup(spark, db, options, now_ms=T0 + 48 * HOUR_MS)
    elapsed = time.perf_counter() - start
    cpu_after = jvm_cpu_seconds(spark, workers)
    db.dispose()
    spent = None if cpu is None or cpu_after is None else round(cpu_after - cpu, 1)
    log(f"rollup of {count:,}: {report.line()} in {elapsed:.1f} s, {spent} JVM CPU-s")
    return {
        "records": count,
        "seconds": round(elapsed, 1),
        "records_per_second": round(count / elapsed),
        "jvm_cpu_seconds": spent,
        "load_average_1m": [round(load, 1), round(os.getloadavg()[0], 1)],
        "counted": report.records,
        "duplicates": report.duplicates,
        "rollup_rows": report.rollups,
        "phases_seconds": report.seconds,
    }


def chart(rollups: list[dict[str, Any]], path: Path) -> None:
    """Stacked seconds per phase, one bar per record count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    labels = [f"{r['records']:,}" for r in rollups]
    phases = list(dict.fromkeys(p for r in rollups for p in r["phases_seconds"]))
    bottom = [0.0] * len(rollups)
    for phase in phases:
        values = [r["phases_seconds"].get(phase, 0.0) for r in rollups]
        axes.bar(labels, values, bottom=bottom, label=phase)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes.set_ylabel("seconds (wall)")
    axes.set_xlabel("usage records rolled up, local[2]")
    axes.set_title("pier billing run, seconds per phase")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def bench_read(
    spark: Any, broker: Any, topic: str, count: int, folder: Path
) -> dict[str, dict[str, Any]]:
    """The reading path taken apart, each variant forced by one aggregate over every row: the
    Kafka source alone, the same values from a text file alone, each through the run's fast stage,
    and `spark.read.json` with the schema and no checks. (Every record on the exact path,
    `usage_rows(fast_path=False)`, took over ten minutes for 1 M at load 30: left out.)"""
    from pyspark.sql import functions as F

    items = records(0, count)
    path = folder / "usage.jsonl"
    with path.open("wb") as out:
        for _, _, value in items:
            out.write(value + b"\n")
    ends: dict[int, int] = {}
    for partition, _, _ in items:
        ends[partition] = ends.get(partition, 0) + 1

    def kafka() -> Any:
        return read_usage(spark, broker.bootstrap, topic, dict.fromkeys(ends, 0), ends)

    def text() -> Any:
        lines = spark.read.text(str(path)).select(F.col("value").cast("binary").alias("value"))
        return lines.select(
            F.lit(None).cast("binary").alias("key"), "value",
            F.lit(0).alias("partition"), F.monotonically_increasing_id().alias("offset"),
        )  # fmt: skip

    def checked(records: Any, scan: bool = True) -> Any:  # the run's fast stage (no exact rows)
        stage = fast_stage(records, scan=scan)
        return stage.agg(F.sum("bytes_in"), F.sum(F.col("_fast").cast("int")))

    schema = ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)
    variants: dict[str, Callable[[], Any]] = {
        "kafka_source": lambda: kafka().agg(F.sum(F.length("value"))),
        "text_file": lambda: text().agg(F.sum(F.length("value"))),
        "kafka_checked": lambda: checked(kafka()),
        "kafka_checked_from_json": lambda: checked(kafka(), scan=False),
        "text_checked": lambda: checked(text()),
        "text_checked_from_json": lambda: checked(text(), scan=False),
        "spark_json_no_checks": lambda: (
            spark.read.schema(schema).json(str(path)).agg(F.sum("bytes_in"))
        ),
    }
    variants["kafka_source"]().first()  # warm the JVM: the rollup ran on another topic
    timings = {}
    for name, frame in variants.items():
        cpu, served = jvm_cpu_seconds(spark), process_cpu_seconds(broker.pid)
        start = time.perf_counter()
        first = frame().first()
        elapsed = time.perf_counter() - start
        timings[name] = {
            "seconds": round(elapsed, 1),
            "rows_per_second": round(len(items) / elapsed),
            "jvm_cpu_seconds": _spent(cpu, jvm_cpu_seconds(spark)),
            "broker_cpu_seconds": _spent(served, process_cpu_seconds(broker.pid)),
            "load_average_1m": round(os.getloadavg()[0], 1),
        }
        log(f"read {name}: {elapsed:.1f} s (sum {first[0] if first else None}) {timings[name]}")
    return timings


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 2)


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


def _cluster(folder: Path, workers: int, memory: str) -> SparkCluster | None:
    """A standalone cluster of `workers` workers sharing this machine's cores (None: 0)."""
    if workers <= 0:
        return None
    cores = max(1, (os.cpu_count() or 2) // workers)
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--conf spark.executor.memory={memory} --conf spark.cores.max={cores * workers} "
        "pyspark-shell"
    )
    return start_spark_cluster(
        folder / "spark-cluster", cores=cores, memory=_worker_memory(memory), workers=workers
    )


def _worker_memory(executor: str) -> str:
    """A worker's memory: its executor's heap and 1 GiB over it (Spark's overhead)."""
    number, unit = int(executor[:-1]), executor[-1].lower()
    return f"{number * 1024 + 1024}m" if unit == "g" else f"{number + 1024}m"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--records", default="1000000,10000000", help="record counts, comma-separated"
    )
    parser.add_argument("--tenants", type=int, default=10_000, help="invoices; 0 leaves them out")
    parser.add_argument("--producers", type=int, default=4, help="producer processes")
    parser.add_argument("--quick", action="store_true", help="200,000 records, 1,000 tenants")
    parser.add_argument("--no-read-breakdown", action="store_true", help="leave out source_vs_json")
    parser.add_argument(
        "--broker-dir",
        type=Path,
        help="keep the broker's data here and reuse topics it holds (runs side by side)",
    )
    parser.add_argument(
        "--cluster-workers", type=int, default=0, help="rollups on a standalone cluster of W"
    )
    parser.add_argument("--executor-memory", default="4g", help="each cluster executor's heap")
    parser.add_argument(
        "--cluster-from",
        type=int,
        default=0,
        help="with --cluster-workers: counts below this run on local[2] in the same run",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON document's path")
    args = parser.parse_args()
    counts = [int(n) for n in args.records.split(",")]
    counts, tenants = ([200_000], 1_000) if args.quick else (counts, args.tenants)
    result: dict[str, Any] = {"machine_cpus": os.cpu_count(), "rollups": []}
    with tempfile.TemporaryDirectory(prefix="pier-bench-billing-") as tmp:
        folder = Path(tmp)
        broker = start_broker(args.broker_dir or folder / "broker")
        cluster = _cluster(folder, args.cluster_workers, args.executor_memory)
        workers = () if cluster is None else tuple(w.pid for w in cluster.all_workers())
        try:
            spark, on = None, ""
            for count in counts:
                topic = f"usage-{count}"
                log(f"producing {count:,} records to {topic}")
                seconds = produce_parallel(broker.bootstrap, topic, count, args.producers)
                log(f"produced in {seconds:.1f} s")
                clustered = cluster is not None and count >= args.cluster_from
                master = cluster.master_url if clustered and cluster else "local[2]"
                if spark is not None and on != master:  # one context a process: the next master
                    spark.stop()
                    spark = None
                spark, on = spark or spark_session(master), master
                run_dir = folder / topic
                run_dir.mkdir()
                rollup = bench_rollup(spark, broker.bootstrap, run_dir, topic, count, workers)
                rollup["master"] = (
                    f"standalone, {args.cluster_workers} workers" if clustered else master
                )
                result["rollups"].append(rollup)
            if spark is not None and counts[0] <= 1_000_000 and not args.no_read_breakdown:
                topic = f"usage-{counts[0]}"
                result["source_vs_json"] = bench_read(spark, broker, topic, counts[0], folder)
            if spark is not None:
                spark.stop()
        finally:
            if cluster is not None:
                cluster.stop()
            broker.stop()
        if tenants:
            result["invoices"] = bench_invoices(folder, tenants)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    chart(result["rollups"], args.out.with_suffix(".png"))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
