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
- `split` finds the runs of consecutive sequences among a run's counted rows ("islands", per
  block of `BLOCK` sequences: a block whose count equals its span is one island; in the others
  `seq - row_number()` is constant along a run): an island of at least `MIN_RANGE` ids, or one
  that touches a stored range or another island of the run, becomes a range to store with the
  run's commit (`billing.rollup.ledger`, in its transaction); the ids of the other islands
  and the unshaped ids go to the Parquet id folders as before.

A gateway numbers its usage records 0, 1, 2, … per incarnation, so one writer's counted ids are
a handful of ranges however many records it wrote: de-duplication no longer reads the ids of the
whole hour on every run or micro-batch, and the ids a run writes shrink to the odd ones. Exact:
a range holds exactly the sequences counted (an island is a run of consecutive distinct
sequences). Driver side (builds plans).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from billing.rollup.seq_ranges import Range, merge

MIN_RANGE: Final = 32  # a shorter island that touches no stored range stays as ids
BLOCK: Final = 1024  # islands are found per block of this many sequences
_WRITER_PART: Final = r"[A-Za-z0-9._-]{1,64}"
TRAFFIC_ID: Final = rf"^({_WRITER_PART}/{_WRITER_PART})/(0|[1-9][0-9]{{0,17}})$"
RANGE_SCHEMA: Final = "r_writer STRING, r_lo BIGINT, r_hi BIGINT"
_RANGE_COLUMNS: Final = ("r_writer", "r_lo", "r_hi")


def keyed(rows: DataFrame) -> DataFrame:
    """`rows` with `writer` and `seq` (null when the id is not a canonical traffic id)."""
    shaped = F.col("id").rlike(TRAFFIC_ID)
    writer = F.when(shaped, F.regexp_extract("id", TRAFFIC_ID, 1))
    seq = F.when(shaped, F.regexp_extract("id", TRAFFIC_ID, 2).cast("bigint"))
    return rows.withColumn("writer", writer).withColumn("seq", seq)


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
    stored: DataFrame | None,
    write_ids: Callable[[DataFrame], None],
) -> list[Range]:
    """The ranges to store of a run's counted rows (from `keyed`, one row per id); the ids that
    no range holds go to `write_ids` (a frame of id, hour_ms). Collects ranges, never ids.

    Islands are found per block of `BLOCK` sequences, so the work spreads over every task even
    when one writer wrote everything: a block whose count equals its span is one island (a hash
    aggregation, no sort); only the rows of blocks with gaps are numbered in sequence order."""
    blocks = (
        counted.withColumn("block", F.floor(F.col("seq") / BLOCK))
        .groupBy("writer", "block")
        .agg(
            F.min("seq").alias("lo"),
            F.max("seq").alias("hi"),
            F.count("*").alias("n"),
            F.max("hour_ms").alias("hour_ms"),
        )
        .persist()
    )
    islands = _islands(counted, blocks).persist()
    try:
        found = _collect(_ranged(islands, stored))
        if _all_ranged(blocks, found):
            write_ids(spark.createDataFrame([], "id STRING, hour_ms BIGINT"))
        else:
            write_ids(_loose(counted, spark, found))
    finally:
        islands.unpersist()
        blocks.unpersist()
    return merge(found)


def _islands(counted: DataFrame, blocks: DataFrame) -> DataFrame:
    """(writer, lo, hi, n, hour_ms) of every maximal run within a block."""
    shaped = blocks.where(F.col("writer").isNotNull())
    whole = F.col("n") == F.col("hi") - F.col("lo") + 1
    dense = shaped.where(whole).select("writer", "lo", "hi", "n", "hour_ms")
    gappy = shaped.where(~whole).select("writer", "block")
    rows = counted.withColumn("block", F.floor(F.col("seq") / BLOCK)).join(
        gappy, ["writer", "block"], "left_semi"
    )
    order = Window.partitionBy("writer", "block").orderBy("seq")
    runs = (
        rows.withColumn("island", F.col("seq") - F.row_number().over(order))
        .groupBy("writer", "block", "island")
        .agg(
            F.min("seq").alias("lo"),
            F.max("seq").alias("hi"),
            F.count("*").alias("n"),
            F.max("hour_ms").alias("hour_ms"),
        )
    )
    return dense.unionByName(runs.select("writer", "lo", "hi", "n", "hour_ms"))


def _ranged(islands: DataFrame, stored: DataFrame | None) -> DataFrame:
    """The islands to keep as ranges: long ones, and short ones that touch a stored range or
    another island of the run (the two ends of a run cut by a block boundary)."""
    near = islands.select(
        F.col("writer").alias("o_writer"), F.col("lo").alias("o_lo"), F.col("hi").alias("o_hi")
    )
    short = islands.where(F.col("n") < MIN_RANGE)
    beside = (F.col("writer") == F.col("o_writer")) & (
        (F.col("lo") == F.col("o_hi") + 1) | (F.col("hi") + 1 == F.col("o_lo"))
    )
    kept = islands.where(F.col("n") >= MIN_RANGE).unionByName(short.join(near, beside, "left_semi"))
    if stored is not None:
        touching = (F.col("writer") == F.col("r_writer")) & (
            (F.col("lo") == F.col("r_hi") + 1) | (F.col("hi") + 1 == F.col("r_lo"))
        )
        kept = kept.unionByName(short.join(F.broadcast(stored), touching, "left_semi"))
    return kept.distinct()


def _collect(ranged: DataFrame) -> list[Range]:
    rows = ranged.select("writer", "lo", "hi", "hour_ms", "n").collect()
    return [Range(r.writer, int(r.lo), int(r.hi), int(r.hour_ms)) for r in rows]


def _all_ranged(blocks: DataFrame, found: list[Range]) -> bool:
    """Whether the ranges hold every counted row (no unshaped id, no loose island)."""
    total = blocks.agg(F.sum("n").alias("n")).first()
    held = sum(r.hi - r.lo + 1 for r in found)
    return total is not None and int(total["n"] or 0) == held


def _loose(counted: DataFrame, spark: SparkSession, found: list[Range]) -> DataFrame:
    """The (id, hour_ms) of counted rows no found range holds."""
    if not found:
        return counted.select("id", "hour_ms")
    held = spark.createDataFrame([(r.writer, r.lo, r.hi) for r in found], RANGE_SCHEMA)
    inside = (F.col("writer") == F.col("r_writer")) & F.col("seq").between(
        F.col("r_lo"), F.col("r_hi")
    )
    return counted.join(F.broadcast(held), inside, "left_anti").select("id", "hour_ms")
