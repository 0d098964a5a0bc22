"""Registration, election and producer-id blocks against a real ZooKeeper (one chroot per test)."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest
from kazoo.client import KazooClient

from brokers.common.clock import ManualClock
from brokers.controller import zk_paths
from brokers.controller.election import ControllerElection
from brokers.controller.errors import (
    DuplicateBrokerIdError,
    ZNodeMissingError,
    ZNodeVersionError,
)
from brokers.controller.producer_id_block import ZkBlockStore
from brokers.controller.registration import BrokerRegistrar, read_live_brokers
from brokers.controller.state import BrokerEndpoint, LeaderAndIsr, TopicPartition
from brokers.controller.zk_client import SessionEvent, SetOp, ZkClient
from tests.polling import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
CLOCK = ManualClock()
WAIT_S = 15.0


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


def on_loop(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    """`check` (a read of state the event loop's callbacks change) as the coroutine function
    `wait_until_async` polls; the loop runs those callbacks between polls."""

    async def checked() -> bool:
        return check()

    return checked


def expire_session(zk: ZkClient, connect: str) -> None:
    """Close `zk`'s session from a second connection: ZooKeeper then expires it for `zk`."""
    session_id, password = zk._kazoo.client_id
    twin = KazooClient(hosts=connect, client_id=(session_id, password))
    twin.start(10)
    twin.stop()
    twin.close()


def registration(broker_id: int, rack: str | None = "r1") -> zk_paths.BrokerRegistration:
    endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)
    return zk_paths.BrokerRegistration(broker_id, (endpoint,), rack, 0)


async def started(connect: str) -> ZkClient:
    zk = ZkClient(connect)
    await zk.start()
    return zk


def test_client_versioned_writes_watches_and_errors(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            tp = TopicPartition("orders", 0)
            state = LeaderAndIsr(1, 0, (1, 2), 1)
            path = zk_paths.partition_state_path(tp)
            await zk.create(path, zk_paths.encode_partition_state(state))
            node = await zk.get(path)
            assert zk_paths.decode_partition_state(node.data, node.version) == LeaderAndIsr(
                1, 0, (1, 2), 1, zk_version=0
            )
            fired: list[tuple[str, bool]] = []
            main = threading.current_thread()
            await zk.get(path, lambda p: fired.append((p, threading.current_thread() is main)))
            moved = LeaderAndIsr(2, 1, (2,), 1)
            assert await zk.set(path, zk_paths.encode_partition_state(moved), node.version) == 1
            with pytest.raises(ZNodeVersionError):
                await zk.set(path, b"{}", node.version)
            await wait_until_async(
                on_loop(lambda: bool(fired)), what="the watch fired", timeout=WAIT_S
            )
            assert fired == [(path, True)], "watch callbacks run on the event loop's thread"
            with pytest.raises(ZNodeMissingError):
                await zk.get("/nope")
            with pytest.raises(ZNodeVersionError):
                await zk.multi([SetOp(path, b"x", 0), SetOp("/other", b"y", -1)])
            assert (await zk.get(path)).version == 1, "a failed multi changes nothing"
        finally:
            await zk.close()

    run(scenario())


def test_registration_epochs_and_duplicate_id(chroot: str) -> None:
    async def scenario() -> None:
        zks = [await started(chroot) for _ in range(3)]
        try:
            epoch1 = await BrokerRegistrar(zks[0], registration(1), CLOCK).register()
            epoch2 = await BrokerRegistrar(zks[1], registration(2, "r2"), CLOCK).register()
            assert 0 < epoch1 < epoch2
            node = await zks[0].get(zk_paths.broker_path(1))
            assert node.czxid == epoch1 and node.ephemeral_owner == zks[0].session_id
            body = json.loads(node.data)
            assert body["version"] == 5 and body["endpoints"] == ["PLAINTEXT://127.0.0.1:9001"]
            assert body["rack"] == "r1" and body["timestamp"] == str(CLOCK.time_ms())
            # A live holder never lets go: after the (short) wait for a stale one, refused.
            with pytest.raises(DuplicateBrokerIdError, match="registered by another live broker"):
                await BrokerRegistrar(zks[2], registration(1), CLOCK, stale_wait_s=0.5).register()
            live = await read_live_brokers(zks[2])
            assert {b: r.epoch for b, r in live.items()} == {1: epoch1, 2: epoch2}
            assert live[2].rack == "r2"
            # The same session registering again (a retried create) is not a duplicate.
            assert await BrokerRegistrar(zks[0], registration(1), CLOCK).register() == epoch1
            await zks[0].close()
            epoch1_again = await BrokerRegistrar(zks[2], registration(1), CLOCK).register()
            assert epoch1_again > epoch2, "a new registration gets a newer broker epoch"
        finally:
            for zk in zks:
                await zk.close()

    run(scenario())


def test_reregistration_after_session_expiry(chroot: str) -> None:
    async def scenario() -> None:
        zk, observer = await started(chroot), await started(chroot)
        events: list[SessionEvent] = []
        zk.add_session_listener(events.append)
        epochs: list[int] = []
        registrar = BrokerRegistrar(zk, registration(7), CLOCK, epochs.append)
        try:
            old_epoch = await registrar.register()
            old_session = zk.session_id
            expire_session(zk, chroot.split("/", maxsplit=1)[0])
            await wait_until_async(
                on_loop(lambda: SessionEvent.EXPIRED in events),
                what="the session expired event",
                timeout=WAIT_S,
            )
            await wait_until_async(
                on_loop(lambda: registrar.epoch > old_epoch),
                what=f"a broker epoch above {old_epoch}",
                timeout=WAIT_S,
            )
            new_epoch = await registrar.wait_reregistered()
            assert zk.session_id != old_session
            assert new_epoch > old_epoch
            assert -1 in epochs and epochs[-1] == new_epoch
            node = await observer.get(zk_paths.broker_path(7))
            assert node.czxid == new_epoch and node.ephemeral_owner == zk.session_id
        finally:
            await zk.close()
            await observer.close()

    run(scenario())


def test_two_contenders_exactly_one_wins_then_failover(chroot: str) -> None:
    async def scenario() -> None:
        zks = [await started(chroot) for _ in range(2)]
        resigned: list[int] = []
        elected: list[tuple[int, int]] = []
        elections = [
            ControllerElection(
                zk,
                broker_id,
                CLOCK,
                on_elected=functools.partial(lambda b, e: elected.append((b, e)), broker_id),
                on_resigned=functools.partial(resigned.append, broker_id),
            )
            for broker_id, zk in zip((1, 2), zks, strict=True)
        ]
        try:
            wins = await asyncio.gather(*(e.start() for e in elections))
            assert sorted(wins) == [False, True]
            winner = 0 if wins[0] else 1
            loser = 1 - winner
            assert elections[winner].epoch == 1 and elected == [(winner + 1, 1)]
            assert elections[loser].active_controller == winner + 1
            body = json.loads((await zks[loser].get(zk_paths.CONTROLLER)).data)
            assert body == {
                "version": 2,
                "brokerid": winner + 1,
                "timestamp": str(CLOCK.time_ms()),
                "kraftControllerEpoch": -1,
            }
            stale_fence = elections[winner].fence()
            await zks[winner].close()
            await wait_until_async(
                on_loop(lambda: elections[loser].is_controller),
                what=f"broker {loser + 1} elected after the winner left",
                timeout=WAIT_S,
            )
            assert elections[loser].epoch == 2
            epoch_node = await zks[loser].get(zk_paths.CONTROLLER_EPOCH)
            assert zk_paths.decode_epoch(epoch_node.data) == 2
            # A write fenced with the deposed controller's epoch version is refused.
            with pytest.raises(ZNodeVersionError):
                await zks[loser].multi([stale_fence, SetOp(zk_paths.CONTROLLER_EPOCH, b"9", -1)])
            await zks[loser].multi([elections[loser].fence()])
        finally:
            for zk in zks:
                await zk.close()

    run(scenario())


def test_controller_resigns_on_session_expiry_and_competes_again(chroot: str) -> None:
    async def scenario() -> None:
        zk, other = await started(chroot), await started(chroot)
        resigned: list[int] = []
        election = ControllerElection(zk, 1, CLOCK, on_resigned=lambda: resigned.append(1))
        standby = ControllerElection(other, 2, CLOCK)
        try:
            assert await election.start()
            assert not await standby.start()
            expire_session(zk, chroot.split("/", maxsplit=1)[0])
            await wait_until_async(
                on_loop(lambda: resigned == [1]), what="broker 1 resigned", timeout=WAIT_S
            )
            await wait_until_async(
                on_loop(lambda: standby.is_controller), what="broker 2 elected", timeout=WAIT_S
            )
            assert standby.epoch == 2
            await wait_until_async(
                on_loop(lambda: election.active_controller == 2),
                what="broker 1 seeing broker 2 as the controller",
                timeout=WAIT_S,
            )
            assert not election.is_controller
        finally:
            await zk.close()
            await other.close()

    run(scenario())


def test_many_contenders_epoch_increment_is_conditional(chroot: str) -> None:
    async def scenario() -> None:
        zks = [await started(chroot) for _ in range(5)]
        try:
            elections = [ControllerElection(zk, i, CLOCK) for i, zk in enumerate(zks)]
            wins = await asyncio.gather(*(e.start() for e in elections))
            assert wins.count(True) == 1
            epoch = zk_paths.decode_epoch((await zks[0].get(zk_paths.CONTROLLER_EPOCH)).data)
            assert epoch == 1, "losers never bumped the epoch"
        finally:
            for zk in zks:
                await zk.close()

    run(scenario())


def test_producer_id_blocks_never_overlap(chroot: str) -> None:
    async def scenario() -> None:
        zks = [await started(chroot) for _ in range(2)]
        try:
            stores = [ZkBlockStore(zk, broker_id) for broker_id, zk in enumerate(zks)]
            starts = [await stores[i % 2].claim_block(100) for i in range(4)]
            starts += await asyncio.gather(*(s.claim_block(100) for s in stores))
            starts.append(await asyncio.to_thread(stores[0].claim_next_block, 100))
            assert sorted(starts) == list(range(0, 700, 100))
            body = json.loads((await zks[0].get(zk_paths.LATEST_PRODUCER_ID_BLOCK)).data)
            assert body == {"version": 1, "broker": 0, "block_start": "600", "block_end": "699"}
        finally:
            for zk in zks:
                await zk.close()

    run(scenario())


def test_an_attempt_before_start_on_a_fresh_cluster_wins(chroot: str) -> None:
    """The session's CONNECTED event can trigger an election before `start()`; on a fresh
    cluster `/controller_epoch` does not exist yet, and the attempt must still succeed."""

    async def scenario() -> None:
        zk = await started(chroot)
        try:
            election = ControllerElection(zk, 1, CLOCK)
            assert not await zk.exists(zk_paths.CONTROLLER_EPOCH)
            assert await election.elect()
            assert election.epoch == 1 and election.is_controller
        finally:
            await zk.close()

    run(scenario())
