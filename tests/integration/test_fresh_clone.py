"""The README's first command on a fresh clone (issue 22): `infra/up` from a clone of the
repository with no virtualenv makes one, installs what every process it starts needs, and keeps
running: both web consoles it prints answer, the billing rollup completes a round against the
demo tenant's usage (its log a JSON report a line, no Spark progress bars), then Ctrl-C stops
everything with exit 0.

The clone is `git clone` of this repository, so it holds what is committed (CI tests a fresh
clone of the submission, so there the two are the same). The run installs into an empty venv from
PyPI or pip's cache: minutes the first time on a machine, well under one once cached. The clone's
`infra/up` runs as the README says, in its own directory; only its ports and state directory are
chosen here, so parallel tests never collide.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.stack import free_port
from tests.integration.test_launcher import wait_for_output
from tests.integration.test_up_admin import gateway_ports
from tests.polling import wait_until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
INSTALL_AND_START_S = 900.0  # an empty venv: pip install from the cache (or PyPI), gcc, then up
ROUND_S = 240.0  # the rollup's first round: a JVM and a Spark session start, then one job
STOP_S = 90.0


def rollup_rounds(log: Path) -> list[dict[str, object]]:
    """The JSON reports of the rollup rounds completed so far (one line each in the log)."""
    if not log.exists():
        return []
    rounds = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                rounds.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rounds


@pytest.fixture
def clone(tmp_path: Path) -> Iterator[Path]:
    target = tmp_path / "pier"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(target)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    yield target
    shutil.rmtree(target / ".venv", ignore_errors=True)


def test_infra_up_on_a_fresh_clone_installs_what_it_runs_and_keeps_running(
    clone: Path, tmp_path: Path
) -> None:
    assert not (clone / ".venv").exists()
    admin_port, broker_port = free_port(), free_port()
    gateway_port = gateway_ports({admin_port, broker_port})
    http_port = free_port()
    argv = ["infra/up", "--standalone", "--root", str(tmp_path / "state")]
    argv += ["--port", str(broker_port), "--admin-port", str(admin_port)]
    argv += ["--gateway-port", str(gateway_port), "--gateway-http-port", str(http_port)]
    argv += ["--gateway-metrics-port", "0", "--billing-every", "2s"]
    env = {k: v for k, v in os.environ.items() if k not in {"PIER_VENV", "VIRTUAL_ENV"}}
    output = tmp_path / "up.out"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            argv,
            cwd=clone,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    try:
        printed = wait_for_output(output, process, "Press Ctrl-C", timeout=INSTALL_AND_START_S)
        for console in ("operator console: ", "tenant console: "):
            url = next(line for line in printed.splitlines() if line.startswith(console)).split()[2]
            with urllib.request.urlopen(url, timeout=10) as page:  # what a browser opens first
                assert page.status == 200 and b"<html" in page.read().lower(), url
        log = tmp_path / "state" / "billing.log"

        def a_round_completed() -> bool:
            assert process.poll() is None, (
                f"infra/up exited {process.returncode}:\n{output.read_text()}"
            )
            return bool(rollup_rounds(log))

        wait_until(
            a_round_completed, what="a completed billing round", timeout=ROUND_S, interval=1.0
        )
        assert process.poll() is None, output.read_text()
        assert "[Stage " not in log.read_text(errors="replace")  # no Spark progress bars
        assert (clone / ".venv" / "bin" / "pier").exists()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=STOP_S) == 0, output.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
