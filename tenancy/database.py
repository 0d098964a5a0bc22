"""Engines, sessions and schema migration for the tenant store on SQLite or PostgreSQL.

- SQLite (`sqlite:///path`): one file, WAL mode (readers never block the writer), foreign keys on,
  a 10 s busy timeout. pysqlite's own transaction handling is switched off and we emit `BEGIN`
  ourselves (SQLAlchemy's documented recipe), so write transactions start with `BEGIN IMMEDIATE`:
  they take the write lock up front instead of failing with SQLITE_BUSY when a read transaction
  later tries to write.
- PostgreSQL (`postgresql+psycopg://…`; a bare `postgresql://` means psycopg 3): pooled connections
  with a liveness check; `upgrade` holds an advisory lock so two processes cannot migrate at once.
Statement parameters are hidden from logs and exception messages (they include hashes).
`Database` is thread-safe: every `read()`/`write()` opens its own session on the shared pool.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.orm import Session

from tenancy.errors import ValidationError

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "tenancy_alembic_version"
_WRITE = "pier_write"  # execution option marking write transactions (BEGIN IMMEDIATE on SQLite)
_MIGRATION_LOCK = 0x7069657274656E61  # "piertena": pg_advisory_xact_lock key for upgrades


def normalise_url(url: str) -> URL:
    """Parse a store URL; refuse anything but a SQLite file or PostgreSQL through psycopg 3."""
    try:
        parsed = make_url(url)
    except Exception:
        raise ValidationError("url", "not a database URL") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise ValidationError("url", "SQLite needs a file path (sqlite:///path/to/tenancy.db)")
        return parsed
    if parsed.drivername != "postgresql+psycopg":
        raise ValidationError("url", "use sqlite:///path or postgresql+psycopg://…")
    return parsed


class Database:
    """The store's engine pair (reads, writes) on one connection pool."""

    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        self.dialect = "sqlite" if self.url.drivername == "sqlite" else "postgresql"
        self.engine = self._create_engine()
        self._writer = self.engine.execution_options(**{_WRITE: True})

    def _create_engine(self) -> Engine:
        if self.dialect == "postgresql":
            return create_engine(self.url, pool_pre_ping=True, hide_parameters=True)
        assert self.url.database is not None
        Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(self.url, hide_parameters=True)
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine

    @property
    def notify_url(self) -> str | None:
        """A libpq URI for LISTEN (PostgreSQL), None on SQLite (the feed polls there)."""
        if self.dialect != "postgresql":
            return None
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    @property
    def sqlite_path(self) -> str | None:
        """The SQLite file (the change feed reads its data_version), None on PostgreSQL."""
        return self.url.database if self.dialect == "sqlite" else None

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session in a read transaction (ended when the block ends)."""
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session in a write transaction, committed when the block ends without an exception."""
        with Session(self._writer, expire_on_commit=False) as session, session.begin():
            yield session

    def upgrade(self, revision: str = "head") -> None:
        """Alembic `upgrade <revision>` on this engine, in one transaction (PostgreSQL: DDL too)."""
        with self._writer.begin() as connection:
            if self.dialect == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK}
                )
            command.upgrade(_alembic_config(connection), revision)

    def revision(self) -> str | None:
        """The schema's current Alembic revision, None for an empty database."""
        with self.engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
            return context.get_current_revision()

    def dispose(self) -> None:
        self.engine.dispose()


def _alembic_config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we issue BEGIN ourselves (see module docstring)
    cursor = dbapi_connection.cursor()
    for pragma in (
        "PRAGMA journal_mode=WAL",
        "PRAGMA foreign_keys=ON",
        "PRAGMA busy_timeout=10000",
        "PRAGMA synchronous=NORMAL",  # WAL + NORMAL: durable across process crashes
    ):
        cursor.execute(pragma)
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    write = connection.get_execution_options().get(_WRITE, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
