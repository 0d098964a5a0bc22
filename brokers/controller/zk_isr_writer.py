"""A partition leader's ISR writes to ZooKeeper (Kafka ZooKeeper mode's `Partition.shrinkIsr/expandIsr`).

Owns: `ZkIsrWriter`, the `IsrWriter` the replica manager calls when a leader shrinks or expands
its ISR (`replica.lag.time.max.ms`), and the `/isr_change_notification/isr_change_<seq>` znodes
that tell the controller to re-read those partitions and push UpdateMetadata.
- The write of `/brokers/topics/<t>/partitions/<p>/state` is conditional on the znode version
  the leader last saw: if the controller (a new leader election) or anyone else wrote in between,
  the write fails and `None` is returned; the leader then waits for the controller's LeaderAndIsr
  instead of overwriting it. A state znode that no longer exists (topic deleted) is answered the
  same way. The leader stays the writer's broker id; the leader epoch and controller epoch are the
  ones the leader got in its last LeaderAndIsr.
- Changed partitions are batched into one sequential notification znode, written
  `notify_delay_s` after the first change (Kafka batches them for the same reason: one controller
  wake-up for a burst of ISR changes); `flush()` writes it at once. A change recorded while a
  notification is being written goes out in the next one.
ZooKeeper being unreachable raises `ZooKeeperUnavailableError` (the caller retries later).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from brokers.controller import zk_paths
from brokers.controller.errors import (
    ControllerError,
    ZNodeMissingError,
    ZNodeVersionError,
)
from brokers.controller.state import LeaderAndIsr, TopicPartition
from brokers.controller.zk_client import ZkClient

log = logging.getLogger(__name__)


class ZkIsrWriter:
    def __init__(self, zk: ZkClient, broker_id: int, *, notify_delay_s: float = 0.5) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._notify_delay_s = notify_delay_s
        self._changed: list[TopicPartition] = []
        self._pending: asyncio.Task[None] | None = None

    async def write_isr(
        self,
        topic: str,
        partition: int,
        leader_epoch: int,
        isr: list[int],
        zk_version: int,
        controller_epoch: int,
    ) -> int | None:
        """Write the new ISR if the state znode is still at `zk_version`; the new version or None."""
        tp = TopicPartition(topic, partition)
        state = LeaderAndIsr(self._broker_id, leader_epoch, tuple(isr), controller_epoch)
        try:
            version = await self._zk.set(
                zk_paths.partition_state_path(tp),
                zk_paths.encode_partition_state(state),
                zk_version,
            )
        except (ZNodeVersionError, ZNodeMissingError):
            log.info("event=isr_write_conflict partition=%s zk_version=%d", tp, zk_version)
            return None
        self._changed.append(tp)
        if self._pending is None or self._pending.done():
            self._pending = asyncio.get_running_loop().create_task(self._notify_later())
        return version

    async def _notify_later(self) -> None:
        # Loops: a change recorded while a notification is being written finds this task still
        # running (so `write_isr` starts none) and must go out in the next one, not wait for
        # an unrelated later change.
        while self._changed:
            await asyncio.sleep(self._notify_delay_s)
            try:
                await self._write_notification()
            except ControllerError as exc:
                # The ISR itself is in ZooKeeper; only the controller's prompt refresh is lost.
                log.warning("event=isr_notification_failed error=%r", exc)

    async def _write_notification(self) -> None:
        changed, self._changed = sorted(set(self._changed)), []
        if not changed:
            return
        prefix = f"{zk_paths.ISR_CHANGE_NOTIFICATION}/{zk_paths.ISR_CHANGE_PREFIX}"
        await self._zk.create(prefix, zk_paths.encode_isr_change(changed), sequence=True)

    async def flush(self) -> None:
        """Write the pending notification now (tests, shutdown)."""
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending
        await self._write_notification()

    async def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending
