"""Launching `infra/up`'s billing rollup: `pier billing run --every 60s` against the local stack.

One child process keeps one Spark session (`local[1]`, so it never takes both cores) and rolls
`__usage` up every interval into the tenant store, so a demo tenant's usage shows in
`pier billing usage` and the admin API without extra steps. No readiness probe: its first run
starts at once and reports on its log. Blocking; one object per process.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra import process as proc
from infra.broker import PIER_PROGRAM

_ENV = {"PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": "127.0.0.1"}


@dataclass
class BillingLoopProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    every: str
    program: tuple[str, ...] = field(default=PIER_PROGRAM, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: the loop finishes the run under way (its commit is atomic) and exits."""
        return proc.terminate(self.process, timeout)

    def kill(self) -> None:
        proc.kill(self.process)


def start_billing_loop(
    log_path: Path,
    db_url: str,
    bootstrap: str,
    *,
    every: str = "60s",
    program: Sequence[str] = PIER_PROGRAM,
) -> BillingLoopProcess:
    argv = [
        *program, "billing", "run", "--db", db_url, "--bootstrap", bootstrap,
        "--master", "local[1]", "--every", every,
    ]  # fmt: skip
    return BillingLoopProcess(proc.spawn(argv, log_path, _ENV), log_path, every, tuple(program))
