"""Resolving `__usage` offsets with the project's client (`brokers.client`), on the driver.

Owns: listing a topic's partitions and resolving offset specs (earliest, latest, a timestamp) to
concrete offsets, once per run: Spark's Kafka source is then given explicit offsets to read.
Coroutines; call from one event loop.
"""

from __future__ import annotations

from billing.source.offsets import EARLIEST, LATEST, OffsetSpec
from brokers.client import Cluster, TopicPartition, UnknownTopicError
from brokers.client.offsets import list_offsets


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
