"""The HTTP API's CPU-heavy work, off the event loop: decoding polled batches, encoding answers.

Owns: `off_loop(fn, *args)`, which runs `fn` on a small pool of its own threads
(`DECODE_THREADS`) and awaits it, so a poll that decompresses a batch and turns hundreds of
records into JSON never holds the event loop every tenant's requests share (docs/security.md,
"HTTP decoding"); the work itself is bounded by the poll's limits (`records.PollLimits`). At most
`DECODE_THREADS` jobs run at once, so at most that many batches are decompressed in memory at a
time; the others wait their turn in order. The codec libraries release the GIL; the pure-Python
decoding holds it in slices the interpreter hands back every few milliseconds, so the event loop
keeps answering while a job runs. Called from the event loop; `fn` must be thread-safe.
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


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on the decoding threads."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), functools.partial(fn, *args, **kwargs))
