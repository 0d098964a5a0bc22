"""The event loop's lag probe sees a loop held by synchronous work, and `settle_heap` freezes
start-up objects out of the collector and raises its thresholds.

A real event loop whose callback blocks it; the histogram is a real prometheus-client one.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from brokers.server.loop_health import (
    GEN0_THRESHOLD,
    LoopLagProbe,
    settle_heap,
    thread_schedule,
)
from brokers.server.metrics import ServerMetrics
from tests.polling import wait_until_async

pytestmark = pytest.mark.unit
HELD_S = 0.3  # how long the test holds the loop; the probe's stall threshold is 0.1 s


def test_a_loop_held_by_synchronous_work_is_measured_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    probe = LoopLagProbe(ServerMetrics(registry).loop_lag, interval=0.01, stall_s=0.1)

    async def scenario() -> None:
        probe.start()
        try:

            async def measured_once() -> bool:
                return (registry.get_sample_value("pier_event_loop_lag_seconds_count") or 0) > 0

            await wait_until_async(measured_once, what="a first lag sample", timeout=10)
            time.sleep(HELD_S)  # a stall off the CPU (as a blocking system call)

            async def stalled() -> bool:
                return probe.stalls > 0

            await wait_until_async(stalled, what="the stall counted", timeout=10)
        finally:
            await probe.stop()

    with caplog.at_level(logging.WARNING, logger="pier.server"):
        asyncio.run(scenario())
    assert probe.worst_s >= HELD_S * 0.5
    slow = registry.get_sample_value("pier_event_loop_lag_seconds_bucket", {"le": "0.1"})
    total = registry.get_sample_value("pier_event_loop_lag_seconds_count")
    assert slow is not None and total is not None and total > slow  # one sample above 100 ms
    assert "event=event_loop_stalled" in caplog.text
    assert probe.busy_stalls == 0  # time.sleep holds the loop without using a CPU
    cpu, waiting = thread_schedule()
    assert cpu > 0 and waiting >= 0


def test_stalls_are_logged_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    probe = LoopLagProbe(None, stall_s=0.1, stall_log_interval_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="pier.server"):
        probe.record(0.2, cpu_s=0.15)
        probe.record(0.5, waiting_s=0.4)
        probe.record(0.01)  # not a stall
        now[0] = 11.0
        probe.record(0.3, cpu_s=0.2)
    lines = [r.getMessage() for r in caplog.records if "event_loop_stalled" in r.getMessage()]
    assert lines == [
        "event=event_loop_stalled worst_lag_ms=200 stalls=1 last_stall_cpu_ms=150 "
        "last_stall_waiting_for_cpu_ms=0",
        "event=event_loop_stalled worst_lag_ms=500 stalls=2 last_stall_cpu_ms=200 "
        "last_stall_waiting_for_cpu_ms=0",
    ]
    assert probe.stalls == 3
    assert (probe.busy_stalls, probe.worst_busy_s) == (2, 0.3)
    assert probe.starved_stalls == 1  # the 0.5 s one waited for a CPU


@pytest.fixture
def collector_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector_restored")
def test_settle_heap_freezes_what_exists_and_raises_the_young_threshold() -> None:
    survivor = [object() for _ in range(1000)]
    settle_heap()
    assert gc.get_freeze_count() >= len(survivor)
    assert gc.get_threshold()[0] == GEN0_THRESHOLD
