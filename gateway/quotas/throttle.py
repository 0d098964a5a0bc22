"""Throttle-time arithmetic of Kafka's quotas (`QuotaUtils`, `ControllerMutationQuotaManager`).

A rate O measured over a window W exceeds its quota T; a delay X added to W brings it back when
O × W / (W + X) = T, so X = (O − T) / T × W. A token bucket below zero needs −tokens / rate seconds
to refill to zero. Kafka rounds with `Math.round` (half up), not Python's half-to-even. Pure
functions; safe from any thread.
"""

from __future__ import annotations

import math

INT32_MAX = 2**31 - 1  # a Java int: Kafka's fetch max bytes and throttle times are ints


def java_round(value: float) -> int:
    """Java's `Math.round`: the nearest integer, halves rounded up."""
    return math.floor(value + 0.5)


def throttle_time_ms(observed: float, quota: float, window_ms: int) -> int:
    """How long to hold a client whose rate `observed` is over `quota` (`QuotaUtils.throttleTime`)."""
    return min(java_round((observed - quota) / quota * window_ms), INT32_MAX)


def bounded_throttle_time_ms(observed: float, quota: float, window_ms: int, max_ms: int) -> int:
    """`throttle_time_ms`, at most `max_ms` (`QuotaUtils.boundedThrottleTime`)."""
    return min(throttle_time_ms(observed, quota, window_ms), max_ms)


def token_throttle_time_ms(tokens: float, rate: float) -> int:
    """How long a bucket at `tokens` (< 0) refilled at `rate` per second takes to reach zero."""
    return min(java_round(-tokens / rate * 1000), INT32_MAX)


def max_value_in_window(quota: float | None, samples: int, window_s: int) -> int:
    """The most one request may take without certain throttling (`maxValueInQuotaWindow`):
    quota × (samples − 1) × window, as a Java int (saturating); no quota → INT32_MAX."""
    if quota is None:
        return INT32_MAX
    return min(int(quota * (samples - 1) * window_s), INT32_MAX)


def request_percentage(elapsed_ms: float) -> float:
    """Time spent on a request as a percentage of one thread for one second (Kafka's
    `nanosToPercentage`): 10 ms of handling is 1 %."""
    return elapsed_ms * 100.0 / 1000.0
