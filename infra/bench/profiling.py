"""Sampling the broker with py-spy while a benchmark phase runs.

Owns: `py_spy_recording(pid, svg)`, a context manager that starts `py-spy record` attached to the
broker's PID (it samples from outside: no code change in the broker, negligible overhead) and, on
exit, interrupts it so it writes the flamegraph SVG. py-spy comes from `pip install py-spy` (it is
looked up next to the running interpreter first, then on PATH) and needs ptrace rights over the
broker (root, or `kernel.yama.ptrace_scope=0`). Blocking; one recording at a time.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SAMPLES_PER_SECOND = 200


def py_spy_program() -> str:
    beside_python = Path(sys.executable).with_name("py-spy")
    found = str(beside_python) if beside_python.exists() else shutil.which("py-spy")
    if found is None:
        raise RuntimeError("py-spy not found: pip install py-spy")
    return found


@contextmanager
def py_spy_recording(pid: int, svg: Path) -> Iterator[None]:
    svg.parent.mkdir(parents=True, exist_ok=True)
    command = [py_spy_program(), "record", "--pid", str(pid), "--output", str(svg)]
    command += ["--format", "flamegraph", "--rate", str(SAMPLES_PER_SECOND)]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
        _, errors = recorder.communicate(timeout=120)
        if recorder.returncode not in (0, -signal.SIGINT) or not svg.exists():
            print(
                f"py-spy failed ({recorder.returncode}): {errors.decode()[-500:]}", file=sys.stderr
            )
