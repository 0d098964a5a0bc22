"""Wiring the transaction coordinator into a broker: `__transaction_state` and the marker channel.

Owns: `transaction_state_spec` (the internal topic: `transaction.state.log.num.partitions`,
compacted, uncompressed, `transaction.state.log.replication.factor`, `min.insync.replicas` =
`transaction.state.log.min.isr`, `transaction.state.log.segment.bytes`, written acks=all as
Kafka's TransactionLog enforces), `ChannelMarkers` (the coordinator's `MarkerSender` over the
replication layer's `TxnMarkerChannel`, which the coordinator may not import) and
`TransactionWiring`: builds the coordinator from broker properties, makes it follow the
`__transaction_state` partitions this broker leads (as `brokers.app.groups` does for groups:
LeaderAndIsr → `on_election` / `on_resignation`; standalone, every partition is loaded at
start-up), and exposes the periodic jobs (timed-out transactions, expired ids) and the metrics.
Markers for partitions this broker leads are written locally (`write_markers_locally`), with
committed `__consumer_offsets` markers handed to the group coordinator. Runs on the event loop;
not thread-safe.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from brokers.app.groups import GroupWiring
from brokers.app.internal_topic import (
    BrokerInternalTopic,
    InternalTopicSpec,
    LeadershipFollower,
    TopicErrors,
)
from brokers.common.clock import Clock
from brokers.common.config import BrokerConfigError
from brokers.coordinator.transactions import TRANSACTION_STATE_TOPIC
from brokers.coordinator.transactions.config import TransactionConfig
from brokers.coordinator.transactions.coordinator import ProducerIds, TransactionCoordinator
from brokers.coordinator.transactions.errors import (
    StateNotAvailableError,
    StateNotCoordinatorError,
    StateRecordTooLargeError,
    TransactionConfigError,
)
from brokers.coordinator.transactions.markers import TxnMarker
from brokers.coordinator.transactions.metrics import TransactionMetricsCollector
from brokers.handlers.services import TopicAdmin
from brokers.replication.metadata_cache import MetadataCache
from brokers.replication.replica_manager import ReplicaManager
from brokers.replication.txn_markers import MarkerRequest, TxnMarkerChannel, write_markers_locally
from brokers.server.purgatory import Purgatory
from brokers.wire.errors import ErrorCode

log = logging.getLogger("pier.transactions")
LOCAL_MARKER_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms for WriteTxnMarkers
STATE_WRITE_TIMEOUT_S = 10.0
STATE_TOPIC_ERRORS = TopicErrors(
    not_coordinator=StateNotCoordinatorError,
    not_available=StateNotAvailableError,
    too_large=StateRecordTooLargeError,
)


def transaction_state_spec(config: TransactionConfig) -> InternalTopicSpec:
    return InternalTopicSpec(
        name=TRANSACTION_STATE_TOPIC,
        partitions=config.topic_partitions,
        replication_factor=config.topic_replication_factor,
        replication_setting="transaction.state.log.replication.factor",
        configs={
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(config.topic_min_isr),
            "segment.bytes": str(config.topic_segment_bytes),
        },
        acks=-1,
        commit_timeout_s=STATE_WRITE_TIMEOUT_S,
    )


class ChannelMarkers:
    """The coordinator's `MarkerSender`: its markers as the channel's `MarkerRequest`s."""

    def __init__(self, channel: TxnMarkerChannel) -> None:
        self.channel = channel

    async def send(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        return await self.channel.send(
            MarkerRequest(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                commit=marker.commit,
                coordinator_epoch=marker.coordinator_epoch,
                partitions=marker.partitions,
            )
        )


class TransactionWiring:
    def __init__(
        self,
        properties: Mapping[str, str],
        *,
        node_id: int,
        metadata: MetadataCache,
        topics: TopicAdmin,
        replicas: ReplicaManager,
        purgatory: Purgatory,
        clock: Clock,
        registry: CollectorRegistry,
        producer_ids: ProducerIds,
        groups: GroupWiring,
        zookeeper_mode: bool,
    ) -> None:
        try:
            self.config = TransactionConfig.from_properties(properties)
        except TransactionConfigError as exc:
            raise BrokerConfigError(str(exc)) from None
        self.topic = BrokerInternalTopic(
            transaction_state_spec(self.config),
            STATE_TOPIC_ERRORS,
            metadata=metadata,
            topics=topics,
            replicas=replicas,
            purgatory=purgatory,
            clock=clock,
            zookeeper_mode=zookeeper_mode,
        )
        local = functools.partial(
            write_markers_locally,
            replicas,
            purgatory,
            on_offsets_marker=groups.coordinator.complete_transaction,
            timeout_s=LOCAL_MARKER_TIMEOUT_S,
            clock=clock,
        )
        self.channel = TxnMarkerChannel(metadata, node_id=node_id, local=local, clock=clock)
        self.coordinator = TransactionCoordinator(
            self.config,
            self.topic,
            clock,
            producer_ids=producer_ids,
            markers=ChannelMarkers(self.channel),
            group_partition=groups.coordinator.partition_for,
            partition_exists=lambda topic, index: metadata.partition(topic, index) is not None,
        )
        registry.register(TransactionMetricsCollector(self.coordinator))
        self._follower = LeadershipFollower(
            TRANSACTION_STATE_TOPIC,
            self.coordinator,
            replicas,
            zookeeper_mode=zookeeper_mode,
            event="txn_state_leadership",
        )

    def start(self) -> None:
        """Standalone: read back every partition (this broker leads them all). In ZooKeeper
        mode nothing is ours until a LeaderAndIsr says so."""
        self._follower.start(self.topic.partition_count())

    async def stop(self) -> None:
        await self._follower.stop()
        await self.coordinator.shutdown()
        await self.channel.close()

    async def loaded(self) -> None:
        """Wait until the start-up load and any load begun since finished (tests, benchmarks)."""
        await self._follower.loaded()

    async def abort_timed_out(self) -> None:
        started = await self.coordinator.abort_timed_out()
        if started:
            log.info("event=txn_timeout_aborts started=%d", started)

    async def expire_ids(self) -> None:
        await self.coordinator.expire_ids()
