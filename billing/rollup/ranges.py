"""Counted traffic ids kept as sequence ranges: `<gateway id>/<incarnation>/<sequence>` per writer.

Owns the Spark steps of a rollup run that use `billing.rollup.seq_ranges.Range` (a writer — the
id's `<gateway id>/<incarnation>` — and an inclusive run of sequence numbers it wrote that were
counted):

- `keyed` gives each row the `writer` and `seq` its id names, when the id has that shape and a
  canonical sequence (`0` or no leading zero, at most 18 digits, so a BIGINT); any other id keeps
  a null writer and is only ever checked by its whole text (`billing.rollup.ids`);
- `flag_counted` marks the rows whose sequence falls in a counted range of their writer (a
  broadcast join on the writer with a range condition: the stored ranges are few), so that
  `billing.rollup.frames.repeats` leaves them out in its one pass over the ids;
- `split` finds the runs of consecutive sequences among a run's counted rows (one aggregation:
  a bit mask of the sequences present per chunk of `CHUNK`): a run of at least `MIN_RANGE` ids,
  or one that touches a stored range, becomes a range to store with the run's commit
  (`billing.rollup.ledger`, in its transaction); the ids of the other runs and the unshaped ids
  go to the Parquet id folders as before.

A gateway numbers its usage records 0, 1, 2, … per incarnation, so one writer's counted ids are
a handful of ranges however many records it wrote: de-duplication no longer reads the ids of the
whole hour on every run or micro-batch, and the ids a run writes shrink to the odd ones. Exact:
a range holds exactly the sequences counted (a run is a stretch of consecutive distinct
sequences, all present). Driver side (builds plans).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from billing.rollup.seq_ranges import Range, merge

MIN_RANGE: Final = 32  # a shorter run that touches no stored range stays as ids
CHUNK: Final = 64  # runs are found from a bit mask per chunk of this many sequences
_CHUNK_BITS: Final = 6  # CHUNK == 1 << _CHUNK_BITS
_ALL_BITS: Final = (1 << CHUNK) - 1
_WRITER_PART: Final = r"[A-Za-z0-9._-]{1,64}"
TRAFFIC_ID: Final = (
    rf"\A({_WRITER_PART}/{_WRITER_PART})/(0|[1-9][0-9]{{0,17}})\z"  # \z: not before a final newline
)
RANGE_SCHEMA: Final = "r_writer STRING, r_lo BIGINT, r_hi BIGINT"
_RANGE_COLUMNS: Final = ("r_writer", "r_lo", "r_hi")


def keyed(rows: DataFrame) -> DataFrame:
    """`rows` with `writer` and `seq` (null when the id is not a canonical traffic id): one
    regular expression for the shape, then the parts cut at the slashes it proved."""
    shaped = F.col("id").rlike(TRAFFIC_ID)
    writer = F.when(shaped, F.substring_index("id", "/", 2))
    seq = F.when(shaped, F.substring_index("id", "/", -1).cast("bigint"))
    return rows.withColumn("writer", writer).withColumn("seq", seq)


def chunk_of(seq: Column) -> Column:
    """The chunk of `CHUNK` sequences a (non-negative) sequence is in; exact for any BIGINT."""
    return F.shiftright(seq, _CHUNK_BITS)


def bit_of(seq: Column) -> Column:
    """A sequence's bit in its chunk's 64-bit mask."""
    one = F.lit(1).cast("bigint")
    return F.call_function("shiftleft", one, seq.bitwiseAND(CHUNK - 1).cast("int"))


def stored_frame(spark: SparkSession, ranges: list[Range]) -> DataFrame | None:
    if not ranges:
        return None
    rows = [(r.writer, r.lo, r.hi) for r in ranges]
    return spark.createDataFrame(rows, RANGE_SCHEMA)


def flag_counted(rows: DataFrame, stored: DataFrame | None) -> DataFrame:
    """`rows` (from `keyed`) with `old`: whether a stored range of its writer holds its sequence
    (a broadcast join on the writer with a range condition; stored ranges are disjoint, so a row
    meets at most one)."""
    if stored is None:
        return rows.withColumn("old", F.lit(False))
    inside = (F.col("writer") == F.col("r_writer")) & F.col("seq").between(
        F.col("r_lo"), F.col("r_hi")
    )
    joined = rows.join(F.broadcast(stored), inside, "left")
    return joined.withColumn("old", F.col("r_writer").isNotNull()).drop(*_RANGE_COLUMNS)


def split(
    spark: SparkSession,
    counted: DataFrame,
    held: list[Range],
    write_ids: Callable[[DataFrame], None],
    masks: DataFrame | None = None,
) -> list[Range]:
    """The ranges to store of a run's counted rows (from `keyed`, one row per id), given the
    `held` (stored) ones; the ids no new range holds go to `write_ids` (a frame of id, hour_ms).

    One aggregation finds the runs: per writer and chunk of `CHUNK` sequences, the bit mask of
    the sequences present (`bit_or`), or `masks`, the same (writer, chunk, mask, hour_ms, n)
    computed already (`frames.run_masks`: then `counted` is read only for loose ids). Whole
    chunks in a row are joined in Spark; the driver reads the runs off the other chunks' masks
    (a run at a time, not a bit) and joins neighbours (`merge`). A run becomes a range when it is
    at least `MIN_RANGE` long or touches a held range; the driver collects runs and masks, never
    ids."""
    chunks = masks if masks is not None else _masks(counted).persist()
    try:
        runs = merge([*_whole_runs(chunks), *_partial_runs(chunks)])
        lasts = {(h.writer, h.hi) for h in held}  # a run touching a held range starts after
        firsts = {(h.writer, h.lo) for h in held}  # one of these, or ends before one of these
        found = [
            r
            for r in runs
            if r.hi - r.lo + 1 >= MIN_RANGE
            or (r.writer, r.lo - 1) in lasts
            or (r.writer, r.hi + 1) in firsts
        ]
        unshaped = chunks.where(F.col("writer").isNull()).agg(F.sum("n")).first()
        if len(found) == len(runs) and not (unshaped and unshaped[0]):
            write_ids(spark.createDataFrame([], "id STRING, hour_ms BIGINT"))
        else:
            write_ids(_loose(counted, spark, found))
    finally:
        if masks is None:
            chunks.unpersist()
    return found


def _masks(counted: DataFrame) -> DataFrame:
    return (
        counted.withColumn("chunk", chunk_of(F.col("seq")))
        .groupBy("writer", "chunk")
        .agg(
            F.bit_or(bit_of(F.col("seq"))).alias("mask"),
            F.max("hour_ms").alias("hour_ms"),
            F.count("*").alias("n"),
        )
    )


def _whole_runs(chunks: DataFrame) -> list[Range]:
    """Runs of chunks with every sequence present, as ranges (gaps and islands over the few
    chunk rows: `chunk - row_number()` is constant along consecutive chunks)."""
    whole = chunks.where(F.col("writer").isNotNull() & (F.col("mask") == F.lit(-1)))
    order = Window.partitionBy("writer").orderBy("chunk")
    grouped = (
        whole.withColumn("run", F.col("chunk") - F.row_number().over(order))
        .groupBy("writer", "run")
        .agg(
            F.min("chunk").alias("first"), F.max("chunk").alias("last"), F.max("hour_ms").alias("h")
        )
    )
    return [
        Range(r.writer, int(r.first) * CHUNK, int(r.last) * CHUNK + CHUNK - 1, int(r.h))
        for r in grouped.collect()
    ]


def _partial_runs(chunks: DataFrame) -> list[Range]:
    partial = chunks.where(F.col("writer").isNotNull() & (F.col("mask") != F.lit(-1)))
    out: list[Range] = []
    for row in partial.select("writer", "chunk", "mask", "hour_ms").collect():
        base = int(row.chunk) * CHUNK
        for low, high in bit_runs(int(row.mask)):
            out.append(Range(row.writer, base + low, base + high, int(row.hour_ms)))
    return out


def bit_runs(mask: int) -> list[tuple[int, int]]:
    """The runs of set bits of a 64-bit mask (signed, as Spark's BIGINT), lowest first, as
    inclusive (first bit, last bit); one step per run."""
    bits = mask & _ALL_BITS
    runs = []
    while bits:
        low = (bits & -bits).bit_length() - 1
        shifted = bits >> low
        length = (~shifted & (shifted + 1)).bit_length() - 1  # the trailing ones
        runs.append((low, low + length - 1))
        bits &= ~(((1 << length) - 1) << low)
    return runs


def _loose(counted: DataFrame, spark: SparkSession, found: list[Range]) -> DataFrame:
    """The (id, hour_ms) of counted rows no found range holds."""
    if not found:
        return counted.select("id", "hour_ms")
    kept = spark.createDataFrame([(r.writer, r.lo, r.hi) for r in found], RANGE_SCHEMA)
    inside = (F.col("writer") == F.col("r_writer")) & F.col("seq").between(
        F.col("r_lo"), F.col("r_hi")
    )
    return counted.join(F.broadcast(kept), inside, "left_anti").select("id", "hour_ms")
