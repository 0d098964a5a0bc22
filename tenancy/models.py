"""SQLAlchemy models of the tenant store: the schema at Alembic head (`tenancy/migrations/`).

The migrations, not `create_all`, build databases; a test compares these models with a migrated
database so the two cannot drift. Secrets are never columns: API keys keep an scrypt hash and the
SCRAM verifiers, operators a SHA-256 of their token. Quota entities use "" for "not part of the
entity" (NULLs would defeat the unique key on PostgreSQL). `change_counter` is one row whose
update serialises writers, so change versions are gapless and in commit order. Rows are used inside
one session at a time; nothing here is shared between threads.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tenancy.sqltypes import Money, UtcDateTime

ID = String(32)
NAME = String(200)
TEXT = String(1000)


class Base(DeclarativeBase):
    pass


class TenantRow(Base):
    __tablename__ = "tenants"
    __table_args__ = (Index("ix_tenants_created", "created_at", "id"),)
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    display_name: Mapped[str] = mapped_column(NAME)
    plan: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    max_partitions: Mapped[int] = mapped_column(BigInteger)
    max_storage_bytes: Mapped[int] = mapped_column(BigInteger)
    max_connections: Mapped[int] = mapped_column(BigInteger)
    max_request_bytes: Mapped[int] = mapped_column(BigInteger)
    max_producer_byte_rate: Mapped[int | None] = mapped_column(BigInteger)  # revision 0003
    max_consumer_byte_rate: Mapped[int | None] = mapped_column(BigInteger)  # revision 0003
    max_groups: Mapped[int | None] = mapped_column(BigInteger)  # revision 0010
    max_transactional_ids: Mapped[int | None] = mapped_column(BigInteger)  # revision 0010
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # revision 0007: "acls" (its service accounts need ACLs) or "open"; never inferred from its ACLs
    authorization: Mapped[str] = mapped_column(String(8), server_default="acls")


class ServiceAccountRow(Base):
    __tablename__ = "service_accounts"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name", name="uq_service_accounts_name"),
        Index("ix_service_accounts_created", "tenant_id", "created_at", "id"),
    )
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"))
    name: Mapped[str] = mapped_column(NAME)
    description: Mapped[str] = mapped_column(TEXT)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ApiKeyRow(Base):
    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_created", "tenant_id", "created_at", "key_id"),)
    key_id: Mapped[str] = mapped_column(ID, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"))
    service_account_id: Mapped[str] = mapped_column(ID, ForeignKey("service_accounts.id"))
    description: Mapped[str] = mapped_column(TEXT)
    secret_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)  # revision 0002


class ScramCredentialRow(Base):
    __tablename__ = "scram_credentials"
    key_id: Mapped[str] = mapped_column(ID, ForeignKey("api_keys.key_id"), primary_key=True)
    mechanism: Mapped[str] = mapped_column(String(32), primary_key=True)
    salt: Mapped[bytes] = mapped_column(LargeBinary)
    iterations: Mapped[int] = mapped_column(Integer)
    stored_key: Mapped[bytes] = mapped_column(LargeBinary)
    server_key: Mapped[bytes] = mapped_column(LargeBinary)


class QuotaRow(Base):
    __tablename__ = "quotas"
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"), primary_key=True)
    entity_user: Mapped[str] = mapped_column(String(255), primary_key=True)
    entity_client: Mapped[str] = mapped_column(String(255), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[float] = mapped_column(Float)


class AclRow(Base):
    __tablename__ = "acls"
    __table_args__ = (
        UniqueConstraint(
            "tenant_id",
            "resource_type",
            "pattern_type",
            "resource_name",
            "operation",
            "permission",
            "principal",
            "host",
            name="uq_acls_binding",
        ),
        Index("ix_acls_created", "tenant_id", "created_at", "id"),
    )
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"))
    resource_type: Mapped[str] = mapped_column(String(32))
    pattern_type: Mapped[str] = mapped_column(String(16))
    resource_name: Mapped[str] = mapped_column(NAME)
    operation: Mapped[str] = mapped_column(String(32))
    permission: Mapped[str] = mapped_column(String(8))
    principal: Mapped[str] = mapped_column(NAME)
    host: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class PlanRow(Base):
    __tablename__ = "plans"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    currency: Mapped[str] = mapped_column(String(3))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # revision 0005: the limits the plan's tenants get, and their default client quotas
    max_partitions: Mapped[int] = mapped_column(BigInteger)
    max_storage_bytes: Mapped[int] = mapped_column(BigInteger)
    max_connections: Mapped[int] = mapped_column(BigInteger)
    max_request_bytes: Mapped[int] = mapped_column(BigInteger)
    max_producer_byte_rate: Mapped[int | None] = mapped_column(BigInteger)
    max_consumer_byte_rate: Mapped[int | None] = mapped_column(BigInteger)
    max_groups: Mapped[int | None] = mapped_column(BigInteger)  # revision 0010
    max_transactional_ids: Mapped[int | None] = mapped_column(BigInteger)  # revision 0010
    producer_byte_rate: Mapped[int | None] = mapped_column(BigInteger)
    consumer_byte_rate: Mapped[int | None] = mapped_column(BigInteger)
    request_percentage: Mapped[float | None] = mapped_column(Float)
    controller_mutation_rate: Mapped[float | None] = mapped_column(Float)
    authorization: Mapped[str] = mapped_column(String(8), server_default="acls")  # revision 0007


class PlanDimensionRow(Base):
    __tablename__ = "plan_dimensions"
    plan_name: Mapped[str] = mapped_column(
        String(64), ForeignKey("plans.name", ondelete="CASCADE"), primary_key=True
    )
    dimension: Mapped[str] = mapped_column(String(64), primary_key=True)
    included: Mapped[Decimal] = mapped_column(Money)


class PlanTierRow(Base):
    __tablename__ = "plan_tiers"
    __table_args__ = (
        ForeignKeyConstraint(
            ["plan_name", "dimension"],
            ["plan_dimensions.plan_name", "plan_dimensions.dimension"],
            ondelete="CASCADE",
        ),
    )
    plan_name: Mapped[str] = mapped_column(String(64), primary_key=True)
    dimension: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    up_to: Mapped[Decimal | None] = mapped_column(Money)
    unit_price: Mapped[Decimal] = mapped_column(Money)


class OperatorRow(Base):
    __tablename__ = "operators"
    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    token_digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AuditRow(Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_tenant", "tenant_id", "id"),)  # revision 0002
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[datetime] = mapped_column(UtcDateTime)
    actor: Mapped[str] = mapped_column(NAME)
    action: Mapped[str] = mapped_column(String(64))
    tenant_id: Mapped[str | None] = mapped_column(ID)
    subject: Mapped[str] = mapped_column(TEXT)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)


class ChangeRow(Base):
    __tablename__ = "changes"
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(64))
    tenant_id: Mapped[str | None] = mapped_column(ID)
    subject: Mapped[str] = mapped_column(TEXT)
    at: Mapped[datetime] = mapped_column(UtcDateTime)


class ChangeCounterRow(Base):
    __tablename__ = "change_counter"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(BigInteger)


class PartitionAllocationRow(Base):
    """Revision 0006: one tenant's partitions as the store knows them. `allocated`: what its topics
    hold on the fleet (last reconciled, then adjusted by creations and deletions); `reserved`:
    what creations under way hold; `version`: bumped by every change (reconciliation's fence)."""

    __tablename__ = "partition_allocations"
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"), primary_key=True)
    allocated: Mapped[int] = mapped_column(BigInteger)
    reserved: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(BigInteger)
    reconciled_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class PartitionReservationRow(Base):
    """Revision 0006: one creation under way (its partitions are in the tenant's `reserved`)."""

    __tablename__ = "partition_reservations"
    __table_args__ = (Index("ix_partition_reservations_tenant", "tenant_id", "created_at"),)
    id: Mapped[str] = mapped_column(ID, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"))
    partitions: Mapped[int] = mapped_column(BigInteger)
    holder: Mapped[str] = mapped_column(NAME)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class GatewayRow(Base):
    """Revision 0007: one running gateway's heartbeat: the change-feed version it has applied (every
    change up to it is in force on its connections) and when it last said so."""

    __tablename__ = "gateways"
    id: Mapped[str] = mapped_column(NAME, primary_key=True)
    applied_version: Mapped[int] = mapped_column(BigInteger)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_seen: Mapped[datetime] = mapped_column(UtcDateTime)


# --- billing (revision 0004): written by `billing/`, read by `tenancy.billing_store` ------------
# Counters are BIGINT; storage byte-milliseconds can pass 2^63 for a large topic over an hour, so
# they are exact decimals (`Money`: NUMERIC(38, 12) on PostgreSQL, decimal text on SQLite).
MAX_RECORD_ID = 520  # tenancy.usage: ids are at most 2 × 255 characters
MAX_WRITER = 129  # `<gateway id>/<incarnation>`, each at most 64 characters


class UsageRollupRow(Base):
    """One (tenant, principal, client-id, topic, UTC hour) of usage: sums, never overwritten.
    Storage rows have principal and client_id ""; topic "" means work tied to no topic."""

    __tablename__ = "billing_usage_hourly"
    __table_args__ = (Index("ix_billing_usage_hourly_tenant", "tenant_id", "hour_ms"),)
    tenant_id: Mapped[str] = mapped_column(ID, primary_key=True)
    principal: Mapped[str] = mapped_column(String(255), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    hour_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    bytes_in: Mapped[int] = mapped_column(BigInteger)
    bytes_out: Mapped[int] = mapped_column(BigInteger)
    requests: Mapped[int] = mapped_column(BigInteger)
    throttle_ms: Mapped[int] = mapped_column(BigInteger)
    connection_ms: Mapped[int] = mapped_column(BigInteger)
    partition_ms: Mapped[int] = mapped_column(BigInteger)
    storage_byte_ms: Mapped[Decimal] = mapped_column(Money)
    records: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer)  # how many runs added to this row
    last_run: Mapped[int] = mapped_column(BigInteger)


class BillingCursorRow(Base):
    """The `__usage` offsets the rollups cover; runs are fenced on (generation, offsets)."""

    __tablename__ = "billing_cursor"
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger)
    offsets: Mapped[str] = mapped_column(Text)  # {"<partition>": next offset}
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class BillingRunRow(Base):
    """One committed rollup run: the offset range it read and what it found there."""

    __tablename__ = "billing_runs"
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    topic: Mapped[str] = mapped_column(String(255))
    generation: Mapped[int] = mapped_column(BigInteger)
    start_offsets: Mapped[str] = mapped_column(Text)
    end_offsets: Mapped[str] = mapped_column(Text)
    until_ms: Mapped[int] = mapped_column(BigInteger)
    records: Mapped[int] = mapped_column(BigInteger)
    duplicates: Mapped[int] = mapped_column(BigInteger)
    rejected: Mapped[int] = mapped_column(BigInteger)
    late_samples: Mapped[int] = mapped_column(BigInteger)
    committed_at: Mapped[datetime] = mapped_column(UtcDateTime)


class BillingRunHourRow(Base):
    """Which runs added to which tenant-hours: an invoice's provenance."""

    __tablename__ = "billing_run_hours"
    __table_args__ = (Index("ix_billing_run_hours_tenant", "tenant_id", "hour_ms"),)
    run_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    tenant_id: Mapped[str] = mapped_column(ID, primary_key=True)
    hour_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)


class BillingRecordIdRow(Base):
    """Ids of counted usage records, kept for the `__usage` retention: a replay counts once."""

    __tablename__ = "billing_record_ids"
    __table_args__ = (Index("ix_billing_record_ids_hour", "hour_ms"),)
    id: Mapped[str] = mapped_column(String(MAX_RECORD_ID), primary_key=True)
    hour_ms: Mapped[int] = mapped_column(BigInteger)


class BillingCountedRangeRow(Base):
    """Counted traffic records as runs of sequence numbers per writer (`<gateway>/<incarnation>`):
    ids in a range count once, however often they are replayed (`billing.rollup.ranges`)."""

    __tablename__ = "billing_counted_ranges"
    __table_args__ = (Index("ix_billing_counted_ranges_hour", "hour_ms"),)
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    writer: Mapped[str] = mapped_column(String(MAX_WRITER), primary_key=True)
    lo: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    hi: Mapped[int] = mapped_column(BigInteger)
    hour_ms: Mapped[int] = mapped_column(BigInteger)  # newest hour of a record in the range


class StoragePendingRow(Base):
    """The newest storage sample of each partition. Unsettled: its duration waits for the next
    sample (or for its cap to pass); settled: already credited for the full cap."""

    __tablename__ = "billing_storage_pending"
    tenant_id: Mapped[str] = mapped_column(ID, primary_key=True)
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at_ms: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    settled: Mapped[bool] = mapped_column(Boolean)


class InvoiceRow(Base):
    """One invoice per (tenant, period); `document` is the canonical JSON once final."""

    __tablename__ = "billing_invoices"
    __table_args__ = (UniqueConstraint("tenant_id", "period", name="uq_billing_invoices_period"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ID)
    period: Mapped[str] = mapped_column(String(7))  # YYYY-MM, UTC
    status: Mapped[str] = mapped_column(String(8))  # draft | final
    plan: Mapped[str] = mapped_column(String(64))
    currency: Mapped[str] = mapped_column(String(3))
    total: Mapped[Decimal] = mapped_column(Money)
    provenance: Mapped[str] = mapped_column(Text)  # JSON
    document: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finalized_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class InvoiceLineRow(Base):
    __tablename__ = "billing_invoice_lines"
    invoice_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("billing_invoices.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(16))  # usage | adjustment
    for_period: Mapped[str] = mapped_column(String(7))
    dimension: Mapped[str] = mapped_column(String(64))
    measure: Mapped[Decimal] = mapped_column(Money)  # raw units: bytes, byte-ms, ms, requests
    quantity: Mapped[Decimal] = mapped_column(Money)  # billing units, 12 places (display)
    amount: Mapped[Decimal] = mapped_column(Money)


class LimitTotalRow(Base):
    """Revision 0008: what every gateway holds together of one of a tenant's limits (`kind`:
    "connections" or "storage"), beside the `base` it adds to (storage: the newest sample)."""

    __tablename__ = "limit_totals"
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    base: Mapped[int] = mapped_column(BigInteger)
    held: Mapped[int] = mapped_column(BigInteger)
    sampled_ms: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class LimitHoldingRow(Base):
    """Revision 0008: one gateway's share of a tenant's limit (its id is the one in `gateways`)."""

    __tablename__ = "limit_holdings"
    __table_args__ = (Index("ix_limit_holdings_gateway", "gateway_id"),)
    tenant_id: Mapped[str] = mapped_column(ID, ForeignKey("tenants.id"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    gateway_id: Mapped[str] = mapped_column(NAME, primary_key=True)
    held: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
