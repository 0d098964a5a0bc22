"""The cleaner's I/O throttle: `log.cleaner.io.max.bytes.per.second` (Kafka's Throttler).

Owns: the rate check over periods of `check_interval_ms` (300 ms, as Kafka): bytes read and written
are added up; once a period is over, a rate above the limit sleeps for as long as it takes to bring
that period back to the limit, then a new period starts. The default limit is unlimited (Kafka's
Double.MaxValue). Time comes from the injected clock's monotonic seconds and the nap from the
injected `sleep`, so tests drive both; the cleaner calls it from the thread doing the I/O (a worker
thread under the asynchronous driver, where sleeping blocks nobody else).

Used by one cleaning pass at a time; not thread-safe.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from brokers.common.clock import Clock

CHECK_INTERVAL_MS = 300


class Throttler:
    def __init__(
        self, max_bytes_per_second: float, *, clock: Clock, sleep: Callable[[float], None],
        check_interval_ms: int = CHECK_INTERVAL_MS,
    ) -> None:  # fmt: skip
        if not max_bytes_per_second > 0:
            raise ValueError(f"a throttle rate must be positive, got {max_bytes_per_second}")
        self.max_bytes_per_second = max_bytes_per_second
        self.slept_seconds = 0.0  # total, a metric
        self._clock = clock
        self._sleep = sleep
        self._interval = check_interval_ms / 1000
        self._period_start = clock.monotonic()
        self._observed = 0

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.max_bytes_per_second)

    def reset(self) -> None:
        """Start a fresh period (a new pass must not pay for an idle gap or an old burst)."""
        self._period_start = self._clock.monotonic()
        self._observed = 0

    def maybe_throttle(self, observed_bytes: int) -> float:
        """Count `observed_bytes`; sleep if the period just ended above the limit. Returns the
        seconds slept."""
        if self.unlimited:
            return 0.0
        self._observed += observed_bytes
        elapsed = self._clock.monotonic() - self._period_start
        if elapsed <= self._interval or self._observed <= 0:
            return 0.0
        nap = 0.0
        if self._observed / elapsed > self.max_bytes_per_second:
            nap = self._observed / self.max_bytes_per_second - elapsed
            if nap > 0:
                self._sleep(nap)
                self.slept_seconds += nap
        self.reset()
        return max(nap, 0.0)
