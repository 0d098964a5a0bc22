"""Alembic environment for the tenant store: migrates the connection the store hands over.

`tenancy.schema.upgrade` puts an open SQLAlchemy `Connection` in `config.attributes["connection"]`;
there is no alembic.ini and no URL here, so the store's engine (SQLite pragmas, PostgreSQL driver)
is the one migrated. The version table is `tenancy_alembic_version` so billing's migrations can
share a PostgreSQL database. Runs once per `upgrade()`, on the caller's thread.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from tenancy.models import Base

VERSION_TABLE = "tenancy_alembic_version"


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("run tenancy migrations through TenantStore.upgrade()")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported for the tenant store")
run_migrations_online()
