"""Broker registration in `/brokers/ids/<id>` with its broker epoch (Kafka's `KafkaZkClient.registerBroker`).

Owns: creating this broker's ephemeral registration znode, refusing to start when another live
broker holds the id, and registering again after the session expires. The broker epoch is the
czxid of the registration znode (KIP-380): it grows with every registration, so the controller's
requests addressed to an older epoch of this broker are recognisably stale, and so are the
requests of a restarted broker's previous incarnation. If the create fails because the znode
exists but our own session owns it (a retried create after a connection blip), that znode is
ours. Callbacks run on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from brokers.common.clock import Clock
from brokers.controller import zk_paths
from brokers.controller.errors import ControllerError, DuplicateBrokerIdError, ZNodeExistsError
from brokers.controller.zk_client import SessionEvent, ZkClient
from brokers.controller.zk_paths import BrokerRegistration

log = logging.getLogger(__name__)


class BrokerRegistrar:
    def __init__(
        self,
        zk: ZkClient,
        registration: BrokerRegistration,
        clock: Clock,
        on_registered: Callable[[int], None] | None = None,
    ) -> None:
        """`on_registered(epoch)` runs after each (re-)registration; the epoch is -1 while none."""
        self._zk = zk
        self._registration = registration
        self._clock = clock
        self._on_registered = on_registered
        self._expired = False
        self._task: asyncio.Task[int] | None = None
        self.epoch = -1
        zk.add_session_listener(self._on_session)

    @property
    def path(self) -> str:
        return zk_paths.broker_path(self._registration.broker_id)

    async def register(self) -> int:
        """Create the registration; return the broker epoch. Raises DuplicateBrokerIdError."""
        current = dataclasses.replace(self._registration, timestamp_ms=self._clock.time_ms())
        data = zk_paths.encode_broker(current)
        try:
            _, czxid = await self._zk.create(self.path, data, ephemeral=True)
        except ZNodeExistsError:
            existing = await self._zk.get(self.path)
            if existing.ephemeral_owner != self._zk.session_id:
                raise DuplicateBrokerIdError(
                    f"broker id {current.broker_id} is registered by another live broker"
                ) from None
            czxid = existing.czxid
        self.epoch = czxid
        if self._on_registered is not None:
            self._on_registered(czxid)
        return czxid

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.EXPIRED:
            # Our ephemeral znode is gone with the session: we are not registered any more.
            self._expired = True
            self.epoch = -1
            if self._on_registered is not None:
                self._on_registered(-1)
        elif event is SessionEvent.CONNECTED and self._expired:
            self._expired = False
            self._task = asyncio.get_running_loop().create_task(self._reregister())

    async def _reregister(self) -> int:
        try:
            return await self.register()
        except ControllerError:
            log.exception("re-registration of broker %d failed", self._registration.broker_id)
            return -1

    async def wait_reregistered(self) -> int:
        """The epoch of the re-registration started after the last session expiry, if any."""
        return await self._task if self._task is not None else self.epoch


async def read_live_brokers(
    zk: ZkClient, watch: Callable[[str], None] | None = None
) -> dict[int, BrokerRegistration]:
    """Every registered broker with its epoch (czxid); `watch` fires when the set changes."""
    brokers: dict[int, BrokerRegistration] = {}
    for name in await zk.children(zk_paths.BROKER_IDS, watch):
        if not name.isdigit():
            continue
        try:
            node = await zk.get(zk_paths.broker_path(int(name)))
        except ControllerError:
            continue  # deregistered between the listing and the read
        brokers[int(name)] = zk_paths.decode_broker(int(name), node.data, epoch=node.czxid)
    return brokers
