"""Counted traffic usage records are kept as sequence ranges per writer.

`billing_counted_ranges` holds, per `__usage` topic and writer (`<gateway id>/<incarnation>` of a
traffic id), runs of sequence numbers that the rollup counted, with the newest UTC hour of a
record in each (ranges whose hour is past `__usage`'s retention are deleted). The ledger writes
them in the rollup's commit; ids of other shapes stay in the Parquet id folders. No backfill: ids
counted before are in those folders and still read.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "billing_counted_ranges",
        sa.Column("topic", sa.String(255), primary_key=True),
        sa.Column("writer", sa.String(129), primary_key=True),
        sa.Column("lo", sa.BigInteger, primary_key=True),
        sa.Column("hi", sa.BigInteger, nullable=False),
        sa.Column("hour_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_billing_counted_ranges_hour", "billing_counted_ranges", ["hour_ms"])


def downgrade() -> None:
    op.drop_index("ix_billing_counted_ranges_hour", table_name="billing_counted_ranges")
    op.drop_table("billing_counted_ranges")
