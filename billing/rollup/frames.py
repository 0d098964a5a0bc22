"""The rollup run's DataFrame steps (Spark), each a function of DataFrames and plain values.

Owns: de-duplication by record id, traffic sums per tenant/principal/client-id/topic/UTC hour,
and storage byte-hours. Storage: each sample of a partition holds its size from `at_ms` until the
next sample of that partition, at most `cap_ms` (2 × the sampling interval); a held interval is
split at UTC hour boundaries. The newest sample of a partition has no successor yet: it stays
pending (carried to the next run) until a successor arrives or `until_ms` passes its cap, when it
is credited the full cap and marked settled. A sample not newer than the partition's pending one
arrived out of order after its time was credited: it is counted as late and not credited.
Byte-milliseconds are DECIMAL(38, 0), exact. Runs on the driver; the work runs on executors.
"""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from billing.rollup import ranges
from billing.rollup.sums import TRAFFIC_MEASURES, PendingSample, RollupKey, Sums
from billing.source.usage import STAGE_EXTRA, both_paths, fast_stage
from tenancy.usage import HOUR_MS

PENDING_SCHEMA = (
    "tenant STRING, topic STRING, partition INT, p_at BIGINT, p_bytes BIGINT, p_settled BOOLEAN"
)


LEAN_COLUMNS = (
    "kafka_partition", "kafka_offset", "rejected", "id", "kind", "tenant", "principal",
    "client_id", "topic", *TRAFFIC_MEASURES, "partition", "bytes", "at_ms",
)  # fmt: skip


def derive(rows: DataFrame) -> DataFrame:
    """The columns the run uses, with the UTC hour each record belongs to and its id's writer and
    sequence (`ranges.keyed`), keeping `usage.fast_stage`'s own columns if `rows` has them: what
    the run persists, computed once per record (`usage.both_paths`' `derive`)."""
    moment = F.when(F.col("kind") == "traffic", F.col("start_ms")).otherwise(F.col("at_ms"))
    extra = [name for name in STAGE_EXTRA if name in rows.columns]
    lean = rows.select(*LEAN_COLUMNS, (moment - moment % F.lit(HOUR_MS)).alias("hour_ms"), *extra)
    return ranges.keyed(lean)


def checked(raw: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(the stage to persist, the run's rows over it): Kafka records fast-checked and `derive`d in
    one small stage (`usage.fast_stage`), which the caller persists, so the records are read and
    parsed once; the rows are its accepted ones and, through the exact rules, the others
    (`usage.both_paths`: those are few, and evaluated again on each pass over the rows)."""
    stage = derive(fast_stage(raw))
    return stage, both_paths(stage, derive)


def seen_ids(valid: DataFrame, counted: DataFrame | None, stored: DataFrame | None) -> DataFrame:
    """The ids de-duplication looks at: the `valid` rows (`ranges.keyed` columns), `old` when a
    `stored` range holds them, and the `earlier` counted ids (`old` too), with each row's
    position columns and `hour_ms` (null for earlier ids, and when `valid` has none)."""
    hour = F.col("hour_ms") if "hour_ms" in valid.columns else F.lit(None).cast("bigint")
    seen = ranges.flag_counted(valid, stored).select(
        "id", "writer", "seq", "kafka_partition", "kafka_offset", "old",
        F.lit(False).alias("earlier"), hour.alias("hour_ms"),
    )  # fmt: skip
    if counted is None:
        return seen
    earlier = ranges.keyed(counted.select("id")).select(
        "id", "writer", "seq",
        F.lit(None).cast("int").alias("kafka_partition"),
        F.lit(None).cast("bigint").alias("kafka_offset"),
        F.lit(True).alias("old"), F.lit(True).alias("earlier"),
        F.lit(None).cast("bigint").alias("hour_ms"),
    )  # fmt: skip
    return seen.unionByName(earlier)


def chunk_masks(seen: DataFrame) -> DataFrame:
    """One aggregation of `seen_ids` serving both de-duplication and the ranges to store: per
    writer and chunk of `ranges.CHUNK` sequences of the rows no stored range holds, `n` rows,
    the OR and XOR of their sequences' bits (`repeats`), `run_or`, the OR of the run's own rows
    alone, `old_or`, of the earlier counted ids alone, `run_n` and `hour_ms`, the count and the
    newest hour of the run's rows; rows without a writer make one row (writer and chunk null).
    Small (a row per 64 sequences): persist it."""
    seq, earlier = F.col("seq"), F.col("earlier")
    bit = ranges.bit_of(seq)
    counted = F.col("writer").isNull() | ~F.col("old") | earlier
    return (
        seen.where(counted)
        .groupBy("writer", ranges.chunk_of(seq).alias("chunk"))
        .agg(
            F.count("*").alias("n"),
            F.bit_or(bit).alias("ored"),
            F.bit_xor(bit).alias("xored"),
            F.bit_or(F.when(~earlier, bit)).alias("run_or"),
            F.bit_or(F.when(earlier, bit)).alias("old_or"),
            F.count(F.when(~earlier, 1)).alias("run_n"),
            F.max(F.when(~earlier, F.col("hour_ms"))).alias("hour_ms"),
        )
    )


def run_masks(masks: DataFrame) -> DataFrame:
    """`chunk_masks` as `ranges.split` takes them (writer, chunk, mask, hour_ms, n): the bits of
    the run's sequences not counted before (its duplicates share their bits), so the run's
    unique rows need no aggregation of their own; the unshaped row keeps its count."""
    old = F.coalesce(F.col("old_or"), F.lit(0).cast("bigint"))
    mask = F.col("run_or").bitwiseAND(F.bitwise_not(old))
    return (
        masks.where(F.col("run_n") > 0)
        .select("writer", "chunk", mask.alias("mask"), "hour_ms", F.col("run_n").alias("n"))
        .where(F.col("writer").isNull() | (F.col("mask") != 0))
    )


def repeats(
    valid: DataFrame,
    counted: DataFrame | None,
    stored: DataFrame | None = None,
    masks: DataFrame | None = None,
) -> DataFrame:
    """The ids among `valid` rows to thin out: each id seen more than once in the run, already
    in `counted` or, for a traffic id (`ranges.keyed` columns), in a `stored` sequence range of
    its writer, with `keep`, the position of the one copy to count (null: none, it was counted
    before), and `dropped`, how many of its valid rows are left out. Small: persist it.

    Only suspects are shuffled by id (`_suspects`): rows without a writer, rows a stored range
    holds, and traffic rows whose sequence may occur twice among the run's rows and `counted`'s
    ids, found from `masks` (`chunk_masks` of the same rows; computed here when not given); the
    run's other rows are known to be unique without moving them."""
    position_type = "decimal(29,0)"
    seen = seen_ids(valid, counted, stored)
    masks = masks if masks is not None else chunk_masks(seen)
    at = F.when(~F.col("earlier"), _position()).cast(position_type)
    suspects = _suspects(seen, masks).select("id", at.alias("at"), "old")
    grouped = suspects.groupBy("id").agg(
        F.count("*").alias("n"),
        F.count("at").alias("copies"),  # the run's own (an earlier run's have no position)
        F.max("old").alias("old"),
        F.min("at").alias("first"),
    )
    keep = F.when(~F.col("old"), F.col("first"))
    dropped = F.col("copies") - F.when(F.col("old"), 0).otherwise(1)
    return grouped.where((F.col("n") > 1) | F.col("old")).select(
        "id", keep.alias("keep"), F.lit(True).alias("rep"), dropped.alias("dropped")
    )


def _suspects(seen: DataFrame, masks: DataFrame) -> DataFrame:
    """The rows of `seen` (the run's, and `earlier` counted ids) whose id may occur twice or was
    counted before. Per writer and chunk of the traffic rows not in a stored range (`masks`):
    `n` rows, the OR and the XOR of their sequences' bits. A chunk with `n` = popcount(OR) has
    no sequence twice; in another, OR & ~XOR are the sequences seen an even number of times, and
    when `n` - popcount(OR) equals their popcount every sequence occurs once or twice, so those
    bits are exactly the repeated ones; otherwise every row of the chunk is a suspect."""
    seq = F.col("seq")
    extra = F.col("n") - F.bit_count("ored")
    twice = F.col("ored").bitwiseAND(F.bitwise_not("xored"))
    dirty = masks.where(F.col("writer").isNotNull() & (extra > 0)).select(
        F.col("writer").alias("d_writer"),
        F.col("chunk").alias("d_chunk"),
        F.when(extra == F.bit_count(twice), twice).otherwise(F.lit(-1)).alias("suspect"),
    )
    on = (F.col("writer") == F.col("d_writer")) & (ranges.chunk_of(seq) == F.col("d_chunk"))
    marked = seen.join(F.broadcast(dirty), on, "left")
    repeated = F.col("suspect").bitwiseAND(ranges.bit_of(seq)) != 0
    suspect = F.col("writer").isNull() | F.col("old") | F.coalesce(repeated, F.lit(False))
    return marked.where(suspect)


def dropped(repeated: DataFrame) -> int:
    """How many valid rows `unique` leaves out (copies of an id, ids counted before): read off
    the small `repeats` frame, so counting the run's records needs no pass over the rows."""
    first = repeated.agg(F.sum("dropped")).first()
    return int(first[0] or 0) if first is not None else 0


def unique(valid: DataFrame, repeated: DataFrame) -> DataFrame:
    """`valid` rows one per record id, without ids counted before: of a repeated id only the copy
    at its `keep` position stays (a join with the small `repeats` frame, which Spark broadcasts
    while it is small, so the rows themselves are not shuffled)."""
    joined = valid.join(repeated, "id", "left")
    stays = F.col("rep").isNull() | F.coalesce(F.col("keep") == _position(), F.lit(False))
    return joined.where(stays).drop("keep", "rep", "dropped")


def _position() -> Column:
    """A record's place in the topic as one orderable number (partition, then offset), so the
    copy to keep is a plain `min` of a hash aggregation."""
    offsets = F.lit(Decimal(10**19)).cast("decimal(20,0)")  # above any offset (a BIGINT)
    partition = F.col("kafka_partition").cast("decimal(29,0)") * offsets
    return (partition + F.col("kafka_offset").cast("decimal(20,0)")).cast("decimal(29,0)")


SAMPLE_KEYS = ("partition", "at_ms", "bytes")  # a storage sample's own fields (null: traffic)


def grouped_sums(records: DataFrame) -> DataFrame:
    """One aggregation of the run's unique rows serving both kinds: per kind, tenant, principal,
    client id, topic (`topic_key`, "" for none), hour and, for storage samples, partition,
    `at_ms` and `bytes` (so each distinct sample stays a row), the traffic measures' sums and
    `records`, the rows summed. Small next to the rows (a row per key, and per sample): persist
    it, then `traffic_sums` and `storage_sums` read it, not the rows."""
    return (
        records.withColumn("topic_key", F.coalesce(F.col("topic"), F.lit("")))
        .groupBy("kind", "tenant", "principal", "client_id", "topic_key", "hour_ms", *SAMPLE_KEYS)
        .agg(*(F.sum(m).alias(m) for m in TRAFFIC_MEASURES), F.count("*").alias("records"))
    )


def traffic_sums(grouped: DataFrame) -> dict[RollupKey, Sums]:
    """The traffic rollups of `grouped_sums`."""
    traffic = (
        grouped.where(F.col("kind") == "traffic")
        .groupBy("tenant", "principal", "client_id", "topic_key", "hour_ms")
        .agg(*(F.sum(m).alias(m) for m in TRAFFIC_MEASURES), F.sum("records").alias("records"))
    )
    out: dict[RollupKey, Sums] = {}
    for row in traffic.collect():
        key = RollupKey(row.tenant, row.principal, row.client_id, row.topic_key, row.hour_ms)
        sums = Sums(records=int(row.records))
        for measure in TRAFFIC_MEASURES:
            setattr(sums, measure, int(row[measure]))
        out[key] = sums
    return out


def storage_sums(
    spark: SparkSession,
    grouped: DataFrame,
    pending: list[PendingSample],
    until_ms: int,
    cap_ms: int,
) -> tuple[dict[RollupKey, Sums], list[PendingSample], int]:
    """(sums per tenant/topic/hour, the new pending sample per partition, late samples) of the
    storage samples in `grouped_sums`: a sample repeated with the same time and size (`records`
    above one) holds its interval once, as a second copy at the same time would hold none."""
    keys = ["tenant", "topic", "partition"]
    carried = spark.createDataFrame(
        [(p.tenant, p.topic, p.partition, p.at_ms, p.bytes, p.settled) for p in pending],
        PENDING_SCHEMA,
    )
    samples = grouped.where(F.col("kind") == "storage").select(
        "tenant", F.col("topic_key").alias("topic"), "partition", "at_ms", "bytes", "records"
    )
    joined = samples.join(carried, keys, "left")
    is_late = F.col("p_at").isNotNull() & (F.col("at_ms") <= F.col("p_at"))
    late = joined.where(is_late).agg(F.sum("records")).first()
    fresh = joined.where(~is_late).select(*keys, "at_ms", "bytes")
    unsettled = carried.where(~F.col("p_settled")).select(
        *keys, F.col("p_at").alias("at_ms"), F.col("p_bytes").alias("bytes")
    )
    intervals = _held(fresh.unionByName(unsettled), until_ms, cap_ms).persist()
    try:
        newest = [
            PendingSample(r.tenant, r.topic, r.partition, r.at_ms, r.bytes, r.held > 0)
            for r in intervals.where(F.col("following").isNull()).toLocalIterator()
        ]
        sums = _hourly(intervals.where(F.col("held") > 0))
    finally:
        intervals.unpersist()
    return sums, newest, int(late[0] or 0) if late is not None else 0


def _held(samples: DataFrame, until_ms: int, cap_ms: int) -> DataFrame:
    order = Window.partitionBy("tenant", "topic", "partition").orderBy("at_ms")
    following = F.lead("at_ms").over(order)
    cap = F.lit(cap_ms).cast("bigint")
    held = (
        F.when(F.col("following").isNotNull(), F.least(F.col("following") - F.col("at_ms"), cap))
        .when(F.lit(until_ms) - F.col("at_ms") >= cap, cap)
        .otherwise(F.lit(0).cast("bigint"))
    )
    return samples.withColumn("following", following).withColumn("held", held)


def _hourly(intervals: DataFrame) -> dict[RollupKey, Sums]:
    hour = F.lit(HOUR_MS).cast("bigint")
    end = F.col("at_ms") + F.col("held")
    pieces = intervals.withColumn(
        "hour_ms",
        F.explode(
            F.sequence(F.col("at_ms") - F.col("at_ms") % hour, (end - 1) - (end - 1) % hour, hour)
        ),
    ).withColumn(
        "piece",
        F.least(end, F.col("hour_ms") + hour) - F.greatest(F.col("at_ms"), F.col("hour_ms")),
    )
    byte_ms = F.col("bytes").cast("decimal(20,0)") * F.col("piece").cast("decimal(17,0)")
    grouped = pieces.groupBy("tenant", "topic", "hour_ms").agg(
        F.sum(byte_ms.cast("decimal(38,0)")).alias("byte_ms"), F.sum("piece").alias("partition_ms")
    )
    out: dict[RollupKey, Sums] = {}
    for row in grouped.toLocalIterator():
        key = RollupKey(row.tenant, "", "", row.topic, row.hour_ms)
        out[key] = Sums(partition_ms=int(row.partition_ms), storage_byte_ms=Decimal(row.byte_ms))
    return out


def fast_census(
    stage: DataFrame, rows: DataFrame
) -> tuple[DataFrame, tuple[int, dict[str, int], list[int]]]:
    """(the run's rows, `census` of them) from one pass over `checked`'s stage (the pass that
    builds its cache): when the fast check accepted every record, the rows are the stage's as
    they are, without `both_paths`' union with the exact rules, so no later step plans, compiles
    or evaluates the exact path (its large expressions were in every action's plan); otherwise
    `rows` and `census(rows)`, a second pass, over the cache."""
    counts = stage.groupBy("_fast", "hour_ms").count().collect()
    if any(not row._fast for row in counts):
        return rows, census(rows)
    fast = stage.where(F.col("_fast")).select(*rows.columns)
    hours = sorted({int(row.hour_ms) for row in counts})
    return fast, (sum(int(row["count"]) for row in counts), {}, hours)


def census(rows: DataFrame) -> tuple[int, dict[str, int], list[int]]:
    """(valid rows, rejected rows by reason, the UTC hours of the valid rows) in one pass."""
    valid, rejected, hours = 0, dict[str, int](), set[int]()
    for row in rows.groupBy("rejected", "hour_ms").count().collect():
        if row.rejected is None:
            valid += int(row["count"])
            hours.add(int(row.hour_ms))
        else:
            rejected[row.rejected] = rejected.get(row.rejected, 0) + int(row["count"])
    return valid, rejected, sorted(hours)
