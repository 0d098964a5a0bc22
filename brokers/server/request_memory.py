"""The bound on request bytes read but not yet processed (Kafka's `queued.max.request.bytes`).

Owns: `RequestMemory`, the accounting of Kafka's `SimpleMemoryPool` in non-strict mode, the mode
Kafka's SocketServer uses. A connection allocates the frame's full size as soon as it has read the
size prefix (so a stalled partial frame counts in full, as in Kafka) and releases it when the
request has been processed or the connection closes. An allocation succeeds while any memory is
left, even if it is larger than what is left (so one maximum-size request always gets through and
the pool can dip below zero by at most one request); otherwise the connection waits — muted, not
reading — in FIFO order until releases bring the pool above zero. Capacity None: unbounded
(Kafka's -1), only the bytes in use are counted. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections import deque


class RequestMemory:
    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def exhausted(self) -> bool:
        return self.capacity is not None and self.used >= self.capacity

    @property
    def waiting(self) -> int:
        """Connections muted until memory is released."""
        return len(self._waiters)

    def try_allocate(self, size: int) -> bool:
        """Take `size` bytes at once if any memory is left and no one waits before us."""
        if self.exhausted or self._waiters:
            return False
        self.used += size
        return True

    async def allocate(self, size: int) -> None:
        """Take `size` bytes, waiting (FIFO) while the pool is exhausted."""
        if self.try_allocate(size):
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, granted)
        self._waiters.append(entry)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release(size)  # granted in the same tick the waiter was cancelled
            elif entry in self._waiters:  # a release may already have skipped it
                self._waiters.remove(entry)
            raise

    def release(self, size: int) -> None:
        self.used -= size
        while self._waiters and not self.exhausted:
            size_wanted, granted = self._waiters.popleft()
            if granted.cancelled():
                continue
            self.used += size_wanted
            granted.set_result(None)
