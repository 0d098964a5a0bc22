"""Initial tenant store schema: tenants, service accounts, API keys and SCRAM verifiers, quotas, ACLs,
plans, operators, the audit log and the change feed (with its one-row version counter).

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenancy.sqltypes import Money, UtcDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(32)
NAME = sa.String(200)
TEXT = sa.String(1000)


def upgrade() -> None:
    _tenants_and_accounts()
    _keys()
    _authorization()
    _plans()
    _journal()


def _tenants_and_accounts() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", ID, primary_key=True),
        sa.Column("display_name", NAME, nullable=False),
        sa.Column("plan", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        *(
            sa.Column(name, sa.BigInteger, nullable=False)
            for name in (
                "max_partitions",
                "max_storage_bytes",
                "max_connections",
                "max_request_bytes",
            )
        ),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.Column("updated_at", UtcDateTime, nullable=False),
    )
    op.create_index("ix_tenants_created", "tenants", ["created_at", "id"])
    op.create_table(
        "service_accounts",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("description", TEXT, nullable=False),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.UniqueConstraint("tenant_id", "name", name="uq_service_accounts_name"),
    )
    op.create_index(
        "ix_service_accounts_created", "service_accounts", ["tenant_id", "created_at", "id"]
    )


def _keys() -> None:
    op.create_table(
        "api_keys",
        sa.Column("key_id", ID, primary_key=True),
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("service_account_id", ID, sa.ForeignKey("service_accounts.id"), nullable=False),
        sa.Column("description", TEXT, nullable=False),
        sa.Column("secret_hash", sa.String(200), nullable=False),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.Column("expires_at", UtcDateTime, nullable=True),
        sa.Column("revoked_at", UtcDateTime, nullable=True),
    )
    op.create_index("ix_api_keys_created", "api_keys", ["tenant_id", "created_at", "key_id"])
    op.create_table(
        "scram_credentials",
        sa.Column("key_id", ID, sa.ForeignKey("api_keys.key_id"), primary_key=True),
        sa.Column("mechanism", sa.String(32), primary_key=True),
        sa.Column("salt", sa.LargeBinary, nullable=False),
        sa.Column("iterations", sa.Integer, nullable=False),
        sa.Column("stored_key", sa.LargeBinary, nullable=False),
        sa.Column("server_key", sa.LargeBinary, nullable=False),
    )


def _authorization() -> None:
    op.create_table(
        "quotas",
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("entity_user", sa.String(255), primary_key=True),
        sa.Column("entity_client", sa.String(255), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
    )
    binding = ("resource_type", "pattern_type", "resource_name", "operation", "permission")
    op.create_table(
        "acls",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("resource_type", sa.String(32), nullable=False),
        sa.Column("pattern_type", sa.String(16), nullable=False),
        sa.Column("resource_name", NAME, nullable=False),
        sa.Column("operation", sa.String(32), nullable=False),
        sa.Column("permission", sa.String(8), nullable=False),
        sa.Column("principal", NAME, nullable=False),
        sa.Column("host", sa.String(64), nullable=False),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.UniqueConstraint("tenant_id", *binding, "principal", "host", name="uq_acls_binding"),
    )
    op.create_index("ix_acls_created", "acls", ["tenant_id", "created_at", "id"])


def _plans() -> None:
    op.create_table(
        "plans",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("updated_at", UtcDateTime, nullable=False),
    )
    op.create_table(
        "plan_dimensions",
        sa.Column(
            "plan_name",
            sa.String(64),
            sa.ForeignKey("plans.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("dimension", sa.String(64), primary_key=True),
        sa.Column("included", Money, nullable=False),
    )
    op.create_table(
        "plan_tiers",
        sa.Column("plan_name", sa.String(64), primary_key=True),
        sa.Column("dimension", sa.String(64), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("up_to", Money, nullable=True),
        sa.Column("unit_price", Money, nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_name", "dimension"],
            ["plan_dimensions.plan_name", "plan_dimensions.dimension"],
            ondelete="CASCADE",
        ),
    )


def _journal() -> None:
    op.create_table(
        "operators",
        sa.Column("name", NAME, primary_key=True),
        sa.Column("token_digest", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", UtcDateTime, nullable=False),
    )
    op.create_table(
        "audit_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("at", UtcDateTime, nullable=False),
        sa.Column("actor", NAME, nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("tenant_id", ID, nullable=True),
        sa.Column("subject", TEXT, nullable=False),
        sa.Column("details", sa.JSON, nullable=False),
    )
    op.create_table(
        "changes",
        sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("tenant_id", ID, nullable=True),
        sa.Column("subject", TEXT, nullable=False),
        sa.Column("at", UtcDateTime, nullable=False),
    )
    counter = op.create_table(
        "change_counter",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(counter, [{"id": 1, "version": 0}])


def downgrade() -> None:
    for table in (
        "change_counter",
        "changes",
        "audit_log",
        "operators",
        "plan_tiers",
        "plan_dimensions",
        "plans",
        "acls",
        "quotas",
        "scram_credentials",
        "api_keys",
        "service_accounts",
        "tenants",
    ):
        op.drop_table(table)
