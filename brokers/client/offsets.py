"""ListOffsets: the earliest, latest or first-at-a-timestamp offset of partitions.

Owns: `list_offsets` and its specs (`EARLIEST` = -2, `LATEST` = -1, `MAX_TIMESTAMP` = -3 as in
Kafka's ListOffsetsRequest; any value ≥ 0 is a timestamp in ms). One request per partition
leader, sent concurrently; the whole lookup is retried on retriable errors (a moved leader
refreshes metadata first). A timestamp with no record at or after it answers offset -1, as Kafka
does. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.connection import BrokerConnection
from brokers.client.errors import check
from brokers.client.messages import make, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@dataclass(frozen=True, slots=True)
class ListedOffset:
    offset: int
    timestamp: int
    leader_epoch: int


async def list_offsets(
    cluster: Cluster, wanted: Mapping[TopicPartition, int], *, read_committed: bool = False
) -> dict[TopicPartition, ListedOffset]:
    """{partition: spec} → {partition: ListedOffset}; raises the first partition error."""
    isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED

    async def attempt() -> dict[TopicPartition, ListedOffset]:
        by_leader: dict[BrokerConnection, dict[TopicPartition, int]] = {}
        for tp, spec in wanted.items():
            by_leader.setdefault(await cluster.leader(tp), {})[tp] = spec
        answers = await asyncio.gather(
            *(_ask(conn, specs, isolation) for conn, specs in by_leader.items())
        )
        return {tp: listed for answer in answers for tp, listed in answer.items()}

    return await cluster.call(attempt)


async def _ask(
    connection: BrokerConnection, specs: dict[TopicPartition, int], isolation: int
) -> dict[TopicPartition, ListedOffset]:
    version = connection.version(ApiKey.LIST_OFFSETS)
    response = await connection.send(_request(version, specs, isolation))
    listed: dict[TopicPartition, ListedOffset] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            check(p.error_code, str(tp))
            listed[tp] = ListedOffset(
                int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1))
            )
    return listed


def _request(version: int, specs: dict[TopicPartition, int], isolation: int) -> Any:
    module = request_module(ApiKey.LIST_OFFSETS, version)
    topics: dict[str, list[Any]] = {}
    for tp, spec in specs.items():
        topics.setdefault(tp.topic, []).append(
            make(
                module,
                "ListOffsetsPartition",
                partition_index=tp.partition,
                current_leader_epoch=-1,
                timestamp=spec,
            )
        )
    return make(
        module,
        "ListOffsetsRequest",
        replica_id=CONSUMER_REPLICA_ID,
        isolation_level=isolation,
        topics=tuple(
            make(module, "ListOffsetsTopic", name=name, partitions=tuple(parts))
            for name, parts in topics.items()
        ),
    )
