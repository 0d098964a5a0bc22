"""A throwaway PostgreSQL server on a free port in a temp dir, for tests and the local stack.

Uses Debian's server binaries (`/usr/lib/postgresql/<version>/bin/{initdb,postgres}`, package
`postgresql`; `PIER_POSTGRES_BIN` names another bin dir). `initdb` and `postgres` refuse to run as
root, so as root both run as the `postgres` user through util-linux `setpriv --reuid/--regid`, which
*execs* (unlike `runuser`, which forks and waits): the PID we hold is the postmaster's own, so a
stop signals exactly that process. The parent-death signal is set after the uid change (the kernel
clears it on a credential change), so a SIGKILLed launcher still takes the server down.

The cluster is tuned for tests, not durability: `fsync=off`, no full-page writes, TCP on one
loopback address only, no Unix socket, `trust` auth for the one superuser `pier`. Stop is a *fast*
shutdown (SIGINT: open sessions are disconnected, unlike SIGTERM's "smart" mode that waits for
them), SIGKILL after a timeout, then the temp dir is removed. Blocking; one object per server, not
shared between threads.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infra import process as proc
from infra.errors import LaunchError
from infra.probes import free_port

DEBIAN_ROOT = Path("/usr/lib/postgresql")
SUPERUSER = "pier"
# Settings for a disposable test cluster; durability is pointless for data dropped after the run.
SERVER_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "unix_socket_directories": "",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
}


@dataclass
class PostgresProcess:
    """One running PostgreSQL server owning `root` (data dir and log)."""

    host: str
    port: int
    root: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        """A SQLAlchemy URL (`driver="postgresql"` gives a plain libpq URI) for `database`."""
        return f"{driver}://{SUPERUSER}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """CREATE DATABASE `name` (optionally from `template`); returns its SQLAlchemy URL."""
        return create_database(self.url(), name, template=template)

    def ready(self) -> bool:
        """True when the server accepts a connection and answers a query."""
        import psycopg

        try:
            with psycopg.connect(self.url(driver="postgresql"), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def stop(self, timeout: float = 15.0) -> int:
        """Fast shutdown (SIGINT), SIGKILL after `timeout`; then remove `root`. Returns the status."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)
            return proc.terminate(self.process, timeout)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def create_database(server_url: str, name: str, *, template: str | None = None) -> str:
    """CREATE DATABASE `name` on the server of `server_url` (a SQLAlchemy or libpq URL whose
    user may create databases), optionally copying `template`; returns the new database's URL."""
    import psycopg
    from psycopg import sql
    from sqlalchemy import make_url

    url = make_url(server_url)
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement = sql.SQL("{} TEMPLATE {}").format(statement, sql.Identifier(template))
    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute(statement)
    return url.set(drivername="postgresql+psycopg", database=name).render_as_string(
        hide_password=False
    )


def server_bin_dir() -> Path:
    """The directory of `initdb`/`postgres`: `PIER_POSTGRES_BIN`, else Debian's newest version."""
    override = os.environ.get("PIER_POSTGRES_BIN")
    if override:
        return Path(override)
    versions = sorted(
        (path for path in DEBIAN_ROOT.glob("*/bin") if (path / "postgres").is_file()),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    if not versions:
        raise LaunchError(
            f"no PostgreSQL server under {DEBIAN_ROOT}: install Debian's `postgresql` (`infra/test` does)"
        )
    return versions[-1]


def start_postgres(
    *,
    port: int | None = None,
    host: str = "127.0.0.1",
    parent: Path | None = None,
    wait: float = 30.0,
) -> PostgresProcess:
    """initdb a new cluster in a fresh temp dir (under `parent`, default the system temp dir), start it.

    As root the temp dir is handed to the `postgres` user, so `parent` must be traversable by it
    (pytest's own tmp dirs are not: they are 0700). On a failed start the server is killed and the
    dir removed before raising.
    """
    bin_dir = server_bin_dir()
    root = Path(tempfile.mkdtemp(prefix="pier-postgres-", dir=parent))
    data_dir, log_path = root / "data", root / "postgres.log"
    try:
        _hand_to_server_user(root)
        _initdb(bin_dir, data_dir, log_path)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    port = port if port is not None else free_port(host)
    argv = [*_as_server_user(), str(bin_dir / "postgres"), "-D", str(data_dir)]
    argv += ["-c", f"listen_addresses={host}", "-c", f"port={port}"]
    for name, value in SERVER_SETTINGS.items():
        argv += ["-c", f"{name}={value}"]
    server = PostgresProcess(host, port, root, proc.spawn(argv, log_path), log_path)
    if wait > 0:
        try:
            proc.wait_ready(
                server.process,
                server.ready,
                timeout=wait,
                name=f"PostgreSQL on {host}:{port}",
                log_path=log_path,
            )
        except BaseException:
            server.stop(timeout=5.0)
            raise
    return server


def _initdb(bin_dir: Path, data_dir: Path, log_path: Path) -> None:
    argv = [*_as_server_user(), str(bin_dir / "initdb"), "-D", str(data_dir), "-U", SUPERUSER]
    argv += ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"]
    with log_path.open("ab") as log:
        result = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", check=False
        )
    if result.returncode != 0:
        raise LaunchError(f"initdb failed (exit {result.returncode}):\n{proc.log_tail(log_path)}")


def _as_server_user() -> list[str]:
    """argv prefix: as root, become `postgres` (exec, same PID), then set the death signal."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise LaunchError("setpriv not found: install util-linux (`infra/test` does)")
    user = _server_user()
    ids = [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]
    # HOME/USER point at root's otherwise; initdb only needs a readable cwd, which `/` is.
    return [setpriv, *ids, "--", setpriv, "--pdeathsig", "KILL", "--"]


def _hand_to_server_user(root: Path) -> None:
    if os.geteuid() == 0:
        user = _server_user()
        os.chown(root, user.pw_uid, user.pw_gid)


def _server_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise LaunchError(
            "running as root needs the `postgres` user: install Debian's `postgresql`"
        ) from None
