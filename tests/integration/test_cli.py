"""The `pier broker` command-line contract, against the real broker process.

Contract (see `pier.cli`): bad arguments or an unusable data dir → exit status 2 and exactly one line
on stderr, no traceback; a ready line `pier broker ready node_id=N listener=HOST:PORT`; SIGTERM or
SIGINT → clean shutdown (exit 0) leaving Kafka's `.kafka_cleanshutdown` marker in the data dir.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from infra.stack import BrokerProcess, free_port

pytestmark = pytest.mark.integration

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def run_broker(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "pier", "broker", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str]) -> None:
    detail = f"exit {result.returncode}; stderr:\n{result.stderr}"
    assert result.returncode == 2, detail
    assert "Traceback" not in result.stderr, detail
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1, detail


@pytest.mark.parametrize(
    "bad",
    [
        ["--bogus-flag"],
        ["--port", "not-a-port"],
        ["--port", "70000"],
        ["--node-id", "minus-one"],
        ["--config", "/nonexistent/pier-broker.properties"],
    ],
    ids=["unknown-flag", "port-not-a-number", "port-out-of-range", "bad-node-id", "no-config"],
)
def test_bad_argument_exits_2_with_one_line(tmp_path: Path, bad: list[str]) -> None:
    args = ["--data-dir", str(tmp_path / "data"), "--port", str(free_port()), *bad]
    assert_one_line_error(run_broker(*args))


def test_missing_data_dir_argument_exits_2(tmp_path: Path) -> None:
    assert_one_line_error(run_broker("--port", str(free_port())))


def test_invalid_config_value_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("log.segment.bytes=not-a-size\n")
    args = ["--data-dir", str(tmp_path / "data"), "--port", str(free_port())]
    assert_one_line_error(run_broker(*args, "--config", str(config)))


@pytest.mark.parametrize("shape", ["file", "under-a-file"])
def test_data_dir_that_is_a_file_exits_2(tmp_path: Path, shape: str) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data dir should be\n")
    data_dir = blocker if shape == "file" else blocker / "data"
    assert_one_line_error(run_broker("--data-dir", str(data_dir), "--port", str(free_port())))


def test_unwritable_data_dir_exits_2(tmp_path: Path) -> None:
    data_dir = tmp_path / "read-only"
    data_dir.mkdir()
    data_dir.chmod(0o500)
    # Root ignores permission bits; drop the capabilities that let it, for the broker only.
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        prefix = ("setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--")
    try:
        assert_one_line_error(
            run_broker("--data-dir", str(data_dir), "--port", str(free_port()), prefix=prefix)
        )
    finally:
        data_dir.chmod(0o700)


def test_ready_line_names_node_and_listener(broker: BrokerProcess) -> None:
    ready = f"pier broker ready node_id=0 listener={broker.bootstrap}"
    assert ready in broker.log_path.read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shuts_down_cleanly(broker: BrokerProcess, signum: signal.Signals) -> None:
    broker.process.send_signal(signum)
    assert broker.process.wait(timeout=30) == 0
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).is_file()
    assert "Traceback" not in broker.log_path.read_text()


def test_restarts_after_clean_and_unclean_shutdown(broker: BrokerProcess) -> None:
    broker.restart()
    broker.kill()
    assert not (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    broker.restart()
    assert broker.stop() == 0
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).is_file()
