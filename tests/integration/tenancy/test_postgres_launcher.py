"""`infra.postgres`: a real server starts on a free port, serves a new database, and stops by PID
leaving no process and no files behind."""

from __future__ import annotations

import psycopg
import pytest

from infra.postgres import start_postgres
from infra.process import pid_running

pytestmark = pytest.mark.integration


def test_start_create_database_and_stop_cleanly() -> None:
    server = start_postgres()
    try:
        assert server.ready()
        url = server.create_database("launcher_check")
        assert url.endswith(f":{server.port}/launcher_check")
        with psycopg.connect(server.url("launcher_check", driver="postgresql")) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("launcher_check",)
            # The postmaster is the PID we hold (setpriv execs), so stop() signals the right process.
            (backend_parent,) = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"
            ).fetchone() or (None,)
            assert backend_parent is not None
    finally:
        status = server.stop()
    assert status == 0
    assert not pid_running(server.process.pid)
    assert not server.root.exists()
    assert not server.ready()
