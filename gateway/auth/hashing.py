"""The gateway's password-hashing threads: scrypt checks off the event loop, bounded.

Owns a small dedicated thread pool (`sasl.hash.threads`, default 1) for the checks that cost
tens of milliseconds of CPU (PLAIN and HTTP Basic secrets against their scrypt hashes), and the
admission to it: at most `queue_size` checks wait for a thread (`sasl.hash.queue.size`), none
waits longer than `max_wait_s` (`sasl.hash.queue.timeout.ms`); past either bound `run` raises
`HashingBusy` at once, so a flood of attempts costs neither memory nor the loop. hashlib.scrypt
releases the GIL, and the pool is apart from asyncio's default executor, so store reads (the change
feed's among them: revocations) never queue behind hashes. A thread count below the machine's
cores leaves the loop a core, or on a one-core machine at least the scheduler's fair share.
`run` is called on the event loop; the pool is not shared between loops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class HashingBusy(Exception):
    """No hashing capacity within the bounds: the attempt fails without a check."""


class HashingPool:
    def __init__(self, threads: int = 1, queue_size: int = 32, max_wait_s: float = 5.0) -> None:
        if threads < 1 or queue_size < 0:
            raise ValueError("a hashing pool needs a thread and a non-negative queue")
        self._threads = threads
        self._queue_size = queue_size
        self._max_wait_s = max_wait_s
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="pier-hash")
        self._running = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def run(self, check: Callable[[], T]) -> T:
        """`check()` on a hashing thread; HashingBusy when the queue is full or the wait too long.
        A caller cancelled while its check runs leaves the slot held until the check ends."""
        await self._acquire()
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, check)
        except RuntimeError:  # closed: the gateway is stopping
            self._release()
            raise HashingBusy("hashing threads stopped") from None
        future.add_done_callback(lambda _: self._release())
        return await asyncio.shield(future)

    async def _acquire(self) -> None:
        if self._running < self._threads and not self._waiters:
            self._running += 1
            return
        if len(self._waiters) >= self._queue_size:
            raise HashingBusy("hashing queue full")
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(self._max_wait_s):
                await waiter  # `_release` hands its slot over: `_running` is unchanged
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed a slot just as the wait ended: pass it on
            if isinstance(exc, TimeoutError):
                raise HashingBusy("waited too long for a hashing thread") from None
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return
        self._running -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
