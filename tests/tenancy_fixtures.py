"""Shared fixtures for tenant-store tests: every scenario runs on SQLite and on a real PostgreSQL.

Import them in a `conftest.py` (`from tests.tenancy_fixtures import *`). What they give:
- `store_backend`: parametrised over "sqlite" and "postgresql"; anything that depends on it runs
  twice, with test ids `[sqlite]` and `[postgresql]`.
- `postgres_server` (session): one PostgreSQL started by `infra.postgres` for the whole session and
  stopped by PID at the end; `PIER_TEST_POSTGRES_URL` (a URL whose user may CREATE DATABASE)
  targets an existing server instead.
- `empty_store_url`: a new, empty database (for migration tests).
- `store_url`: a new database already at Alembic head: copied from a template migrated once per
  session (a SQLite file copy; PostgreSQL `CREATE DATABASE … TEMPLATE`), so each test is isolated
  and cheap.
- `tenancy_clock`: a manual UTC clock starting at the real current time; `advance(seconds)`.
- `store`: `TenantStore` on `store_url` with `tenancy_clock`, closed after the test.
Fixtures run on pytest's main thread.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from infra.postgres import PostgresProcess, create_database, start_postgres
from tenancy.store import TenantStore

__all__ = [
    "BACKENDS",
    "TenancyClock",
    "empty_store_url",
    "postgres_server",
    "store",
    "store_backend",
    "store_template",
    "store_url",
    "tenancy_clock",
]

BACKENDS = ("sqlite", "postgresql")
_TEMPLATE_DB = "pier_tenancy_template"


class TenancyClock:
    """A settable aware-UTC clock for `TenantStore.open(clock=...)`."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = (start or datetime.now(UTC)).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class _PostgresTarget:
    """Where test databases are created: our own server, or the one PIER_TEST_POSTGRES_URL names."""

    def __init__(self, url: str, process: PostgresProcess | None) -> None:
        self.url = url
        self.process = process

    def new_database(self, template: str | None = None) -> str:
        return create_database(self.url, f"t_{uuid.uuid4().hex[:16]}", template=template)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[_PostgresTarget]:
    external = os.environ.get("PIER_TEST_POSTGRES_URL")
    if external:
        yield _PostgresTarget(external, None)
        return
    server = start_postgres()
    try:
        yield _PostgresTarget(server.url(), server)
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def store_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _new_empty(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / f'tenancy-{uuid.uuid4().hex[:8]}.db'}"
    target: _PostgresTarget = request.getfixturevalue("postgres_server")
    return target.new_database()


@pytest.fixture
def empty_store_url(store_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _new_empty(store_backend, request, tmp_path)


@pytest.fixture(scope="session")
def store_template() -> dict[str, str]:
    """Per backend, a database at Alembic head to copy (migrated lazily, once per session)."""
    return {}


def _template(backend: str, request: pytest.FixtureRequest) -> str:
    templates: dict[str, str] = request.getfixturevalue("store_template")
    if backend not in templates:
        if backend == "sqlite":
            folder = request.getfixturevalue("tmp_path_factory").mktemp("tenancy-template")
            url = f"sqlite:///{folder / 'template.db'}"
        else:
            target: _PostgresTarget = request.getfixturevalue("postgres_server")
            url = create_database(target.url, f"{_TEMPLATE_DB}_{uuid.uuid4().hex[:8]}")
        store = TenantStore.open(url)
        try:
            store.upgrade()
        finally:
            store.close()  # no session may stay open on a PostgreSQL template
        templates[backend] = url
    return templates[backend]


@pytest.fixture
def store_url(store_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    template = _template(store_backend, request)
    if store_backend == "sqlite":
        target = tmp_path / f"tenancy-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(template.removeprefix("sqlite:///"), target)
        return f"sqlite:///{target}"
    server: _PostgresTarget = request.getfixturevalue("postgres_server")
    return server.new_database(template=template.rsplit("/", 1)[-1])


@pytest.fixture
def tenancy_clock() -> TenancyClock:
    return TenancyClock()


@pytest.fixture
def store(store_url: str, tenancy_clock: TenancyClock) -> Iterator[TenantStore]:
    opened = TenantStore.open(store_url, clock=tenancy_clock)
    try:
        yield opened
    finally:
        opened.close()
