"""Migrations on both stores: an empty database upgrades to head, a database at the previous or the
first revision (with data) upgrades and keeps working (tenants from before 0003 have no rate caps),
and the models equal what the migrations build."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import column, insert, inspect, table

from tenancy.credentials import hash_secret
from tenancy.database import VERSION_TABLE, _alembic_config
from tenancy.domain import TenantLimits
from tenancy.models import Base
from tenancy.scram import make_credential
from tenancy.sqltypes import UtcDateTime
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, account, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration
HEAD, PREVIOUS, FIRST = "0010", "0002", "0001"  # PREVIOUS: the one before 0003 (rate caps)
SECRET = "s3cretS3cretS3cretS3cretS3cretS3cretS3cret"
RATE_CAPS = ("max_producer_byte_rate", "max_consumer_byte_rate")  # revision 0003
NAME_LIMITS = ("max_groups", "max_transactional_ids")  # revision 0010
OLD_LIMITS = TenantLimits(7, 2**40, 9, 65536)  # as stored before 0003: no rate caps (None)


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


def test_previous_revision_with_tenants_upgrades_without_caps(
    empty_store_url: str, tenancy_clock: TenancyClock
) -> None:
    with TenantStore.open(empty_store_url, clock=tenancy_clock) as store:
        store.upgrade(PREVIOUS)
        assert store.schema_revision() == PREVIOUS
        columns = {c["name"] for c in inspect(store._db.engine).get_columns("tenants")}
        assert not columns & set(RATE_CAPS)
        _insert_tenant_at_old_revision(store, "acme", tenancy_clock)
        _insert_tenant_at_old_revision(store, "beta", tenancy_clock, status="suspended")
        store.upgrade()
        assert store.schema_revision() == HEAD
        acme = store.get_tenant("acme")
        assert acme.limits == OLD_LIMITS
        assert (acme.limits.max_producer_byte_rate, acme.limits.max_consumer_byte_rate) == (
            None,
            None,
        )
        assert (acme.display_name, acme.plan, acme.status) == ("Tenant acme", "free", "active")
        assert store.get_tenant("beta").status == "suspended"
        assert [t.limits for t in store.list_tenants().items] == [OLD_LIMITS, OLD_LIMITS]
        capped = replace(OLD_LIMITS, max_producer_byte_rate=1_048_576)
        assert store.update_tenant("acme", limits=capped, actor=OPERATOR).limits == capped
        assert store.get_tenant("acme").limits == capped
        assert store.get_tenant("beta").limits == OLD_LIMITS
        account(store, "acme")  # the upgraded tenant takes new resources
        assert [c.kind for c in store.changes_since(0)] == [
            "tenant.created",
            "tenant.created",
            "tenant.updated",
            "service_account.created",
        ]


def test_downgrade_to_previous_drops_the_caps_and_keeps_tenants(
    empty_store_url: str, tenancy_clock: TenancyClock
) -> None:
    with TenantStore.open(empty_store_url, clock=tenancy_clock) as store:
        store.upgrade()
        capped = replace(OLD_LIMITS, max_producer_byte_rate=10, max_consumer_byte_rate=20)
        store.create_tenant(
            display_name="Acme", plan="free", limits=capped, tenant_id="acme", actor=OPERATOR
        )
        account(store, "acme")  # rows referencing the tenant survive too
        with store._db.engine.begin() as connection:
            command.downgrade(_alembic_config(connection), PREVIOUS)
        assert store.schema_revision() == PREVIOUS
        columns = {c["name"] for c in inspect(store._db.engine).get_columns("tenants")}
        assert not columns & set(RATE_CAPS)
        store.upgrade()
        assert store.get_tenant("acme").limits == OLD_LIMITS  # the caps went with the columns
        assert len(store.list_service_accounts("acme").items) == 1


def test_name_limits_start_as_the_gateway_s_and_go_with_a_downgrade(
    empty_store_url: str, tenancy_clock: TenancyClock
) -> None:
    """Revision 0010: every tenant and plan from before keeps the gateway's group and
    transactional-id limits (NULL); a tenant's own survive an update; a downgrade drops them."""
    with TenantStore.open(empty_store_url, clock=tenancy_clock) as store:
        store.upgrade("0009")
        _insert_tenant_at_old_revision(store, "acme", tenancy_clock)
        store.upgrade()
        assert store.schema_revision() == HEAD
        assert store.get_tenant("acme").limits == OLD_LIMITS  # both None
        assert all(
            (p.limits.max_groups, p.limits.max_transactional_ids) == (None, None)
            for p in store.list_plans()
        )
        limited = replace(OLD_LIMITS, max_groups=5, max_transactional_ids=7)
        assert store.update_tenant("acme", limits=limited, actor=OPERATOR).limits == limited
        assert store.get_tenant("acme").limits == limited
        with store._db.engine.begin() as connection:
            command.downgrade(_alembic_config(connection), "0009")
        for name in ("tenants", "plans"):
            columns = {c["name"] for c in inspect(store._db.engine).get_columns(name)}
            assert not columns & set(NAME_LIMITS)
        store.upgrade()
        assert store.get_tenant("acme").limits == OLD_LIMITS


def test_first_revision_with_data_upgrades(
    empty_store_url: str, tenancy_clock: TenancyClock
) -> None:
    with TenantStore.open(empty_store_url, clock=tenancy_clock) as store:
        store.upgrade(FIRST)
        assert store.schema_revision() == FIRST
        columns = {c["name"] for c in inspect(store._db.engine).get_columns("api_keys")}
        assert "last_used_at" not in columns
        _insert_tenant_at_old_revision(store, "acme", tenancy_clock)
        sa_id = _insert_account_at_old_revision(store, "acme", tenancy_clock)
        _insert_key_at_first_revision(store, sa_id, tenancy_clock)
        store.upgrade()
        assert store.schema_revision() == HEAD
        principal = store.verify_api_key("KEY0000000000001", SECRET)
        assert principal is not None and principal.service_account_id == sa_id
        assert store.get_api_key("KEY0000000000001").last_used_at == tenancy_clock.now
        assert store.get_tenant("acme").limits == OLD_LIMITS
        assert [c.kind for c in store.changes_since(0)] == [
            "tenant.created",
            "service_account.created",
        ]
        assert len(store.audit_log(tenant_id="acme").items) == 2
        indexes = {i["name"] for i in inspect(store._db.engine).get_indexes("audit_log")}
        assert "ix_audit_log_tenant" in indexes


def _insert_tenant_at_old_revision(
    store: TenantStore, tenant_id: str, clock: TenancyClock, status: str = "active"
) -> None:
    """A tenant row as revisions 0001 and 0002 knew it (the head model has columns they lack),
    journalled as the store does."""
    tenants = table(
        "tenants",
        *(column(name) for name in ("id", "display_name", "plan", "status", "max_partitions")),
        *(column(name) for name in ("max_storage_bytes", "max_connections", "max_request_bytes")),
        column("created_at", UtcDateTime),
        column("updated_at", UtcDateTime),
    )
    with store._db.write() as session:
        session.execute(
            insert(tenants).values(
                id=tenant_id,
                display_name=f"Tenant {tenant_id}",
                plan="free",
                status=status,
                max_partitions=OLD_LIMITS.max_partitions,
                max_storage_bytes=OLD_LIMITS.max_storage_bytes,
                max_connections=OLD_LIMITS.max_connections,
                max_request_bytes=OLD_LIMITS.max_request_bytes,
                created_at=clock.now,
                updated_at=clock.now,
            )
        )
        store._journal(
            session,
            actor=OPERATOR,
            action="tenant.created",
            tenant_id=tenant_id,
            subject=tenant_id,
            details={},
        )


def _insert_account_at_old_revision(store: TenantStore, tenant_id: str, clock: TenancyClock) -> str:
    """A service account row (the store's own path would read the tenant through the head model)."""
    accounts = table(
        "service_accounts",
        *(column(name) for name in ("id", "tenant_id", "name", "description")),
        column("created_at", UtcDateTime),
    )
    sa_id = "sa-0000000001"
    with store._db.write() as session:
        session.execute(
            insert(accounts).values(
                id=sa_id, tenant_id=tenant_id, name="app", description="", created_at=clock.now
            )
        )
        store._journal(
            session,
            actor=OPERATOR,
            action="service_account.created",
            tenant_id=tenant_id,
            subject=sa_id,
            details={},
        )
    return sa_id


def _insert_key_at_first_revision(store: TenantStore, sa_id: str, clock: TenancyClock) -> None:
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
