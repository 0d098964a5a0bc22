"""`pier gateway` as an operator meets it: bad arguments and settings are one line and exit 2, an
unreachable fleet is one line and exit 1 — never a stack trace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infra.probes import free_port
from tenancy.store import TenantStore

pytestmark = pytest.mark.integration


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def base(tmp_path: Path, bootstrap: str = "127.0.0.1:1") -> list[str]:
    return ["--bootstrap", bootstrap, "--db", f"sqlite:///{tmp_path / 't.db'}"]


@pytest.mark.parametrize(
    ("extra", "properties", "expected"),
    [
        (["--port", "notaport"], None, "invalid int value"),
        (["--port", "0"], None, "--port 0 needs --broker-port-base"),
        (["--port", "9999", "--tls-cert", "x.pem"], None, "--tls-cert and --tls-key go together"),
        (["--port", "9999"], "no.such.setting=1\n", "unknown gateway setting 'no.such.setting'"),
        (["--port", "9999"], "quota.window.num=one\n", "quota.window.num='one' is not an integer"),
        (["--port", "9999"], "gateway.id=a/b\n", "gateway.id 'a/b' must be"),
        (["--port", "9999", "--zookeeper", "zk;rm"], None, "zookeeper.connect 'zk;rm' is not"),
        (["--port", "9999"], "fleet.rates.hold.ms=10\n", "fleet.rates.hold.ms=10 is out of range"),
        (["--port", "9999", "--workers", "0"], None, "--workers 0 is not 1..64"),
        (["--port", "9999"], "workers=65\n", "workers=65 is out of range"),
        (
            ["--port", "0", "--broker-port-base", "9000", "--workers", "2"],
            None,
            "workers > 1 needs fixed ports",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    tmp_path: Path, extra: list[str], properties: str | None, expected: str
) -> None:
    args = base(tmp_path) + extra
    if properties is not None:
        config = tmp_path / "gateway.properties"
        config.write_text(properties)
        args += ["--config", str(config)]
    done = run(*args)
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_an_unreachable_fleet_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with TenantStore.open(f"sqlite:///{tmp_path / 't.db'}") as store:
        store.upgrade()
    dead = f"127.0.0.1:{free_port()}"
    done = run(*base(tmp_path, dead), "--port", str(free_port()), "--log-level", "ERROR")
    assert done.returncode == 1, done.stderr
    assert f"no broker of {dead} answers" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_uninitialised_tenant_store_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = run(*base(tmp_path), "--port", str(free_port()), "--log-level", "ERROR")
    assert done.returncode == 1, done.stderr
    assert "has no schema: run `pier tenancy init" in done.stderr
    assert "Traceback" not in done.stderr


def test_workers_that_cannot_start_stop_the_gateway_with_exit_1(tmp_path: Path) -> None:
    """`--workers 2` in front of a dead fleet: each worker says why, the supervisor exits 1."""
    with TenantStore.open(f"sqlite:///{tmp_path / 't.db'}") as store:
        store.upgrade()
    dead = f"127.0.0.1:{free_port()}"
    args = [*base(tmp_path, dead), "--port", str(free_port()), "--workers", "2"]
    done = run(*args, "--log-level", "ERROR")
    assert done.returncode == 1, done.stderr
    assert f"no broker of {dead} answers" in done.stderr
    assert "event=worker_start_failed code=1" in done.stderr
    assert "Traceback" not in done.stderr
