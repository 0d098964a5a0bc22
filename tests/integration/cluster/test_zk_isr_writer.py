"""A leader's ISR writes against a real ZooKeeper: conditional on the znode version, notified."""

from __future__ import annotations

import asyncio

import pytest

from brokers.controller import zk_paths
from brokers.controller.state import LeaderAndIsr, TopicPartition
from brokers.controller.zk_client import ZkClient
from brokers.controller.zk_isr_writer import ZkIsrWriter
from tests.polling import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
TP = TopicPartition("orders", 2)


async def seeded(connect: str) -> tuple[ZkClient, int]:
    """A started client and a partition state znode led by broker 1; returns its version."""
    zk = ZkClient(connect)
    await zk.start()
    await zk.ensure_path(zk_paths.ISR_CHANGE_NOTIFICATION)
    state = LeaderAndIsr(1, 4, (1, 2, 3), 7)
    await zk.create(zk_paths.partition_state_path(TP), zk_paths.encode_partition_state(state))
    return zk, (await zk.get(zk_paths.partition_state_path(TP))).version


def test_shrink_is_written_conditionally_and_announced_once(chroot: str) -> None:
    async def scenario() -> None:
        zk, version = await seeded(chroot)
        writer = ZkIsrWriter(zk, broker_id=1, notify_delay_s=60)
        new_version = await writer.write_isr("orders", 2, 4, [1, 2], version, 7)
        assert new_version == version + 1
        node = await zk.get(zk_paths.partition_state_path(TP))
        assert zk_paths.decode_partition_state(node.data, node.version) == LeaderAndIsr(
            1, 4, (1, 2), 7, new_version
        )
        assert await writer.write_isr("orders", 2, 4, [1], new_version, 7) == new_version + 1
        await writer.flush()
        names = await zk.children(zk_paths.ISR_CHANGE_NOTIFICATION)
        assert len(names) == 1 and names[0].startswith(zk_paths.ISR_CHANGE_PREFIX)
        notice = await zk.get(f"{zk_paths.ISR_CHANGE_NOTIFICATION}/{names[0]}")
        assert zk_paths.decode_isr_change(notice.data) == [TP]
        await writer.close()
        await zk.close()

    asyncio.run(scenario())


def test_a_stale_version_loses_to_the_controller_and_nothing_is_announced(chroot: str) -> None:
    async def scenario() -> None:
        zk, version = await seeded(chroot)
        moved = LeaderAndIsr(2, 5, (2, 3), 8)  # the controller elected broker 2 meanwhile
        await zk.set(zk_paths.partition_state_path(TP), zk_paths.encode_partition_state(moved))
        writer = ZkIsrWriter(zk, broker_id=1, notify_delay_s=60)
        assert await writer.write_isr("orders", 2, 4, [1], version, 7) is None
        assert await writer.write_isr("gone", 0, 0, [1], 0, 7) is None  # no state znode
        node = await zk.get(zk_paths.partition_state_path(TP))
        assert zk_paths.decode_partition_state(node.data).leader == 2
        await writer.flush()
        assert await zk.children(zk_paths.ISR_CHANGE_NOTIFICATION) == []
        await writer.close()
        await zk.close()

    asyncio.run(scenario())


def test_the_notification_is_written_after_the_delay_without_a_flush(chroot: str) -> None:
    async def scenario() -> None:
        zk, version = await seeded(chroot)
        writer = ZkIsrWriter(zk, broker_id=1, notify_delay_s=0.01)
        await writer.write_isr("orders", 2, 4, [1, 3], version, 7)

        async def notified() -> bool:
            return bool(await zk.children(zk_paths.ISR_CHANGE_NOTIFICATION))

        await wait_until_async(notified, what="an ISR change notification", timeout=10)
        await writer.close()
        await zk.close()

    asyncio.run(scenario())


class HeldNotifications(ZkClient):
    """The real client, except that the first notification write waits until released: the
    window in which a leader may record another ISR change."""

    def __init__(self, connect: str) -> None:
        super().__init__(connect)
        self.writing = asyncio.Event()
        self.release = asyncio.Event()

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False
    ) -> tuple[str, int]:
        if path.startswith(zk_paths.ISR_CHANGE_NOTIFICATION + "/") and not self.writing.is_set():
            self.writing.set()
            await self.release.wait()
        return await super().create(path, data, ephemeral=ephemeral, sequence=sequence)


def test_a_change_recorded_while_a_notification_is_written_is_announced_too(chroot: str) -> None:
    """The race that left a moved partition mid-reassignment: its ISR grew while the batch of
    another partition's change was being written, and no notification ever named it."""

    async def scenario() -> None:
        zk = HeldNotifications(chroot)
        await zk.start()
        await zk.ensure_path(zk_paths.ISR_CHANGE_NOTIFICATION)
        other = TopicPartition("orders", 3)
        versions: dict[TopicPartition, int] = {}
        for tp in (TP, other):
            state = zk_paths.encode_partition_state(LeaderAndIsr(1, 4, (1,), 7))
            await zk.create(zk_paths.partition_state_path(tp), state)
            versions[tp] = (await zk.get(zk_paths.partition_state_path(tp))).version
        writer = ZkIsrWriter(zk, broker_id=1, notify_delay_s=0.01)
        await writer.write_isr("orders", 2, 4, [1, 2], versions[TP], 7)
        await asyncio.wait_for(zk.writing.wait(), 10)
        await writer.write_isr("orders", 3, 4, [1, 2], versions[other], 7)
        zk.release.set()

        async def announced() -> set[TopicPartition]:
            named: set[TopicPartition] = set()
            for name in await zk.children(zk_paths.ISR_CHANGE_NOTIFICATION):
                node = await zk.get(f"{zk_paths.ISR_CHANGE_NOTIFICATION}/{name}")
                named.update(zk_paths.decode_isr_change(node.data))
            return named

        async def both_announced() -> bool:
            return await announced() == {TP, other}

        await wait_until_async(both_announced, what="both ISR changes announced", timeout=10)
        await writer.close()
        await zk.close()

    asyncio.run(scenario())
