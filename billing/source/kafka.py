"""Reading `__usage` over the Kafka protocol with the project's client (`brokers.client`).

Owns: listing a topic's partitions, resolving offset specs (earliest, latest, a timestamp) to
concrete offsets, and `read_range`, which yields the (offset, key, value) of every record in
[start, end) of one partition. `read_range` is synchronous on purpose: Spark calls a reader's
`read()` on an executor's Python worker thread, so it runs the asyncio client on an event loop of
its own (one per call), opens its own connections to the brokers, and yields between fetches, so
memory stays at one fetch response. Control batches (transaction markers) are skipped; a batch cut
at the end of a fetch response is fetched again from its first offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Final

from billing.source.offsets import EARLIEST, LATEST, OffsetSpec
from brokers.client import Cluster, TopicPartition, UnknownTopicError
from brokers.client.consumer import FetchLimits, fetch
from brokers.client.errors import ClientError
from brokers.client.offsets import list_offsets
from brokers.records.batch import HEADER_SIZE, parse_header
from brokers.records.builder import read_batch

KafkaRecord = tuple[int, bytes | None, bytes | None]  # offset, key, value
_FETCH: Final = FetchLimits(max_wait_s=0.2, max_bytes=8 * 2**20, partition_max_bytes=4 * 2**20)
_MAX_EMPTY_FETCHES: Final = 50


class UsageReadError(ClientError):
    """The range cannot be read as asked (e.g. it ends past the partition's high watermark)."""


async def partitions_of(cluster: Cluster, topic: str) -> list[int]:
    metadata = await cluster.metadata(refresh=True)
    info = metadata.topics.get(topic)
    if info is None or not info.partitions:
        raise UnknownTopicError(f"topic {topic!r} does not exist")
    return sorted(info.partitions)


async def resolve(
    cluster: Cluster, topic: str, spec: OffsetSpec, partitions: list[int]
) -> dict[int, int]:
    """Concrete offsets for `spec` (EARLIEST/LATEST looked up; explicit offsets kept)."""
    wanted = {p: spec.for_partition(p) for p in partitions}
    symbolic = {TopicPartition(topic, p): s for p, s in wanted.items() if s in (EARLIEST, LATEST)}
    listed = await list_offsets(cluster, symbolic) if symbolic else {}
    return {p: listed[TopicPartition(topic, p)].offset if s < 0 else s for p, s in wanted.items()}


async def offsets_at(
    cluster: Cluster, topic: str, partitions: list[int], ts_ms: int
) -> dict[int, int]:
    """Per partition, the first offset whose timestamp is >= `ts_ms` (the end if there is none)."""
    tps = {TopicPartition(topic, p): ts_ms for p in partitions}
    at = await list_offsets(cluster, tps)
    latest = await list_offsets(cluster, dict.fromkeys(tps, LATEST))
    return {tp.partition: at[tp].offset if at[tp].offset >= 0 else latest[tp].offset for tp in tps}


def read_range(
    bootstrap: str, topic: str, partition: int, start: int, end: int
) -> Iterator[KafkaRecord]:
    """Every record at offsets [start, end) of `topic`/`partition`, in offset order."""
    loop = asyncio.new_event_loop()
    cluster = Cluster(bootstrap)
    try:
        position = start
        empty = 0
        while position < end:
            tp = TopicPartition(topic, partition)
            fetched = loop.run_until_complete(fetch(cluster, {tp: position}, _FETCH))[tp]
            records, following = records_in(fetched.records, position, end)
            if following == position:
                if fetched.high_watermark <= position or empty >= _MAX_EMPTY_FETCHES:
                    raise UsageReadError(
                        f"{tp}: no records at offset {position} (high watermark "
                        f"{fetched.high_watermark}), expected up to {end}"
                    )
                empty += 1
                continue
            empty = 0
            yield from records
            position = following
    finally:
        loop.run_until_complete(cluster.close())
        loop.close()


def records_in(buf: bytes, position: int, end: int) -> tuple[list[KafkaRecord], int]:
    """Records of the complete batches in a fetch answer within [position, end), and the offset to
    fetch next (`position` when the answer held no complete batch past it)."""
    view = memoryview(buf)
    records: list[KafkaRecord] = []
    following, pos = position, 0
    while pos + HEADER_SIZE <= len(view):
        header = parse_header(view, pos)
        if pos + header.size > len(view):
            break  # a batch cut at the response's size limit: fetched again next time
        if header.next_offset > position and not header.is_control:
            _, batch_records = read_batch(view, pos)
            for record in batch_records:
                offset = header.base_offset + record.offset_delta
                if position <= offset < end:
                    records.append((offset, record.key, record.value))
        following = max(following, min(header.next_offset, end))
        pos += header.size
    return records, following
