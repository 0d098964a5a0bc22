"""The `pier-usage` data source against a real broker: typed rows, offset options, split ranges,
malformed records as rejected rows, and the streaming reader."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from infra.stack import BrokerProcess
from tenancy.usage import encode
from tests.integration.billing.usage_gen import storage, traffic, write

pytestmark = pytest.mark.integration


def _load(spark: Any, bootstrap: str, **options: str) -> list[Any]:
    reader = spark.read.format("pier-usage").option("bootstrap", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return sorted(reader.load().collect(), key=lambda r: (r.kafka_partition, r.kafka_offset))


def test_rows_are_typed_and_malformed_records_are_rejected_rows(
    spark: Any, usage_broker: BrokerProcess
) -> None:
    rng = random.Random(1)
    records = [*traffic(rng, ["acme", "globex"], 40), *storage("acme", "orders", 0, [(1000, 5)])]
    write(usage_broker.bootstrap, [*records, (b"bad/1/1", b"{not json"), (None, b'{"v":2}')])
    rows = _load(spark, usage_broker.bootstrap, maxRecordsPerPartition="7")
    assert len(rows) == len(records) + 2
    rejected = [r for r in rows if r.rejected is not None]
    assert [(r.id, r.rejected) for r in rejected] == [
        ("bad/1/1", "value is not UTF-8 JSON: JSONDecodeError"),
        (None, "unknown version 2"),
    ]
    by_id = {r.id: r for r in rows if r.rejected is None}
    for record in records:
        row = by_id[record.id]
        assert row.kind == record.kind and row.tenant == record.tenant
        for name in (
            "principal",
            "client_id",
            "start_ms",
            "bytes_in",
            "connection_ms",
            "bytes",
            "at_ms",
        ):
            assert getattr(row, name) == getattr(record, name, None)
    offsets = {(r.kafka_partition, r.kafka_offset) for r in rows}
    assert len(offsets) == len(rows)  # each record once, split ranges neither overlap nor gap


def test_starting_and_ending_offsets(spark: Any, usage_broker: BrokerProcess) -> None:
    rng = random.Random(2)
    records = traffic(rng, ["acme"], 20)  # one tenant: one partition
    write(usage_broker.bootstrap, records)
    partition = _load(spark, usage_broker.bootstrap)[0].kafka_partition
    window = json.dumps({str(partition): 5})
    end = json.dumps({str(partition): 12})
    rows = _load(spark, usage_broker.bootstrap, startingOffsets=window, endingOffsets=end)
    assert [r.kafka_offset for r in rows] == list(range(5, 12))
    assert [r.id for r in rows] == [r.id for r in records[5:12]]
    assert _load(spark, usage_broker.bootstrap, startingOffsets="latest") == []


def test_stream_reads_each_record_once(
    spark: Any, usage_broker: BrokerProcess, tmp_path: Any
) -> None:
    rng = random.Random(3)
    first, second = traffic(rng, ["acme", "initech"], 15), traffic(rng, ["acme"], 5, first_seq=100)
    write(usage_broker.bootstrap, first)

    def drain(name: str) -> None:
        query = (
            spark.readStream.format("pier-usage")
            .option("bootstrap", usage_broker.bootstrap)
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .queryName(name)
            .start()
        )
        query.awaitTermination(120)

    drain("first")
    write(usage_broker.bootstrap, second)
    drain("second")
    ids = [r.id for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    assert sorted(ids) == sorted(r.id for r in [*first, *second])
    assert encode(first[0])[0] == first[0].id.encode()
