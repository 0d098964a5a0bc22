"""A generator of known usage for billing tests: records in exactly the documented `__usage`
format (through `tenancy.usage.encode`), produced with the project's client, plus totals computed
independently of billing's code (plain Python over the generated records)."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from brokers.client import Cluster, TopicPartition
from brokers.client.producer import produce
from brokers.client.topics import NewTopic, create_topics
from brokers.records.builder import build_batch
from tenancy.usage import (
    HOUR_MS,
    USAGE_TOPIC,
    StorageSample,
    TrafficRecord,
    UsageRecord,
    encode,
    partition_for,
    storage_id,
    traffic_id,
)

PARTITIONS = 3
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
KafkaRecord = tuple[bytes | None, bytes | None]


@dataclass
class Written:
    records: list[UsageRecord]  # as written, duplicates included
    malformed: int


def create_usage_topic(bootstrap: str, partitions: int = PARTITIONS) -> None:
    async def go() -> None:
        async with Cluster(bootstrap) as cluster:
            # records are stamped T0 (months ago): without this the broker's retention deletes
            # them minutes in, and a stream's replay of a killed micro-batch cannot read them
            topic = NewTopic(USAGE_TOPIC, partitions, 1, {"retention.ms": "-1"})
            result = await create_topics(cluster, [topic])
            assert result[USAGE_TOPIC] is None, result

    asyncio.run(go())


def write(
    bootstrap: str, items: Sequence[UsageRecord | KafkaRecord], partitions: int = PARTITIONS
) -> None:
    """Produce `items` (records, or raw (key, value) pairs for malformed ones → partition 0)."""
    by_partition: dict[int, list[KafkaRecord]] = defaultdict(list)
    for item in items:
        if isinstance(item, TrafficRecord | StorageSample):
            by_partition[partition_for(item.tenant, partitions)].append(encode(item))
        else:
            by_partition[0].append(item)

    async def go() -> None:
        async with Cluster(bootstrap) as cluster:
            for partition, pairs in by_partition.items():
                for start in range(0, len(pairs), 500):
                    batch = build_batch(pairs[start : start + 500], base_timestamp=T0)
                    await produce(cluster, TopicPartition(USAGE_TOPIC, partition), batch)

    asyncio.run(go())


def traffic(
    rng: random.Random,
    tenants: Sequence[str],
    count: int,
    *,
    gateway: str = "gw1",
    first_seq: int = 0,
    hours: int = 3,
    base_ms: int = T0,
) -> list[TrafficRecord]:
    out = []
    for i in range(count):
        tenant = rng.choice(tenants)
        hour = base_ms + rng.randrange(hours) * HOUR_MS
        start = hour + rng.randrange(HOUR_MS - 10_000)
        out.append(
            TrafficRecord(
                id=traffic_id(gateway, "inc1", first_seq + i),
                tenant=tenant,
                principal=rng.choice(["sa-1", "sa-2"]),
                client_id=rng.choice(["", "app"]),
                topic=rng.choice([None, "orders", "events"]),
                start_ms=start,
                end_ms=start + rng.randrange(10_000),
                bytes_in=rng.randrange(10**9),
                bytes_out=rng.randrange(10**9),
                requests=rng.randrange(1000),
                throttle_ms=rng.randrange(100),
                connection_ms=rng.randrange(10_000),
            )
        )
    return out


def storage(
    tenant: str, topic: str, partition: int, samples: Iterable[tuple[int, int]]
) -> list[StorageSample]:
    return [
        StorageSample(
            storage_id("s1", tenant, topic, partition, at), tenant, topic, partition, size, at
        )
        for at, size in samples
    ]


Key = tuple[str, str, str, str, int]  # tenant, principal, client_id, topic ("" = none), hour_ms


def traffic_totals(records: Iterable[UsageRecord]) -> dict[Key, dict[str, int]]:
    """Sums per (tenant, principal, client_id, topic, hour) over records, each id once."""
    seen: set[str] = set()
    totals: dict[Key, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in records:
        if not isinstance(r, TrafficRecord) or r.id in seen:
            continue
        seen.add(r.id)
        key = (r.tenant, r.principal, r.client_id, r.topic or "", r.start_ms - r.start_ms % HOUR_MS)
        for name in ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms"):
            totals[key][name] += getattr(r, name)
        totals[key]["records"] += 1
    return {k: dict(v) for k, v in totals.items()}


def storage_totals(
    samples: Iterable[UsageRecord], interval_ms: int, until_ms: int
) -> dict[Key, dict[str, int]]:
    """Byte-ms and partition-ms per (tenant, "", "", topic, hour): each sample holds until the next
    of its partition, at most 2 × interval; the last one only once `until_ms` is past its cap."""
    by_partition: dict[tuple[str, str, int], dict[int, int]] = defaultdict(dict)
    for s in samples:
        if isinstance(s, StorageSample):
            by_partition[(s.tenant, s.topic, s.partition)][s.at_ms] = s.bytes
    totals: dict[Key, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cap = 2 * interval_ms
    for (tenant, topic, _), points in by_partition.items():
        times = sorted(points)
        for i, at in enumerate(times):
            if i + 1 < len(times):
                held = min(times[i + 1] - at, cap)
            elif until_ms - at >= cap:
                held = cap
            else:
                continue
            ms = at
            while ms < at + held:
                hour = ms - ms % HOUR_MS
                piece = min(at + held, hour + HOUR_MS) - ms
                totals[(tenant, "", "", topic, hour)]["storage_byte_ms"] += points[at] * piece
                totals[(tenant, "", "", topic, hour)]["partition_ms"] += piece
                ms += piece
    return {k: dict(v) for k, v in totals.items()}
