"""One rollup run (`pier billing run`): `__usage` from the stored offsets to end offsets resolved
before reading → hourly rollups, committed with the next offsets in one fenced transaction.

Exactly once: the range read is [stored offsets, end offsets), and the end offsets are stored in
the same transaction as the sums, so a run that dies before its commit leaves nothing and the next
run reads the same range again; one that dies after it leaves a complete run, and the next starts
where it ended. Within a run each record id counts once; ids counted by earlier runs are skipped
(`billing.rollup.ranges`: traffic ids against the sequence ranges per gateway incarnation that
earlier runs stored with their commits; `billing.rollup.ids`: any other id by an anti-join in Spark
against the ids earlier runs kept in Parquet under the state directory, written before the commit
and named after it), so a record replayed at a later offset still counts once; no record id goes
through the driver. Records are read with
Spark's Kafka source and checked in the JVM (`billing.source.usage`). Malformed
records are never dropped silently: they are counted by reason in the report, in the run's row
and in the `pier_billing_rejected_records_total` metric. `--until` ends the range at the first
offset appended at or after that time (default: the latest offsets) and is the time up to which
storage samples without a successor are settled. Driver side; one run per call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from prometheus_client import Counter
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from billing.rollup import frames, ledger, ranges
from billing.rollup.ids import IdStore
from billing.rollup.sums import Cursor, RunOutput
from billing.source import kafka
from billing.source.offsets import EARLIEST, LATEST, OffsetSpec, offsets_to_json
from billing.source.usage import read_usage
from brokers.client import Cluster
from tenancy.database import Database
from tenancy.usage import RETENTION_MS, USAGE_TOPIC

_log = logging.getLogger(__name__)
DEFAULT_SAMPLE_INTERVAL_MS: Final = 60_000
REJECTED = Counter(
    "pier_billing_rejected_records", "usage records refused by the contract", ["reason"]
)
DUPLICATES = Counter("pier_billing_duplicate_records", "usage records whose id was already counted")
Hook = Callable[[], None]


@dataclass(frozen=True)
class RunOptions:
    bootstrap: str
    state_dir: Path  # counted ids (billing.rollup.ids): shared by the driver and executors
    topic: str = USAGE_TOPIC
    until_ms: int | None = None
    sample_interval_ms: int = DEFAULT_SAMPLE_INTERVAL_MS  # storage samples hold ≤ 2 × this


@dataclass(frozen=True)
class RunHooks:
    """Test seams: called right before and right after the commit (e.g. to kill the run)."""

    before_commit: Hook | None = None
    after_commit: Hook | None = None


@dataclass(frozen=True)
class RunReport:
    run_id: int
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    records: int
    duplicates: int
    rejected: dict[str, int] = field(default_factory=dict)
    late_samples: int = 0
    rollups: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # per phase

    def line(self) -> str:
        rejected = sum(self.rejected.values())
        reasons = "; ".join(f"{n}× {r}" for r, n in sorted(self.rejected.items()))
        return (
            f"run {self.run_id}: {self.records} records, {self.duplicates} duplicates, "
            f"{rejected} rejected{' (' + reasons + ')' if reasons else ''}, "
            f"{self.late_samples} late storage samples, {self.rollups} rollup rows; "
            f"offsets {offsets_to_json(self.start_offsets)} → {offsets_to_json(self.end_offsets)}"
        )


def run_rollup(
    spark: SparkSession,
    db: Database,
    options: RunOptions,
    *,
    hooks: RunHooks = RunHooks(),
    now_ms: int | None = None,
) -> RunReport:
    until_ms = options.until_ms if options.until_ms is not None else now_ms or _now_ms()
    clock = Phases()
    cursor, store = open_ledger(db, options)
    start, end = _range(options, cursor)
    clock.lap("resolve")
    raw = read_usage(spark, options.bootstrap, options.topic, start, end)
    return roll_up_records(
        spark, db, options, raw, cursor, store, start, end, until_ms, hooks=hooks, clock=clock
    )


def open_ledger(db: Database, options: RunOptions) -> tuple[Cursor | None, IdStore]:
    """The committed cursor, and the counted ids brought in step with it (`IdStore.recover`)."""
    cursor = ledger.read_cursor(db, options.topic)
    store = IdStore(options.state_dir, options.topic)
    if cursor is not None:
        store.recover(cursor.generation, cursor.offsets)
    return cursor, store


def roll_up_records(
    spark: SparkSession,
    db: Database,
    options: RunOptions,
    raw: DataFrame,
    cursor: Cursor | None,
    store: IdStore,
    start: dict[int, int],
    end: dict[int, int] | None,
    until_ms: int,
    *,
    hooks: RunHooks = RunHooks(),
    clock: Phases | None = None,
    cut_lineage: bool = False,
) -> RunReport:
    """Roll up `raw` (Kafka records of [start, end)) and commit it with `end` as the next offsets;
    `end=None` (a stream's micro-batch) takes, per partition, the offset after the last record.
    `cut_lineage` (a stream's micro-batch: small, and its fixed cost is the lag) materializes the
    checked rows once (`localCheckpoint`) so every later step plans over that leaf instead of the
    usage checks again: half the driver's and the jobs' time of a small batch."""
    clock = clock or Phases()
    stage, rows = frames.checked(raw)
    compressed = _cache_compression(spark, start, end)
    stage.persist()
    try:
        if cut_lineage:
            rows = rows.localCheckpoint(eager=True)
            stage.unpersist()
            valid_count, reasons, hours = frames.census(rows)
        else:
            rows, (valid_count, reasons, hours) = frames.fast_census(stage, rows)
        end = end if end is not None else _ends_seen(rows, start)
        out = RunOutput(options.topic, cursor, start, end, until_ms)
        out.rejected = sum(reasons.values())
        clock.lap("read")

        def fill(attempt: Path) -> None:
            _roll_up(spark, db, rows, valid_count, hours, out, options, store, attempt, clock)

        return commit_run(spark, db, store, out, fill, reasons=reasons, hooks=hooks, clock=clock)
    finally:
        stage.unpersist()
        spark.conf.set(_COMPRESSED, compressed)


_COMPRESSED: Final = "spark.sql.inMemoryColumnarStorage.compressed"
RAW_CACHE_BYTES: Final = 180  # a cached row uncompressed (170 for the benchmark's records)
RAW_CACHE_SHARE: Final = 0.6  # of the heap: Spark's unified memory (`spark.memory.fraction`)


def _cache_compression(
    spark: SparkSession, start: dict[int, int], end: dict[int, int] | None
) -> str:
    """Cache the run's rows uncompressed when it reads a known range on a `local` master and
    that many rows, uncompressed, fit in Spark's share of the JVM's heap (a cached block that
    does not fit goes to disk); returns the setting to put
    back after the run. Building the compressed columnar cache was a third of a 10 M-record
    run's reading CPU (docs/billing.md, "Speed"); uncompressed it is about 3.3 times larger,
    so a range too large for the heap (or a cluster's executors, whose heaps the driver does
    not see) keeps Spark's compression."""
    before = str(spark.conf.get(_COMPRESSED, "true"))
    context: Any = spark.sparkContext
    if end is None or not str(context.master).startswith("local"):
        return before
    records = sum(max(0, o - start.get(p, o)) for p, o in end.items())
    heap = int(context._jvm.java.lang.Runtime.getRuntime().maxMemory())
    if records * RAW_CACHE_BYTES <= heap * RAW_CACHE_SHARE:
        spark.conf.set(_COMPRESSED, "false")
    return before


def commit_run(
    spark: SparkSession,
    db: Database,
    store: IdStore,
    out: RunOutput,
    fill: Callable[[Path], None],
    *,
    reasons: dict[str, int] | None = None,
    hooks: RunHooks = RunHooks(),
    clock: Phases | None = None,
) -> RunReport:
    """The commit tail of every rollup path (`roll_up_records`, `billing.rollup.one_pass`):
    `fill(attempt)` completes `out` and writes the run's ids into a new attempt folder; then the
    fenced transaction (`ledger.commit`: rollups, ranges, storage state and `out.end_offsets`),
    the folder named after it (`IdStore.promote`), the housekeeping of a committed run (ids past
    `__usage`'s retention deleted, closed hours merged), the metrics and the report. Nothing is
    committed when `fill` or the commit fails (the attempt folder goes); dying after the commit
    leaves the attempt for the next run's `IdStore.recover`. `reasons`: rejected rows by reason."""
    clock = clock or Phases()
    reasons = reasons or {}
    generation = (out.start.generation if out.start else 0) + 1
    attempt = store.new_attempt(generation, out.end_offsets)
    try:
        fill(attempt)
        if hooks.before_commit:
            hooks.before_commit()
        run_id = ledger.commit(db, out)
    except BaseException:
        store.discard(attempt)
        raise
    if hooks.after_commit:  # dying here leaves the attempt for the next run's `recover`
        hooks.after_commit()
    store.promote(attempt, generation)
    clock.lap("commit")
    store.expire(out.until_ms - RETENTION_MS)
    _compact(spark, store, out.until_ms)
    clock.lap("compact")
    for reason, count in reasons.items():
        REJECTED.labels(reason=reason).inc(count)
    DUPLICATES.inc(out.duplicates)
    return RunReport(
        run_id,
        out.start_offsets,
        out.end_offsets,
        out.records,
        out.duplicates,
        reasons,
        out.late_samples,
        len(out.rollups),
        clock.seconds,
    )


def _compact(spark: SparkSession, store: IdStore, now_ms: int) -> None:
    """Merge the counted ids of hours that are over (`IdStore.compact`); the run is committed
    already, so a failure is logged and left for the next run."""
    try:
        hours = store.compact(spark, now_ms)
    except Exception as error:  # housekeeping: never fails a committed run
        _log.warning("event=billing_ids_compact_failed error=%r", str(error).splitlines()[:1])
        return
    if hours:
        _log.info("event=billing_ids_compacted hours=%d", len(hours))


def _ends_seen(rows: DataFrame, start: dict[int, int]) -> dict[int, int]:
    last = rows.groupBy("kafka_partition").agg(F.max("kafka_offset").alias("last")).collect()
    seen = {int(r.kafka_partition): int(r["last"]) + 1 for r in last}
    return {p: max(start.get(p, 0), seen.get(p, 0)) for p in sorted({*start, *seen})}


class Phases:
    """Wall seconds per phase of a run (`RunReport.seconds`), each `lap` since the last."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 2)
        self._last = now


def _roll_up(
    spark: SparkSession,
    db: Database,
    rows: DataFrame,
    valid_count: int,
    hours: list[int],
    out: RunOutput,
    options: RunOptions,
    store: IdStore,
    attempt: Path,
    clock: Phases,
) -> None:
    valid = rows.where(F.col("rejected").isNull())
    counted = store.counted(spark, hours)
    legacy = ledger.counted_ids(db, hours)  # ids earlier versions kept in the database
    if legacy:
        old = spark.createDataFrame([(i,) for i in legacy], "id STRING")
        counted = old if counted is None else counted.unionByName(old)
    held = ledger.counted_ranges(db, options.topic)
    stored = ranges.stored_frame(spark, held)
    masks = frames.chunk_masks(frames.seen_ids(valid, counted, stored)).persist()
    repeated = frames.repeats(valid, counted, stored, masks).persist()
    try:
        records = frames.unique(valid, repeated)
        out.duplicates = frames.dropped(repeated)
        out.records = valid_count - out.duplicates
        clock.lap("dedupe")
        grouped = frames.grouped_sums(records).persist()  # one pass over the rows for both
        try:
            out.rollups = frames.traffic_sums(grouped)
            storage, out.pending, out.late_samples = frames.storage_sums(
                spark,
                grouped,
                ledger.pending_samples(db),
                out.until_ms,
                2 * options.sample_interval_ms,
            )
        finally:
            grouped.unpersist()
        for key, sums in storage.items():
            out.rollups.setdefault(key, type(sums)()).add(sums)
        clock.lap("sums")
        write = partial(store.write, attempt=attempt)
        out.ranges = ranges.split(spark, records, held, write, frames.run_masks(masks))
        clock.lap("ids")
    finally:
        repeated.unpersist()
        masks.unpersist()


def _range(options: RunOptions, cursor: Cursor | None) -> tuple[dict[int, int], dict[int, int]]:
    """Start: the stored offsets (earliest for partitions they lack); end: resolved now."""

    async def resolve() -> tuple[dict[int, int], dict[int, int]]:
        async with Cluster(options.bootstrap) as cluster:
            partitions = await kafka.partitions_of(cluster, options.topic)
            stored = tuple(sorted(cursor.offsets.items())) if cursor else ()
            start = await kafka.resolve(
                cluster, options.topic, OffsetSpec(EARLIEST, stored), partitions
            )
            if options.until_ms is None:
                end = await kafka.resolve(cluster, options.topic, OffsetSpec(LATEST), partitions)
            else:
                end = await kafka.offsets_at(cluster, options.topic, partitions, options.until_ms)
            return start, {p: max(end[p], start[p]) for p in partitions}

    return asyncio.run(resolve())


def _now_ms() -> int:
    return int(time.time() * 1000)


def describe(report: RunReport) -> dict[str, Any]:
    return {
        "run": report.run_id,
        "records": report.records,
        "duplicates": report.duplicates,
        "rejected": report.rejected,
        "late_samples": report.late_samples,
        "seconds": report.seconds,
        "start_offsets": {str(p): o for p, o in sorted(report.start_offsets.items())},
        "end_offsets": {str(p): o for p, o in sorted(report.end_offsets.items())},
    }
