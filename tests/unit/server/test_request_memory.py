"""`RequestMemory`: Kafka's non-strict SimpleMemoryPool accounting, FIFO waiters, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from brokers.server.request_memory import RequestMemory

pytestmark = pytest.mark.unit


def test_unbounded_pool_always_allocates_and_counts_use() -> None:
    memory = RequestMemory(None)
    assert memory.try_allocate(10**9) and memory.try_allocate(10**9)
    assert memory.used == 2 * 10**9 and not memory.exhausted
    memory.release(10**9)
    assert memory.used == 10**9


def test_allocation_succeeds_while_any_memory_is_left_even_if_larger() -> None:
    """Non-strict: one maximum-size request always gets through; the pool dips below zero."""
    memory = RequestMemory(100)
    assert memory.try_allocate(99)
    assert memory.try_allocate(500)  # 1 byte left: still granted
    assert memory.used == 599 and memory.exhausted
    assert not memory.try_allocate(1)
    memory.release(500)
    assert not memory.exhausted and memory.try_allocate(1)


def test_waiters_are_granted_in_arrival_order_once_memory_is_released() -> None:
    async def scenario() -> list[str]:
        memory = RequestMemory(10)
        assert memory.try_allocate(10)
        order: list[str] = []

        async def wait(name: str, size: int) -> None:
            await memory.allocate(size)
            order.append(name)

        first = asyncio.create_task(wait("first", 8))
        await asyncio.sleep(0)
        second = asyncio.create_task(wait("second", 8))
        await asyncio.sleep(0)
        assert memory.waiting == 2 and order == []
        assert not memory.try_allocate(1), "a newcomer must not overtake the waiters"
        memory.release(10)  # 10 free: first takes 8, 2 are left, so second is granted too
        await asyncio.gather(first, second)
        assert memory.used == 16
        return order

    assert asyncio.run(scenario()) == ["first", "second"]


def test_a_cancelled_waiter_leaves_the_queue_and_holds_nothing() -> None:
    async def scenario() -> RequestMemory:
        memory = RequestMemory(10)
        assert memory.try_allocate(10)
        waiter = asyncio.create_task(memory.allocate(5))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert memory.waiting == 0
        memory.release(10)
        return memory

    memory = asyncio.run(scenario())
    assert memory.used == 0


def test_a_waiter_granted_and_cancelled_in_the_same_tick_gives_the_memory_back() -> None:
    async def scenario() -> RequestMemory:
        memory = RequestMemory(10)
        assert memory.try_allocate(10)
        waiter = asyncio.create_task(memory.allocate(5))
        await asyncio.sleep(0)
        memory.release(10)  # grants the waiter (used 5) ...
        waiter.cancel()  # ... which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return memory

    assert asyncio.run(scenario()).used == 0
