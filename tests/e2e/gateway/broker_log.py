"""What a test reads straight from the broker, bypassing the gateway: a partition's record
batches as stored (their sizes are what metering must count), DescribeLogDirs sizes, and the
usage records of `__usage` decoded with `tenancy.usage.decode` and de-duplicated by id.

Uses the project's own client (`brokers.client`) on a private event loop per call. Blocking;
call from the test's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from brokers.client import Cluster, TopicPartition
from brokers.client.consumer import FetchLimits, fetch
from brokers.client.log_dirs import describe_log_dirs
from brokers.records.batch import HEADER_SIZE, BatchHeader, parse_header
from brokers.records.builder import read_batch
from tenancy.usage import USAGE_TOPIC, UsageRecord, decode

LIMITS = FetchLimits(max_wait_s=0.0, max_bytes=64 << 20, partition_max_bytes=64 << 20)


def _complete_batches(records: bytes) -> list[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch (a fetch may end in a partial one)."""
    batches, pos = [], 0
    while len(records) - pos >= HEADER_SIZE:
        header = parse_header(records, pos)
        if pos + header.size > len(records):
            break
        batches.append((pos, header))
        pos += header.size
    return batches


async def _read(cluster: Cluster, tp: TopicPartition) -> list[tuple[BatchHeader, bytes]]:
    """Every batch of `tp` from offset 0 to its high watermark, as the broker stores it."""
    batches: list[tuple[BatchHeader, bytes]] = []
    offset = 0
    while True:
        part = (await fetch(cluster, {tp: offset}, LIMITS))[tp]
        found = _complete_batches(part.records)
        for pos, header in found:
            if header.next_offset > offset:
                batches.append((header, bytes(part.records[pos : pos + header.size])))
                offset = header.next_offset
        if offset >= part.high_watermark or not found:
            return batches


def batch_bytes(bootstrap: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The bytes of the record batches stored in each partition."""

    async def run() -> dict[TopicPartition, int]:
        async with Cluster(bootstrap) as cluster:
            return {
                tp: sum(header.size for header, _ in await _read(cluster, tp)) for tp in partitions
            }

    return asyncio.run(run())


def log_dir_sizes(bootstrap: str, node_id: int) -> dict[TopicPartition, int]:
    """DescribeLogDirs of the broker: the size of every partition it holds."""

    async def run() -> dict[TopicPartition, int]:
        async with Cluster(bootstrap) as cluster:
            return await describe_log_dirs(cluster, node_id=node_id)

    return asyncio.run(run())


def usage_records(bootstrap: str) -> dict[str, UsageRecord]:
    """Every record of `__usage`, decoded and de-duplicated by id (as billing reads them)."""

    async def run() -> dict[str, UsageRecord]:
        async with Cluster(bootstrap) as cluster:
            metadata = await cluster.metadata(refresh=True)
            topic = metadata.topics.get(USAGE_TOPIC)
            if topic is None:
                return {}
            found: dict[str, UsageRecord] = {}
            for index in sorted(topic.partitions):
                for _header, raw in await _read(cluster, TopicPartition(USAGE_TOPIC, index)):
                    for record in read_batch(raw)[1]:
                        usage = decode(record.key, record.value)
                        found.setdefault(usage.id, usage)
            return found

    return asyncio.run(run())


def batch_headers(bootstrap: str, tp: TopicPartition) -> list[BatchHeader]:
    """The header of every batch stored in `tp` (producer id, sequence, offsets), in order."""

    async def run() -> list[BatchHeader]:
        async with Cluster(bootstrap) as cluster:
            return [header for header, _ in await _read(cluster, tp)]

    return asyncio.run(run())
