"""The clock every broker component reads time from, injectable so tests can control it.

Owns: the `Clock` protocol, the system clock and a manual clock for tests.
Concurrency: `SystemClock` is stateless and thread-safe; `ManualClock` is not thread-safe.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (timeouts, rates); never goes backwards."""
        ...


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, time_ms: int = 1_700_000_000_000, monotonic: float = 1000.0) -> None:
        self._time_ms = time_ms
        self._monotonic = monotonic

    def time_ms(self) -> int:
        return self._time_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, ms: int) -> None:
        self._time_ms += ms
        self._monotonic += ms / 1000.0


SYSTEM_CLOCK = SystemClock()
