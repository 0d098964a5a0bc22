"""Child processes of the local stack: spawn with a log file, stop by PID, read the log tail.

Every child runs in its own session, so a Ctrl-C in the terminal reaches only the launcher, which then
stops the children in order (brokers before ZooKeeper). Signals go to the child's PID only, never to a
group or a name. Children still alive when the interpreter exits are killed by an `atexit` hook; and
when the launcher itself is SIGKILLed (a CI timeout), util-linux `setpriv --pdeathsig KILL` (which
execs the program, so the PID is unchanged) makes the kernel kill them too. The death signal fires
when the *thread* that spawned the child ends, so spawn from a long-lived thread (the main thread,
as fixtures and `infra/up` do). The registry of live children is guarded by a lock; the functions
are safe from any thread, but one `Popen` should be stopped from one thread at a time.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from infra.errors import NotReadyError, ProcessExitedError
from infra.probes import poll_until

_live: set[subprocess.Popen[bytes]] = set()
_live_lock = threading.Lock()


def spawn(
    argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `argv` with stdout and stderr appended to `log_path`; stdin is /dev/null."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, **(env or {})}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [*_die_with_parent(), *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
        )
    with _live_lock:
        _live.add(process)
    return process


def terminate(process: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM the PID and wait; SIGKILL when it outlives `timeout`. Returns the exit status."""
    try:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        return process.wait()
    finally:
        _forget(process)


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the PID (if still running) and reap it."""
    try:
        if process.poll() is None:
            process.kill()
        process.wait()
    finally:
        _forget(process)


def wait_ready(
    process: subprocess.Popen[bytes],
    probe: Callable[[], bool],
    *,
    timeout: float,
    name: str,
    log_path: Path,
) -> None:
    """Poll `probe` until it holds; raise with the log tail when the process exits or time runs out."""

    def exited() -> bool:
        return process.poll() is not None

    if poll_until(probe, timeout=timeout, exited=exited):
        return
    tail = log_tail(log_path)
    if exited():
        raise ProcessExitedError(
            f"{name} exited with status {process.returncode} before it was ready;"
            f" log {log_path}:\n{tail}"
        )
    raise NotReadyError(f"{name} not ready after {timeout:g}s; log {log_path}:\n{tail}")


def pid_running(pid: int) -> bool:
    """True when a process with this PID exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the command name, which is parenthesised and may hold spaces.
    return status.rsplit(")", 1)[-1].split()[0] != "Z"


def log_tail(path: Path, max_lines: int = 60, max_bytes: int = 32768) -> str:
    """The last lines of a log file, or a note saying why there is none."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - max_bytes))
            data = log.read()
    except OSError as exc:
        return f"<no log at {path}: {exc.strerror}>"
    lines = data.decode("utf-8", "replace").splitlines()[-max_lines:]
    return "\n".join(lines) if lines else f"<{path} is empty>"


def _die_with_parent() -> list[str]:
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def _forget(process: subprocess.Popen[bytes]) -> None:
    with _live_lock:
        _live.discard(process)


@atexit.register
def _kill_leftovers() -> None:
    with _live_lock:
        leftovers = list(_live)
    for process in leftovers:
        kill(process)
