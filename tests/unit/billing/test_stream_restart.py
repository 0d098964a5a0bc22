"""`infra/up`'s billing stream is restarted when it dies, after a backoff that doubles from 2 s to
at most 60 s and starts over once a stream has lived two minutes (`infra.billing_loop`). Real
child processes (a Python that exits at once stands in for a dying `pier billing stream`); the
clock is passed in, so nothing sleeps."""

from __future__ import annotations

import sys
from pathlib import Path

from infra.billing_loop import (
    FIRST_BACKOFF_S,
    HEALTHY_S,
    MAX_BACKOFF_S,
    BillingStreamProcess,
    billing_stream_argv,
    start_billing_stream,
)

DIES = (sys.executable, "-c", "import sys; sys.exit(3)")


def _dead(tmp_path: Path) -> BillingStreamProcess:
    stream = start_billing_stream(
        tmp_path / "billing.log", "sqlite:///x.db", "127.0.0.1:1", tmp_path / "state", program=DIES
    )
    stream.process.wait(30)
    return stream


def _next_restart(stream: BillingStreamProcess, now: float) -> float:
    """Let the restarted process die too; the delay the next restart waits."""
    assert stream.restart_if_due(now) is not None  # scheduled: says so
    delay = stream.backoff_s
    assert stream.restart_if_due(now + delay - 0.1) is None  # not yet
    pid = stream.pid
    line = stream.restart_if_due(now + delay)
    assert line is not None and "restarted" in line and stream.pid != pid
    stream.process.wait(30)
    return delay


def test_a_dead_stream_restarts_with_a_doubling_backoff(tmp_path: Path) -> None:
    stream = _dead(tmp_path)
    now = stream.started_at + 1
    delays = []
    for _ in range(7):
        delays.append(_next_restart(stream, now))
        now = stream.started_at + 1  # dies a second after each start
    assert (
        delays
        == [2, 4, 8, 16, 32, 60, 60]
        == [min(FIRST_BACKOFF_S * 2**i, MAX_BACKOFF_S) for i in range(7)]
    )
    assert stream.restarts == 7
    assert "exited with 3" in (stream.restart_if_due(stream.started_at + HEALTHY_S) or "")
    assert stream.backoff_s == FIRST_BACKOFF_S  # it lived long enough: the backoff starts over


def test_a_running_or_stopped_stream_is_left_alone(tmp_path: Path) -> None:
    lives = (sys.executable, "-c", "import time; time.sleep(60)")
    stream = start_billing_stream(
        tmp_path / "billing.log", "sqlite:///x.db", "127.0.0.1:1", tmp_path / "state", program=lives
    )
    try:
        assert stream.restart_if_due() is None and stream.restarts == 0
    finally:
        stream.stop(10)
    assert stream.restart_at is None and stream.pid == stream.process.pid


def test_the_stream_command_is_pier_billing_stream_with_its_state_and_trigger() -> None:
    argv = billing_stream_argv("sqlite:///t.db", "b:9092", Path("/s"), trigger="10s")
    assert argv[-12:] == [
        "billing", "stream", "--db", "sqlite:///t.db", "--bootstrap", "b:9092",
        "--state", "/s", "--master", "local[1]", "--trigger", "10s",
    ]  # fmt: skip
