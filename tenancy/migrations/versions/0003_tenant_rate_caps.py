"""Tenants get optional tenant-wide byte-rate caps: produce and fetch bytes/s over all principals.

`max_producer_byte_rate` and `max_consumer_byte_rate` are nullable: NULL means no cap, which is
what every tenant existing before this revision gets (the gateway then applies only the client
quotas, as before).

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COLUMNS = ("max_producer_byte_rate", "max_consumer_byte_rate")


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.BigInteger, nullable=True))


def downgrade() -> None:
    # In place (SQLite >= 3.35 drops a plain column): rebuilding `tenants` in batch mode would
    # drop a table that every tenant-owned row references while foreign keys are enforced.
    with op.batch_alter_table("tenants", recreate="never") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
