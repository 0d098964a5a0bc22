"""Wiring the group coordinator into a broker: `__consumer_offsets` over the broker's partitions.

Owns: `BrokerOffsetsTopic` (the coordinator's `OffsetsTopic`: `brokers.app.internal_topic`'s
shared internal-topic class with `offsets.topic.num.partitions`, `cleanup.policy=compact`,
`offsets.topic.segment.bytes` and the group coordinator's errors); `GroupWiring` (builds the coordinator from broker properties, makes it follow the
offsets partitions this broker leads, drives `tick` and offset retention, registers the group
metrics).

Standalone, this broker leads every offsets partition: all are loaded at start-up and the
replication factor is min(`offsets.topic.replication.factor`, 1). In ZooKeeper mode, as Kafka:
the topic is created with `offsets.topic.replication.factor` replicas and refused
(COORDINATOR_NOT_AVAILABLE) while fewer brokers are alive; the coordinator follows leadership
(Kafka's `onLeadershipChange` → `onElection` / `onResignation`) through the replica manager's
leadership listener: a LeaderAndIsr making this broker leader of partition p loads p, becoming a
follower or a stopped/deleted replica unloads it. A write is committed once the ISR has it (the
high watermark passes it); leadership lost meanwhile (or a new leader epoch) fails it with
NOT_COORDINATOR, since the record may be truncated. The new leader loads up to its log end, as
Kafka does: that log is the one its followers converge to. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from brokers.app.internal_topic import (
    BrokerInternalTopic,
    InternalTopicSpec,
    LeadershipFollower,
    TopicErrors,
)
from brokers.common.clock import Clock
from brokers.common.config import BrokerConfigError
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.errors import (
    CoordinatorNotAvailableError,
    GroupConfigError,
    InvalidCommitOffsetSizeError,
    InvalidProducerEpochError,
    NotCoordinatorError,
)
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.metrics import GroupMetricsCollector
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.purgatory import Purgatory

log = logging.getLogger("pier.coordinator")
TICK_INTERVAL_MS = 100
COMMIT_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms


def offsets_topic_spec(config: GroupConfig) -> InternalTopicSpec:
    return InternalTopicSpec(
        name=OFFSETS_TOPIC,
        partitions=config.offsets_topic_partitions,
        replication_factor=config.offsets_topic_replication_factor,
        replication_setting="offsets.topic.replication.factor",
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        },
        commit_timeout_s=COMMIT_TIMEOUT_S,
    )


OFFSETS_TOPIC_ERRORS = TopicErrors(
    not_coordinator=NotCoordinatorError,
    not_available=CoordinatorNotAvailableError,
    too_large=InvalidCommitOffsetSizeError,
    fenced_producer=InvalidProducerEpochError,  # a fenced TxnOffsetCommit
)


class BrokerOffsetsTopic(BrokerInternalTopic):
    """`__consumer_offsets` as the group coordinator's `OffsetsTopic`."""

    def __init__(
        self,
        config: GroupConfig,
        *,
        metadata: MetadataView,
        topics: TopicAdmin,
        replicas: ReplicaManager,
        purgatory: Purgatory,
        clock: Clock,
        zookeeper_mode: bool,
    ) -> None:
        super().__init__(
            offsets_topic_spec(config),
            OFFSETS_TOPIC_ERRORS,
            metadata=metadata,
            topics=topics,
            replicas=replicas,
            purgatory=purgatory,
            clock=clock,
            zookeeper_mode=zookeeper_mode,
        )


class GroupWiring:
    def __init__(
        self,
        properties: Mapping[str, str],
        *,
        metadata: MetadataView,
        topics: TopicAdmin,
        replicas: ReplicaManager,
        purgatory: Purgatory,
        clock: Clock,
        registry: CollectorRegistry,
        zookeeper_mode: bool,
    ) -> None:
        try:
            self.config = GroupConfig.from_properties(properties)
        except GroupConfigError as exc:
            raise BrokerConfigError(str(exc)) from None
        self._replicas = replicas
        self.topic = BrokerOffsetsTopic(
            self.config,
            metadata=metadata,
            topics=topics,
            replicas=replicas,
            purgatory=purgatory,
            clock=clock,
            zookeeper_mode=zookeeper_mode,
        )
        self.coordinator = GroupCoordinator(self.config, self.topic, clock)
        self.metrics = GroupMetricsCollector(self.coordinator, self._high_watermark)
        registry.register(self.metrics)
        self._follower = LeadershipFollower(
            OFFSETS_TOPIC,
            self.coordinator,
            replicas,
            zookeeper_mode=zookeeper_mode,
            event="offsets_leadership",
        )

    def start(self) -> None:
        """Standalone: read back every offsets partition (this broker leads them all). In
        ZooKeeper mode nothing is ours until a LeaderAndIsr says so."""
        self._follower.start(self.topic.partition_count())

    async def stop(self) -> None:
        await self._follower.stop()
        await self.coordinator.shutdown()

    async def loaded(self) -> None:
        """Wait until the start-up load and any load begun since finished (tests, benchmarks)."""
        await self._follower.loaded()

    async def tick(self) -> None:
        self.coordinator.tick()

    async def expire_offsets(self) -> None:
        removed = await self.coordinator.expire_offsets()
        if removed:
            log.info("event=groups_expired count=%d", removed)

    def _high_watermark(self, topic: str, partition: int) -> int | None:
        replica = self._replicas.find(topic, partition)
        return None if replica is None else replica.high_watermark
