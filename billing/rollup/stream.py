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
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from billing.rollup.job import RunOptions, RunReport, open_ledger, roll_up_records
from billing.source import kafka
from billing.source.offsets import EARLIEST
from brokers.client import Cluster, UnknownTopicError
from tenancy.database import Database

Reporter = Callable[[RunReport], None]
TOPIC_WAIT_S = 2.0
STOP_WAIT_S = 30.0


def checkpoint_dir(options: RunOptions) -> str:
    return str(options.state_dir / options.topic / "stream-checkpoint")


def run_stream(
    spark: SparkSession,
    db: Database,
    options: RunOptions,
    trigger_s: float,
    stop: threading.Event,
    report: Reporter,
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
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", options.bootstrap)
        .option("assign", json.dumps({options.topic: partitions}))
        .option("startingOffsets", json.dumps({options.topic: starting}))
        .option("failOnDataLoss", "true")
        .load()
    )

    def micro_batch(batch: DataFrame, _batch_id: int) -> None:
        report(_roll_up_batch(spark, db, options, batch))

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


def _roll_up_batch(
    spark: SparkSession, db: Database, options: RunOptions, batch: DataFrame
) -> RunReport:
    cursor, store = open_ledger(db, options)
    start = dict(cursor.offsets) if cursor else {}
    fresh = batch
    if start:  # a batch replayed after a crash: what the ledger counted is skipped
        floor = F.create_map(*(F.lit(x) for p, o in start.items() for x in (p, o)))
        fresh = batch.where(
            F.coalesce(F.col("offset") >= F.element_at(floor, F.col("partition")), F.lit(True))
        )
    now_ms = options.until_ms if options.until_ms is not None else int(time.time() * 1000)
    return roll_up_records(spark, db, options, fresh, cursor, store, start, None, now_ms)


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
