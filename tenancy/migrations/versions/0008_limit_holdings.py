"""Connection and storage limits are held in the store, per gateway, so the fleet never passes them.

`limit_totals` holds, per tenant and kind ("connections" or "storage"), what every gateway holds
together (`held`) beside a `base` the holdings add to (0 for connections; for storage the bytes
the tenant's partitions held at the newest sample, taken at `sampled_ms`), and a `version` bumped
by every change. `limit_holdings` holds each gateway's share (its id is the one in `gateways`), so
the share of a gateway whose heartbeat stopped expires in the transaction of the next reservation
instead of holding the tenant's limit for ever. A gateway reserves with a conditional UPDATE of the
totals row (`base + held + n` within the tenant's `max_connections` / `max_storage_bytes`), which
is atomic on SQLite (BEGIN IMMEDIATE) and PostgreSQL (the row lock). No backfill: a tenant gets its
rows with its first connection or lease.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenancy.sqltypes import UtcDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ID = sa.String(32)
KIND = sa.String(16)


def upgrade() -> None:
    op.create_table(
        "limit_totals",
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("kind", KIND, primary_key=True),
        sa.Column("base", sa.BigInteger, nullable=False),
        sa.Column("held", sa.BigInteger, nullable=False),
        sa.Column("sampled_ms", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("updated_at", UtcDateTime, nullable=False),
    )
    op.create_table(
        "limit_holdings",
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("kind", KIND, primary_key=True),
        sa.Column("gateway_id", sa.String(200), primary_key=True),
        sa.Column("held", sa.BigInteger, nullable=False),
        sa.Column("updated_at", UtcDateTime, nullable=False),
    )
    op.create_index("ix_limit_holdings_gateway", "limit_holdings", ["gateway_id"])


def downgrade() -> None:
    op.drop_index("ix_limit_holdings_gateway", table_name="limit_holdings")
    op.drop_table("limit_holdings")
    op.drop_table("limit_totals")
