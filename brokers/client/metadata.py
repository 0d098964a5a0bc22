"""A snapshot of cluster metadata as a Metadata response tells it, and the request that asks.

Owns: `TopicPartition`, `BrokerAddress`, `PartitionInfo`, `TopicInfo`, `ClusterMetadata`,
`metadata_request` and `parse_metadata`. Snapshots are immutable once parsed, so they can be
shared freely; thread-safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from brokers.client.errors import NoLeaderError, UnknownTopicError, check
from brokers.client.messages import make, request_module
from brokers.client.versions import ApiKey
from brokers.wire.errors import ErrorCode

NO_LEADER = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error: ErrorCode
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    is_internal: bool = False
    topic_id: uuid.UUID | None = None  # Metadata v10+ (None: older answers, or the zero id)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerAddress]
    topics: dict[str, TopicInfo]

    def topic(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None or info.error == ErrorCode.unknown_topic_or_partition:
            raise UnknownTopicError(f"unknown topic {name!r}")
        check(info.error, name)  # e.g. LEADER_NOT_AVAILABLE while it is being created
        return info

    def partitions(self, name: str) -> list[int]:
        return sorted(self.topic(name).partitions)

    def leader(self, tp: TopicPartition) -> BrokerAddress:
        """The leader's address; UnknownTopicError or NoLeaderError (retriable) otherwise."""
        info = self.topic(tp.topic).partitions.get(tp.partition)
        if info is None:
            raise UnknownTopicError(f"unknown partition {tp}")
        address = self.brokers.get(info.leader)
        if info.leader == NO_LEADER or address is None:
            raise NoLeaderError(f"no leader for {tp}")
        return address


def metadata_request(
    version: int,
    topics: Sequence[str] | None,
    *,
    allow_auto_create: bool = False,
    topic_ids: Sequence[uuid.UUID] = (),
) -> Any:
    """`topics=None` asks for every topic (v1+ semantics of a null array); `topic_ids` (v12+) are
    looked up by id besides the named topics."""
    module = request_module(ApiKey.METADATA, version)
    wanted = None
    if topics is not None:
        wanted = tuple(make(module, "MetadataRequestTopic", name=t, topic_id=None) for t in topics)
        wanted += tuple(
            make(module, "MetadataRequestTopic", name=None, topic_id=i) for i in topic_ids
        )
    return make(
        module,
        "MetadataRequest",
        topics=wanted,
        allow_auto_topic_creation=allow_auto_create,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def parse_metadata(response: Any) -> ClusterMetadata:
    brokers = {
        int(b.node_id): BrokerAddress(int(b.node_id), b.host, int(b.port), b.rack)
        for b in response.brokers
    }
    topics = {t.name: _topic(t) for t in response.topics if t.name is not None}
    return ClusterMetadata(
        cluster_id=getattr(response, "cluster_id", None),
        controller_id=int(getattr(response, "controller_id", NO_LEADER)),
        brokers=brokers,
        topics=topics,
    )


def _topic(topic: Any) -> TopicInfo:
    partitions = {
        int(p.partition_index): PartitionInfo(
            partition=int(p.partition_index),
            leader=int(p.leader_id),
            leader_epoch=int(getattr(p, "leader_epoch", -1)),
            replicas=tuple(int(r) for r in p.replica_nodes),
            isr=tuple(int(r) for r in p.isr_nodes),
            error=p.error_code,
        )
        for p in topic.partitions
    }
    topic_id = getattr(topic, "topic_id", None)
    if topic_id is not None and topic_id.int == 0:
        topic_id = None
    return TopicInfo(topic.name, topic.error_code, partitions, bool(topic.is_internal), topic_id)
