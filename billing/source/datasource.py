"""`pier-usage`: a PySpark Python data source reading `__usage` (README.md, "Billing"; docs/design.md, "A tenant's request").

Owns: `UsageDataSource` (the registered name, the schema, the readers), `UsageBatchReader` and
`UsageStreamReader`. Offsets are resolved once on the driver (`partitions()` for a batch read,
`latestOffset()` for a micro-batch); each input partition is one offset range of one Kafka
partition (ranges longer than `maxRecordsPerPartition` are split), and executors read their
ranges from the brokers directly (`billing.source.kafka.read_range`). The stream's offsets are
`{"<partition>": next offset}`. Reader objects are pickled to executors: they hold only options
and plain values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from billing.source import kafka
from billing.source.offsets import LATEST, OffsetSpec, split_range
from billing.source.options import SourceOptions, parse_options
from billing.source.rows import SCHEMA, Row, arrow_batches, to_row
from brokers.client import Cluster

NAME = "pier-usage"


class OffsetRange(InputPartition):
    """Offsets [start, end) of one Kafka partition."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition, self.start, self.end = partition, start, end


class UsageDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> UsageBatchReader:
        return UsageBatchReader(parse_options(self.options))

    def streamReader(self, schema: StructType) -> UsageStreamReader:
        return UsageStreamReader(parse_options(self.options))


def resolve_offsets(options: SourceOptions, *specs: OffsetSpec) -> list[dict[int, int]]:
    """Each spec resolved to concrete offsets of every partition of the topic (driver side)."""

    async def resolve_all() -> list[dict[int, int]]:
        async with Cluster(options.bootstrap) as cluster:
            partitions = await kafka.partitions_of(cluster, options.topic)
            return [await kafka.resolve(cluster, options.topic, s, partitions) for s in specs]

    return asyncio.run(resolve_all())


def plan_ranges(start: dict[int, int], end: dict[int, int], max_records: int) -> list[OffsetRange]:
    """The input partitions between two offset maps; a partition missing from `start` starts at
    its end (nothing to read), one whose range is empty gives none."""
    ranges = []
    for partition in sorted(end):
        low = start.get(partition, end[partition])
        for piece_start, piece_end in split_range(low, end[partition], max_records):
            ranges.append(OffsetRange(partition, piece_start, piece_end))
    return ranges


def read_output(options: SourceOptions, partition: InputPartition) -> Iterator[Any]:
    rows = read_partition(options, partition)
    return arrow_batches(rows) if options.arrow else rows


def read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[Row]:
    if not isinstance(partition, OffsetRange):
        return  # Spark reads one placeholder partition when a plan has none
    records = kafka.read_range(
        options.bootstrap, options.topic, partition.partition, partition.start, partition.end
    )
    for offset, key, value in records:
        yield to_row(partition.partition, offset, key, value)


class UsageBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        start, end = resolve_offsets(self.options, self.options.starting, self.options.ending)
        return plan_ranges(start, end, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_output(self.options, partition)


class UsageStreamReader(DataSourceStreamReader):
    """Micro-batches of `__usage`: each reads from the previous end to the latest offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def initialOffset(self) -> dict[str, int]:
        (start,) = resolve_offsets(self.options, self.options.starting)
        return {str(p): o for p, o in start.items()}

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, int]:
        (latest,) = resolve_offsets(self.options, OffsetSpec(LATEST))
        return {str(p): o for p, o in latest.items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = {int(p): int(o) for p, o in start.items()}
        until = {int(p): int(o) for p, o in end.items()}
        return plan_ranges(begin, until, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_output(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the stream's checkpoint holds the offsets (Kafka keeps the data)."""
