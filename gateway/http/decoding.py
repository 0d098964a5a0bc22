"""The HTTP API's CPU-heavy work, off the event loop: decoding polled batches, encoding answers.

Owns: `off_loop(tenant, fn, *args)`, which runs `fn` on a small pool of its own threads
(`DECODE_THREADS`) and awaits it, so a poll that decompresses a batch and turns hundreds of
records into JSON never holds the event loop every tenant's requests share (docs/security.md,
"HTTP decoding"); the work itself is bounded by the poll's limits (`records.PollLimits`). Each
tenant has one lane: its jobs run one at a time, so one tenant's polls never hold every thread
and another tenant's poll always finds one within a job's time. At most `DECODE_THREADS` jobs run
at once, so at most that many batches are decompressed in memory at a time. The codec libraries
release the GIL; the pure-Python decoding holds it in slices the interpreter hands back every few
milliseconds, so the event loop keeps answering while a job runs. Called from the event loop
(the lanes are asyncio primitives: one event loop); `fn` must be thread-safe.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

DECODE_THREADS = 2
P = ParamSpec("P")
T = TypeVar("T")


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=DECODE_THREADS, thread_name_prefix="pier-http-decode")


class _Lanes:
    """One lock per tenant with work queued or running (dropped when its last job ends)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def run(self, tenant: str, job: Callable[[], T]) -> T:
        lock, users = self._locks.get(tenant, (asyncio.Lock(), 0))
        self._locks[tenant] = (lock, users + 1)
        try:
            async with lock:
                return await asyncio.get_running_loop().run_in_executor(_pool(), job)
        finally:
            lock, users = self._locks[tenant]
            if users == 1:
                del self._locks[tenant]
            else:
                self._locks[tenant] = (lock, users - 1)

    def busy(self) -> int:
        return len(self._locks)


_LANES = _Lanes()


async def off_loop(tenant: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on the decoding threads, in `tenant`'s lane."""
    return await _LANES.run(tenant, functools.partial(fn, *args, **kwargs))
