"""API keys remember when they were last used; the audit log gets a per-tenant index.

`last_used_at` is written at most once a minute per key by verification (see `tenancy.keys`), so
operators can find idle keys; the index serves `audit_log(tenant_id=...)`, which pages a tenant's
entries newest first.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenancy.sqltypes import UtcDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("last_used_at", UtcDateTime, nullable=True))
    op.create_index("ix_audit_log_tenant", "audit_log", ["tenant_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_tenant", table_name="audit_log")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("last_used_at")
