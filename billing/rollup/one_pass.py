"""The stream's one-pass path: a micro-batch of plain traffic and storage samples rolled up by one
aggregation of its records.

Owns `roll_up_one_pass`. A batch whose records are all accepted by the usage check's fast path
(`billing.source.usage`) and are traffic with a `<gateway id>/<incarnation>/<sequence>` id
(`billing.rollup.ranges`) or storage samples (what a gateway writes) needs no de-duplication row
by row: what the exact path would find is known from aggregates. So one aggregation over the
checked records, GROUPING SETS of (tenant, principal, client id, topic, hour) and of (writer,
chunk of `CHUNK` sequences), collected at once, gives:

- the traffic rollups, as `frames.traffic_sums` sums the unique rows;
- per writer and chunk the rows, the bit mask of their sequences and their hours: a traffic id
  repeats within the batch exactly when a chunk has fewer bits than rows, and was counted before
  exactly when a run of it lies in a stored sequence range or a bit of it in the ids earlier runs
  kept in Parquet for the batch's hours;
- per storage sample id (in the second set, under the id with chunk `SAMPLE_CHUNK`) its copies
  and its first copy (lowest Kafka partition and offset: the one the exact path keeps). Samples
  are few (one per tenant partition and sampling interval), so they come to the driver; one
  counted before (among the Parquet ids of the batch's hours, checked in the same small job as
  the traffic bits) counts not at all, another once, its other copies as duplicates. The kept
  samples then go through the exact path's own storage steps (`frames.grouped_sums`,
  `frames.storage_sums`, over a small frame of them), and their ids to Parquet as the exact path
  writes them;
- the runs of consecutive sequences, stored as ranges with the commit (every run, also the short
  ones `ranges.split` would keep as ids: the next micro-batch's records usually join them, and
  no traffic ids in Parquet means the next batch has none to check).

Anything else returns None and the caller rolls the batch up the exact way
(`job.roll_up_records`), so the one-pass path is a shortcut, never a second set of rules: a record
the fast check refused (malformed or not canonical), another id shape, a repeated or already
counted traffic id, more than `MAX_SAMPLES` storage samples (counted in the aggregation's job:
their rows never reach the driver), end offsets not known, or more than
`MAX_SHORT_RUNS` short runs. The commit is the exact path's (`job.commit_run`): rollups, ranges,
storage state and the next offsets in one fenced transaction, the id folder renamed after it.
Driver side; one call per micro-batch, from the stream's thread.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from billing.rollup import frames, ledger, ranges
from billing.rollup.ids import IdStore
from billing.rollup.job import Phases, RunOptions, RunReport, commit_run
from billing.rollup.seq_ranges import Range, merge
from billing.rollup.sums import TRAFFIC_MEASURES, Cursor, PendingSample, RollupKey, RunOutput, Sums
from tenancy.database import Database

_log = logging.getLogger(__name__)
MAX_SHORT_RUNS: Final = 20_000  # more new runs shorter than `ranges.MIN_RANGE`: the exact path
MAX_SAMPLES: Final = 100_000  # more storage sample ids in a batch: the exact path (driver memory)
SAMPLE_CHUNK: Final = -1  # the chunk of a storage sample's row in the second grouping set
_SUM_KEYS: Final = ("s_tenant", "s_principal", "s_client_id", "s_topic", "s_hour")
_CHUNK_KEYS: Final = ("c_writer", "c_chunk")
_SUMS_SET: Final = 0b0000011  # grouping_id() of the (tenant, ..., hour) set: chunk keys rolled up
_BITS: Final = (1 << ranges.CHUNK) - 1
_FIRST: Final = (
    "kafka_partition",
    "kafka_offset",
    "bytes",
    "tenant",
    "topic",
    "partition",
    "at_ms",
)
_KEPT_SCHEMA: Final = (
    "id STRING, kind STRING, tenant STRING, principal STRING, client_id STRING, topic STRING, "
    "hour_ms BIGINT, partition INT, at_ms BIGINT, bytes BIGINT, "
    + ", ".join(f"{m} BIGINT" for m in TRAFFIC_MEASURES)
)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One writer's chunk of `ranges.CHUNK` sequences in a batch."""

    rows: int
    mask: int  # the bits of the sequences present (Spark's signed BIGINT)
    hour_lo: int
    hour_hi: int


@dataclass(frozen=True, slots=True)
class Sample:
    """One storage sample id in a batch: its copies, and the fields of its first copy."""

    copies: int
    tenant: str
    topic: str
    partition: int
    at_ms: int
    bytes: int
    hour_ms: int


@dataclass
class Digest:
    """What the one aggregation found in a batch."""

    other: int = 0  # rows that are neither plain traffic nor a storage sample
    valid: int = 0  # plain traffic rows
    sums: dict[RollupKey, Sums] = field(default_factory=dict)
    chunks: dict[tuple[str, int], Chunk] = field(default_factory=dict)
    samples: dict[str, Sample] = field(default_factory=dict)  # by id
    oversize: int = 0  # sample ids, when more than MAX_SAMPLES: nothing else is filled

    def repeats(self) -> bool:
        return any(c.rows != (c.mask & _BITS).bit_count() for c in self.chunks.values())

    def hours(self) -> list[int]:
        """The hours of the batch's rows (the exact path reads the ids counted for these)."""
        traffic = {key.hour_ms for key in self.sums}
        return sorted(traffic | {s.hour_ms for s in self.samples.values()})

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
    clock = Phases()
    stage, _ = frames.checked(batch)
    found = digest(stage)
    if found.oversize or found.other or found.repeats():
        samples = found.oversize or len(found.samples)
        _log.info("event=billing_one_pass_declined other=%d samples=%d", found.other, samples)
        return None
    runs = found.runs()
    held = ledger.counted_ranges(db, options.topic)
    traffic_counted, samples_counted = _counted_before(spark, db, store, found)
    if _overlaps(runs, held) or traffic_counted:
        _log.info("event=billing_one_pass_declined reason=counted_before")
        return None
    if _short_runs(runs, held) > MAX_SHORT_RUNS:
        return None
    out = RunOutput(options.topic, cursor, start, end, now_ms)
    out.rollups, out.ranges = found.sums, runs
    kept = _storage(spark, db, options, _kept_samples(found, samples_counted, out), out)
    clock.lap("digest")

    def fill(attempt: Path) -> None:
        store.write(kept.select("id", "hour_ms"), attempt)

    return commit_run(spark, db, store, out, fill, clock=clock)


def digest(stage: DataFrame) -> Digest:
    """One aggregation over `frames.checked`'s stage (GROUPING SETS, so the records are read
    and checked once), collected. Its storage sample ids are counted in the same job, and their
    rows dropped there when they are more than `MAX_SAMPLES`: such a batch is only `oversize`."""
    fast = F.coalesce(F.col("_fast"), F.lit(False))
    plain = fast & (F.col("kind") == "traffic") & F.col("writer").isNotNull()
    sample = fast & (F.col("kind") == "storage")
    sum_cols = ("tenant", "principal", "client_id", "topic", "hour_ms")
    keyed = stage.select(
        *(F.when(plain, _key(name)).alias(key) for name, key in zip(sum_cols, _SUM_KEYS, strict=True)),
        F.when(plain, F.col("writer")).when(sample, F.col("id")).alias("c_writer"),
        F.when(plain, ranges.chunk_of(F.col("seq")))
        .when(sample, F.lit(SAMPLE_CHUNK).cast("bigint")).alias("c_chunk"),
        F.when(plain, ranges.bit_of(F.col("seq"))).alias("bit"),
        F.when(plain | sample, F.col("hour_ms")).alias("hour"),
        F.when(sample, F.struct(*_FIRST)).alias("first"),
        (~(plain | sample)).alias("other"),
        *(F.when(plain, F.col(m)).alias(m) for m in TRAFFIC_MEASURES),
    )  # fmt: skip
    grouped = keyed.groupingSets([list(_SUM_KEYS), list(_CHUNK_KEYS)], *_SUM_KEYS, *_CHUNK_KEYS)
    aggregated = grouped.agg(
        F.grouping_id().alias("gid"),
        F.count(F.col("hour")).alias("n"),
        F.count(F.when(F.col("other"), 1)).alias("other_rows"),
        F.bit_or("bit").alias("mask"),
        F.min("hour").alias("hour_lo"),
        F.max("hour").alias("hour_hi"),
        F.min("first").alias("first"),
        *(F.sum(m).alias(m) for m in TRAFFIC_MEASURES),
    )
    is_sample = _sample_row()
    everything = Window.partitionBy(F.lit(0))  # the aggregated rows (few): one task
    counted = aggregated.withColumn("samples", F.count(F.when(is_sample, 1)).over(everything))
    rows = counted.where(~is_sample | (F.col("samples") <= MAX_SAMPLES)).collect()
    if rows and rows[0].samples > MAX_SAMPLES:
        return Digest(oversize=rows[0].samples)
    out = Digest()
    for row in rows:
        if row.gid == _SUMS_SET:
            out.other += int(row.other_rows)
            if row.s_tenant is not None:
                _add_sums(out, row)
        elif row.c_writer is not None and row.c_chunk == SAMPLE_CHUNK:
            out.samples[row.c_writer] = _sample(row)
        elif row.c_writer is not None:
            chunk = Chunk(int(row.n), int(row.mask), int(row.hour_lo), int(row.hour_hi))
            out.chunks[(row.c_writer, int(row.c_chunk))] = chunk
    return out


def _sample_row() -> Column:
    """A storage sample id's row in the aggregation, as `digest` reads it back."""
    chunk_set = (F.col("gid") != _SUMS_SET) & F.col("c_writer").isNotNull()
    return chunk_set & (F.col("c_chunk") == SAMPLE_CHUNK)


def _key(name: str) -> Column:
    return F.coalesce(F.col("topic"), F.lit("")) if name == "topic" else F.col(name)


def _add_sums(out: Digest, row: Any) -> None:
    key = RollupKey(row.s_tenant, row.s_principal, row.s_client_id, row.s_topic, row.s_hour)
    sums = Sums(records=int(row.n))
    for measure in TRAFFIC_MEASURES:
        setattr(sums, measure, int(getattr(row, measure)))
    out.sums[key] = sums
    out.valid += sums.records


def _sample(row: Any) -> Sample:
    first = row.first
    return Sample(
        int(row.n), first.tenant, first.topic, int(first.partition), int(first.at_ms),
        int(first.bytes), int(row.hour_lo),
    )  # fmt: skip


def _kept_samples(found: Digest, counted: set[str], out: RunOutput) -> list[tuple[Any, ...]]:
    """The rows of the samples to count (`_KEPT_SCHEMA`: one per id not counted before, its first
    copy), with `out`'s records and duplicates as the exact path counts them."""
    kept = []
    out.records = found.valid
    for sample_id, s in sorted(found.samples.items()):
        if sample_id in counted:
            out.duplicates += s.copies
            continue
        out.duplicates += s.copies - 1
        out.records += 1
        fields = (s.tenant, None, None, s.topic, s.hour_ms, s.partition, s.at_ms, s.bytes)
        kept.append((sample_id, "storage", *fields, *(None for _ in TRAFFIC_MEASURES)))
    return kept


def _storage(
    spark: SparkSession,
    db: Database,
    options: RunOptions,
    kept: list[tuple[Any, ...]],
    out: RunOutput,
) -> DataFrame:
    """The kept samples as a frame, their storage sums (the exact path's steps, over that frame)
    added to `out` with the new pending samples and the late count. The steps run only when there
    are samples or a pending sample is due to be credited; otherwise they would change nothing."""
    frame = spark.createDataFrame(kept, _KEPT_SCHEMA)
    cap_ms = 2 * options.sample_interval_ms
    pending = ledger.pending_samples(db)
    if not kept and not _settling(pending, out.until_ms, cap_ms):
        return frame
    grouped = frames.grouped_sums(frame).persist()
    try:
        storage, out.pending, out.late_samples = frames.storage_sums(
            spark, grouped, pending, out.until_ms, cap_ms
        )
    finally:
        grouped.unpersist()
    for key, sums in storage.items():
        out.rollups.setdefault(key, Sums()).add(sums)
    return frame


def _settling(pending: list[PendingSample], now_ms: int, cap_ms: int) -> bool:
    """Whether a pending storage sample is due to be credited (`frames.storage_sums` does it)."""
    return any(not p.settled and now_ms - p.at_ms >= cap_ms for p in pending)


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


def _counted_before(
    spark: SparkSession, db: Database, store: IdStore, found: Digest
) -> tuple[bool, set[str]]:
    """(whether a traffic id of the batch is among the ids earlier runs kept for the batch's
    hours, in Parquet or, for earlier versions, the database; which of its storage sample ids
    are): one small job over those ids, their bits per writer and chunk against the batch's,
    and the sample ids found by a broadcast join with the batch's."""
    hours = found.hours()
    counted = store.counted(spark, hours)
    legacy = ledger.counted_ids(db, hours)
    if legacy:
        old = spark.createDataFrame([(i,) for i in legacy], "id STRING")
        counted = old if counted is None else counted.unionByName(old)
    if counted is None:
        return False, set()
    ids = ranges.keyed(counted.select("id"))
    if found.samples:
        mine = spark.createDataFrame([(i,) for i in found.samples], "sample STRING")
        ids = ids.join(F.broadcast(mine), F.col("id") == F.col("sample"), "left")
    else:
        ids = ids.withColumn("sample", F.lit(None).cast("string"))
    seq, writer = F.col("seq"), F.col("writer")
    rows = (
        ids.where(writer.isNotNull() | F.col("sample").isNotNull())
        .groupBy(
            F.coalesce(writer, F.col("sample")).alias("key"),
            F.when(writer.isNotNull(), ranges.chunk_of(seq)).alias("chunk"),
        )
        .agg(F.bit_or(ranges.bit_of(seq)).alias("mask"))
        .collect()
    )
    traffic, samples = False, set[str]()
    for row in rows:
        if row.chunk is None:
            samples.add(row.key)
            continue
        chunk = found.chunks.get((row.key, int(row.chunk)))
        traffic = traffic or (chunk is not None and bool(chunk.mask & int(row.mask)))
    return traffic, samples
