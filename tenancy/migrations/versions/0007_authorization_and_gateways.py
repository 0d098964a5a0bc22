"""Access fails closed: whether a tenant's service accounts need ACLs is an explicit setting, and
every gateway reports the change-feed version it has applied.

`tenants.authorization` and `plans.authorization` are "acls" (a service account may do only what
an ALLOW binding grants: Kafka's `allow.everyone.if.no.acl.found=false`) or "open" (a resource
that no binding names is open to the tenant's accounts: Kafka's `...=true`). Until this revision
the gateway inferred it per request from whether the tenant had any ACL; existing tenants keep
what they had, now written down: a tenant with at least one ACL gets "acls", one without "open".
Existing plans, and the column default, are "acls": a new tenant is closed unless its plan (or
its operator) says "open". `gateways` holds one heartbeat row per running gateway (its id, the
version it has applied, when it started and when it last reported); the admin API waits, after a
change that takes access away, until every live gateway has applied it (docs/security.md).
Downgrading drops the table and the columns (the gateway then infers again).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tenancy.sqltypes import UtcDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CLOSED, OPEN = "acls", "open"


def upgrade() -> None:
    for table in ("tenants", "plans"):
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.add_column(
                sa.Column("authorization", sa.String(8), nullable=False, server_default=CLOSED)
            )
    tenants = sa.table("tenants", sa.column("id", sa.String), sa.column("authorization", sa.String))
    acls = sa.table("acls", sa.column("tenant_id", sa.String))
    with_acls = sa.select(acls.c.tenant_id).distinct()
    op.execute(sa.update(tenants).where(tenants.c.id.not_in(with_acls)).values(authorization=OPEN))
    op.create_table(
        "gateways",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("applied_version", sa.BigInteger, nullable=False),
        sa.Column("started_at", UtcDateTime, nullable=False),
        sa.Column("last_seen", UtcDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gateways")
    for table in ("plans", "tenants"):
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column("authorization")
