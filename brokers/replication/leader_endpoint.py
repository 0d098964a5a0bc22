"""The real `LeaderEndpoint`s of the replica fetcher: one connection to the partition leader.

Owns: `ChannelLeader` (Kafka's `RemoteLeaderEndPoint`, what the fetcher manager uses) — replica
Fetch v11 requests with our broker id as `replica_id` (the leader then reads up to its log end
and counts the fetch as a follower's) over a `LeaderChannel`, whose answers' records are views
into the channel's reused buffer (valid until the next request: the fetcher appends them first),
and OffsetForLeaderEpoch, which the client does not speak yet: it is built here at v3 (the first
version with `replica_id`, served by Pier and by Kafka since 2.3) rather than negotiated; and
ListOffsets v8 for the leader's earliest local offset (-4, KIP-405), which a follower below the
leader's local log start asks before rebuilding from the remote tier.
`RemoteLeader` is the same over the client's `BrokerConnection` (records copied; for tests and
tools that already hold one). Connection failures surface as `ClientError`, which the fetcher
turns into a back-off. Runs on the connection's event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brokers.client.connection import BrokerConnection
from brokers.client.consumer import (
    FetchedPartition,
    FetchLimits,
    FetchPosition,
    fetch_from,
    fetch_request,
)
from brokers.client.messages import decode_response, make, request_module
from brokers.client.metadata import TopicPartition
from brokers.replication.fetch_answer import FETCH_VERSION, ReplicaFetched, parse_fetch_response
from brokers.replication.fetcher import EpochAnswer, EpochQuery, LocalStartAnswer
from brokers.replication.leader_channel import LeaderChannel
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity

FETCH = 1
OFFSET_FOR_LEADER_EPOCH = 23
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
LIST_OFFSETS = 2
LIST_OFFSETS_VERSION = 8  # the first with EARLIEST_LOCAL (-4); flexible
EARLIEST_LOCAL = -4
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
        return _epoch_answers(response)

    async def earliest_local(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> LocalStartAnswer:
        request = _earliest_local_request(self._node_id, tp, current_leader_epoch)
        return _local_start(await self._connection.send(request))


class ChannelLeader:
    def __init__(
        self,
        channel: LeaderChannel,
        *,
        node_id: int,
        request_timeout_s: float,
        limits: FetchLimits = REPLICA_FETCH_LIMITS,
    ) -> None:
        self._channel = channel
        self._node_id = node_id
        self._timeout_s = request_timeout_s
        self._limits = limits

    async def fetch(
        self, positions: Mapping[TopicPartition, FetchPosition]
    ) -> Mapping[TopicPartition, ReplicaFetched]:
        body = encode_entity(fetch_request(FETCH_VERSION, positions, self._limits, self._node_id))
        frame, start = await self._channel.call(
            FETCH,
            FETCH_VERSION,
            body,
            flexible=False,
            timeout_s=self._limits.max_wait_s + self._timeout_s,
        )
        return parse_fetch_response(frame, start)

    async def end_offsets(
        self, queries: Mapping[TopicPartition, EpochQuery]
    ) -> Mapping[TopicPartition, EpochAnswer]:
        body = encode_entity(_epoch_request(self._node_id, queries))
        frame, start = await self._channel.call(
            OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            body,
            flexible=False,
            timeout_s=self._timeout_s,
        )
        version = OFFSET_FOR_LEADER_EPOCH_VERSION
        readonly = frame.toreadonly()  # kio's reader takes read-only buffers
        return _epoch_answers(decode_response(OFFSET_FOR_LEADER_EPOCH, version, readonly, start))

    async def earliest_local(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> LocalStartAnswer:
        body = encode_entity(_earliest_local_request(self._node_id, tp, current_leader_epoch))
        frame, start = await self._channel.call(
            LIST_OFFSETS, LIST_OFFSETS_VERSION, body, flexible=True, timeout_s=self._timeout_s
        )
        readonly = frame.toreadonly()
        return _local_start(decode_response(LIST_OFFSETS, LIST_OFFSETS_VERSION, readonly, start))


def _earliest_local_request(node_id: int, tp: TopicPartition, current_leader_epoch: int) -> Any:
    module = request_module(LIST_OFFSETS, LIST_OFFSETS_VERSION)
    partition = make(
        module,
        "ListOffsetsPartition",
        partition_index=tp.partition,
        current_leader_epoch=current_leader_epoch,
        timestamp=EARLIEST_LOCAL,
    )
    topic = make(module, "ListOffsetsTopic", name=tp.topic, partitions=(partition,))
    return make(
        module, "ListOffsetsRequest", replica_id=node_id, isolation_level=0, topics=(topic,)
    )


def _local_start(response: Any) -> LocalStartAnswer:
    for topic in response.topics:
        for p in topic.partitions:
            return LocalStartAnswer(ErrorCode(p.error_code), int(p.offset), int(p.leader_epoch))
    return LocalStartAnswer(ErrorCode.unknown_topic_or_partition)


def _epoch_answers(response: Any) -> dict[TopicPartition, EpochAnswer]:
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
