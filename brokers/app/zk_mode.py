"""ZooKeeper mode for a broker: the composition of membership, election, controller and fencing.

Owns: building, for one `Broker`, the ZooKeeper session (`ZkClient`), its registration with a
broker epoch (`BrokerRegistrar`), the controller election and the `Controller` it drives, the
controller→broker `ControllerChannel`, the broker-side `BrokerFence`, the leader's `ZkIsrWriter`
(injected into the replica manager), producer-id blocks from ZooKeeper (`ZkBlockStore`) and the
`ZkTopicAdmin` that replaces the standalone topic registry as `broker.topics`. `routes()` gives
the four control APIs and the controller's admin APIs (ElectLeaders, Alter/List partition
reassignments; NOT_CONTROLLER on the other brokers). Start-up order (`start`, after the listener is open so the registration
advertises the real port): session, `/cluster/id` (as Kafka's broker, which reads or creates
it), registration (a duplicate id stops the broker), then the election. `stop` ends the term and
closes the session, so the registration and a held `/controller` vanish at once; before that,
`controlled_shutdown` (run by `Broker.stop`) has the controller move this broker's leadership
away first, so clients fail over without waiting for the session timeout.
Topic configs: `TopicConfigs` (shared with the topic admin) and the `/config/changes` listener
bring config changes to every broker's logs and to the controller, and give new logs their
topic's overrides from ZooKeeper; `start` arms the listener and applies ZooKeeper's overrides to
the logs found on disk before the registration.
Runs on the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

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
from brokers.handlers.control_fence import BrokerFence
from brokers.log.meta_properties import read_cluster_id, write_cluster_id
from brokers.server.routes import Route
from brokers.zk.config_changes import (
    DEFAULT_EXPIRATION_MS,
    EXPIRATION_PROPERTY,
    ConfigChangeListener,
)
from brokers.zk.topic_configs import TopicConfigs
from brokers.zk.topics import ZkTopicAdmin

if TYPE_CHECKING:
    from brokers.app.standalone import Broker

log = logging.getLogger("pier.cluster")
SHUTDOWN_REQUEST_TIMEOUT_S = 10.0


def _flag(properties: Mapping[str, str], key: str, default: bool) -> bool:
    return properties.get(key, str(default)).strip().lower() == "true"


class ClusterMode:
    def __init__(self, broker: Broker, connect: str) -> None:
        config = broker.config
        properties = dict(config.properties)
        self._broker = broker
        session_ms = int(properties.get("zookeeper.session.timeout.ms", "18000"))
        self.zk = ZkClient(connect, session_timeout_s=session_ms / 1000)
        self.fence = BrokerFence()
        self.channel = ControllerChannel(client_id=f"pier-controller-{config.node_id}")
        self.election = ControllerElection(self.zk, config.node_id, broker.clock)
        self.controller = Controller(
            self.zk,
            self.election,
            self.channel,
            unclean_default=_flag(properties, "unclean.leader.election.enable", False),
            auto_rebalance=_flag(properties, "auto.leader.rebalance.enable", True),
            rebalance_interval_s=int(
                properties.get("leader.imbalance.check.interval.seconds", "300")
            ),
            imbalance_percentage=int(
                properties.get("leader.imbalance.per.broker.percentage", "10")
            ),
        )
        stats = ControllerStats(broker.registry, broker.clock)
        self.controller.observe_events(stats)
        broker.registry.register(ControllerCollector(self.controller, stats))
        self.election._on_elected = self.controller.on_elected  # wired after both exist
        self.election._on_resigned = self.controller.on_resigned
        self.registrar: BrokerRegistrar | None = None
        self.isr_writer = ZkIsrWriter(self.zk, config.node_id)
        broker.replicas.isr_writer = self.isr_writer
        broker.producer_ids = ProducerIdManager(ZkBlockStore(self.zk, config.node_id))
        self.topic_configs = TopicConfigs(
            self.zk, broker.metadata, broker.replicas, broker_defaults=config.properties
        )
        self.topic_configs.listeners.append(self.controller.topic_config_changed)
        broker.replicas.new_log_overrides = self.topic_configs.for_new_log
        self.config_changes = ConfigChangeListener(
            self.zk,
            broker.clock,
            self.topic_configs.refresh,
            expiration_ms=int(properties.get(EXPIRATION_PROPERTY, DEFAULT_EXPIRATION_MS)),
        )
        broker.topics = ZkTopicAdmin(
            self.zk,
            broker.metadata,
            broker.replicas,
            broker_defaults=config.properties,
            configs=self.topic_configs,
        )

    def routes(self) -> list[Route]:
        from brokers.handlers import (
            alter_partition_reassignments,
            controlled_shutdown,
            elect_leaders,
            leader_and_isr,
            list_partition_reassignments,
            stop_replica,
            update_metadata,
        )

        broker = self._broker
        return [
            leader_and_isr.route(self.fence, broker.metadata, broker.replicas),
            stop_replica.route(self.fence, broker.replicas),
            update_metadata.route(self.fence, broker.metadata),
            controlled_shutdown.route(self.controller),
            elect_leaders.route(self.controller),
            alter_partition_reassignments.route(self.controller),
            list_partition_reassignments.route(self.controller),
        ]

    async def start(self) -> None:
        """Join the cluster; raises `DuplicateBrokerIdError` / `ZooKeeperUnavailableError`."""
        broker, config = self._broker, self._broker.config
        await self.zk.start()
        broker.metadata.cluster_id = await self._join_cluster_id()
        await self.config_changes.start()
        await self.topic_configs.load_local()  # logs on disk opened with the broker defaults
        registration = zk_paths.BrokerRegistration(
            config.node_id, self._endpoints(), config.rack, broker.clock.time_ms()
        )
        self.registrar = BrokerRegistrar(
            self.zk, registration, broker.clock, on_registered=self.fence.on_registered
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
        config = self._broker.config
        client = self._broker.metadata.brokers[config.node_id]
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
        data_dir = self._broker.config.data_dir
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
        properties = self._broker.config.properties
        if not _flag(properties, "controlled.shutdown.enable", True):
            return False
        retries = int(properties.get("controlled.shutdown.max.retries", "3"))
        backoff_ms = int(properties.get("controlled.shutdown.retry.backoff.ms", "5000"))
        deadline = asyncio.get_running_loop().time() + retries * backoff_ms / 1000
        node_id, epoch = self._broker.config.node_id, self.fence.broker_epoch
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
        controller = self._broker.metadata.inter_broker_endpoint(self.election.active_controller)
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
