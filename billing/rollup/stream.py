"""`pier billing stream`: the rollup as a Structured Streaming query over `__usage`.

Each micro-batch (one per trigger interval that has new records) is rolled up and committed exactly
as a batch run's range is (`job.roll_up_records`): checked in the JVM, de-duplicated against the
counted ids, rollups and the next offsets in one fenced transaction. Spark's checkpoint
(`<state>/<topic>/stream-checkpoint`) says where the query is; the ledger says what was counted.
A micro-batch Spark runs again after a crash (its checkpoint behind the ledger) skips the records
below the ledger's offsets, so nothing counts twice; a new checkpoint starts at the ledger's
offsets (earliest for partitions it lacks). `pier billing run` stays for backfills and reruns, over
the same code: a run and the stream committing at once make one of them fail its fence (the
stream then stops with an error; start it again: `infra/up` does, with a backoff). A stream
started before the topic exists waits for it. Driver side; `run_stream` blocks until `stop`.

A micro-batch of plain traffic and storage samples (what gateways write) is rolled up by one
aggregation of its records (`billing.rollup.one_pass`); any other (a malformed or non-canonical
record, a repeated or replayed traffic id, ...) the exact way, as a batch run's range. Its end
offsets come from Spark's write-ahead offset log (`batch_end`), not from a job over its records;
it reads at most `MAX_BATCH_RECORDS` offsets (a backlog drains in bounded batches); its Kafka
partitions are coalesced to the default parallelism; the stream's session runs without adaptive
execution (each adaptive query stage was one more job and re-plan); and on the exact path the
checked rows are materialized once (`roll_up_records(cut_lineage=True)`) so the later steps plan
over a leaf.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from billing.rollup.job import RunOptions, RunReport, open_ledger, roll_up_records
from billing.rollup.one_pass import roll_up_one_pass
from billing.source import kafka
from billing.source.offsets import EARLIEST
from brokers.client import Cluster, UnknownTopicError
from tenancy.database import Database

Reporter = Callable[[RunReport], None]
TOPIC_WAIT_S = 2.0
STOP_WAIT_S = 30.0
MAX_BATCH_RECORDS = 1_000_000  # a backlog is drained in micro-batches of at most this many
MICRO_BATCH_CONF = {"spark.sql.adaptive.enabled": "false"}


def checkpoint_dir(options: RunOptions) -> str:
    return str(options.state_dir / options.topic / "stream-checkpoint")


def run_stream(
    spark: SparkSession,
    db: Database,
    options: RunOptions,
    trigger_s: float,
    stop: threading.Event,
    report: Reporter,
    max_records: int = MAX_BATCH_RECORDS,
) -> None:
    """Run the query until `stop` is set (then it ends after the micro-batch under way, waiting
    at most `STOP_WAIT_S`) or it fails (the error is raised)."""
    partitions = _wait_for_partitions(options, stop)
    if partitions is None:
        return
    cursor, _ = open_ledger(db, options)
    known = cursor.offsets if cursor else {}
    starting = {str(p): known.get(p, EARLIEST) for p in partitions}
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    for key, value in MICRO_BATCH_CONF.items():
        spark.conf.set(key, value)
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", options.bootstrap)
        .option("assign", json.dumps({options.topic: partitions}))
        .option("startingOffsets", json.dumps({options.topic: starting}))
        .option("failOnDataLoss", "true")
        .option("maxOffsetsPerTrigger", str(max_records))
        .load()
    )

    def micro_batch(batch: DataFrame, batch_id: int) -> None:
        end = batch_end(checkpoint_dir(options), batch_id, options.topic)
        report(_roll_up_batch(spark, db, options, batch, end))

    query = (
        records.writeStream.foreachBatch(micro_batch)
        .trigger(processingTime=f"{trigger_s} seconds")
        .option("checkpointLocation", checkpoint_dir(options))
        .queryName("pier-billing")
        .start()
    )
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(1)
    finally:
        _stop_between_batches(query)
    error = query.exception()
    if error is not None:
        raise RuntimeError(str(error).splitlines()[0] if str(error) else "stream failed")


def _stop_between_batches(query: Any) -> None:
    """Stop the query once the micro-batch under way (if any) is committed, or after
    `STOP_WAIT_S`: interrupting a batch is safe (its commit is atomic and fenced) but makes Spark
    log the interruption at length."""
    deadline = time.monotonic() + STOP_WAIT_S
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()


def batch_end(checkpoint: str, batch_id: int, topic: str) -> dict[int, int] | None:
    """The offsets micro-batch `batch_id` reads up to, from Spark's write-ahead offset log
    (`<checkpoint>/offsets/<id>`, written before the batch runs): what the batch's commit stores
    as the next offsets, known without a Spark job over its records. None when the log cannot be
    read as expected (then the batch finds them from its records)."""
    try:
        lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text("utf-8").splitlines()
    except OSError:
        return None
    for line in lines[1:]:
        try:
            found = _topic_offsets(json.loads(line), topic)
        except ValueError:
            continue
        if found is not None:
            return found
    return None


def _topic_offsets(document: Any, topic: str) -> dict[int, int] | None:
    """`{partition: offset}` of `topic` in a Kafka source offset (`{topic: {"0": 12, ...}}`),
    looked for at any depth of a log line's JSON."""
    if not isinstance(document, dict):
        return None
    offsets = document.get(topic)
    if isinstance(offsets, dict) and all(isinstance(o, int) for o in offsets.values()):
        return {int(p): int(o) for p, o in offsets.items()}
    for value in document.values():
        found = _topic_offsets(value, topic)
        if found is not None:
            return found
    return None


def _roll_up_batch(
    spark: SparkSession,
    db: Database,
    options: RunOptions,
    batch: DataFrame,
    logged_end: dict[int, int] | None,
) -> RunReport:
    cursor, store = open_ledger(db, options)
    start = dict(cursor.offsets) if cursor else {}
    fresh = batch
    if start:  # a batch replayed after a crash: what the ledger counted is skipped
        floor = F.create_map(*(F.lit(x) for p, o in start.items() for x in (p, o)))
        fresh = batch.where(
            F.coalesce(F.col("offset") >= F.element_at(floor, F.col("partition")), F.lit(True))
        )
    end = None
    if logged_end is not None:  # a batch replayed behind the ledger commits no offset back
        end = {p: max(o, start.get(p, 0)) for p, o in logged_end.items()}
        end.update({p: o for p, o in start.items() if p not in end})
    now_ms = options.until_ms if options.until_ms is not None else int(time.time() * 1000)
    fresh = fresh.coalesce(max(1, spark.sparkContext.defaultParallelism))
    if end is not None:  # plain traffic: one Spark job (`one_pass`); anything else: the exact path
        done = roll_up_one_pass(spark, db, options, fresh, cursor, store, start, end, now_ms)
        if done is not None:
            return done
    return roll_up_records(
        spark, db, options, fresh, cursor, store, start, end, now_ms, cut_lineage=True
    )


def _wait_for_partitions(options: RunOptions, stop: threading.Event) -> list[int] | None:
    """The topic's partitions; while it does not exist yet (a fresh stack whose gateway has not
    flushed usage), ask again every `TOPIC_WAIT_S` until `stop` (then None)."""
    said = False
    while not stop.is_set():
        try:
            return asyncio.run(_partitions(options))
        except UnknownTopicError:
            if not said:
                print(
                    f"pier: waiting for topic {options.topic} to exist", file=sys.stderr, flush=True
                )
                said = True
            stop.wait(TOPIC_WAIT_S)
    return None


async def _partitions(options: RunOptions) -> list[int]:
    async with Cluster(options.bootstrap) as cluster:
        return await kafka.partitions_of(cluster, options.topic)


def describe_batch(report: RunReport) -> dict[str, Any]:
    from billing.rollup.job import describe

    return describe(report)
