"""`infra/up --standalone` with the operators' admin API: a real broker and a real `pier admin-api`
on a SQLite tenant store under a tmp root, free ports, Ctrl-C (SIGINT) to stop. (The default
cluster shape is tested in test_up_cluster.py.)

The launcher runs as `python -m infra.up_main`, which is what the `infra/up` script execs once its
virtualenv step is done; running the script itself would `pip install` into the shared virtualenv
in the middle of a test run whenever `pyproject.toml` changed.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.probes import port_in_use
from infra.process import pid_running
from infra.stack import free_port
from tests.integration.test_launcher import children_of, wait_for_output

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
TOKEN_PREFIX = "pop_"
SECRET_NOTE = "pier: store the secret now; it is not shown again"  # `pier admin api-keys create`


@dataclass
class UpRun:
    """One `infra/up` subprocess and the file its stdout and stderr go to."""

    process: subprocess.Popen[bytes]
    output: Path
    admin_url: str

    def text(self) -> str:
        return self.output.read_text()

    def wait_until_up(self) -> None:
        wait_for_output(self.output, self.process, "Press Ctrl-C", timeout=WAIT_S)

    def wait_exit(self) -> int:
        try:
            return self.process.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"infra/up still running {WAIT_S}s after the stop:\n{self.text()}")

    def ctrl_c(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.wait_exit()


def gateway_ports(taken: set[int]) -> int:
    """A gateway port P with P + 1 (standalone broker 0's gateway port) free too, neither of
    them among the ports already chosen for the stack's other listeners (not yet bound)."""
    for _ in range(50):
        port = free_port()
        pair = {port, port + 1}
        if not pair & taken and not port_in_use("127.0.0.1", port + 1):
            return port
    raise AssertionError("no pair of free ports found")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    """Start `infra/up` on free ports with its state in `tmp_path/state`; kill leftovers after."""
    runs: list[UpRun] = []

    def start(admin_port: int | None = None) -> UpRun:
        admin_port = admin_port or free_port()
        broker_port = free_port()
        gateway_port = gateway_ports({admin_port, broker_port})
        argv = [sys.executable, "-m", "infra.up_main", "--root", str(tmp_path / "state")]
        argv += ["--standalone", "--port", str(broker_port), "--admin-port", str(admin_port)]
        argv += ["--gateway-port", str(gateway_port), "--gateway-metrics-port", "0"]
        argv += ["--no-billing"]  # the cluster test covers the rollup
        output = tmp_path / f"up-{len(runs)}.out"
        with output.open("wb") as sink:
            process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
        runs.append(UpRun(process, output, f"http://127.0.0.1:{admin_port}"))
        return runs[-1]

    yield start
    for run in runs:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()


def http_get(url: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def printed_http_api(text: str) -> str:
    """The tenant HTTP API's base URL from infra/up's `tenant HTTP API: URL (...)` line."""
    line = next(line for line in text.splitlines() if line.startswith("tenant HTTP API: "))
    return line.split()[3]


def create_http_consumer(http: str, credentials_file: Path) -> str:
    """A v2 consumer instance of the demo tenant (group `g-up`), made over HTTP Basic; its name."""
    credentials = json.loads(credentials_file.read_text())
    basic = base64.b64encode(f"{credentials['key_id']}:{credentials['secret']}".encode()).decode()
    request = urllib.request.Request(
        f"{http}/consumers/g-up",
        data=json.dumps({"name": "up-1", "format": "binary"}).encode(),
        headers={
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/vnd.kafka.v2+json",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["instance_id"])


def stack_children(run: UpRun) -> dict[str, int]:
    """`broker` / `admin-api` → PID of the launcher's live children."""
    kinds = {}
    for pid, cmd in children_of(run.process.pid).items():
        kind = "admin-api" if " admin-api " in cmd else "broker" if " broker " in cmd else cmd
        kind = "gateway" if " gateway " in cmd else kind
        kinds[kind] = pid
    return kinds


def printed_token(text: str) -> str | None:
    tokens = [line for line in text.splitlines() if line.startswith(TOKEN_PREFIX)]
    assert len(tokens) <= 1, text
    return tokens[0] if tokens else None


def run_printed_admin_snippet(text: str) -> str:
    """The `--- admin API ---` block infra/up printed, run by bash as pasted; what it printed.
    It must succeed step by step (errexit, pipefail) and print nothing on stderr."""
    block = text.split("--- admin API ---\n", 1)[1].split("\n\n", 1)[0]
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", block],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    detail = f"{block}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, detail
    assert set(done.stderr.splitlines()) <= {SECRET_NOTE}, detail  # no warning, just that note
    return done.stdout


def test_up_runs_the_admin_api_reuses_its_store_and_stops_on_ctrl_c(
    tmp_path: Path, launch: Any
) -> None:
    first = launch()
    first.wait_until_up()
    token_file = tmp_path / "state" / "operator-token"
    token = printed_token(first.text())
    assert token is not None
    assert token_file.read_text() == token + "\n"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert (tmp_path / "state" / "tenancy.db").is_file()
    assert f"admin API: {first.admin_url}" in first.text()
    assert f'-H "Authorization: Bearer $(cat {token_file})" {first.admin_url}/v1/tenants' in (
        first.text()
    )

    status, health = http_get(f"{first.admin_url}/healthz")
    assert (status, health["status"]) == (200, "ok")  # `version`: the demo tenant's changes
    assert http_get(f"{first.admin_url}/v1/tenants")[0] == 401
    status, page = http_get(f"{first.admin_url}/v1/tenants", token)
    assert status == 200
    assert [item["id"] for item in page["items"]] == ["demo"]  # infra/up's demo tenant
    printed = run_printed_admin_snippet(first.text())  # a tenant, an account, a key, an ACL
    status, page = http_get(f"{first.admin_url}/v1/tenants", token)
    (acme,) = [item for item in page["items"] if item["display_name"] == "Acme"]
    status, acls = http_get(f"{first.admin_url}/v1/tenants/{acme['id']}/acls", token)
    assert status == 200 and [acl["operation"] for acl in acls["items"]] == ["ALL"], acls
    assert "secret" in printed  # the new key's secret, shown once
    # The admin API knows infra/up's gateway: an HTTP consumer instance made there is listed.
    http = printed_http_api(first.text())
    instance = create_http_consumer(http, tmp_path / "state" / "demo-credentials.json")
    status, consumers = http_get(f"{first.admin_url}/v1/tenants/demo/http-consumers", token)
    assert status == 200, consumers
    assert consumers["unreachable"] == [], consumers
    assert [(c["gateway"], c["instance_id"]) for c in consumers["items"]] == [(http, instance)]

    pids = stack_children(first)
    assert sorted(pids) == ["admin-api", "broker", "gateway"]
    assert first.ctrl_c() == 0
    assert not any(pid_running(pid) for pid in pids.values())

    second = launch()
    second.wait_until_up()
    assert printed_token(second.text()) is None
    assert f"operator token: in {token_file}" in second.text()
    assert token_file.read_text() == token + "\n"
    status, page = http_get(f"{second.admin_url}/v1/tenants", token)
    assert status == 200
    assert [item["id"] for item in page["items"]] == ["demo", acme["id"]]
    pids = stack_children(second)
    assert sorted(pids) == ["admin-api", "broker", "gateway"]
    assert second.ctrl_c() == 0
    assert not any(pid_running(pid) for pid in pids.values())


def test_up_fails_when_the_admin_api_dies(tmp_path: Path, launch: Any) -> None:
    run = launch()
    run.wait_until_up()
    pids = stack_children(run)
    os.kill(pids["admin-api"], signal.SIGKILL)
    assert run.wait_exit() == 1
    assert "infra/up: admin API exited with -9" in run.text()
    assert not any(pid_running(pid) for pid in pids.values())


def test_up_refuses_a_busy_admin_port_and_leaves_nothing(tmp_path: Path, launch: Any) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        run = launch(admin_port=busy.getsockname()[1])
        assert run.wait_exit() == 1
    assert "pick another with --admin-port" in run.text()
    # Every port is checked before anything starts: no broker was started.
    assert not (tmp_path / "state" / "data").exists()
    assert not (tmp_path / "state" / "operator-token").exists()
