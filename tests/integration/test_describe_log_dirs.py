"""DescribeLogDirs against a real broker: sizes equal the bytes of the partition's segment files,
unknown topics and partitions are left out, every served version answers, and kafka-python's
`KafkaAdminClient.describe_log_dirs()` reads the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kafka.admin import KafkaAdminClient

from brokers.client import Cluster, TopicPartition
from brokers.client.log_dirs import describe_log_dirs
from brokers.client.producer import produce
from brokers.client.topics import NewTopic, create_topics
from brokers.records.builder import simple_batch
from brokers.wire.entities import make, request_module
from infra.stack import BrokerProcess

pytestmark = pytest.mark.integration
T = TypeVar("T")
TOPIC = "sized"


def run(broker: BrokerProcess, body: Callable[[Cluster], Awaitable[T]]) -> T:
    async def main() -> T:
        async with Cluster(broker.bootstrap) as cluster:
            assert (await create_topics(cluster, [NewTopic(TOPIC, 2, 1)]))[TOPIC] is None
            for _ in range(3):
                await produce(cluster, TopicPartition(TOPIC, 0), simple_batch([b"x" * 100] * 5))
            return await body(cluster)

    return asyncio.run(main())


def segment_bytes(broker: BrokerProcess, tp: TopicPartition) -> int:
    matches = list(broker.data_dir.rglob(f"{tp.topic}-{tp.partition}"))
    assert len(matches) == 1, matches
    return sum(f.stat().st_size for f in Path(matches[0]).glob("*.log"))


def test_sizes_match_the_segment_files(broker: BrokerProcess) -> None:
    async def body(cluster: Cluster) -> dict[TopicPartition, int]:
        return await describe_log_dirs(cluster, node_id=broker.node_id)

    sizes = run(broker, body)
    p0, p1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    assert sizes[p0] == segment_bytes(broker, p0) > 0
    assert sizes[p1] == 0


def test_named_partitions_only_and_unknown_ones_left_out(broker: BrokerProcess) -> None:
    async def body(cluster: Cluster) -> dict[TopicPartition, int]:
        connection = await cluster.node(broker.node_id)
        return await describe_log_dirs(connection, {TOPIC: [1, 7], "no-such-topic": [0]})

    assert run(broker, body) == {TopicPartition(TOPIC, 1): 0}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_version_answers(broker: BrokerProcess, version: int) -> None:
    async def body(cluster: Cluster) -> Any:
        connection = await cluster.node(broker.node_id)
        module = request_module(35, version)
        return await connection.send(make(module, "DescribeLogDirsRequest", topics=None))

    response = run(broker, body)
    (result,) = response.results
    assert result.error_code == 0
    assert Path(result.log_dir).is_absolute()
    (topic,) = [t for t in result.topics if t.name == TOPIC]
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1]
    assert all(p.offset_lag == 0 and not p.is_future_key for p in topic.partitions)
    if version >= 4:
        assert result.total_bytes >= result.usable_bytes >= 0


def test_kafka_python_admin_reads_it(broker: BrokerProcess) -> None:
    async def nothing(cluster: Cluster) -> None:
        return None

    run(broker, nothing)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    (answer,) = answers
    (log_dir,) = answer["log_dirs"]
    topics = {t["name"]: t for t in log_dir["topics"]}
    sizes = {p["partition_index"]: p["partition_size"] for p in topics[TOPIC]["partitions"]}
    assert sizes[0] == segment_bytes(broker, TopicPartition(TOPIC, 0))
