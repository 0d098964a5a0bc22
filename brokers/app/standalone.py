"""A standalone broker: wires storage, partitions, the topic registry, handlers and the listener.

Owns: start-up order (log recovery before the listener opens), the periodic jobs (retention,
flush, checkpoints, delayed segment deletes), the metrics endpoint, and clean shutdown (listener
closed first, then logs flushed, checkpoints and the clean-shutdown marker written).
Runs on one asyncio event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server

from brokers.app.groups import TICK_INTERVAL_MS, GroupWiring
from brokers.common.clock import SYSTEM_CLOCK, Clock
from brokers.common.config import BrokerConfig
from brokers.coordinator.producer_ids import FileBlockStore, ProducerIdManager
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.metrics import CleanerCollector
from brokers.log.config import LogConfig
from brokers.log.log_manager import LogManager
from brokers.log.meta_properties import read_cluster_id, write_cluster_id
from brokers.log.metrics import LogSizeCollector
from brokers.replication.local_topics import LocalTopicRegistry
from brokers.replication.metadata_cache import BrokerEndpoint, MetadataCache
from brokers.replication.metrics import IsrChangeCounters, ReplicaManagerCollector
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.dispatcher import Dispatcher
from brokers.server.listener import Listener
from brokers.server.metrics import ServerMetrics
from brokers.server.purgatory import Purgatory
from brokers.wire.framing import FrameLimits

if TYPE_CHECKING:
    from brokers.app.zk_mode import ClusterMode
    from brokers.zk.topics import ZkTopicAdmin

log = logging.getLogger("pier.broker")


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        registry: CollectorRegistry | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.clock = clock
        self.registry = registry or CollectorRegistry()
        self.purgatory = Purgatory()
        self.topic_metrics = BrokerTopicMetrics(self.registry)
        self.server_metrics = ServerMetrics(self.registry)
        data_dir = config.data_dir
        self.log_manager = LogManager(
            data_dir,
            clock=clock,
            default_config=LogConfig.from_properties({}, config.properties),
            cleaner_config=CleanerConfig.from_properties(config.properties),
        )
        # ZooKeeper mode takes the cluster id from `/cluster/id` on joining; until then none.
        stored = read_cluster_id(data_dir)
        if stored is None and config.zookeeper_connect is None:
            stored = write_cluster_id(data_dir, uuid.uuid4().hex[:22])
        self.metadata = MetadataCache(cluster_id=stored or "", controller_id=config.node_id)
        self.metadata.brokers[config.node_id] = BrokerEndpoint(
            config.node_id, config.advertised, config.port, config.broker_rack
        )
        self.replicas = ReplicaManager(
            self.log_manager,
            data_dir,
            node_id=config.node_id,
            clock=clock,
            on_append=self.purgatory.notify,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            broker_properties=config.properties,  # broker defaults of logs LeaderAndIsr creates
        )
        self.topics: LocalTopicRegistry | ZkTopicAdmin = LocalTopicRegistry(
            data_dir,
            self.replicas,
            self.metadata,
            node_id=config.node_id,
            broker_defaults=config.properties,
        )
        self.producer_ids = ProducerIdManager(FileBlockStore(data_dir / "pier-producer-id-block"))
        self.cluster: ClusterMode | None = None
        if config.zookeeper_connect is not None:  # ZooKeeper mode replaces topics and producer ids
            from brokers.app.zk_mode import ClusterMode

            self.cluster = ClusterMode(self, config.zookeeper_connect)
        self.registry.register(LogSizeCollector(self._log_sizes))
        self.registry.register(ReplicaManagerCollector(self.replicas.partitions))
        self.replicas.isr_update_observer = IsrChangeCounters(self.registry).record
        if self.log_manager.cleaner is not None:
            self.registry.register(CleanerCollector(self.log_manager.cleaner))
        self.groups = GroupWiring(self)  # group coordinator and __consumer_offsets
        self._listener: Listener | None = None
        self._jobs: list[asyncio.Task[None]] = []

    @property
    def port(self) -> int:
        assert self._listener is not None
        return self._listener.port

    async def start(self) -> None:
        self.log_manager.startup()
        self.replicas.startup()
        self.topics.load()
        self.groups.start()  # reads __consumer_offsets back; COORDINATOR_LOAD_IN_PROGRESS until done
        from brokers.handlers import build_route_table  # handlers depend on Broker, not vice versa

        table = build_route_table(self)
        for route in self.cluster.routes() if self.cluster is not None else []:
            table.add(route)
        dispatcher = Dispatcher(table, self.server_metrics)
        limits = FrameLimits(max_request_bytes=self.config.socket_request_max_bytes)
        self._listener = Listener(
            dispatcher,
            self.config.host,
            self.config.port,
            limits=limits,
            metrics=self.server_metrics,
            connections_max_idle_ms=self.config.connections_max_idle_ms,
            queued_max_request_bytes=self.config.queued_max_request_bytes,
        )
        await self._listener.start()
        if self.config.port == 0:  # an ephemeral port: advertise the one we got
            endpoint = self.metadata.brokers[self.config.node_id]
            self.metadata.brokers[self.config.node_id] = BrokerEndpoint(
                endpoint.node_id, endpoint.host, self.port, endpoint.rack
            )
        if self.cluster is not None:
            await self.cluster.start()
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

    async def stop(self) -> None:
        """Close the listener first so no append races the final flush and checkpoint."""
        if self.cluster is not None:  # leadership moves away while we still serve (Kafka)
            await self.cluster.controlled_shutdown()
        if self._listener is not None:
            await self._listener.stop()
        for job in self._jobs:
            job.cancel()
        for job in self._jobs:
            with contextlib.suppress(asyncio.CancelledError):
                await job
        await self.groups.stop()
        if self.cluster is not None:
            await self.cluster.stop()
            await self.replicas.shutdown()
        self.replicas.checkpoint_high_watermarks()
        self.log_manager.shutdown()

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
        self.log_manager.run_flush()

    async def _checkpoint(self) -> None:
        self.log_manager.checkpoint()
        self.replicas.checkpoint_high_watermarks()

    async def _clean(self) -> None:
        """Compaction: the heavy part runs in a worker thread, swaps on this loop."""
        await self.log_manager.run_cleaner_async()

    async def _delayed_deletes(self) -> None:
        self.log_manager.run_delayed_deletes()

    def _log_sizes(self) -> list[tuple[str, int, int]]:
        return [(p.topic, p.index, p.log.size_bytes) for p in self.replicas.partitions()]
