"""Billing tables: hourly usage rollups, the `__usage` cursor and runs, counted record ids,
pending storage samples, invoices and their lines (see `tenancy.models`, "billing").

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenancy.sqltypes import Money, UtcDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ID = sa.String(32)
RUN_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def _big(name: str, **options: object) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger, nullable=False, **options)  # type: ignore[arg-type]


def upgrade() -> None:
    op.create_table(
        "billing_usage_hourly",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("principal", sa.String(255), primary_key=True),
        sa.Column("client_id", sa.String(255), primary_key=True),
        sa.Column("topic", sa.String(255), primary_key=True),
        _big("hour_ms", primary_key=True, autoincrement=False),
        *(
            _big(name)
            for name in (
                "bytes_in",
                "bytes_out",
                "requests",
                "throttle_ms",
                "connection_ms",
                "partition_ms",
            )
        ),
        sa.Column("storage_byte_ms", Money, nullable=False),
        _big("records"),
        sa.Column("version", sa.Integer, nullable=False),
        _big("last_run"),
    )
    op.create_index(
        "ix_billing_usage_hourly_tenant", "billing_usage_hourly", ["tenant_id", "hour_ms"]
    )
    op.create_table(
        "billing_cursor",
        sa.Column("topic", sa.String(255), primary_key=True),
        _big("generation"),
        sa.Column("offsets", sa.Text, nullable=False),
        sa.Column("updated_at", UtcDateTime, nullable=False),
    )
    op.create_table(
        "billing_runs",
        sa.Column("id", RUN_ID, primary_key=True, autoincrement=True),
        sa.Column("topic", sa.String(255), nullable=False),
        _big("generation"),
        sa.Column("start_offsets", sa.Text, nullable=False),
        sa.Column("end_offsets", sa.Text, nullable=False),
        *(_big(name) for name in ("until_ms", "records", "duplicates", "rejected", "late_samples")),
        sa.Column("committed_at", UtcDateTime, nullable=False),
    )
    op.create_table(
        "billing_run_hours",
        _big("run_id", primary_key=True, autoincrement=False),
        sa.Column("tenant_id", ID, primary_key=True),
        _big("hour_ms", primary_key=True, autoincrement=False),
    )
    op.create_index("ix_billing_run_hours_tenant", "billing_run_hours", ["tenant_id", "hour_ms"])
    op.create_table(
        "billing_record_ids",
        sa.Column("id", sa.String(520), primary_key=True),
        _big("hour_ms"),
    )
    op.create_index("ix_billing_record_ids_hour", "billing_record_ids", ["hour_ms"])
    op.create_table(
        "billing_storage_pending",
        sa.Column("tenant_id", ID, primary_key=True),
        sa.Column("topic", sa.String(255), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
        _big("at_ms"),
        _big("bytes"),
        sa.Column("settled", sa.Boolean, nullable=False),
    )
    _invoices()


def _invoices() -> None:
    op.create_table(
        "billing_invoices",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("period", sa.String(7), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("plan", sa.String(64), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("total", Money, nullable=False),
        sa.Column("provenance", sa.Text, nullable=False),
        sa.Column("document", sa.Text, nullable=True),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.Column("updated_at", UtcDateTime, nullable=False),
        sa.Column("finalized_at", UtcDateTime, nullable=True),
        sa.UniqueConstraint("tenant_id", "period", name="uq_billing_invoices_period"),
    )
    op.create_table(
        "billing_invoice_lines",
        sa.Column(
            "invoice_id",
            sa.String(64),
            sa.ForeignKey("billing_invoices.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("for_period", sa.String(7), nullable=False),
        sa.Column("dimension", sa.String(64), nullable=False),
        sa.Column("measure", Money, nullable=False),
        sa.Column("quantity", Money, nullable=False),
        sa.Column("amount", Money, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "billing_invoice_lines",
        "billing_invoices",
        "billing_storage_pending",
        "billing_record_ids",
        "billing_run_hours",
        "billing_runs",
        "billing_cursor",
        "billing_usage_hourly",
    ):
        op.drop_table(table)
