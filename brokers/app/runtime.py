"""A built broker's lifecycle, shared by both composition roots, and the parts both build alike.

Owns: `Broker`, what `brokers.app.standalone.build_standalone` and `brokers.app.zk_mode.
build_zk_broker` return: the parts they built (public, for tests and tools; handlers never see
this object), start-up order (log recovery before the listener opens; in ZooKeeper mode the
membership starts once the listener is open so the registration advertises the real port), the
periodic jobs (retention, flush, checkpoints, delayed segment deletes, compaction, group ticks and
offset expiry, timed-out transactions and expired transactional ids; ISR shrink in ZooKeeper
mode), the metrics endpoint, and clean shutdown
(controlled shutdown first in ZooKeeper mode, then the listener closed, then logs flushed,
checkpoints and the clean-shutdown marker written). Also the construction steps both roots share
(`log_manager_for`, `metadata_cache_for`, `register_storage_metrics`).
Runs on one asyncio event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

from prometheus_client import CollectorRegistry, start_http_server

from brokers.app.groups import TICK_INTERVAL_MS, GroupWiring
from brokers.app.tiered import TieredWiring, build_tiered
from brokers.app.transactions import TransactionWiring
from brokers.app.txn_verification import TxnVerification
from brokers.common.clock import Clock
from brokers.common.config import BrokerConfig, BrokerConfigError, int_setting
from brokers.handlers import build_route_table
from brokers.handlers.services import HandlerServices, HostedLog, ProducerIdSource, TopicAdmin
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.metrics import CleanerCollector
from brokers.log.config import LogConfig
from brokers.log.log_manager import LogManager
from brokers.log.metrics import LogSizeCollector
from brokers.log.producer_state.manager import DEFAULT_MAX_PRODUCERS
from brokers.replication.metadata_cache import BrokerEndpoint, MetadataCache
from brokers.replication.metrics import LastStableOffsetLagCollector, ReplicaManagerCollector
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.accept import ConnectionQuotas, resolve_overrides
from brokers.server.dispatcher import Dispatcher
from brokers.server.listener import Listener
from brokers.server.metrics import ServerMetrics
from brokers.server.purgatory import Purgatory
from brokers.server.routes import Route, RouteTable
from brokers.wire.framing import FrameLimits

log = logging.getLogger("pier.broker")


class Membership(Protocol):
    """ZooKeeper mode's part of the lifecycle (`brokers.app.zk_mode.ClusterMode`)."""

    async def start(self) -> None: ...

    async def controlled_shutdown(self) -> bool: ...

    async def stop(self) -> None: ...


class TopicRegistry(TopicAdmin, Protocol):
    """The handlers' `TopicAdmin` plus its start-up step (the standalone registry reads its
    file; ZooKeeper mode's admin has nothing to load)."""

    def load(self) -> None: ...


def log_manager_for(config: BrokerConfig, clock: Clock) -> LogManager:
    return LogManager(
        config.data_dir,
        clock=clock,
        default_config=LogConfig.from_properties({}, config.properties),
        cleaner_config=CleanerConfig.from_properties(config.properties),
        # Kafka's setting: producer state of an idle producer id is forgotten after this long
        # (checked with retention); one with an open transaction never is.
        producer_id_expiration_ms=int_setting(
            config.properties, "producer.id.expiration.ms", 86_400_000, 1, BrokerConfigError
        ),
        # Pier's: producers a partition's state holds; past it the longest-known idle one goes
        max_producers=int_setting(
            config.properties,
            "pier.producer.state.max.producers",
            DEFAULT_MAX_PRODUCERS,
            1,
            BrokerConfigError,
        ),
    )


def metadata_cache_for(config: BrokerConfig, cluster_id: str) -> MetadataCache:
    """This broker's metadata cache, knowing itself as the only broker so far."""
    metadata = MetadataCache(cluster_id=cluster_id, controller_id=config.node_id)
    metadata.brokers[config.node_id] = BrokerEndpoint(
        config.node_id, config.advertised, config.port, config.broker_rack
    )
    return metadata


class EmptyLog(NamedTuple):
    """DescribeLogDirs' entry for a partition led before its log exists (no bytes yet)."""

    topic: str
    partition: int
    size_bytes: int = 0


@dataclass(frozen=True)
class HostedLogs:
    """The LogDirs DescribeLogDirs reads: the log manager's logs plus an `EmptyLog` for each
    deferred leader (replica_manager), so every hosted partition is listed, as Kafka lists every
    replica, without creating any log."""

    log_manager: LogManager
    replicas: ReplicaManager

    @property
    def log_dir(self) -> Path:
        return self.log_manager.log_dir

    def logs(self) -> list[HostedLog]:
        deferred = [
            EmptyLog(topic, index) for (topic, index), _ in self.replicas.deferred_leaders()
        ]
        return [*self.log_manager.logs(), *deferred]


def register_storage_metrics(
    registry: CollectorRegistry, log_manager: LogManager, replicas: ReplicaManager
) -> None:
    def log_sizes() -> list[tuple[str, int, int]]:
        deferred = [(topic, index, 0) for (topic, index), _ in replicas.deferred_leaders()]
        return [(p.topic, p.index, p.log.size_bytes) for p in replicas.partitions()] + deferred

    def deferred_min_isrs() -> list[int]:
        return [d.config.min_insync_replicas for _, d in replicas.deferred_leaders()]

    registry.register(LogSizeCollector(log_sizes))
    registry.register(ReplicaManagerCollector(replicas.partitions, deferred_min_isrs))
    registry.register(LastStableOffsetLagCollector(replicas.partitions))
    if log_manager.cleaner is not None:
        registry.register(CleanerCollector(log_manager.cleaner))


class Broker:
    """The parts of one broker and their start/stop. Built only by the composition roots."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock,
        registry: CollectorRegistry,
        purgatory: Purgatory,
        server_metrics: ServerMetrics,
        topic_metrics: BrokerTopicMetrics,
        log_manager: LogManager,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        topics: TopicRegistry,
        producer_ids: ProducerIdSource,
        groups: GroupWiring,
        transactions: TransactionWiring,
        routes: RouteTable,
        cluster: Membership | None = None,
        txn_verification: TxnVerification | None = None,
        tiered: TieredWiring | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.registry = registry
        self.purgatory = purgatory
        self.server_metrics = server_metrics
        self.topic_metrics = topic_metrics
        self.log_manager = log_manager
        self.metadata = metadata
        self.replicas = replicas
        self.topics = topics
        self.producer_ids = producer_ids
        self.groups = groups
        self.transactions = transactions
        self.routes = routes
        self.cluster = cluster
        self.txn_verification = txn_verification  # None: partition verification disabled
        self.tiered = tiered  # None: remote.log.storage.system.enable=false
        self._listener: Listener | None = None
        self._jobs: list[asyncio.Task[None]] = []
        self._joined = False  # registered in ZooKeeper; stop() before that has nothing to move

    @property
    def port(self) -> int:
        assert self._listener is not None
        return self._listener.port

    async def start(self) -> None:
        quotas = ConnectionQuotas(  # first: an override host that does not resolve stops start-up
            self.config.max_connections,
            self.config.max_connections_per_ip,
            resolve_overrides(self.config.max_connections_per_ip_overrides),
        )
        self.log_manager.startup()
        self.replicas.startup()
        self.topics.load()
        self.groups.start()  # reads __consumer_offsets back; COORDINATOR_LOAD_IN_PROGRESS until done
        self.transactions.start()  # and __transaction_state
        dispatcher = Dispatcher(self.routes, self.server_metrics)
        limits = FrameLimits(max_request_bytes=self.config.socket_request_max_bytes)
        self._listener = Listener(
            dispatcher,
            self.config.host,
            self.config.port,
            limits=limits,
            metrics=self.server_metrics,
            connections_max_idle_ms=self.config.connections_max_idle_ms,
            queued_max_request_bytes=self.config.queued_max_request_bytes,
            quotas=quotas,
        )
        await self._listener.start()
        if self.config.port == 0:  # an ephemeral port: advertise the one we got
            endpoint = self.metadata.brokers[self.config.node_id]
            self.metadata.brokers[self.config.node_id] = BrokerEndpoint(
                endpoint.node_id, endpoint.host, self.port, endpoint.rack
            )
        if self.cluster is not None:
            await self.cluster.start()
            self._joined = True
            self._schedule(self.replicas.isr_shrink_interval_ms, self.replicas.shrink_isrs)
        if self.config.metrics_port is not None:
            start_http_server(
                self.config.metrics_port, addr=self.config.host, registry=self.registry
            )
        self._schedule(self.config.retention_check_interval_ms, self._retention)
        self._schedule(self.config.flush_scheduler_interval_ms, self._flush)
        self._schedule(self.config.checkpoint_interval_ms, self._checkpoint)
        self._schedule(1_000, self._delayed_deletes)
        cleaner = self.log_manager.cleaner
        if cleaner is not None and cleaner.config.enable:
            self._schedule(cleaner.config.backoff_ms, self._clean)
        self._schedule(TICK_INTERVAL_MS, self.groups.tick)
        retention_check_ms = self.groups.config.offsets_retention_check_interval_ms
        self._schedule(retention_check_ms, self.groups.expire_offsets)
        txn = self.transactions.config
        self._schedule(txn.abort_timed_out_interval_ms, self.transactions.abort_timed_out)
        self._schedule(txn.remove_expired_interval_ms, self.transactions.expire_ids)
        if self.tiered is not None:
            self._schedule(self.tiered.task_interval_ms, self.tiered.manager.run)

    async def stop(self) -> None:
        """Close the listener first so no append races the final flush and checkpoint."""
        if self.cluster is not None and self._joined:  # leadership moves away first (Kafka)
            await self.cluster.controlled_shutdown()
        if self._listener is not None:
            await self._listener.stop()
        for job in self._jobs:
            job.cancel()
        for job in self._jobs:
            with contextlib.suppress(asyncio.CancelledError):
                await job
        if self.txn_verification is not None:
            await self.txn_verification.close()
        await self.transactions.stop()
        await self.groups.stop()
        if self.cluster is not None:
            await self.cluster.stop()
            await self.replicas.shutdown()
        self.replicas.checkpoint_high_watermarks()
        self.log_manager.shutdown()
        if self.tiered is not None:
            await self.tiered.writer.close()
            self.tiered.manager.store.close()

    def _schedule(self, interval_ms: int, job: Callable[[], Awaitable[None]]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    await job()
                except Exception as exc:  # a failed job is logged and retried next interval
                    log.error("event=job_failed job=%s error=%r", job.__name__, exc)

        self._jobs.append(asyncio.create_task(loop()))

    async def _retention(self) -> None:
        deleted = self.log_manager.run_retention()
        if deleted:
            log.info("event=retention deleted_segments=%d", deleted)

    async def _flush(self) -> None:
        await self.log_manager.run_flush_async()

    async def _checkpoint(self) -> None:
        self.log_manager.checkpoint()
        self.replicas.checkpoint_high_watermarks()

    async def _clean(self) -> None:
        """Compaction: the heavy part runs in a worker thread, swaps on this loop."""
        await self.log_manager.run_cleaner_async()

    async def _delayed_deletes(self) -> None:
        self.log_manager.run_delayed_deletes()


@dataclass(frozen=True, slots=True)
class CoreParts:
    """What both composition roots build the same way before their mode-specific parts."""

    config: BrokerConfig
    clock: Clock
    registry: CollectorRegistry
    purgatory: Purgatory
    server_metrics: ServerMetrics
    topic_metrics: BrokerTopicMetrics
    log_manager: LogManager
    metadata: MetadataCache
    replicas: ReplicaManager


def assemble(
    core: CoreParts,
    topics: TopicRegistry,
    producer_ids: ProducerIdSource,
    *,
    zookeeper_mode: bool,
    extra_routes: list[Route] | None = None,
    cluster: Membership | None = None,
) -> Broker:
    """The last steps both roots share: the group coordinator over `__consumer_offsets`, the
    transaction coordinator over `__transaction_state` (and the produce path's verification
    with it, KIP-890 part 1), the handlers' narrow services, the route table (plus `extra_routes`), and the `Broker`."""
    groups = GroupWiring(
        core.config.properties,
        metadata=core.metadata,
        topics=topics,
        replicas=core.replicas,
        purgatory=core.purgatory,
        clock=core.clock,
        registry=core.registry,
        zookeeper_mode=zookeeper_mode,
    )
    # Deleted partitions' offsets go from every group (Kafka's onPartitionsDeleted).
    core.metadata.on_partitions_deleted(groups.coordinator.partitions_deleted)
    transactions = TransactionWiring(
        core.config.properties,
        node_id=core.config.node_id,
        metadata=core.metadata,
        topics=topics,
        replicas=core.replicas,
        purgatory=core.purgatory,
        clock=core.clock,
        registry=core.registry,
        producer_ids=producer_ids,
        groups=groups,
        zookeeper_mode=zookeeper_mode,
    )
    verification = None
    if transactions.config.partition_verification_enable:
        verification = TxnVerification(
            transactions.coordinator,
            core.metadata,
            node_id=core.config.node_id,
            zookeeper_mode=zookeeper_mode,
        )
    tiered = build_tiered(
        core.config, metadata=core.metadata, topics=topics, replicas=core.replicas,
        purgatory=core.purgatory, clock=core.clock, registry=core.registry,
        zookeeper_mode=zookeeper_mode,
    )  # fmt: skip
    services = HandlerServices(
        config=core.config,
        clock=core.clock,
        metadata=core.metadata,
        replicas=core.replicas,
        purgatory=core.purgatory,
        topics=topics,
        groups=groups,
        transactions=transactions,
        producer_ids=producer_ids,
        log_dirs=HostedLogs(core.log_manager, core.replicas),
        topic_metrics=core.topic_metrics,
        zookeeper_mode=zookeeper_mode,
        txn_verifier=verification,
        tiered=None if tiered is None else tiered.manager,
    )
    return Broker(
        core.config,
        clock=core.clock,
        registry=core.registry,
        purgatory=core.purgatory,
        server_metrics=core.server_metrics,
        topic_metrics=core.topic_metrics,
        log_manager=core.log_manager,
        metadata=core.metadata,
        replicas=core.replicas,
        topics=topics,
        producer_ids=producer_ids,
        groups=groups,
        transactions=transactions,
        routes=build_route_table(services, extra_routes),
        cluster=cluster,
        txn_verification=verification,
        tiered=tiered,
    )
