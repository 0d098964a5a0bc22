"""`AcceptBackoff`: failed accepts wait longer each time (capped) and log once per interval."""

from __future__ import annotations

import pytest

from brokers.server.accept import AcceptBackoff

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_delay_doubles_from_10_ms_up_to_1_s_and_resets_on_success() -> None:
    backoff = AcceptBackoff(FakeClock())
    delays = [backoff.failed()[0] for _ in range(9)]
    assert delays == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]
    backoff.succeeded()
    assert backoff.failed()[0] == 0.01


def test_failures_are_logged_once_per_interval_with_how_many_they_stand_for() -> None:
    clock = FakeClock()
    backoff = AcceptBackoff(clock, log_interval_s=10.0)
    assert backoff.failed()[1] == 1  # the first failure is reported at once
    silent = [backoff.failed()[1] for _ in range(500)]
    assert silent == [None] * 500, "a storm of EMFILEs must not become a storm of log lines"
    clock.now += 10.0
    assert backoff.failed()[1] == 501  # the next line counts the failures it stands for
    assert backoff.failed()[1] is None
