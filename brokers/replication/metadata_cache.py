"""The broker's view of the cluster: brokers, topics, partitions and who leads them.

Owns: `MetadataCache` and its value types, read by Metadata, DescribeCluster and every handler
that must answer NOT_LEADER_OR_FOLLOWER. Standalone, the local topic registry fills it; in cluster
mode UpdateMetadata from the controller will. Whoever removes deleted partitions from it tells
the `on_partitions_deleted` listeners (the group coordinator forgets their offsets, as Kafka's
onPartitionsDeleted); a listener that fails is logged, the others still hear. A
`PartitionMetadata`'s broker lists may be shared with other partitions (UpdateMetadata interns
them): replace them, never change one in place.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from brokers.common.internal_topics import is_internal

log = logging.getLogger(__name__)
DeletionListener = Callable[[Sequence[tuple[str, int]]], None]


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    index: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return is_internal(self.name)


@dataclass(slots=True)
class MetadataCache:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    # Brokers' inter-broker (`REPLICATION` listener) endpoints, for broker-to-broker traffic
    # only; clients are always given `brokers`. A broker absent here has just the one endpoint.
    inter_broker: dict[int, BrokerEndpoint] = field(default_factory=dict)
    deletion_listeners: list[DeletionListener] = field(default_factory=list)

    def on_partitions_deleted(self, listener: DeletionListener) -> None:
        self.deletion_listeners.append(listener)

    def partitions_deleted(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Tell the listeners that `partitions` were deleted (and left the cache)."""
        if not partitions:
            return
        for listener in self.deletion_listeners:
            try:
                listener(partitions)
            except Exception as exc:
                log.error("event=partition_deletion_listener_failed error=%r", exc)

    def inter_broker_endpoint(self, node_id: int) -> BrokerEndpoint | None:
        """Where this broker reaches broker `node_id` (Kafka's `inter.broker.listener.name`)."""
        return self.inter_broker.get(node_id) or self.brokers.get(node_id)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def partition(self, topic: str, index: int) -> PartitionMetadata | None:
        meta = self.topics.get(topic)
        return None if meta is None else meta.partitions.get(index)
