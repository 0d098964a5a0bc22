"""UsageWriter and StorageSampler against a real broker: what the meter counted reads back from
`__usage` (decoded by `tenancy.usage.decode`) with the same sums, a flush that failed while the
broker was down is written once after it restarts (no id twice), and storage samples carry the
sizes DescribeLogDirs reports."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from prometheus_client import CollectorRegistry

from brokers.client import ClientConfig, Cluster, TopicPartition
from brokers.client.consumer import fetch
from brokers.client.errors import BrokerConnectionError, BrokerResponseError, NoLeaderError
from brokers.client.log_dirs import describe_log_dirs
from brokers.client.producer import produce
from brokers.client.topics import NewTopic, create_topics
from brokers.records.batch import iter_headers
from brokers.records.builder import read_batch, simple_batch
from gateway.metering import StorageSampler, UsageKey, UsageMeter, UsageWriter
from infra.stack import BrokerProcess
from tenancy.usage import USAGE_TOPIC, StorageSample, TrafficRecord, UsageRecord, decode
from tests.polling import wait_until_async

pytestmark = pytest.mark.integration
T = TypeVar("T")
DEADLINE_S = 30.0
PARTITIONS = 3
KEYS = [UsageKey("acme", "sa-1", "app", "orders"), UsageKey("globex", "sa-2", "", None)]


def run(broker: BrokerProcess, body: Callable[[Cluster], Awaitable[T]]) -> T:
    async def main() -> T:
        config = ClientConfig(retries=2, retry_backoff_s=0.05, retry_backoff_max_s=0.2)
        async with Cluster(broker.bootstrap, config) as cluster:
            return await body(cluster)

    return asyncio.run(main())


def writer_for(cluster: Cluster, meter: UsageMeter, registry: CollectorRegistry) -> UsageWriter:
    return UsageWriter(cluster, meter, registry=registry, interval_s=0.1, partitions=PARTITIONS)


async def read_usage(cluster: Cluster) -> list[UsageRecord]:
    wanted = {TopicPartition(USAGE_TOPIC, p): 0 for p in range(PARTITIONS)}
    records: list[UsageRecord] = []
    for fetched in (await fetch(cluster, wanted)).values():
        for position, _ in iter_headers(fetched.records):
            _, batch = read_batch(fetched.records, position)
            records += [decode(r.key, r.value) for r in batch]
    return records


def traffic_sums(records: list[UsageRecord]) -> dict[str, int]:
    sums: Counter[str] = Counter()
    for r in records:
        if isinstance(r, TrafficRecord):
            sums.update(bytes_in=r.bytes_in, bytes_out=r.bytes_out, requests=r.requests)
    return dict(sums)


def test_recorded_usage_reads_back_with_the_same_sums(broker: BrokerProcess) -> None:
    registry = CollectorRegistry()

    async def body(cluster: Cluster) -> None:
        meter = UsageMeter("gw-1", "inc1", lambda: time.time_ns() // 1_000_000)
        writer = writer_for(cluster, meter, registry)
        await writer.start()
        for i in range(200):
            meter.record(KEYS[i % 2], bytes_in=10, bytes_out=3, requests=1)
            if i % 50 == 0:
                await asyncio.sleep(0.1)  # let several windows go by
        expected = {"bytes_in": 2000, "bytes_out": 600, "requests": 200}

        async def all_written() -> bool:
            return traffic_sums(await read_usage(cluster)) == expected

        await wait_until_async(all_written, what=f"usage sums {expected}", timeout=DEADLINE_S)
        await writer.stop()
        records = await read_usage(cluster)
        assert len({r.id for r in records}) == len(records)
        assert {r.tenant for r in records} == {"acme", "globex"}

    run(broker, body)
    assert registry.get_sample_value("pier_gateway_usage_records_lost_total") == 0
    assert registry.get_sample_value("pier_gateway_usage_pending_records") == 0
    assert (registry.get_sample_value("pier_gateway_usage_records_written_total") or 0) > 0


def test_a_flush_retried_after_a_broker_restart_writes_each_id_once(broker: BrokerProcess) -> None:
    registry = CollectorRegistry()

    def failures() -> float:
        return registry.get_sample_value("pier_gateway_usage_flush_failures_total") or 0

    async def body(cluster: Cluster) -> None:
        meter = UsageMeter("gw-1", "inc2", lambda: time.time_ns() // 1_000_000)
        writer = writer_for(cluster, meter, registry)
        await writer.start()
        meter.record(KEYS[0], requests=5)
        await wait_until_async(
            lambda: _has_requests(cluster, 5), what="5 requests written", timeout=DEADLINE_S
        )
        await asyncio.to_thread(broker.stop)
        meter.record(KEYS[0], requests=7)
        meter.record(KEYS[1], requests=11)

        async def a_flush_failed() -> bool:
            return failures() > 0

        await wait_until_async(
            a_flush_failed, what="a flush failed while the broker is down", timeout=DEADLINE_S
        )
        await asyncio.to_thread(broker.restart)
        await wait_until_async(
            lambda: _has_requests(cluster, 23),
            what="23 requests written after the restart",
            timeout=DEADLINE_S,
            retry_on=BROKER_COMING_BACK,
        )
        await writer.stop()
        records = await read_usage(cluster)
        assert len({r.id for r in records}) == len(records)
        assert traffic_sums(records)["requests"] == 23

    run(broker, body)


# What a read raises while the restarted broker comes back: no connection yet, or its partitions
# not led again yet (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE).
BROKER_COMING_BACK = (BrokerConnectionError, NoLeaderError, BrokerResponseError)


async def _has_requests(cluster: Cluster, total: int) -> bool:
    return traffic_sums(await read_usage(cluster)).get("requests", 0) >= total


def tenant_topic(name: str) -> tuple[str, str] | None:
    tenant, sep, topic = name.partition("_")
    return (tenant, topic) if sep and not name.startswith("_") else None


def test_storage_samples_carry_describe_log_dirs_sizes(broker: BrokerProcess) -> None:
    registry = CollectorRegistry()

    async def body(cluster: Cluster) -> None:
        assert (await create_topics(cluster, [NewTopic("acme_orders", 2, 1)]))[
            "acme_orders"
        ] is None
        for _ in range(3):
            await produce(cluster, TopicPartition("acme_orders", 1), simple_batch([b"y" * 64] * 4))
        meter = UsageMeter("gw-1", "inc3", lambda: time.time_ns() // 1_000_000)
        writer = writer_for(cluster, meter, registry)
        await writer.start()
        sampler = StorageSampler(cluster, writer, tenant_topic=tenant_topic, interval_s=60.0)
        samples = await sampler.sample()
        sizes = await describe_log_dirs(cluster, node_id=broker.node_id)
        assert {(s.topic, s.partition): s.bytes for s in samples} == {
            ("orders", p): sizes[TopicPartition("acme_orders", p)] for p in (0, 1)
        }
        assert sizes[TopicPartition("acme_orders", 1)] > 0
        assert sampler.stored_bytes("acme") == sum(s.bytes for s in samples)
        assert all(s.at_ms % 60_000 == 0 for s in samples)

        async def written() -> bool:
            stored = [r for r in await read_usage(cluster) if isinstance(r, StorageSample)]
            return sorted(stored, key=lambda s: s.partition) == samples

        await wait_until_async(written, what="the storage samples written", timeout=DEADLINE_S)
        await writer.stop()

    run(broker, body)
