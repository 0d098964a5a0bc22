"""ZooKeeper mode for a broker: the composition of membership, election, controller and fencing.

Owns: building, for one `Broker`, the ZooKeeper session (`ZkClient`), its registration with a
broker epoch (`BrokerRegistrar`), the controller election and the `Controller` it drives, the
controller→broker `ControllerChannel`, the broker-side `BrokerFence`, the leader's `ZkIsrWriter`
(injected into the replica manager), producer-id blocks from ZooKeeper (`ZkBlockStore`) and the
`ZkTopicAdmin` that replaces the standalone topic registry as `broker.topics`. `routes()` gives
the four control APIs. Start-up order (`start`, after the listener is open so the registration
advertises the real port): session, `/cluster/id` (as Kafka's broker, which reads or creates
it), registration (a duplicate id stops the broker), then the election. `stop` ends the term and
closes the session, so the registration and a held `/controller` vanish at once; before that,
`controlled_shutdown` (run by `Broker.stop`) has the controller move this broker's leadership
away first, so clients fail over without waiting for the session timeout.
Runs on the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import TYPE_CHECKING, Any

from brokers.controller import requests as rq
from brokers.controller import zk_paths
from brokers.controller.channel import ControllerChannel, frame_request, read_response
from brokers.controller.controller import Controller
from brokers.controller.controller_store import ControllerStore
from brokers.controller.election import ControllerElection
from brokers.controller.errors import ControllerError, ControllerMovedError
from brokers.controller.producer_id_block import ZkBlockStore
from brokers.controller.registration import BrokerRegistrar
from brokers.controller.state import BrokerEndpoint
from brokers.controller.zk_client import ZkClient
from brokers.controller.zk_isr_writer import ZkIsrWriter
from brokers.coordinator.producer_ids import ProducerIdManager
from brokers.handlers.control_fence import BrokerFence
from brokers.server.routes import Route
from brokers.zk_topics import ZkTopicAdmin

if TYPE_CHECKING:
    from brokers.broker import Broker

log = logging.getLogger("pier.cluster")
SHUTDOWN_REQUEST_TIMEOUT_S = 10.0


def _flag(properties: dict[str, str], key: str, default: bool) -> bool:
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
        self.election._on_elected = self.controller.on_elected  # wired after both exist
        self.election._on_resigned = self.controller.on_resigned
        self.registrar: BrokerRegistrar | None = None
        self.isr_writer = ZkIsrWriter(self.zk, config.node_id)
        broker.replicas.isr_writer = self.isr_writer
        broker.producer_ids = ProducerIdManager(ZkBlockStore(self.zk, config.node_id))
        broker.topics = ZkTopicAdmin(
            self.zk, broker.metadata, broker.replicas, broker_defaults=config.properties
        )

    def routes(self) -> list[Route]:
        from brokers.handlers import (
            controlled_shutdown,
            leader_and_isr,
            stop_replica,
            update_metadata,
        )

        broker = self._broker
        return [
            leader_and_isr.route(self.fence, broker.metadata, broker.replicas),
            stop_replica.route(self.fence, broker.replicas),
            update_metadata.route(self.fence, broker.metadata),
            controlled_shutdown.route(self.controller),
        ]

    async def start(self) -> None:
        """Join the cluster; raises `DuplicateBrokerIdError` / `ZooKeeperUnavailableError`."""
        broker, config = self._broker, self._broker.config
        await self.zk.start()
        broker.metadata.cluster_id = await ControllerStore(self.zk).create_top_level_paths()
        endpoint = broker.metadata.brokers[config.node_id]
        registration = zk_paths.BrokerRegistration(
            config.node_id,
            (BrokerEndpoint("PLAINTEXT", endpoint.host, endpoint.port),),
            config.rack,
            broker.clock.time_ms(),
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

    async def controlled_shutdown(self, retries: int = 3, backoff_s: float = 0.5) -> bool:
        """Kafka's controlled shutdown (SIGTERM): ask the controller to move this broker's
        leadership away, repeating until it reports none left; False if it never did."""
        node_id, epoch = self._broker.config.node_id, self.fence.broker_epoch
        request = rq.ControlledShutdownRequest(broker_id=node_id, broker_epoch=epoch)
        for _ in range(retries):
            with contextlib.suppress(OSError, TimeoutError, ControllerError):
                if self.controller.active:
                    if not await self.controller.controlled_shutdown(node_id, epoch):
                        return True
                else:
                    response = await self._ask_controller(request)
                    if response.error_code == 0 and not response.remaining_partitions:
                        return True
            await asyncio.sleep(backoff_s)
        log.warning("event=controlled_shutdown_incomplete node_id=%d", node_id)
        return False

    async def _ask_controller(self, request: rq.ControlledShutdownRequest) -> Any:
        controller = self._broker.metadata.brokers.get(self.election.active_controller)
        if controller is None:
            raise ControllerMovedError("no known controller")
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
        await self.controller.close()
        await self.isr_writer.close()
        await self.zk.close()
