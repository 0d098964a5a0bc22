"""The composition root of a ZooKeeper-mode broker, and its part of the broker's lifecycle.

Owns: `build_zk_broker`, the only place a broker of a ZooKeeper cluster is assembled, each part
built once and handed what it uses: the ZooKeeper session (`ZkClient`), `TopicConfigs` (topic
overrides from ZooKeeper, applied to the log manager's logs and read by new logs), the leader's
`ZkIsrWriter`, the replica manager (given both), the `ZkTopicAdmin` the handlers use as their
topic admin, producer-id blocks from ZooKeeper (`ZkBlockStore`), the controller election and the
`Controller` it drives (with its `ControllerChannel` and metrics), the broker-side `BrokerFence`,
the group and transaction coordinators (`runtime.assemble`; both follow the leadership of
their internal topics' partitions), and the route table: the client routes plus the four control APIs and the
controller's admin APIs (ElectLeaders, Alter/List partition reassignments; NOT_CONTROLLER on the
other brokers). `ClusterMode` is ZooKeeper mode's part of `brokers.app.runtime.Broker`'s
lifecycle. Start-up order (`start`, after the listener is open so the registration advertises
the real port): session, `/cluster/id` (as Kafka's broker, which reads or creates it), the
`/config/changes` listener and ZooKeeper's overrides applied to the logs found on disk,
registration with a broker epoch (`BrokerRegistrar`; a duplicate id stops the broker), then the
election. `stop` ends the term and closes the session, so the registration and a held
`/controller` vanish at once; before that, `controlled_shutdown` (run by `Broker.stop`) has the
controller move this broker's leadership away first, so clients fail over without waiting for
the session timeout. Built before the event loop serves; runs on the broker's event loop; not
thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from brokers.app.runtime import (
    Broker,
    CoreParts,
    assemble,
    log_manager_for,
    metadata_cache_for,
    register_storage_metrics,
)
from brokers.common.clock import SYSTEM_CLOCK, Clock
from brokers.common.config import BrokerConfig, BrokerConfigError
from brokers.controller import requests as rq
from brokers.controller import zk_paths
from brokers.controller.channel import ControllerChannel, frame_request, read_response
from brokers.controller.controller import Controller
from brokers.controller.controller_store import ControllerStore
from brokers.controller.election import ControllerElection
from brokers.controller.errors import (
    ControllerError,
    ControllerMovedError,
    InconsistentClusterIdError,
)
from brokers.controller.metrics import ControllerCollector, ControllerStats
from brokers.controller.producer_id_block import ZkBlockStore
from brokers.controller.registration import BrokerRegistrar
from brokers.controller.state import BrokerEndpoint
from brokers.controller.zk_client import ZkClient
from brokers.controller.zk_isr_writer import ZkIsrWriter
from brokers.coordinator.producer_ids import ProducerIdManager
from brokers.handlers import (
    alter_partition_reassignments,
    controlled_shutdown,
    elect_leaders,
    leader_and_isr,
    list_partition_reassignments,
    stop_replica,
    update_metadata,
)
from brokers.handlers.control_fence import BrokerFence
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.log.meta_properties import read_cluster_id, write_cluster_id
from brokers.replication.metadata_cache import MetadataCache
from brokers.replication.metrics import IsrChangeCounters
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.metrics import ServerMetrics
from brokers.server.purgatory import Purgatory
from brokers.server.routes import Route
from brokers.zk.config_changes import (
    DEFAULT_EXPIRATION_MS,
    EXPIRATION_PROPERTY,
    ConfigChangeListener,
)
from brokers.zk.topic_configs import TopicConfigs
from brokers.zk.topics import ZkTopicAdmin

log = logging.getLogger("pier.cluster")
SHUTDOWN_REQUEST_TIMEOUT_S = 10.0


def _flag(properties: Mapping[str, str], key: str, default: bool) -> bool:
    return properties.get(key, str(default)).strip().lower() == "true"


def build_zk_broker(
    config: BrokerConfig,
    *,
    clock: Clock = SYSTEM_CLOCK,
    registry: CollectorRegistry | None = None,
) -> Broker:
    """A ZooKeeper-mode broker: the standalone parts where they are the same, ZooKeeper's where
    they differ (ISR writes, topic admin, topic configs, producer-id blocks), the controller and
    its election, and the control/controller routes on top of the client routes."""
    config.validate()
    if config.zookeeper_connect is None:
        raise BrokerConfigError("a ZooKeeper-mode broker needs zookeeper.connect")
    properties = dict(config.properties)
    registry = registry or CollectorRegistry()
    purgatory = Purgatory()
    topic_metrics = BrokerTopicMetrics(registry)
    server_metrics = ServerMetrics(registry)
    log_manager = log_manager_for(config, clock)
    # The cluster id comes from `/cluster/id` on joining; until then the stored one, or none.
    metadata = metadata_cache_for(config, read_cluster_id(config.data_dir) or "")
    session_ms = int(properties.get("zookeeper.session.timeout.ms", "18000"))
    zk = ZkClient(config.zookeeper_connect, session_timeout_s=session_ms / 1000)
    topic_configs = TopicConfigs(zk, metadata, log_manager, broker_defaults=config.properties)
    isr_writer = ZkIsrWriter(zk, config.node_id)
    replicas = ReplicaManager(
        log_manager,
        config.data_dir,
        node_id=config.node_id,
        clock=clock,
        on_append=purgatory.notify,
        isr_writer=isr_writer,
        new_log_overrides=topic_configs.for_new_log,
        isr_update_observer=IsrChangeCounters(registry).record,
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        broker_properties=config.properties,  # broker defaults of logs LeaderAndIsr creates
    )
    register_storage_metrics(registry, log_manager, replicas)
    replicas.on_topic_gone(topic_metrics.forget)  # a deleted topic's series go with it
    topics = ZkTopicAdmin(
        zk, metadata, log_manager, broker_defaults=config.properties, configs=topic_configs
    )
    producer_ids = ProducerIdManager(ZkBlockStore(zk, config.node_id))
    election, controller = _controller(config, clock, registry, zk)
    topic_configs.listeners.append(controller.topic_config_changed)
    topic_configs.listeners.append(replicas.topic_config_changed)  # logs not created yet
    fence = BrokerFence()
    cluster = ClusterMode(
        config,
        clock=clock,
        metadata=metadata,
        zk=zk,
        fence=fence,
        election=election,
        controller=controller,
        isr_writer=isr_writer,
        topic_configs=topic_configs,
        config_changes=ConfigChangeListener(
            zk,
            clock,
            topic_configs.refresh,
            expiration_ms=int(properties.get(EXPIRATION_PROPERTY, DEFAULT_EXPIRATION_MS)),
        ),
    )
    core = CoreParts(
        config, clock, registry, purgatory, server_metrics, topic_metrics, log_manager, metadata,
        replicas,
    )  # fmt: skip
    control = _control_routes(fence, metadata, replicas, controller)
    return assemble(
        core, topics, producer_ids, zookeeper_mode=True, extra_routes=control, cluster=cluster
    )


def _controller(
    config: BrokerConfig, clock: Clock, registry: CollectorRegistry, zk: ZkClient
) -> tuple[ControllerElection, Controller]:
    """The controller this broker runs while it holds `/controller`, the election that starts
    and ends its terms, its channel to the brokers, and its metrics."""
    properties = config.properties
    election = ControllerElection(zk, config.node_id, clock)
    channel = ControllerChannel(client_id=f"pier-controller-{config.node_id}")
    controller = Controller(
        zk,
        election,
        channel,
        unclean_default=_flag(properties, "unclean.leader.election.enable", False),
        auto_rebalance=_flag(properties, "auto.leader.rebalance.enable", True),
        rebalance_interval_s=int(properties.get("leader.imbalance.check.interval.seconds", "300")),
        imbalance_percentage=int(properties.get("leader.imbalance.per.broker.percentage", "10")),
    )
    election.follow(controller.on_elected, controller.on_resigned)
    stats = ControllerStats(registry, clock)
    controller.observe_events(stats)
    registry.register(ControllerCollector(controller, stats))
    return election, controller


def _control_routes(
    fence: BrokerFence, metadata: MetadataCache, replicas: ReplicaManager, controller: Controller
) -> list[Route]:
    """The four controller→broker APIs and the controller's admin APIs (ElectLeaders,
    Alter/List partition reassignments; NOT_CONTROLLER on the other brokers)."""
    return [
        leader_and_isr.route(fence, metadata, replicas),
        stop_replica.route(fence, replicas),
        update_metadata.route(fence, metadata),
        controlled_shutdown.route(controller),
        elect_leaders.route(controller),
        alter_partition_reassignments.route(controller),
        list_partition_reassignments.route(controller),
    ]


class ClusterMode:
    """ZooKeeper mode's part of the broker's lifecycle: joining, controlled shutdown, leaving."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock,
        metadata: MetadataCache,
        zk: ZkClient,
        fence: BrokerFence,
        election: ControllerElection,
        controller: Controller,
        isr_writer: ZkIsrWriter,
        topic_configs: TopicConfigs,
        config_changes: ConfigChangeListener,
    ) -> None:
        self._config = config
        self._clock = clock
        self._metadata = metadata
        self.zk = zk
        self.fence = fence
        self.election = election
        self.controller = controller
        self.isr_writer = isr_writer
        self.topic_configs = topic_configs
        self.config_changes = config_changes
        self.registrar: BrokerRegistrar | None = None

    async def start(self) -> None:
        """Join the cluster; raises `DuplicateBrokerIdError` / `ZooKeeperUnavailableError`."""
        config = self._config
        await self.zk.start()
        self._metadata.cluster_id = await self._join_cluster_id()
        await self.config_changes.start()
        await self.topic_configs.load_local()  # logs on disk opened with the broker defaults
        registration = zk_paths.BrokerRegistration(
            config.node_id, self._endpoints(), config.broker_rack, self._clock.time_ms()
        )
        self.registrar = BrokerRegistrar(
            self.zk, registration, self._clock, on_registered=self.fence.on_registered
        )
        epoch = await self.registrar.register()
        await self.election.start()
        log.info(
            "event=cluster_joined node_id=%d broker_epoch=%d controller=%d",
            config.node_id,
            epoch,
            self.election.active_controller,
        )

    def _endpoints(self) -> tuple[BrokerEndpoint, ...]:
        """PLAINTEXT for clients, plus REPLICATION when `inter.broker.advertised.address` is set
        (Kafka's split listeners; the controller and followers use the second)."""
        config = self._config
        client = self._metadata.brokers[config.node_id]
        endpoints = [BrokerEndpoint(zk_paths.CLIENT_LISTENER, client.host, client.port)]
        inter_broker = config.inter_broker_address
        if inter_broker is not None:
            host, port = inter_broker
            endpoints.append(BrokerEndpoint(zk_paths.INTER_BROKER_LISTENER, host, port))
        return tuple(endpoints)

    async def _join_cluster_id(self) -> str:
        """`/cluster/id` (created by the first broker), checked against meta.properties as Kafka
        does: a data dir of another cluster refuses to join rather than mix their logs."""
        cluster_id = await ControllerStore(self.zk).create_top_level_paths()
        data_dir = self._config.data_dir
        stored = read_cluster_id(data_dir)
        if stored is not None and stored != cluster_id:
            raise InconsistentClusterIdError(
                f"the cluster id {cluster_id} in ZooKeeper does not match the stored cluster id "
                f"{stored} in {data_dir}/meta.properties: the broker is trying to join the wrong "
                "cluster"
            )
        return write_cluster_id(data_dir, cluster_id)

    async def controlled_shutdown(self, poll_s: float = 0.2) -> bool:
        """Kafka's controlled shutdown (SIGTERM): ask the controller to move this broker's
        leadership away, repeating until it reports none left; False if it never did. The time
        allowed is Kafka's `controlled.shutdown.max.retries` × `controlled.shutdown.retry.
        backoff.ms` (3 × 5 s), polled every `poll_s` so a quick move ends the wait at once."""
        properties = self._config.properties
        if not _flag(properties, "controlled.shutdown.enable", True):
            return False
        retries = int(properties.get("controlled.shutdown.max.retries", "3"))
        backoff_ms = int(properties.get("controlled.shutdown.retry.backoff.ms", "5000"))
        deadline = asyncio.get_running_loop().time() + retries * backoff_ms / 1000
        node_id, epoch = self._config.node_id, self.fence.broker_epoch
        request = rq.ControlledShutdownRequest(broker_id=node_id, broker_epoch=epoch)
        while (left_s := deadline - asyncio.get_running_loop().time()) > 0:
            # Each attempt ends with the time allowed (a busy controller queue, a request's own
            # 10 s timeouts): SIGTERM must not outlive it, whoever is slow to answer.
            with contextlib.suppress(OSError, TimeoutError, ControllerError):
                async with asyncio.timeout(left_s):
                    if self.controller.active:
                        if not await self.controller.controlled_shutdown(node_id, epoch):
                            return True
                    else:
                        response = await self._ask_controller(request)
                        if response.error_code == 0 and not response.remaining_partitions:
                            return True
            await asyncio.sleep(poll_s)
        log.warning("event=controlled_shutdown_incomplete node_id=%d", node_id)
        return False

    async def _ask_controller(self, request: rq.ControlledShutdownRequest) -> Any:
        # Broker-to-controller traffic uses the inter-broker listener, as Kafka's does.
        controller = self._metadata.inter_broker_endpoint(self.election.active_controller)
        if controller is None:
            raise ControllerMovedError("no known controller")
        async with asyncio.timeout(SHUTDOWN_REQUEST_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(controller.host, controller.port)
        try:
            writer.write(frame_request(request, 1, b"pier-shutdown"))
            async with asyncio.timeout(SHUTDOWN_REQUEST_TIMEOUT_S):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
            return read_response(rq.CONTROLLED_SHUTDOWN, frame, 1)
        finally:
            writer.close()

    async def stop(self) -> None:
        await self.config_changes.stop()
        await self.controller.close()
        await self.isr_writer.close()
        await self.zk.close()
