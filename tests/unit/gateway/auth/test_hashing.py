"""`HashingPool`: checks run on its own threads, at most `threads` at once, at most `queue_size`
waiting (more fail at once), none waiting past the deadline, the loop free meanwhile."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway.auth.hashing import HashingBusy, HashingPool

pytestmark = pytest.mark.unit


class Gate:
    """A blocking check the test releases; counts how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.threads: set[str] = set()

    def __call__(self) -> str:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.current_thread().name)
        assert self.release.wait(10)
        with self.lock:
            self.running -= 1
        return "done"


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_checks_run_on_the_pool_threads_bounded_and_queued() -> None:
    async def run() -> None:
        pool = HashingPool(threads=2, queue_size=3, max_wait_s=10)
        gate = Gate()
        tasks = [asyncio.create_task(pool.run(gate)) for _ in range(5)]
        await settle()
        assert (pool.running, pool.waiting) == (2, 3)
        with pytest.raises(HashingBusy):
            await pool.run(gate)  # the queue is full: refused at once
        ticks = 0
        while ticks < 5:  # the loop stays free while checks block their threads
            await asyncio.sleep(0.001)
            ticks += 1
        gate.release.set()
        assert await asyncio.gather(*tasks) == ["done"] * 5
        assert gate.most == 2
        assert all(name.startswith("pier-hash") for name in gate.threads)
        assert (pool.running, pool.waiting) == (0, 0)
        pool.close()

    asyncio.run(run())


def test_a_wait_past_the_deadline_fails_and_frees_its_place() -> None:
    async def run() -> None:
        pool = HashingPool(threads=1, queue_size=1, max_wait_s=0.05)
        gate = Gate()
        first = asyncio.create_task(pool.run(gate))
        await settle()
        with pytest.raises(HashingBusy):
            await pool.run(gate)
        assert pool.waiting == 0
        gate.release.set()
        assert await first == "done"
        assert await pool.run(lambda: 7) == 7
        pool.close()

    asyncio.run(run())


def test_a_cancelled_caller_keeps_the_slot_until_its_check_ends() -> None:
    async def run() -> None:
        pool = HashingPool(threads=1, queue_size=4, max_wait_s=10)
        gate = Gate()
        first = asyncio.create_task(pool.run(gate))
        await settle()
        first.cancel()
        await settle()
        assert pool.running == 1, "the thread still hashes: the bound must still count it"
        waiting = asyncio.create_task(pool.run(lambda: "next"))
        await settle()
        assert pool.waiting == 1
        gate.release.set()
        assert await waiting == "next"
        assert pool.running == 0
        pool.close()

    asyncio.run(run())


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    async def run() -> None:
        pool = HashingPool(threads=1, queue_size=1, max_wait_s=10)
        gate = Gate()
        first = asyncio.create_task(pool.run(gate))
        await settle()
        waiter = asyncio.create_task(pool.run(gate))
        await settle()
        waiter.cancel()
        await settle()
        assert pool.waiting == 0
        gate.release.set()
        assert await first == "done"
        assert pool.running == 0
        pool.close()

    asyncio.run(run())


def test_a_closed_pool_refuses_instead_of_raising_anything_else() -> None:
    async def run() -> None:
        pool = HashingPool()
        pool.close()
        with pytest.raises(HashingBusy):
            await pool.run(lambda: 1)
        assert pool.running == 0

    asyncio.run(run())
