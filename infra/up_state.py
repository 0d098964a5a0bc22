"""`infra/up`'s record of a running stack, `<root>/stack.json`, and how a second `infra/up` uses it.

The launcher writes the record as it starts (`starting`: no processes yet), once its stack is up
and again whenever something changes (a broker died, a restart request was served), and removes
it when it stops. It holds the launcher's PID with its start time (from /proc, so a reused PID is
never mistaken for it), each process's name, PID, address, log and whether it runs, the stack's
endpoints (name and URL, as `infra/up` printed them), and how many restart requests were served,
with the last one's outcome. A second `infra/up` with the same `--root` finds the live launcher
there (`infra.up_watch.ask_running_launcher`); when a process died it sends it SIGUSR1 (by PID)
and waits until the served count moves on: the launcher itself restarts what died, on its main
thread, so the new processes are its children like the others, die with it, and stop in order on
Ctrl-C. Writes are atomic (temporary file, then rename). Blocking; the
launcher writes from its main thread only.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infra.process import pid_running

STATE_FILE = "stack.json"
RESTART_SIGNAL = signal.SIGUSR1
ANSWER_TIMEOUT_S = 180.0  # a broker restart waits for its listener (30 s) and ZooKeeper's expiry


@dataclass(frozen=True)
class ProcessEntry:
    """One process of the stack as the record shows it."""

    name: str
    pid: int
    address: str
    log: str
    running: bool


@dataclass
class RestartOutcome:
    """What one restart request did: lines saying what was restarted, and what failed."""

    restarted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LauncherRecord:
    """A launcher found alive through its record."""

    pid: int
    restarts: int
    processes: list[ProcessEntry]
    last_restart: RestartOutcome
    starting: bool = False
    endpoints: list[tuple[str, str]] = field(default_factory=list)

    def dead(self) -> list[ProcessEntry]:
        """The processes that are not running (as recorded, or gone since)."""
        return [p for p in self.processes if not p.running or not pid_running(p.pid)]


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name (which may hold spaces); field 22 is the 20th.
    return int(stat.rsplit(")", 1)[-1].split()[19])


def save(
    root: Path,
    processes: Sequence[ProcessEntry],
    restarts: int,
    last: RestartOutcome,
    endpoints: Sequence[tuple[str, str]] = (),
) -> None:
    """Write this launcher's record of its running stack (atomically)."""
    _write(root, processes, restarts, last, endpoints, starting=False)


def save_starting(root: Path) -> None:
    """Write this launcher's record while it starts its stack (atomically)."""
    _write(root, (), 0, RestartOutcome(), (), starting=True)


def _write(
    root: Path,
    processes: Sequence[ProcessEntry],
    restarts: int,
    last: RestartOutcome,
    endpoints: Sequence[tuple[str, str]],
    *,
    starting: bool,
) -> None:
    record = {
        "launcher": {"pid": os.getpid(), "start_time": start_time(os.getpid())},
        "starting": starting,
        "processes": [asdict(entry) for entry in processes],
        "endpoints": [list(pair) for pair in endpoints],
        "restarts": restarts,
        "last_restart": asdict(last),
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / STATE_FILE
    temporary = path.with_name(f".{STATE_FILE}.{os.getpid()}")
    temporary.write_text(json.dumps(record, indent=2) + "\n")
    temporary.replace(path)


def remove(root: Path) -> None:
    """Delete the record if it is this launcher's."""
    path = root / STATE_FILE
    data = _read(path)
    if data is not None and data.get("launcher", {}).get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def find_launcher(root: Path) -> LauncherRecord | None:
    """The live launcher recorded under `root`, or None (no record, or a stale one)."""
    data = _read(root / STATE_FILE)
    if data is None:
        return None
    try:
        pid = int(data["launcher"]["pid"])
        started = data["launcher"]["start_time"]
        if pid == os.getpid() or not pid_running(pid) or start_time(pid) != started:
            return None
        return LauncherRecord(
            pid=pid,
            restarts=int(data["restarts"]),
            processes=[ProcessEntry(**entry) for entry in data["processes"]],
            last_restart=RestartOutcome(**data["last_restart"]),
            starting=bool(data.get("starting", False)),
            endpoints=[(str(name), str(url)) for name, url in data.get("endpoints", [])],
        )
    except (KeyError, TypeError, ValueError):
        return None


def request_restart(
    root: Path, launcher: LauncherRecord, timeout: float = ANSWER_TIMEOUT_S
) -> LauncherRecord | None:
    """Ask the launcher to restart what died; its record once it answered, None if it went away
    (or did not answer within `timeout`)."""
    os.kill(launcher.pid, RESTART_SIGNAL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = find_launcher(root)
        if current is None:
            return None
        if current.restarts > launcher.restarts:
            return current
        time.sleep(0.1)
    return None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
