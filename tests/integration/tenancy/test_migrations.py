"""Migrations on both stores: an empty database upgrades to head, a database at the previous revision
(with data) upgrades and keeps working, and the models equal what the migrations build."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import column, insert, inspect, table

from tenancy.credentials import hash_secret
from tenancy.database import VERSION_TABLE
from tenancy.models import Base
from tenancy.scram import make_credential
from tenancy.sqltypes import UtcDateTime
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import account, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration
HEAD, PREVIOUS = "0003", "0001"  # PREVIOUS: the data test needs a revision before 0002
SECRET = "s3cretS3cretS3cretS3cretS3cretS3cretS3cret"


def test_empty_database_upgrades_to_head(empty_store_url: str) -> None:
    with TenantStore.open(empty_store_url) as store:
        assert store.schema_revision() is None
        store.upgrade()
        assert store.schema_revision() == HEAD
        store.upgrade()  # idempotent
        assert store.schema_revision() == HEAD
        assert store.current_version() == 0
        assert tenant(store, "acme").id == "acme"
        tables = set(inspect(store._db.engine).get_table_names())
    assert set(Base.metadata.tables) <= tables


def test_previous_revision_with_data_upgrades(
    empty_store_url: str, tenancy_clock: TenancyClock
) -> None:
    with TenantStore.open(empty_store_url, clock=tenancy_clock) as store:
        store.upgrade(PREVIOUS)
        assert store.schema_revision() == PREVIOUS
        columns = {c["name"] for c in inspect(store._db.engine).get_columns("api_keys")}
        assert "last_used_at" not in columns
        tenant(store, "acme")
        sa = account(store, "acme")
        _insert_key_at_previous_revision(store, sa.id, tenancy_clock)
        store.upgrade()
        assert store.schema_revision() == HEAD
        principal = store.verify_api_key("KEY0000000000001", SECRET)
        assert principal is not None and principal.service_account_id == sa.id
        assert store.get_api_key("KEY0000000000001").last_used_at == tenancy_clock.now
        assert [c.kind for c in store.changes_since(0)] == [
            "tenant.created",
            "service_account.created",
        ]
        assert len(store.audit_log(tenant_id="acme").items) == 2
        indexes = {i["name"] for i in inspect(store._db.engine).get_indexes("audit_log")}
        assert "ix_audit_log_tenant" in indexes


def _insert_key_at_previous_revision(store: TenantStore, sa_id: str, clock: TenancyClock) -> None:
    """An API key row as revision 0001 knew it (the head model has a column 0001 lacks)."""
    keys = table(
        "api_keys",
        *(column(name) for name in ("key_id", "tenant_id", "service_account_id", "description")),
        column("secret_hash"),
        column("created_at", UtcDateTime),
    )
    verifiers = table(
        "scram_credentials",
        *(column(name) for name in ("key_id", "mechanism", "salt", "iterations")),
        column("stored_key"),
        column("server_key"),
    )
    with store._db.write() as session:
        session.execute(
            insert(keys).values(
                key_id="KEY0000000000001",
                tenant_id="acme",
                service_account_id=sa_id,
                description="old",
                secret_hash=hash_secret(SECRET),
                created_at=clock.now,
            )
        )
        credential = make_credential("SCRAM-SHA-256", SECRET, iterations=4096)
        session.execute(
            insert(verifiers).values(
                key_id="KEY0000000000001",
                mechanism=credential.mechanism,
                salt=credential.salt,
                iterations=credential.iterations,
                stored_key=credential.stored_key,
                server_key=credential.server_key,
            )
        )


def test_models_match_the_migrated_schema(store: TenantStore) -> None:
    with store._db.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "version_table": VERSION_TABLE}
        )
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_sqlite_store_is_a_wal_file_with_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "data" / "tenancy.db"  # the data dir is created on open
    with TenantStore.open(f"sqlite:///{path}") as store:
        store.upgrade()
        with store._db.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    assert path.is_file()
