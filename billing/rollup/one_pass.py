"""The stream's one-pass path: a micro-batch of plain traffic rolled up by one Spark job.

Owns `roll_up_one_pass`. A batch whose records are all plain traffic (accepted by the usage
check's fast path, `billing.source.usage`, with a `<gateway id>/<incarnation>/<sequence>` id:
`billing.rollup.ranges`) needs no de-duplication row by row when no id in it repeats and none was
counted before, and both are known from aggregates. So one aggregation over the checked records,
GROUPING SETS of (tenant, principal, client id, topic, hour) and of (writer, chunk of `CHUNK`
sequences), collected at once, gives:

- the rollups, as `frames.traffic_sums` sums the unique rows;
- per writer and chunk the rows, the bit mask of their sequences and their hours: an id repeats
  within the batch exactly when a chunk has fewer bits than rows, and was counted before exactly
  when a run of it lies in a stored sequence range or a bit of it in the ids earlier runs kept in
  Parquet for those hours (a second, small job, only when such ids exist);
- the runs of consecutive sequences, stored as ranges with the commit (every run, also the short
  ones `ranges.split` would keep as ids: the next micro-batch's records usually join them, and
  no Parquet ids means the next batch has none to check).

Anything else returns None and the caller rolls the batch up the exact way
(`job.roll_up_records`), so the one-pass path is a shortcut, never a second set of rules: a record
the fast check refused (malformed or not canonical), a storage sample or another id shape, a
repeated or already counted id, a storage sample due to be settled, end offsets not known, or more
than `MAX_SHORT_RUNS` short runs. The commit is the exact path's: rollups, ranges and the next
offsets in one fenced transaction, the (empty) id folder renamed after it. Driver side; one call
per micro-batch, from the stream's thread.
"""

from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass, field
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from billing.rollup import frames, ledger, ranges
from billing.rollup.ids import IdStore
from billing.rollup.job import RunOptions, RunReport
from billing.rollup.seq_ranges import Range, merge
from billing.rollup.sums import TRAFFIC_MEASURES, Cursor, RollupKey, RunOutput, Sums
from tenancy.database import Database
from tenancy.usage import RETENTION_MS

_log = logging.getLogger(__name__)
MAX_SHORT_RUNS: Final = 20_000  # more new runs shorter than `ranges.MIN_RANGE`: the exact path
_SUM_KEYS: Final = ("s_tenant", "s_principal", "s_client_id", "s_topic", "s_hour")
_CHUNK_KEYS: Final = ("c_writer", "c_chunk")
_SUMS_SET: Final = 0b0000011  # grouping_id() of the (tenant, ..., hour) set: chunk keys rolled up
_BITS: Final = (1 << ranges.CHUNK) - 1


@dataclass(frozen=True, slots=True)
class Chunk:
    """One writer's chunk of `ranges.CHUNK` sequences in a batch."""

    rows: int
    mask: int  # the bits of the sequences present (Spark's signed BIGINT)
    hour_lo: int
    hour_hi: int


@dataclass
class Digest:
    """What the one aggregation found in a batch."""

    other: int = 0  # rows that are not plain traffic (refused, storage, another id shape)
    valid: int = 0
    sums: dict[RollupKey, Sums] = field(default_factory=dict)
    chunks: dict[tuple[str, int], Chunk] = field(default_factory=dict)

    def repeats(self) -> bool:
        return any(c.rows != (c.mask & _BITS).bit_count() for c in self.chunks.values())

    def hours(self) -> list[int]:
        return sorted({key.hour_ms for key in self.sums})

    def runs(self) -> list[Range]:
        """The runs of consecutive sequences, joined across chunks, with their newest hour."""
        pieces = [
            Range(writer, chunk * ranges.CHUNK + lo, chunk * ranges.CHUNK + hi, c.hour_hi)
            for (writer, chunk), c in self.chunks.items()
            for lo, hi in ranges.bit_runs(c.mask)
        ]
        return merge(pieces)


def roll_up_one_pass(
    spark: SparkSession,
    db: Database,
    options: RunOptions,
    batch: DataFrame,
    cursor: Cursor | None,
    store: IdStore,
    start: dict[int, int],
    end: dict[int, int],
    now_ms: int,
) -> RunReport | None:
    """Roll up and commit `batch` (Kafka records of [start, end)) in one pass, or None (nothing
    done) when it needs the exact path."""
    began = time.perf_counter()
    if _settling(db, now_ms, 2 * options.sample_interval_ms):
        return None
    stage, _ = frames.checked(batch)
    found = digest(stage)
    if found.other or found.repeats():
        _log.info("event=billing_one_pass_declined other=%d", found.other)
        return None
    runs = found.runs()
    held = ledger.counted_ranges(db, options.topic)
    if _overlaps(runs, held) or _counted_before(spark, db, store, found):
        _log.info("event=billing_one_pass_declined reason=counted_before")
        return None
    if _short_runs(runs, held) > MAX_SHORT_RUNS:
        return None
    digested = time.perf_counter()
    out = RunOutput(options.topic, cursor, start, end, now_ms)
    out.rollups, out.records, out.ranges = found.sums, found.valid, runs
    run_id = _commit(spark, db, store, out)
    committed = time.perf_counter()
    _housekeeping(spark, store, now_ms)
    seconds = {
        "digest": round(digested - began, 2),
        "commit": round(committed - digested, 2),
        "compact": round(time.perf_counter() - committed, 2),
    }
    return RunReport(run_id, start, end, out.records, 0, {}, 0, len(out.rollups), seconds)


def digest(stage: DataFrame) -> Digest:
    """One aggregation over `frames.checked`'s stage (GROUPING SETS, so the records are read
    and checked once), collected."""
    plain = F.coalesce(
        F.col("_fast") & (F.col("kind") == "traffic") & F.col("writer").isNotNull(), F.lit(False)
    )
    sum_cols = ("tenant", "principal", "client_id", "topic", "hour_ms")
    keyed = stage.select(
        *(F.when(plain, _key(name)).alias(key) for name, key in zip(sum_cols, _SUM_KEYS, strict=True)),
        F.when(plain, F.col("writer")).alias("c_writer"),
        F.when(plain, ranges.chunk_of(F.col("seq"))).alias("c_chunk"),
        F.when(plain, ranges.bit_of(F.col("seq"))).alias("bit"),
        F.when(plain, F.col("hour_ms")).alias("hour"),
        (~plain).alias("other"),
        *TRAFFIC_MEASURES,
    )  # fmt: skip
    grouped = keyed.groupingSets([list(_SUM_KEYS), list(_CHUNK_KEYS)], *_SUM_KEYS, *_CHUNK_KEYS)
    rows = grouped.agg(
        F.grouping_id().alias("gid"),
        F.count(F.col("hour")).alias("n"),
        F.count(F.when(F.col("other"), 1)).alias("other_rows"),
        F.bit_or("bit").alias("mask"),
        F.min("hour").alias("hour_lo"),
        F.max("hour").alias("hour_hi"),
        *(F.sum(F.when(~F.col("other"), F.col(m))).alias(m) for m in TRAFFIC_MEASURES),
    ).collect()
    out = Digest()
    for row in rows:
        if row.gid == _SUMS_SET:
            out.other += int(row.other_rows)
            if row.s_tenant is not None:
                _add_sums(out, row)
        elif row.c_writer is not None:
            chunk = Chunk(int(row.n), int(row.mask), int(row.hour_lo), int(row.hour_hi))
            out.chunks[(row.c_writer, int(row.c_chunk))] = chunk
    return out


def _key(name: str) -> Column:
    return F.coalesce(F.col("topic"), F.lit("")) if name == "topic" else F.col(name)


def _add_sums(out: Digest, row: object) -> None:
    key = RollupKey(row.s_tenant, row.s_principal, row.s_client_id, row.s_topic, row.s_hour)  # type: ignore[attr-defined]
    sums = Sums(records=int(row.n))  # type: ignore[attr-defined]
    for measure in TRAFFIC_MEASURES:
        setattr(sums, measure, int(getattr(row, measure)))
    out.sums[key] = sums
    out.valid += sums.records


def _settling(db: Database, now_ms: int, cap_ms: int) -> bool:
    """Whether a pending storage sample is due to be credited (`frames.storage_sums` does it)."""
    return any(not p.settled and now_ms - p.at_ms >= cap_ms for p in ledger.pending_samples(db))


def _overlaps(runs: list[Range], held: list[Range]) -> bool:
    """Whether a run meets a stored range of its writer (stored ranges are disjoint)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for item in sorted(held):
        spans.setdefault(item.writer, []).append((item.lo, item.hi))
    for run in runs:
        mine = spans.get(run.writer)
        if not mine:
            continue
        at = bisect.bisect_right(mine, (run.hi, 2**63)) - 1  # the last one starting by run.hi
        if at >= 0 and mine[at][1] >= run.lo:
            return True
    return False


def _short_runs(runs: list[Range], held: list[Range]) -> int:
    """New runs `ranges.split` would keep as ids (short, touching no stored range)."""
    lasts = {(h.writer, h.hi) for h in held}
    firsts = {(h.writer, h.lo) for h in held}
    return sum(
        1
        for r in runs
        if r.hi - r.lo + 1 < ranges.MIN_RANGE
        and (r.writer, r.lo - 1) not in lasts
        and (r.writer, r.hi + 1) not in firsts
    )


def _counted_before(spark: SparkSession, db: Database, store: IdStore, found: Digest) -> bool:
    """Whether an id of the batch is among the ids earlier runs kept (Parquet, or the database
    for earlier versions) for its hours: their bits per writer and chunk against the batch's."""
    hours = found.hours()
    counted = store.counted(spark, hours)
    legacy = ledger.counted_ids(db, hours)
    if legacy:
        old = spark.createDataFrame([(i,) for i in legacy], "id STRING")
        counted = old if counted is None else counted.unionByName(old)
    if counted is None:
        return False
    seq = F.col("seq")
    masks = (
        ranges.keyed(counted.select("id"))
        .where(F.col("writer").isNotNull())
        .groupBy("writer", ranges.chunk_of(seq).alias("chunk"))
        .agg(F.bit_or(ranges.bit_of(seq)).alias("mask"))
        .collect()
    )
    for row in masks:
        chunk = found.chunks.get((row.writer, int(row.chunk)))
        if chunk is not None and chunk.mask & int(row.mask):
            return True
    return False


def _commit(spark: SparkSession, db: Database, store: IdStore, out: RunOutput) -> int:
    """The fenced transaction, with the run's (empty) id folder written before and renamed after
    it, as `IdStore` expects of every committed generation."""
    generation = (out.start.generation if out.start else 0) + 1
    attempt = store.new_attempt(generation, out.end_offsets)
    try:
        store.write(spark.createDataFrame([], "id STRING, hour_ms BIGINT"), attempt)
        run_id = ledger.commit(db, out)
    except BaseException:
        store.discard(attempt)
        raise
    store.promote(attempt, generation)
    return run_id


def _housekeeping(spark: SparkSession, store: IdStore, now_ms: int) -> None:
    """As after an exact run: ids past retention go, closed hours are merged; a failure is
    logged and left for the next batch (this one is committed)."""
    store.expire(now_ms - RETENTION_MS)
    try:
        store.compact(spark, now_ms)
    except Exception as error:  # housekeeping: never fails a committed batch
        _log.warning("event=billing_ids_compact_failed error=%r", str(error).splitlines()[:1])
