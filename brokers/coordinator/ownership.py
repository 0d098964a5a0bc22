"""Which partitions of a coordinator's internal topic this broker serves, and for which epoch.

Owns: `PartitionOwnership` — the `loading` and `owned` sets (COORDINATOR_LOAD_IN_PROGRESS and
NOT_COORDINATOR come from them), the leader epoch last ordered per partition, and one background
load task per partition — shared by the group coordinator (`__consumer_offsets`, through
`OffsetsOwnership`) and the transaction coordinator (`__transaction_state`). Mirrors Kafka's
`onElection` / `onResignation` with `GroupMetadataManager.epochForPartitionId`:
- `elect(p, epoch)`: this broker now leads p. An order older than the last one seen is ignored;
  while p is served (loading or loaded) a newer epoch only records it — leadership that was lost
  in between came with a `resign`, which dropped the partition's state, so the next `elect`
  reads p back.
- `resign(p, epoch)`: this broker no longer leads p (follower, stopped, deleted). Ignored when
  older than the last order; otherwise the load is cancelled and the state is forgotten.
A load refused by a `StorageError` (a cold segment's open at a full descriptor table) is retried
with a growing pause until it reads or the partition is resigned.
A load installs its result only if it is still the partition's current load when it finishes,
so a cancelled load (resigned meanwhile) never overwrites a newer one. `NO_EPOCH` is the
standalone broker's term (it leads every partition and never changes).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from brokers.coordinator.loader import LoadedPartition, load_partition
from brokers.coordinator.offsets_topic import OffsetsTopic
from brokers.log.errors import StorageError

log = logging.getLogger("pier.coordinator")
NO_EPOCH = -1
RETRY_FIRST_S = 0.05  # a load refused by a full descriptor table is tried again after this,
RETRY_MAX_S = 5.0  # doubling up to this

T = TypeVar("T")
Load = Callable[[int, int], Awaitable[T]]  # (partition, epoch) -> what was read back
InstallLoaded = Callable[[int, int, T], None]  # (partition, epoch, loaded)
Install = Callable[[LoadedPartition], None]
Forget = Callable[[int], None]


class PartitionOwnership(Generic[T]):
    def __init__(
        self, load: Load[T], install: InstallLoaded[T], forget: Forget, *, name: str
    ) -> None:
        self._load_partition = load
        self._install = install
        self._forget = forget
        self._name = name
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self._epochs: dict[int, int] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}

    def epoch_of(self, partition: int) -> int | None:
        return self._epochs.get(partition)

    def elect(self, partition: int, epoch: int = NO_EPOCH) -> asyncio.Task[None] | None:
        """Become coordinator of `partition` for leader epoch `epoch`; returns the load task."""
        known = self._epochs.get(partition)
        if known is not None and epoch < known:
            log.info("event=stale_election partition=%d epoch=%d known=%d", partition, epoch, known)
            return None
        serving = partition in self.owned or partition in self.loading
        self._epochs[partition] = epoch
        if serving:
            # Still serving means no resignation came in between: the same leader under a newer
            # epoch (an ISR change). Kafka's makeLeader does not re-elect then; state stays.
            return self._loads.get(partition)
        self.loading.add(partition)
        task = asyncio.get_running_loop().create_task(self._load(partition, epoch))
        self._loads[partition] = task
        return task

    def resign(self, partition: int, epoch: int | None = None) -> bool:
        """Stop coordinating `partition` (None: whatever the epoch); False if the order is stale."""
        known = self._epochs.get(partition)
        if epoch is not None and known is not None and epoch < known:
            return False
        if epoch is not None:
            self._epochs[partition] = epoch
        self._drop(partition)
        return True

    async def wait_loaded(self) -> None:
        """Until no load is running (loads started meanwhile included); never cancels them."""
        while self._loads:
            await asyncio.wait(list(self._loads.values()))

    async def close(self) -> None:
        """Resign everything and wait for the cancelled loads to end."""
        tasks = list(self._loads.values())
        for partition in sorted(self.owned | self.loading | set(self._loads)):
            self._drop(partition)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _drop(self, partition: int) -> None:
        task = self._loads.pop(partition, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()  # the loader yields between batches, so this takes effect promptly
        self.loading.discard(partition)
        self.owned.discard(partition)
        self._forget(partition)

    async def _load(self, partition: int, epoch: int) -> None:
        loaded = await self._read(partition, epoch)
        this_task = asyncio.current_task()
        if self._loads.get(partition) is not this_task:
            return  # resigned meanwhile (and perhaps elected again: a newer load runs)
        del self._loads[partition]
        self.loading.discard(partition)
        if loaded is None:  # unreadable log: its state stays NOT_COORDINATOR
            return
        self._install(partition, epoch, loaded)
        self.owned.add(partition)

    async def _read(self, partition: int, epoch: int) -> T | None:
        """The partition read back; a load refused by a `StorageError` (a full descriptor table
        at a cold segment's open: nothing changed, the next read may succeed) is retried after
        a growing pause while this broker still leads the partition (a resign cancels it); any
        other failure leaves it unread (NOT_COORDINATOR until leadership moves)."""
        pause = RETRY_FIRST_S
        while True:
            try:
                return await self._load_partition(partition, epoch)
            except StorageError as exc:
                log.warning(
                    "event=%s_load_retry partition=%d epoch=%d in_s=%.2f error=%r",
                    self._name, partition, epoch, pause, exc,
                )  # fmt: skip
            except Exception as exc:
                log.error(
                    "event=%s_load_failed partition=%d epoch=%d error=%r",
                    self._name, partition, epoch, exc,
                )  # fmt: skip
                return None
            await asyncio.sleep(pause)
            pause = min(RETRY_MAX_S, pause * 2)


class OffsetsOwnership(PartitionOwnership[LoadedPartition]):
    """The group coordinator's: `__consumer_offsets` partitions read back into groups."""

    def __init__(self, topic: OffsetsTopic, install: Install, forget: Forget) -> None:
        async def load(partition: int, epoch: int) -> LoadedPartition:
            return await load_partition(topic, partition)

        def install_loaded(partition: int, epoch: int, loaded: LoadedPartition) -> None:
            install(loaded)

        super().__init__(load, install_loaded, forget, name="offsets")
