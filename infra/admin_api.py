"""Launching the operators' admin API (`pier admin-api`) and preparing its tenant store.

`init_tenant_store` runs `pier tenancy init --db URL` to completion: it creates or upgrades the
schema and, when the store has no operator yet, the first one, whose token `pier` prints once, alone
on stdout (returned here; `None` when operators already exist, as `init` then creates none).
`start_admin_api` runs `python -m pier admin-api --db URL --port PORT --host HOST` with its output
appended to a log file; readiness is `GET /healthz` answering 200, which also proves the store is
reachable. Blocking; one object per process, not shared between threads.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra import process as proc
from infra.broker import PIER_PROGRAM
from infra.errors import LaunchError
from infra.probes import free_port, http_ok

HEALTH_PATH = "/healthz"
# Creating the schema runs every Alembic migration; a few seconds on a slow disk.
INIT_TIMEOUT = 120.0
_API_ENV = {"PYTHONUNBUFFERED": "1"}


@dataclass
class AdminApiProcess:
    """One running admin API server."""

    host: str
    port: int
    db_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    program: tuple[str, ...] = field(default=PIER_PROGRAM, repr=False)

    @property
    def url(self) -> str:
        """Base URL for `curl` and `pier admin --url`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (the server closes its listener and store), wait, SIGKILL after `timeout`."""
        return proc.terminate(self.process, timeout)

    def kill(self) -> None:
        """SIGKILL and reap."""
        proc.kill(self.process)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll `GET /healthz` until it answers 200; raise with the log tail on exit or timeout."""
        proc.wait_ready(
            self.process,
            lambda: http_ok(self.host, self.port, HEALTH_PATH),
            timeout=timeout,
            name=f"admin API on {self.url}",
            log_path=self.log_path,
        )


def init_tenant_store(db_url: str, *, program: Sequence[str] = PIER_PROGRAM) -> str | None:
    """Create or upgrade the store's schema; return the first operator's token, if one was made."""
    argv = [*program, "tenancy", "init", "--db", db_url]
    try:
        done = subprocess.run(
            argv,
            check=False,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INIT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise LaunchError(f"`pier tenancy init` did not finish in {INIT_TIMEOUT:g}s") from None
    if done.returncode != 0:
        raise LaunchError(
            f"`pier tenancy init --db {db_url}` failed with status {done.returncode}:\n"
            + done.stderr.strip()
        )
    token = done.stdout.strip()
    if "\n" in token:
        raise LaunchError(f"`pier tenancy init` printed more than a token on stdout: {token!r}")
    return token or None


def start_admin_api(
    db_url: str,
    log_path: Path,
    *,
    port: int | None = None,
    host: str = "127.0.0.1",
    wait: float = 30.0,
    program: Sequence[str] = PIER_PROGRAM,
    gateway_http: Sequence[str] = (),
    zookeeper: str | None = None,
) -> AdminApiProcess:
    """Start the admin API on an initialised store and wait up to `wait` seconds until healthy.

    `wait=0` returns without probing. A server that fails to become ready is killed before the
    error (which carries its log tail) is raised, so nothing is left running.
    """
    port = port if port is not None else free_port(host)
    argv = [*program, "admin-api", "--db", db_url, "--port", str(port), "--host", host]
    for url in gateway_http:  # the operator view of HTTP consumer instances asks these
        argv += ["--gateway-http", url]
    if zookeeper is not None:  # the fleet view's registrations (`GET /v1/gateways`)
        argv += ["--zookeeper", zookeeper]
    server = AdminApiProcess(
        host=host,
        port=port,
        db_url=db_url,
        process=proc.spawn(argv, log_path, _API_ENV),
        log_path=log_path,
        program=tuple(program),
    )
    if wait > 0:
        try:
            server.wait_ready(wait)
        except BaseException:
            server.kill()
            raise
    return server
