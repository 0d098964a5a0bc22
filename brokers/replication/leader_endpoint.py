"""The real `LeaderEndpoint` of the replica fetcher: one connection to the partition leader.

Owns: `RemoteLeader` (Kafka's `RemoteLeaderEndPoint`) — replica Fetch requests through the
client's `fetch_from` with our broker id as `replica_id` (the leader then reads up to its log end
and counts the fetch as a follower's), and OffsetForLeaderEpoch, which the client does not speak
yet: it is built here at v3 (the first version with `replica_id`, served by Pier and by Kafka
since 2.3) rather than negotiated. Connection failures surface as `ClientError`, which the
fetcher turns into a back-off. Runs on the connection's event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brokers.client.connection import BrokerConnection
from brokers.client.consumer import FetchedPartition, FetchLimits, FetchPosition, fetch_from
from brokers.client.messages import make, request_module
from brokers.client.metadata import TopicPartition
from brokers.replication.fetcher import EpochAnswer, EpochQuery
from brokers.wire.errors import ErrorCode

OFFSET_FOR_LEADER_EPOCH = 23
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
# replica.fetch.wait.max.ms 500, replica.fetch.min.bytes 1, replica.fetch.max.bytes 1 MiB,
# replica.fetch.response.max.bytes 10 MiB.
REPLICA_FETCH_LIMITS = FetchLimits(
    max_wait_s=0.5, min_bytes=1, max_bytes=10 * 1024 * 1024, partition_max_bytes=1024 * 1024
)


class RemoteLeader:
    def __init__(
        self,
        connection: BrokerConnection,
        *,
        node_id: int,
        limits: FetchLimits = REPLICA_FETCH_LIMITS,
    ) -> None:
        self._connection = connection
        self._node_id = node_id
        self._limits = limits

    async def fetch(
        self, positions: Mapping[TopicPartition, FetchPosition]
    ) -> Mapping[TopicPartition, FetchedPartition]:
        return await fetch_from(self._connection, positions, self._limits, replica_id=self._node_id)

    async def end_offsets(
        self, queries: Mapping[TopicPartition, EpochQuery]
    ) -> Mapping[TopicPartition, EpochAnswer]:
        response = await self._connection.send(_epoch_request(self._node_id, queries))
        return {
            TopicPartition(topic.topic, int(p.partition)): EpochAnswer(
                ErrorCode(p.error_code), int(p.leader_epoch), int(p.end_offset)
            )
            for topic in response.topics
            for p in topic.partitions
        }


def _epoch_request(node_id: int, queries: Mapping[TopicPartition, EpochQuery]) -> Any:
    module = request_module(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION)
    topics: dict[str, list[Any]] = {}
    for tp, query in queries.items():
        topics.setdefault(tp.topic, []).append(
            make(
                module,
                "OffsetForLeaderPartition",
                partition=tp.partition,
                current_leader_epoch=query.current_leader_epoch,
                leader_epoch=query.leader_epoch,
            )
        )
    return make(
        module,
        "OffsetForLeaderEpochRequest",
        replica_id=node_id,
        topics=tuple(
            make(module, "OffsetForLeaderTopic", topic=name, partitions=tuple(parts))
            for name, parts in topics.items()
        ),
    )
