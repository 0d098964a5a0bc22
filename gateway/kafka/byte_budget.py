"""A bound on bytes held by requests: the gateway's form of Kafka's `queued.max.request.bytes`.

Owns: `ByteBudget`, the pool a connection takes a frame's announced size from as soon as it has
read the size prefix (so a stalled partial frame counts in full, as in Kafka's `SimpleMemoryPool`)
and gives back when the request has been answered or the connection closes (`Charge.release`),
and the FIFO of connections waiting — muted, not reading — until enough is given back.

Unlike Kafka's non-strict pool, a take succeeds only when it fits (`used + size <= capacity`) or
the pool is empty, so the pool never holds more than its capacity as long as no frame is larger
than the capacity (the listener caps the frame size at it: see docs/gateway.md). A waiter is
granted by a deferred call (`defer`, the loop's `call_soon` by default), never inside the
release that made room, so a connection is never re-entered from another's answer. Runs on the
event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable

Defer = Callable[[Callable[[], None]], object]


class Charge:
    """Bytes taken from a budget; `release` gives them back (once: later calls do nothing)."""

    __slots__ = ("_budget", "size")

    def __init__(self, budget: ByteBudget, size: int) -> None:
        self._budget: ByteBudget | None = budget
        self.size = size

    def release(self) -> None:
        budget, self._budget = self._budget, None
        if budget is not None:
            budget.give_back(self.size)


class Waiter:
    """A connection waiting for `size` bytes; `cancel` when it closes first."""

    __slots__ = ("cancelled", "granted", "size")

    def __init__(self, size: int, granted: Callable[[Charge], None]) -> None:
        self.size = size
        self.granted = granted
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def call_soon(callback: Callable[[], None]) -> object:
    return asyncio.get_running_loop().call_soon(callback)


class ByteBudget:
    def __init__(self, capacity: int, *, defer: Defer = call_soon) -> None:
        self.capacity = capacity
        self.used = 0
        self._defer = defer
        self._waiters: deque[Waiter] = deque()

    @property
    def waiting(self) -> int:
        """Connections muted until bytes are given back."""
        return sum(1 for w in self._waiters if not w.cancelled)

    def _fits(self, size: int) -> bool:
        return self.used == 0 or self.used + size <= self.capacity

    def try_take(self, size: int) -> Charge | None:
        """`size` bytes at once if they fit and no one waits before us; else None."""
        self._drop_cancelled()
        if self._waiters or not self._fits(size):
            return None
        self.used += size
        return Charge(self, size)

    def take_up_to(self, wanted: int) -> Charge | None:
        """As many of `wanted` bytes as are free now (all of them from an empty pool, up to its
        capacity), for an answer whose size the taker can bound; None when nothing is free or
        connections wait before us."""
        self._drop_cancelled()
        free = self.capacity - self.used
        if self._waiters or free <= 0 or wanted <= 0:
            return None
        size = min(wanted, free)
        self.used += size
        return Charge(self, size)

    def wait(self, size: int, granted: Callable[[Charge], None]) -> Waiter:
        """Queue for `size` bytes; `granted(charge)` is called (deferred) once they are taken."""
        waiter = Waiter(size, granted)
        self._waiters.append(waiter)
        self._grant()
        return waiter

    def give_back(self, size: int) -> None:
        self.used -= size
        self._grant()

    def _drop_cancelled(self) -> None:
        while self._waiters and self._waiters[0].cancelled:
            self._waiters.popleft()

    def _grant(self) -> None:
        self._drop_cancelled()
        while self._waiters and self._fits(self._waiters[0].size):
            waiter = self._waiters.popleft()
            self.used += waiter.size
            charge = Charge(self, waiter.size)
            self._defer(functools.partial(_deliver, waiter, charge))
            self._drop_cancelled()


def _deliver(waiter: Waiter, charge: Charge) -> None:
    if waiter.cancelled:  # closed between the grant and this call
        charge.release()
    else:
        waiter.granted(charge)
