"""Partition limits are reserved in the store: a per-tenant allocation row and its reservations.

`partition_allocations` holds, per tenant, the partitions its topics have on the fleet as the
store knows them (`allocated`), the partitions held by creations under way (`reserved`), and a
`version` bumped by every change to the row (the fence a reconciliation with the fleet's real
count checks). A gateway reserves with one conditional UPDATE (`allocated + reserved + n` within
the tenant's `max_partitions`) before it forwards CreateTopics or CreatePartitions, so concurrent
creations on any number of gateways cannot pass the limit together. `partition_reservations` holds
each reservation under way (its tenant, size, holder and age), so one left behind by a crashed
gateway expires instead of holding the tenant's partitions for ever. Tenants existing before this
revision get no row: the gateway creates it from the fleet's count on first use.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenancy.sqltypes import UtcDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ID = sa.String(32)


def upgrade() -> None:
    op.create_table(
        "partition_allocations",
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("allocated", sa.BigInteger, nullable=False),
        sa.Column("reserved", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("reconciled_at", UtcDateTime, nullable=False),
        sa.Column("updated_at", UtcDateTime, nullable=False),
    )
    op.create_table(
        "partition_reservations",
        sa.Column("id", ID, primary_key=True),
        sa.Column("tenant_id", ID, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("partitions", sa.BigInteger, nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("created_at", UtcDateTime, nullable=False),
    )
    op.create_index(
        "ix_partition_reservations_tenant", "partition_reservations", ["tenant_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_partition_reservations_tenant", table_name="partition_reservations")
    op.drop_table("partition_reservations")
    op.drop_table("partition_allocations")
