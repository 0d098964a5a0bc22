"""Controller election through the `/controller` ephemeral znode (Kafka's `KafkaController.elect`).

Owns: becoming controller, the controller epoch, following who the controller is, and resigning.
- Every broker watches `/controller`. When it is absent, a broker tries, in ONE ZooKeeper multi-op,
  to create `/controller` (ephemeral) and to set `/controller_epoch` to epoch + 1 conditional on the
  epoch znode's version (Kafka's `registerControllerAndIncrementControllerEpoch`). Either both
  happen or neither: of two contenders exactly one wins, and epochs never repeat or go back.
- The winner's epoch znode version is kept (`epoch_zk_version`); `fence()` returns a CheckOp on it
  that the controller adds to each of its ZooKeeper writes, so a deposed controller's writes fail.
- On session expiry, or when `/controller` changes to someone else, the controller resigns at once
  (`on_resigned`); after a new session it competes again.
- A lost reply: the multi may succeed on the server while its answer is lost (connection loss).
  `/controller` then names this broker, in this session, and the epoch was bumped by the same
  multi, so the next attempt adopts that epoch and its znode version and becomes controller
  (Kafka's `checkControllerAndEpoch`). A `/controller` naming this broker from an older session
  is left alone: it vanishes when that session expires, and the watch runs the election again.
- `move()` is Kafka's `triggerControllerMove`: resign, then delete `/controller` only if the epoch
  znode is still at our version (no newer controller), so every broker competes again.
Attempts and the release in `move()` hold one lock, so they never interleave. Callbacks run on
the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from brokers.common.clock import Clock
from brokers.controller import zk_paths
from brokers.controller.errors import (
    ControllerError,
    ZNodeExistsError,
    ZNodeMissingError,
    ZNodeVersionError,
    ZooKeeperUnavailableError,
)
from brokers.controller.state import INITIAL_CONTROLLER_EPOCH
from brokers.controller.zk_client import (
    CheckOp,
    CreateOp,
    DeleteOp,
    SessionEvent,
    SetOp,
    Versioned,
    ZkClient,
)

log = logging.getLogger(__name__)
NO_CONTROLLER = -1


class ControllerElection:
    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        clock: Clock,
        on_elected: Callable[[int], None] | None = None,
        on_resigned: Callable[[], None] | None = None,
    ) -> None:
        """`on_elected(epoch)` / `on_resigned()` run on the event loop when this broker's role changes."""
        self._zk = zk
        self.broker_id = broker_id
        self._clock = clock
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self.active_controller = NO_CONTROLLER
        self.epoch = -1
        self.epoch_zk_version = -1
        self._pending: asyncio.Task[bool] | None = None
        self._again = False
        self._lock = asyncio.Lock()
        self._release: asyncio.Task[None] | None = None
        zk.add_session_listener(self._on_session)

    def follow(self, on_elected: Callable[[int], None], on_resigned: Callable[[], None]) -> None:
        """Who hears of this broker's role changes: the `Controller` this election drives, which
        is built from the election and so is wired after it (before `start`)."""
        self._on_elected = on_elected
        self._on_resigned = on_resigned

    @property
    def is_controller(self) -> bool:
        return self.active_controller == self.broker_id and self.epoch >= 0

    def fence(self) -> CheckOp:
        """Add to every controller write: it fails once another controller bumped the epoch."""
        return CheckOp(zk_paths.CONTROLLER_EPOCH, self.epoch_zk_version)

    async def start(self) -> bool:
        """Compete; True when this broker won."""
        return await self.elect()

    async def elect(self) -> bool:
        """One attempt; re-arms the watch on `/controller` whatever the outcome."""
        async with self._lock:
            return await self._attempt()

    async def _attempt(self) -> bool:
        active = await self._read_active()
        if active is not None:
            if self.active_controller == self.broker_id and not self.is_controller:
                return await self._adopt(active)
            return self.is_controller
        # Created here, not only in start(): the session's CONNECTED event may trigger an
        # attempt before start() runs, on a fresh cluster.
        with contextlib.suppress(ZNodeExistsError):
            await self._zk.create(
                zk_paths.CONTROLLER_EPOCH, zk_paths.encode_epoch(INITIAL_CONTROLLER_EPOCH)
            )
        epoch_node = await self._zk.get(zk_paths.CONTROLLER_EPOCH)
        epoch = zk_paths.decode_epoch(epoch_node.data)
        registration = zk_paths.ControllerRegistration(self.broker_id, self._clock.time_ms())
        try:
            await self._zk.multi(
                [
                    CreateOp(zk_paths.CONTROLLER, zk_paths.encode_controller(registration), True),
                    SetOp(
                        zk_paths.CONTROLLER_EPOCH,
                        zk_paths.encode_epoch(epoch + 1),
                        epoch_node.version,
                    ),
                ]
            )
        except (ZNodeExistsError, ZNodeVersionError):
            # Someone else became controller first (Kafka's ControllerMovedException).
            await self._read_active()
            return False
        self._become(epoch + 1, epoch_node.version + 1)
        return True

    async def _adopt(self, controller: Versioned) -> bool:
        """`/controller` names this broker but it is not controller: a lost election reply."""
        if controller.ephemeral_owner != self._zk.session_id:
            return False  # an older session's node: gone when that session expires
        if self._release is not None and not self._release.done():
            return False  # move() gave it up; the release runs the election again
        # Nobody can bump the epoch while our `/controller` exists, so the epoch znode is the
        # one our multi wrote.
        epoch_node = await self._zk.get(zk_paths.CONTROLLER_EPOCH)
        log.info("broker %d adopts its controller znode after a lost reply", self.broker_id)
        self._become(zk_paths.decode_epoch(epoch_node.data), epoch_node.version)
        return True

    def _become(self, epoch: int, epoch_zk_version: int) -> None:
        self.epoch, self.epoch_zk_version = epoch, epoch_zk_version
        self.active_controller = self.broker_id
        log.info("broker %d is controller with epoch %d", self.broker_id, self.epoch)
        if self._on_elected is not None:
            self._on_elected(self.epoch)

    async def _read_active(self) -> Versioned | None:
        """Refresh `active_controller` with a watch armed; the `/controller` znode, if any."""
        try:
            node = await self._zk.get(zk_paths.CONTROLLER, self._on_controller_change)
        except ZNodeMissingError:
            # exists() arms a watch that also fires on creation.
            if await self._zk.exists(zk_paths.CONTROLLER, self._on_controller_change):
                return await self._read_active()
            self._set_active(NO_CONTROLLER)
            return None
        self._set_active(zk_paths.decode_controller(node.data).broker_id)
        return node

    def _set_active(self, broker_id: int) -> None:
        was_controller = self.is_controller
        self.active_controller = broker_id
        if was_controller and broker_id != self.broker_id:
            self.resign()

    def resign(self) -> None:
        """Stop acting as controller (the epoch is forgotten; a new election bumps it)."""
        was_controller = self.epoch >= 0
        self.epoch, self.epoch_zk_version = -1, -1
        if self.active_controller == self.broker_id:
            self.active_controller = NO_CONTROLLER
        if was_controller:
            log.info("broker %d resigned as controller", self.broker_id)
            if self._on_resigned is not None:
                self._on_resigned()

    def move(self) -> None:
        """Give up the controllership so the election runs again (Kafka's
        `triggerControllerMove`, after a failed failover): resign now, then delete `/controller`
        fenced by our epoch znode version, so a newer controller's node is never touched."""
        if not self.is_controller:
            return
        fence = self.fence()
        self.resign()
        self._release = asyncio.get_running_loop().create_task(self._give_up_znode(fence))

    async def _give_up_znode(self, fence: CheckOp) -> None:
        async with self._lock:
            try:
                await self._zk.multi([fence, DeleteOp(zk_paths.CONTROLLER)])
            except (ZNodeVersionError, ZNodeMissingError):
                pass  # a newer controller exists, or our session (and node) already ended
            except ZooKeeperUnavailableError:
                # The node stays; after reconnecting, the election adopts it and fails over again.
                log.warning("broker %d could not delete its controller znode", self.broker_id)
        self._schedule_election()

    def _on_controller_change(self, _path: str) -> None:
        self._schedule_election()

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.EXPIRED:
            self.resign()
            self.active_controller = NO_CONTROLLER
        elif event is SessionEvent.CONNECTED:
            self._schedule_election()

    def _schedule_election(self) -> None:
        # A watch is one-shot: an event arriving during an attempt must cause another attempt.
        self._again = True
        if self._pending is None or self._pending.done():
            self._pending = asyncio.get_running_loop().create_task(self._elect_quietly())

    async def _elect_quietly(self) -> bool:
        won = False
        while self._again:
            self._again = False
            try:
                won = await self.elect()
            except ControllerError as exc:
                log.warning("controller election by broker %d failed: %r", self.broker_id, exc)
                won = False
        return won

    async def settled(self) -> bool:
        """Wait for a `move()`'s release and the election attempts triggered by watches/session
        events to finish."""
        if self._release is not None:
            await self._release
        return await self._pending if self._pending is not None else self.is_controller
