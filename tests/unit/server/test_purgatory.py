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
