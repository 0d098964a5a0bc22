"""Tiered storage's wiring (KIP-405): the remote store, `__remote_log_metadata` and the
RemoteLogManager, built when the broker sets `remote.log.storage.system.enable=true`.

Owns: `TieredWiring` — the metadata topic as an internal topic of this broker (created on first
use: `remote.log.metadata.topic.num.partitions` partitions, replication factor
`remote.log.metadata.topic.replication.factor` capped by the live brokers when standalone,
`cleanup.policy=delete` with unlimited retention as Kafka's, every write acks=all), the store
(brokers.tiered.factory), the metrics and the manager, plus its periodic task interval; and
`MetadataTopicWriter`: an event goes straight into the local replica when this broker leads its
metadata partition (always, standalone), else (ZooKeeper mode) it is produced acks=all to that
partition's leader with the project's client, through this broker's own listener (a retried
produce may append an event twice: folding is idempotent). Built before the event loop serves;
runs on it; not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from brokers.app.internal_topic import BrokerInternalTopic, InternalTopicSpec, TopicErrors
from brokers.client import ClientConfig
from brokers.client.cluster import Cluster
from brokers.client.errors import ClientError
from brokers.client.metadata import TopicPartition
from brokers.client.producer import produce
from brokers.common.clock import Clock
from brokers.common.config import BrokerConfig
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.purgatory import Purgatory
from brokers.tiered.config import TieredConfig
from brokers.tiered.factory import build_store
from brokers.tiered.metadata_manager import METADATA_TOPIC, RemoteLogMetadataManager
from brokers.tiered.metrics import RemoteStorageMetrics
from brokers.tiered.remote_log_manager import RemoteLogManager


class RemoteMetadataUnavailableError(Exception):
    """`__remote_log_metadata` could not take a write now (not leader, too few replicas)."""


_ERRORS = TopicErrors(
    not_coordinator=RemoteMetadataUnavailableError,
    not_available=RemoteMetadataUnavailableError,
    too_large=RemoteMetadataUnavailableError,
)


class MetadataTopicWriter:
    def __init__(
        self, topic: BrokerInternalTopic, replicas: ReplicaManager, metadata: MetadataView,
        *, node_id: int, zookeeper_mode: bool,
    ) -> None:  # fmt: skip
        self._topic = topic
        self._replicas = replicas
        self._metadata = metadata
        self._node_id = node_id
        self._zookeeper_mode = zookeeper_mode
        self._cluster: Cluster | None = None

    def partition_count(self) -> int:
        return self._topic.partition_count()

    async def append(self, partition: int, batch: bytes) -> int:
        replica = self._replicas.find(METADATA_TOPIC, partition)
        if not self._zookeeper_mode or (replica is not None and replica.is_leader):
            return await self._topic.append(partition, batch)
        self._topic.ensure_created()
        try:
            result = await produce(
                self._client(), TopicPartition(METADATA_TOPIC, partition), batch, acks=-1
            )
        except (ClientError, OSError) as exc:
            raise RemoteMetadataUnavailableError(f"{METADATA_TOPIC}-{partition}: {exc}") from exc
        assert result is not None  # acks=-1 always answers
        return result.base_offset

    def _client(self) -> Cluster:
        if self._cluster is None:
            me = self._metadata.brokers[self._node_id]
            config = ClientConfig(client_id=f"pier-remote-log-metadata-{self._node_id}")
            self._cluster = Cluster(f"{me.host}:{me.port}", config)
        return self._cluster

    async def close(self) -> None:
        if self._cluster is not None:
            await self._cluster.close()


def _topic_id(metadata: MetadataView, name: str) -> str:
    topic = metadata.topic(name)
    return "" if topic is None else topic.topic_id.hex


@dataclass(frozen=True, slots=True)
class TieredWiring:
    manager: RemoteLogManager
    task_interval_ms: int
    writer: MetadataTopicWriter


def build_tiered(
    config: BrokerConfig, *, metadata: MetadataView, topics: TopicAdmin,
    replicas: ReplicaManager, purgatory: Purgatory, clock: Clock, registry: CollectorRegistry,
    zookeeper_mode: bool,
) -> TieredWiring | None:  # fmt: skip
    settings = TieredConfig.from_properties(config.properties, config.data_dir)
    if not settings.enabled:
        return None
    spec = InternalTopicSpec(
        name=METADATA_TOPIC,
        partitions=settings.metadata_partitions,
        replication_factor=settings.metadata_replication_factor,
        replication_setting="remote.log.metadata.topic.replication.factor",
        configs={"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
        acks=-1,
    )
    topic = BrokerInternalTopic(
        spec, _ERRORS, metadata=metadata, topics=topics, replicas=replicas,
        purgatory=purgatory, clock=clock, zookeeper_mode=zookeeper_mode,
    )  # fmt: skip
    writer = MetadataTopicWriter(
        topic, replicas, metadata, node_id=config.node_id, zookeeper_mode=zookeeper_mode
    )
    remote_metrics = RemoteStorageMetrics(registry)
    replicas.on_topic_gone(remote_metrics.forget)  # a deleted topic's series go with it
    manager = RemoteLogManager(
        build_store(settings), RemoteLogMetadataManager(writer, replicas), replicas,
        clock=clock, node_id=config.node_id, metrics=remote_metrics,
        index_cache_segments=settings.index_cache_segments,
        copy_max_bytes_per_second=settings.copy_max_bytes_per_second,
        topic_id_of=lambda name: _topic_id(metadata, name),
    )  # fmt: skip
    replicas.fetchers.remote_tier = manager  # followers below a leader's local log start
    return TieredWiring(manager, settings.task_interval_ms, writer)
