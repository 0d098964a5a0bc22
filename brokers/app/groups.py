"""Wiring the group coordinator into a broker: `__consumer_offsets` over the broker's partitions.

Owns: `BrokerOffsetsTopic` (the coordinator's `OffsetsTopic`: creates the internal topic on first
use — `offsets.topic.num.partitions`, `cleanup.policy=compact`, `offsets.topic.segment.bytes` —
appends as leader and waits for the high watermark to pass the batch, maps partition errors to
coordinator errors, and reads a partition back batch by batch up to the log end seen when the
read starts); `GroupWiring` (builds the coordinator from broker properties, makes it follow the
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

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry

from brokers.common.clock import Clock
from brokers.common.config import BrokerConfigError
from brokers.common.descriptors import DescriptorLimitError
from brokers.controller.errors import ControllerError
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.errors import (
    CoordinatorNotAvailableError,
    GroupConfigError,
    InvalidCommitOffsetSizeError,
    NotCoordinatorError,
)
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.metrics import GroupMetricsCollector
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.log.errors import LogError, StorageError
from brokers.records.batch import iter_headers
from brokers.records.errors import RecordTooLargeError
from brokers.replication import errors as replication_errors
from brokers.replication.partition import Partition
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.purgatory import Purgatory

log = logging.getLogger("pier.coordinator")
TICK_INTERVAL_MS = 100
COMMIT_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms
READ_CHUNK_BYTES = 1 << 20


class BrokerOffsetsTopic:
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
        self._config = config
        self._metadata = metadata
        self._topics = topics
        self._replicas = replicas
        self._purgatory = purgatory
        self._clock = clock
        self._zookeeper_mode = zookeeper_mode

    def partition_count(self) -> int:
        topic = self._metadata.topic(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else self._config.offsets_topic_partitions

    def ensure_created(self) -> None:
        if self._metadata.topic(OFFSETS_TOPIC) is not None:
            return
        replication = self._replication_factor()
        configs: dict[str, str | None] = {
            "cleanup.policy": "compact",
            "segment.bytes": str(self._config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        }
        with contextlib.suppress(replication_errors.TopicExistsError):
            try:
                self._topics.create_topic(
                    OFFSETS_TOPIC, self._config.offsets_topic_partitions, replication, configs
                )
            except ControllerError as exc:  # ZooKeeper unreachable: FindCoordinator retries
                raise CoordinatorNotAvailableError(str(exc)) from exc
            except (DescriptorLimitError, StorageError) as exc:
                # Out of open files (or a disk fault) creating the internal topic: the client
                # retries FindCoordinator, as Kafka's answer while the topic cannot be created.
                raise CoordinatorNotAvailableError(
                    f"{OFFSETS_TOPIC} cannot be created: {exc}"
                ) from exc
            log.info(
                "event=offsets_topic_created partitions=%d replication_factor=%d",
                self.partition_count(),
                replication,
            )

    def _replication_factor(self) -> int:
        wanted = self._config.offsets_topic_replication_factor
        alive = len(self._metadata.brokers)
        if not self._zookeeper_mode:
            return min(wanted, alive)
        if alive < wanted:  # Kafka's createInternalTopic refuses rather than under-replicate
            raise CoordinatorNotAvailableError(
                f"{OFFSETS_TOPIC} needs {wanted} live brokers "
                f"(offsets.topic.replication.factor), {alive} alive"
            )
        return wanted

    async def append(self, partition: int, batch: bytes) -> int:
        try:
            self.ensure_created()
            replica = self._replicas.get(OFFSETS_TOPIC, partition)
            term = replica.leadership_term
            last_offset = replica.append_as_leader(batch).last_offset
        except (replication_errors.NotLeaderOrFollowerError, LogError) as exc:
            raise NotCoordinatorError(str(exc)) from exc
        except RecordTooLargeError as exc:
            raise InvalidCommitOffsetSizeError(str(exc)) from exc
        except replication_errors.ReplicationError as exc:
            raise CoordinatorNotAvailableError(str(exc)) from exc
        await self._committed(replica, term, last_offset)
        return last_offset

    async def _committed(self, replica: Partition, term: int, last_offset: int) -> None:
        """acks=all for coordinator writes: answer only once the ISR has the batch. Leadership
        lost meanwhile (even if regained) fails it; an epoch bump while leading (an ISR change)
        does not, as Kafka's delayed produce."""
        clock = self._clock
        deadline = clock.monotonic() + COMMIT_TIMEOUT_S
        key = (replica.topic, replica.index)
        while replica.high_watermark <= last_offset:
            if not replica.is_leader or replica.leadership_term != term:
                raise NotCoordinatorError(f"{OFFSETS_TOPIC}-{replica.index}: leadership moved")
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                raise CoordinatorNotAvailableError(f"{OFFSETS_TOPIC}-{replica.index} not committed")
            await self._purgatory.wait([key], remaining)

    def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
        replica = self._replicas.find(OFFSETS_TOPIC, partition)
        if replica is None:
            return
        log_ = replica.log
        offset = max(from_offset, log_.log_start_offset)
        end = log_.log_end_offset  # while loading nothing is appended: the coordinator refuses
        while offset < end:
            read = log_.read(offset, READ_CHUNK_BYTES, max_offset=end)
            if read.region is None or read.next_offset <= offset:
                return
            data = read.region.read()
            for position, header in iter_headers(data):
                yield data[position : position + header.size]
            offset = read.next_offset

    def high_watermark(self, partition: int) -> int:
        replica = self._replicas.find(OFFSETS_TOPIC, partition)
        return -1 if replica is None else replica.high_watermark


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
        self._zookeeper_mode = zookeeper_mode
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
        self._loading: asyncio.Task[None] | None = None
        replicas.on_leadership_change(self._on_leadership_change)

    def start(self) -> None:
        """Standalone: read back every offsets partition (this broker leads them all). In
        ZooKeeper mode nothing is ours until a LeaderAndIsr says so."""
        if self._zookeeper_mode:
            return
        partitions = range(self.topic.partition_count())
        self._loading = asyncio.ensure_future(self.coordinator.load_partitions(partitions))

    def _on_leadership_change(
        self, topic: str, partition: int, is_leader: bool, leader_epoch: int
    ) -> None:
        if topic != OFFSETS_TOPIC:
            return
        log.info(
            "event=offsets_leadership partition=%d leader=%s epoch=%d",
            partition,
            is_leader,
            leader_epoch,
        )
        if is_leader:
            self.coordinator.on_election(partition, leader_epoch)
        else:
            self.coordinator.on_resignation(partition, leader_epoch)

    async def stop(self) -> None:
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loading
        await self.coordinator.shutdown()

    async def loaded(self) -> None:
        """Wait until the start-up load and any load begun since finished (tests, benchmarks)."""
        if self._loading is not None:
            await asyncio.shield(self._loading)
        await self.coordinator.ownership.wait_loaded()

    async def tick(self) -> None:
        self.coordinator.tick()

    async def expire_offsets(self) -> None:
        removed = await self.coordinator.expire_offsets()
        if removed:
            log.info("event=groups_expired count=%d", removed)

    def _high_watermark(self, topic: str, partition: int) -> int | None:
        replica = self._replicas.find(topic, partition)
        return None if replica is None else replica.high_watermark
