"""The event loop's health: how late it runs what is due, and the garbage collector's settings.

Owns:
- `LoopLagProbe`: a task that asks to wake every `interval` seconds and records how late it woke
  (the loop was busy with synchronous work, or the process was not on a CPU) in the
  `pier_event_loop_lag_seconds` histogram (Kafka has no such metric: its network threads do not
  share one loop); a lag of at least `stall_s` is logged as `event=event_loop_stalled` (at most
  one line per `stall_log_interval_s`, with the worst lag and the count since the last line),
  so a latency tail can be told apart from a slow request. Each stall is split by the loop
  thread's scheduler statistics over it (`/proc/thread-self/schedstat`: time on a CPU, time
  runnable but waiting for one): `busy` stalls (at least half of it on a CPU: synchronous work
  on the loop), `starved` ones (at least half of it waiting for a CPU the machine's other
  processes hold) and the rest, blocked in a system call (an fsync, a write to a busy disk).
  Without /proc the CPU time comes from `time.thread_time` and nothing counts as starved. Start
  it with `start()`; `stop()` logs `event=event_loop_lag_summary` (worst lag, stalls, busy and
  starved stalls since start, worst busy lag).
- `settle_heap()`: called once the broker has started, it moves every object alive then into
  the collector's permanent generation (`gc.freeze`: start-up state — configs, partitions,
  schemas — is never scanned again) and raises the young-generation threshold, so full
  collections, which pause the loop in proportion to the heap, become rare (docs/benchmarks.md,
  "Where the broker's time goes").

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import Histogram

log = logging.getLogger("pier.server")
GEN0_THRESHOLD = 20_000  # objects allocated between young collections (CPython: 700)
GEN1_THRESHOLD = 20  # young collections per middle one (CPython: 10)
GEN2_THRESHOLD = 20  # middle collections per full one (CPython: 10)
PROBE_INTERVAL_S = 0.05
STALL_S = 0.1
STALL_LOG_INTERVAL_S = 10.0
_SCHEDSTAT = Path("/proc/thread-self/schedstat")


def thread_schedule() -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for a CPU) of the calling thread."""
    try:
        on_cpu_ns, waiting_ns, _ = _SCHEDSTAT.read_text().split()
    except (OSError, ValueError):
        return time.thread_time(), 0.0
    return int(on_cpu_ns) / 1e9, int(waiting_ns) / 1e9


def settle_heap() -> None:
    """Freeze what start-up allocated and make collections rarer (see the module docstring)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
    log.info(
        "event=heap_settled frozen_objects=%d gc_thresholds=%s",
        gc.get_freeze_count(),
        ",".join(str(t) for t in gc.get_threshold()),
    )


class LoopLagProbe:
    """Measures how late the loop wakes a sleeper; see the module docstring."""

    def __init__(
        self,
        histogram: Histogram | None,
        *,
        interval: float = PROBE_INTERVAL_S,
        stall_s: float = STALL_S,
        stall_log_interval_s: float = STALL_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        schedule: Callable[[], tuple[float, float]] = thread_schedule,
    ) -> None:
        self._histogram = histogram
        self._interval = interval
        self._stall_s = stall_s
        self._log_interval = stall_log_interval_s
        self._clock = clock
        self._schedule = schedule
        self._task: asyncio.Task[None] | None = None
        self.worst_s = 0.0  # the largest lag seen since start
        self.stalls = 0  # lags of at least stall_s since start
        self.busy_stalls = 0  # of those, the ones at least half on a CPU (work on the loop)
        self.worst_busy_s = 0.0  # the largest busy stall
        self.starved_stalls = 0  # stalls at least half spent waiting for a CPU
        self._unlogged = 0
        self._unlogged_worst = 0.0
        self._logged_at: float | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="pier-loop-lag")

    async def stop(self) -> None:
        """Stop probing; one line with the worst lag and the stall count since start."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            log.info(
                "event=event_loop_lag_summary worst_lag_ms=%d stalls=%d busy_stalls=%d "
                "worst_busy_lag_ms=%d starved_stalls=%d",
                round(self.worst_s * 1000),
                self.stalls,
                self.busy_stalls,
                round(self.worst_busy_s * 1000),
                self.starved_stalls,
            )

    def record(self, lag_s: float, cpu_s: float = 0.0, waiting_s: float = 0.0) -> None:
        """Count one measured lag; over it the loop thread spent `cpu_s` on a CPU and
        `waiting_s` waiting for one (test seam)."""
        lag_s = max(0.0, lag_s)
        if self._histogram is not None:
            self._histogram.observe(lag_s)
        self.worst_s = max(self.worst_s, lag_s)
        if lag_s < self._stall_s:
            return
        self.stalls += 1
        if cpu_s >= lag_s / 2:
            self.busy_stalls += 1
            self.worst_busy_s = max(self.worst_busy_s, lag_s)
        elif waiting_s >= lag_s / 2:
            self.starved_stalls += 1
        self._unlogged += 1
        self._unlogged_worst = max(self._unlogged_worst, lag_s)
        now = self._clock()
        if self._logged_at is None or now - self._logged_at >= self._log_interval:
            log.warning(
                "event=event_loop_stalled worst_lag_ms=%d stalls=%d last_stall_cpu_ms=%d "
                "last_stall_waiting_for_cpu_ms=%d",
                round(self._unlogged_worst * 1000),
                self._unlogged,
                round(cpu_s * 1000),
                round(waiting_s * 1000),
            )
            self._logged_at = now
            self._unlogged = 0
            self._unlogged_worst = 0.0

    async def _run(self) -> None:
        while True:
            due = self._clock() + self._interval
            cpu, waiting = self._schedule()
            await asyncio.sleep(self._interval)
            cpu_after, waiting_after = self._schedule()
            self.record(self._clock() - due, cpu_after - cpu, waiting_after - waiting)
