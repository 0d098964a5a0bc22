"""Purgatory: requests parked until something they watch changes, or their time runs out.

Owns: keyed watchers. A delayed fetch watches its partitions and is woken by appends (or, once
replication lands, high-watermark moves); a delayed acks=all produce will watch the same keys.
Instead of Kafka's timer wheel we lean on asyncio's timers: `wait(keys, timeout)` returns when any
key is notified or the timeout passes; the caller then re-checks its condition (a notification is
a hint, never a promise). A parked operation is one future and one timer handle, and a notify
resolves that future itself, so the woken fetch resumes on the loop's next turn (with
`asyncio.wait_for` it resumed a turn later, through a helper future and its callbacks: 16
consumers long-polling 100 partitions park and wake thousands of times a second). Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until one of `keys` is notified (True) or `timeout` seconds pass (False)."""
        if timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        watched = list(keys)
        for key in watched:
            self._watchers.setdefault(key, set()).add(future)
        timer = loop.call_later(timeout, _settle, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            for key in watched:
                self._forget(key, future)

    def notify(self, key: Hashable) -> None:
        futures = self._watchers.pop(key, None)
        if not futures:
            return
        for future in futures:
            _settle(future, True)

    def _forget(self, key: Hashable, future: asyncio.Future[bool]) -> None:
        futures = self._watchers.get(key)
        if futures is None:
            return
        futures.discard(future)
        if not futures:
            with contextlib.suppress(KeyError):
                del self._watchers[key]

    def watched(self) -> int:
        """Number of parked operations' key registrations (a gauge for metrics and tests)."""
        return sum(len(f) for f in self._watchers.values())


def _settle(future: asyncio.Future[bool], notified: bool) -> None:
    """Resolve a parked operation once: True when notified, False when its time ran out."""
    if not future.done():
        future.set_result(notified)
