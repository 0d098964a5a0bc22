"""Plans carry what their tenants get, and the store starts with three plans: free, standard,
enterprise.

`plans` gains the tenant limits a plan gives (`max_partitions`, `max_storage_bytes`,
`max_connections`, `max_request_bytes`, and the optional tenant-wide byte-rate caps) and its
default client quotas (Kafka's names and units: `producer_byte_rate` and `consumer_byte_rate` whole
bytes/s, `request_percentage` and `controller_mutation_rate` numbers; NULL = that quota unset).
Plans that exist before this revision get the store's default limits (what their tenants got when
created without limits) and no quotas. The three default plans are added unless a plan of that
name exists already; the values are docs/plans.md's, frozen here as data (a later change of the
defaults is a later revision). Downgrading drops the columns and keeps the plans' prices.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from alembic import op

from tenancy.sqltypes import Money, UtcDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

GIB, TIB, MIB = 2**30, 2**40, 2**20
# The store's DEFAULT_LIMITS when this revision was written: what a pre-0005 plan's tenants got.
LIMITS = {
    "max_partitions": 100,
    "max_storage_bytes": 10 * GIB,
    "max_connections": 100,
    "max_request_bytes": MIB,
}
RATE_CAPS = ("max_producer_byte_rate", "max_consumer_byte_rate")
QUOTAS = {
    "producer_byte_rate": sa.BigInteger,
    "consumer_byte_rate": sa.BigInteger,
    "request_percentage": sa.Float,
    "controller_mutation_rate": sa.Float,
}

# name -> (limits, quotas, {dimension: (included, [(up_to, unit_price), ...])}); prices in EUR.
D = Decimal
DEFAULT_PLANS: dict[str, tuple[dict[str, int], dict[str, float], dict[str, Any]]] = {
    "free": (
        dict(LIMITS),
        {"producer_byte_rate": MIB, "consumer_byte_rate": 2 * MIB, "request_percentage": 25.0},
        {
            "ingress_gib": (D(0), [(None, D(0))]),
            "egress_gib": (D(0), [(None, D(0))]),
            "storage_gib_hours": (D(0), [(None, D(0))]),
            "requests": (D(0), [(None, D(0))]),
        },
    ),
    "standard": (
        {
            "max_partitions": 1_000,
            "max_storage_bytes": TIB,
            "max_connections": 1_000,
            "max_request_bytes": 8 * MIB,
        },
        {
            "producer_byte_rate": 10 * MIB,
            "consumer_byte_rate": 20 * MIB,
            "request_percentage": 100.0,
        },
        {
            "ingress_gib": (D(10), [(D(1000), D("0.10")), (None, D("0.08"))]),
            "egress_gib": (D(10), [(D(1000), D("0.09")), (None, D("0.07"))]),
            "storage_gib_hours": (D(720), [(None, D("0.00014"))]),
            "requests": (D(1_000_000), [(None, D("0.0000004"))]),
            "connection_hours": (D(720), [(None, D("0.015"))]),
        },
    ),
    "enterprise": (
        {
            "max_partitions": 10_000,
            "max_storage_bytes": 100 * TIB,
            "max_connections": 10_000,
            "max_request_bytes": 100 * MIB,
        },
        {
            "producer_byte_rate": 100 * MIB,
            "consumer_byte_rate": 200 * MIB,
            "request_percentage": 400.0,
        },
        {
            "ingress_gib": (D(100), [(D(10_000), D("0.06")), (None, D("0.04"))]),
            "egress_gib": (D(100), [(D(10_000), D("0.05")), (None, D("0.03"))]),
            "storage_gib_hours": (D(7200), [(None, D("0.0001"))]),
            "requests": (D(10_000_000), [(None, D("0.0000002"))]),
            "connection_hours": (D(7200), [(None, D("0.01"))]),
        },
    ),
}


def upgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        for name, value in LIMITS.items():
            batch.add_column(
                sa.Column(name, sa.BigInteger, nullable=False, server_default=str(value))
            )
        for name in RATE_CAPS:
            batch.add_column(sa.Column(name, sa.BigInteger, nullable=True))
        for name, kind in QUOTAS.items():
            batch.add_column(sa.Column(name, kind, nullable=True))
    _add_default_plans()


def _add_default_plans() -> None:
    plans = sa.table(
        "plans",
        sa.column("name", sa.String),
        sa.column("currency", sa.String),
        sa.column("updated_at", UtcDateTime),
        *(sa.column(name, sa.BigInteger) for name in (*LIMITS, *RATE_CAPS)),
        *(sa.column(name, kind) for name, kind in QUOTAS.items()),
    )
    dimensions = sa.table(
        "plan_dimensions",
        sa.column("plan_name", sa.String),
        sa.column("dimension", sa.String),
        sa.column("included", Money),
    )
    tiers = sa.table(
        "plan_tiers",
        sa.column("plan_name", sa.String),
        sa.column("dimension", sa.String),
        sa.column("position", sa.Integer),
        sa.column("up_to", Money),
        sa.column("unit_price", Money),
    )
    connection = op.get_bind()
    existing = set(connection.scalars(sa.select(plans.c.name)))
    now = datetime.now(UTC)
    for name, (limits, quotas, prices) in DEFAULT_PLANS.items():
        if name in existing:
            continue  # an operator's plan of that name stays as it is
        row = {"name": name, "currency": "EUR", "updated_at": now, **limits, **quotas}
        connection.execute(sa.insert(plans).values(row))
        for dimension, (included, steps) in prices.items():
            connection.execute(
                sa.insert(dimensions).values(plan_name=name, dimension=dimension, included=included)
            )
            for position, (up_to, unit_price) in enumerate(steps):
                connection.execute(
                    sa.insert(tiers).values(
                        plan_name=name,
                        dimension=dimension,
                        position=position,
                        up_to=up_to,
                        unit_price=unit_price,
                    )
                )


def downgrade() -> None:
    # In place, as 0003's downgrade: rebuilding `plans` would drop a table its dimensions reference.
    with op.batch_alter_table("plans", recreate="never") as batch:
        for name in reversed([*LIMITS, *RATE_CAPS, *QUOTAS]):
            batch.drop_column(name)
