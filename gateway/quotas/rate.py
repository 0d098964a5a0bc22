"""A rate measured over time-windowed samples, as Kafka's `Rate` over a `SampledStat` (`WindowedSum`).

`quota.window.num` samples of `quota.window.size.seconds` each (11 × 1 s by default). A sample is
complete once it is a window old; the next record then starts a new one, reusing the oldest slot.
Kafka keeps one slot more than `samples` for a sample that began before the monitored span but
still overlaps it. A sample without events for `samples` windows is obsolete and is reset before
any measurement. The rate is the sum of the live samples over the window Kafka computes: the time
since the oldest live sample started, padded to at least (samples − 1) full windows, and at least
1 ms (`Rate.windowSize`). Pure; not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0


class SampledRate:
    """Kafka's `Rate(WindowedSum)` with `MetricConfig(samples, timeWindowMs)`; values per second."""

    __slots__ = ("_current", "_samples", "last_record_ms", "samples", "window_size_ms")

    def __init__(self, *, samples: int = 11, window_ms: int = 1000) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self.samples = samples
        self.window_size_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_record_ms: int | None = None

    def record(self, value: float, now_ms: int) -> None:
        """Add `value` at `now_ms` (negative values take back what was recorded)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_size_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms
        self.last_record_ms = now_ms

    def unrecord(self, value: float, now_ms: int) -> None:
        """Take back `value` recorded earlier (Kafka's `unrecordQuotaSensor`: records −value)."""
        self.record(-value, now_ms)

    def total(self, now_ms: int) -> float:
        """The sum of the live samples."""
        self._purge_obsolete(now_ms)
        return sum(sample.value for sample in self._samples)

    def measure(self, now_ms: int) -> float:
        """The rate per second at `now_ms`."""
        total = self.total(now_ms)
        return total * 1000.0 / self.window_ms(now_ms)

    def window_ms(self, now_ms: int) -> int:
        """The span the rate is measured over at `now_ms` (Kafka's `Rate.windowSize`)."""
        self._purge_obsolete(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self.window_size_ms
        if full_windows < self.samples - 1:
            # Early on, assume (samples − 1) full windows so a first burst does not read as a
            # huge rate over a few milliseconds.
            elapsed += (self.samples - 1 - full_windows) * self.window_size_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One slot beyond `samples` keeps the sample that overlaps the window's start, so the sum
        # does not drop by a whole sample at each boundary (Kafka PR #15889, "rate metric spikes").
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _oldest(self, now_ms: int) -> _Sample:
        self._current_sample(now_ms)
        return min(self._samples, key=lambda sample: sample.start_ms)

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_size_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)
