"""DescribeLogDirs from the client side: the size on disk of each partition one broker holds.

Owns: `describe_log_dirs`. The request goes to one broker (log dirs are per broker, Kafka's
Admin sends one request per broker too). A log dir answering an error (KAFKA_STORAGE_ERROR: an
offline dir) contributes nothing; future logs (KIP-113 moves between dirs) are not counted, so each
partition has one size. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.connection import BrokerConnection
from brokers.client.errors import InvalidArgumentError, check
from brokers.client.messages import make, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey
from brokers.wire.errors import ErrorCode

DESCRIBE_LOG_DIRS = 35


async def describe_log_dirs(
    target: BrokerConnection | Cluster,
    topics: Mapping[str, Sequence[int]] | None = None,
    *,
    node_id: int | None = None,
) -> dict[TopicPartition, int]:
    """{partition: bytes on disk} of the broker behind `target` (a connection, or a cluster and
    the `node_id` of one of its brokers); `topics` None asks for every partition it holds."""
    if isinstance(target, BrokerConnection):
        return await _describe(target, topics)
    if node_id is None:
        raise InvalidArgumentError("describe_log_dirs on a cluster needs a node_id")
    cluster = target

    async def attempt() -> dict[TopicPartition, int]:
        return await _describe(await cluster.node(node_id), topics)

    return await cluster.call(attempt)


async def _describe(
    connection: BrokerConnection, topics: Mapping[str, Sequence[int]] | None
) -> dict[TopicPartition, int]:
    version = connection.version(ApiKey.DESCRIBE_LOG_DIRS)
    module = request_module(DESCRIBE_LOG_DIRS, version)
    wanted = None
    if topics is not None:
        wanted = tuple(
            make(module, "DescribableLogDirTopic", topic=name, partitions=tuple(parts))
            for name, parts in topics.items()
        )
    response: Any = await connection.send(make(module, "DescribeLogDirsRequest", topics=wanted))
    check(getattr(response, "error_code", ErrorCode.none), f"{connection.address} log dirs")
    sizes: dict[TopicPartition, int] = {}
    for result in response.results:
        if result.error_code != ErrorCode.none:
            continue
        for topic in result.topics:
            for partition in topic.partitions:
                if not partition.is_future_key:
                    tp = TopicPartition(topic.name, int(partition.partition_index))
                    sizes[tp] = int(partition.partition_size)
    return sizes
