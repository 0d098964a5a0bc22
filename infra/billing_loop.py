"""Launching `infra/up`'s billing rollup: `pier billing stream` against the local stack.

One child process keeps one Spark session (`local[1]`, so it never takes both cores) running the
rollup as a Structured Streaming query: a micro-batch every trigger interval (default 30 s) with
new usage is rolled up into the tenant store, so a demo tenant's usage shows in
`pier billing usage` and the admin API within about a minute. Its state directory (counted ids and
the stream's checkpoint, `<state>/__usage/stream-checkpoint`) is `<root>/billing-state`, the
default `pier billing run` uses beside the same store, so a backfill or rerun continues from the
same ledger. No readiness probe: the query starts at once and reports on its log (one JSON line a
micro-batch).

The stream is not essential to the stack: when it dies (brokers briefly away, `__usage` not yet
created, a backfill `run` winning the fence), `restart_if_due`, called by `infra/up`'s watcher
every second, starts it again after a backoff that doubles from 2 s up to 60 s and goes back to
2 s once a stream has lived 2 minutes. Blocking; one object per process; main thread only (the
child's parent-death signal belongs to the thread that spawned it).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra import process as proc
from infra.broker import PIER_PROGRAM

_ENV = {"PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": "127.0.0.1"}
FIRST_BACKOFF_S = 2.0
MAX_BACKOFF_S = 60.0
HEALTHY_S = 120.0  # a stream that lived this long starts the backoff over


@dataclass
class BillingStreamProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    trigger: str
    state_dir: Path
    argv: tuple[str, ...] = field(repr=False)
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0
    backoff_s: float = 0.0
    restart_at: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def checkpoint(self) -> Path:
        return self.state_dir / "__usage" / "stream-checkpoint"

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: the stream finishes the micro-batch under way (its commit is atomic), exits."""
        self.restart_at = None
        return proc.terminate(self.process, timeout)

    def kill(self) -> None:
        proc.kill(self.process)

    def restart_if_due(self, now: float | None = None) -> str | None:
        """A dead stream: schedule its restart (backoff), or restart it when due. Returns the line
        to print about what was done, or None."""
        now = time.monotonic() if now is None else now
        if self.process.poll() is None:
            return None
        if self.restart_at is None:
            lived = now - self.started_at
            self.backoff_s = (
                FIRST_BACKOFF_S
                if lived >= HEALTHY_S or not self.backoff_s
                else min(self.backoff_s * 2, MAX_BACKOFF_S)
            )
            self.restart_at = now + self.backoff_s
            return (
                f"billing stream (pid {self.pid}) exited with {self.process.returncode};"
                f" restarting in {self.backoff_s:.0f} s (log {self.log_path})"
            )
        if now < self.restart_at:
            return None
        self.process = proc.spawn(self.argv, self.log_path, _ENV)
        self.started_at, self.restart_at = now, None
        self.restarts += 1
        return f"billing stream restarted (pid {self.pid}, restart {self.restarts})"


def billing_stream_argv(
    db_url: str,
    bootstrap: str,
    state_dir: Path,
    *,
    trigger: str = "30s",
    master: str = "local[1]",
    program: Sequence[str] = PIER_PROGRAM,
) -> list[str]:
    return [
        *program, "billing", "stream", "--db", db_url, "--bootstrap", bootstrap,
        "--state", str(state_dir), "--master", master, "--trigger", trigger,
    ]  # fmt: skip


def start_billing_stream(
    log_path: Path,
    db_url: str,
    bootstrap: str,
    state_dir: Path,
    *,
    trigger: str = "30s",
    master: str = "local[1]",
    program: Sequence[str] = PIER_PROGRAM,
) -> BillingStreamProcess:
    argv = billing_stream_argv(
        db_url, bootstrap, state_dir, trigger=trigger, master=master, program=program
    )
    process = proc.spawn(argv, log_path, _ENV)
    return BillingStreamProcess(process, log_path, trigger, state_dir, tuple(argv))
