"""Broker registration in `/brokers/ids/<id>` with its broker epoch (Kafka's `KafkaZkClient.registerBroker`).

Owns: creating this broker's ephemeral registration znode, refusing to start when another live
broker holds the id, and registering again after the session expires. The broker epoch is the
czxid of the registration znode (KIP-380): it grows with every registration, so the controller's
requests addressed to an older epoch of this broker are recognisably stale, and so are the
requests of a restarted broker's previous incarnation. If the create fails because the znode
exists:
- our own session owns it (a retried create after a connection blip): that znode is ours;
- another session owns it: usually this broker's previous incarnation, killed (`kill -9`, power
  loss) before it could close its session. ZooKeeper deletes the znode when that session
  expires, a session timeout after the dead process's last heartbeat, or after ZooKeeper's own
  restart, which restores sessions with their timeout renewed. So the registrar watches the
  znode and creates its own as soon as the old one is gone, waiting at most `stale_wait_s`
  (default: twice this broker's session timeout, room for a predecessor with a longer one);
  a znode still held after that belongs to a live broker with the same id:
  `DuplicateBrokerIdError`. Kafka's `registerBroker` fails at once instead, which is why a
  crashed Kafka broker restarted quickly has to be started again.
Callbacks run on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable

from brokers.common.clock import Clock
from brokers.controller import zk_paths
from brokers.controller.errors import (
    ControllerError,
    DuplicateBrokerIdError,
    ZNodeExistsError,
    ZNodeMissingError,
)
from brokers.controller.zk_client import SessionEvent, Versioned, ZkClient
from brokers.controller.zk_paths import BrokerRegistration

log = logging.getLogger(__name__)


class BrokerRegistrar:
    def __init__(
        self,
        zk: ZkClient,
        registration: BrokerRegistration,
        clock: Clock,
        on_registered: Callable[[int], None] | None = None,
        *,
        stale_wait_s: float | None = None,
    ) -> None:
        """`on_registered(epoch)` runs after each (re-)registration; the epoch is -1 while none.
        `stale_wait_s` bounds the wait for another session's registration of this id to vanish
        (default: twice the session timeout)."""
        self._zk = zk
        self._registration = registration
        self._clock = clock
        self._on_registered = on_registered
        self.stale_wait_s = 2 * zk.session_timeout_s if stale_wait_s is None else stale_wait_s
        self._expired = False
        self._task: asyncio.Task[int] | None = None
        self.epoch = -1
        zk.add_session_listener(self._on_session)

    @property
    def path(self) -> str:
        return zk_paths.broker_path(self._registration.broker_id)

    async def register(self) -> int:
        """Create the registration; return the broker epoch. Waits (up to `stale_wait_s`) for
        another session's registration of this id to vanish; DuplicateBrokerIdError if it stays."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.stale_wait_s
        waiting_for: int | None = None
        while True:
            existing = await self._try_create()
            if existing is None:
                break
            if existing.ephemeral_owner == self._zk.session_id:  # a retried create: ours
                self._registered(existing.czxid)
                return existing.czxid
            if existing.ephemeral_owner != waiting_for:
                waiting_for = existing.ephemeral_owner
                log.info(
                    "event=registration_waiting broker=%d owner_session=0x%x wait_s=%g",
                    self._registration.broker_id,
                    waiting_for,
                    max(0.0, deadline - loop.time()),
                )
            if not await self._vanished(deadline):
                raise DuplicateBrokerIdError(
                    f"broker id {self._registration.broker_id} is registered by another live "
                    f"broker (ZooKeeper session 0x{waiting_for:x}, still there after "
                    f"{loop.time() - started:.1f}s)"
                )
        if waiting_for is not None:
            log.info(
                "event=registration_freed broker=%d owner_session=0x%x waited_s=%.1f",
                self._registration.broker_id,
                waiting_for,
                loop.time() - started,
            )
        return self.epoch

    async def _try_create(self) -> Versioned | None:
        """Create the znode (None: registered) or return the one in the way."""
        current = dataclasses.replace(self._registration, timestamp_ms=self._clock.time_ms())
        while True:
            try:
                _, czxid = await self._zk.create(
                    self.path, zk_paths.encode_broker(current), ephemeral=True
                )
            except ZNodeExistsError:
                with contextlib.suppress(ZNodeMissingError):  # gone meanwhile: create again
                    return await self._zk.get(self.path)
            else:
                self._registered(czxid)
                return None

    async def _vanished(self, deadline: float) -> bool:
        """Wait until the registration znode is deleted (or changes), or until `deadline`;
        True when the create is worth trying again."""
        changed = asyncio.Event()
        if not await self._zk.exists(self.path, lambda _path: changed.set()):
            return True
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(remaining):
                await changed.wait()
        return changed.is_set()

    def _registered(self, epoch: int) -> None:
        self.epoch = epoch
        if self._on_registered is not None:
            self._on_registered(epoch)

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.EXPIRED:
            # Our ephemeral znode is gone with the session: we are not registered any more.
            self._expired = True
            self._registered(-1)
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
