import asyncio

import pytest

from brokers.server.purgatory import Purgatory

pytestmark = pytest.mark.unit


def test_notify_wakes_a_waiter_and_forgets_it() -> None:
    async def scenario() -> tuple[bool, int]:
        purgatory = Purgatory()
        waiter = asyncio.create_task(purgatory.wait([("t", 0), ("t", 1)], timeout=30))
        while purgatory.watched() < 2:
            await asyncio.sleep(0)
        purgatory.notify(("t", 1))
        woke = await waiter
        return woke, purgatory.watched()

    assert asyncio.run(scenario()) == (True, 0)


def test_timeout_returns_false_and_cleans_up() -> None:
    async def scenario() -> tuple[bool, int]:
        purgatory = Purgatory()
        woke = await purgatory.wait([("t", 0)], timeout=0.01)
        return woke, purgatory.watched()

    assert asyncio.run(scenario()) == (False, 0)


def test_notify_of_an_unwatched_key_is_harmless() -> None:
    Purgatory().notify(("nobody", 0))


def test_a_notified_waiter_resumes_on_the_next_loop_turn() -> None:
    """One wake-up hop: the notify resolves the parked future itself, no helper future between."""

    async def scenario() -> bool:
        purgatory = Purgatory()
        waiter = asyncio.create_task(purgatory.wait([("t", 0)], timeout=30))
        while purgatory.watched() < 1:
            await asyncio.sleep(0)
        purgatory.notify(("t", 0))
        await asyncio.sleep(0)
        return waiter.done() and waiter.result()

    assert asyncio.run(scenario()) is True


def test_a_cancelled_waiter_forgets_its_keys_and_a_late_notify_is_harmless() -> None:
    async def scenario() -> tuple[bool, int]:
        purgatory = Purgatory()
        waiter = asyncio.create_task(purgatory.wait([("t", 0), ("t", 1)], timeout=30))
        while purgatory.watched() < 2:
            await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        purgatory.notify(("t", 0))
        return waiter.cancelled(), purgatory.watched()

    assert asyncio.run(scenario()) == (True, 0)


def test_a_timed_out_waiter_then_notified_key_stays_false() -> None:
    async def scenario() -> tuple[bool, bool]:
        purgatory = Purgatory()
        first = await purgatory.wait([("t", 0)], timeout=0.01)
        purgatory.notify(("t", 0))  # nobody parked any more
        second = asyncio.create_task(purgatory.wait([("t", 0)], timeout=30))
        while purgatory.watched() < 1:
            await asyncio.sleep(0)
        purgatory.notify(("t", 0))
        return first, await second

    assert asyncio.run(scenario()) == (False, True)
