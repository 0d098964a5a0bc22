"""A second `infra/up` on a state dir whose launcher is alive but not up yet, or up with nothing
dead (issue 22 item 10): it starts nothing, says what it found, and exits 3. The "launcher" is a
real process (`sleep`) whose record is written the way `infra.up_state` writes it; the full stack
is exercised in test_up_running.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra import up_state
from tests.integration.test_up_cluster import REPO

pytestmark = pytest.mark.integration


@pytest.fixture
def launcher() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


def write_record(
    root: Path, pid: int, *, starting: bool, processes: list[dict[str, object]]
) -> None:
    root.mkdir(parents=True, exist_ok=True)
    record = {
        "launcher": {"pid": pid, "start_time": up_state.start_time(pid)},
        "starting": starting,
        "processes": processes,
        "endpoints": [
            ["admin API", "http://127.0.0.1:1"],
            ["tenant HTTP API", "http://127.0.0.1:2"],
        ],
        "restarts": 0,
        "last_restart": {"restarted": [], "failed": []},
    }
    (root / up_state.STATE_FILE).write_text(json.dumps(record))


def second_up(root: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "infra.up_main", "--root", str(root)]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def test_a_second_up_while_the_first_is_starting_waits_for_nothing_and_exits_3(
    tmp_path: Path, launcher: subprocess.Popen[bytes]
) -> None:
    write_record(tmp_path, launcher.pid, starting=True, processes=[])
    done = second_up(tmp_path)
    assert done.returncode == 3, done.stderr
    assert (
        f"Pier is already starting from {tmp_path} (launcher pid {launcher.pid}); nothing started"
        in done.stderr
    )
    assert launcher.poll() is None  # not signalled
    assert json.loads((tmp_path / up_state.STATE_FILE).read_text())["starting"] is True


def test_a_second_up_with_nothing_dead_lists_the_stack_and_exits_3(
    tmp_path: Path, launcher: subprocess.Popen[bytes]
) -> None:
    entry = {"name": "gateway", "pid": launcher.pid, "address": "127.0.0.1:3", "log": "g.log"}
    write_record(tmp_path, launcher.pid, starting=False, processes=[{**entry, "running": True}])
    done = second_up(tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"Pier is already running from {tmp_path} (launcher pid {launcher.pid})" in done.stdout
    assert f"gateway: pid {launcher.pid} 127.0.0.1:3 running" in done.stdout
    assert "admin API: http://127.0.0.1:1" in done.stdout
    assert "tenant HTTP API: http://127.0.0.1:2" in done.stdout
    assert launcher.poll() is None
