"""Tenants and plans get optional limits on the consumer groups and transactional ids a tenant
may hold on the fleet's coordinators.

`max_groups` and `max_transactional_ids` are nullable: NULL means the gateway's own settings
(`tenant.max.groups`, `tenant.max.transactional.ids`), which is what every tenant and plan existing
before this revision keeps, so no tenant's limit changes here.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ("max_groups", "max_transactional_ids")
TABLES = ("tenants", "plans")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for name in COLUMNS:
                batch.add_column(sa.Column(name, sa.BigInteger, nullable=True))


def downgrade() -> None:
    # In place (as revision 0003): rebuilding `tenants` would drop a table every tenant-owned row
    # references while foreign keys are enforced.
    for table in TABLES:
        with op.batch_alter_table(table, recreate="never") as batch:
            for name in reversed(COLUMNS):
                batch.drop_column(name)
