"""Values the tenant store hands to callers: frozen dataclasses, detached from any database session.

Nothing here holds a secret except `Secret` (the one-time API key secret or operator token), whose
`repr()` is redacted so it cannot leak through a log line that formats a tuple or a dataclass;
`ScramCredential` hides its verifier fields from `repr()` too. Immutable, so safe to share between
threads and to cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

T = TypeVar("T")

DEFAULT_ENTITY = "<default>"  # Kafka's name for the default user / client-id quota entity


class Secret(str):
    """A secret string shown to its owner once; `repr()` never reveals it (str() does, on purpose)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('***')"


@dataclass(frozen=True)
class TenantLimits:
    """What one tenant may use. The two rate caps (bytes/s, as Kafka's byte-rate quotas) bound the
    tenant's produce and fetch traffic summed over all its principals; None = no cap. The
    consumer groups and transactional ids the tenant may hold on the fleet's coordinators (revision
    0010); None = the gateway's `tenant.max.groups` / `tenant.max.transactional.ids`."""

    max_partitions: int
    max_storage_bytes: int
    max_connections: int
    max_request_bytes: int
    max_producer_byte_rate: int | None = None
    max_consumer_byte_rate: int | None = None
    max_groups: int | None = None
    max_transactional_ids: int | None = None


DEFAULT_LIMITS = TenantLimits(
    max_partitions=100,
    max_storage_bytes=10 * 2**30,
    max_connections=100,
    max_request_bytes=2**20,  # Kafka's message.max.bytes is about 1 MiB
    max_producer_byte_rate=None,  # no tenant-wide caps: only the client quotas apply
    max_consumer_byte_rate=None,
)


@dataclass(frozen=True)
class Tenant:
    id: str
    display_name: str
    plan: str
    status: str  # active | suspended | deleted
    limits: TenantLimits
    created_at: datetime
    updated_at: datetime
    # Whether its service accounts need ACLs (revision 0007; `tenancy.plan_rules.AUTHORIZATIONS`):
    # "acls" = deny by default, "open" = a resource no ACL names is open to its accounts.
    authorization: str = "acls"


@dataclass(frozen=True)
class ServiceAccount:
    id: str
    tenant_id: str
    name: str
    description: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    tenant_id: str
    service_account_id: str
    description: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


@dataclass(frozen=True)
class QuotaEntity:
    """A Kafka client-quota entity: None = not part of it, `<default>` = the default entity."""

    user: str | None
    client_id: str | None


@dataclass(frozen=True)
class EffectiveQuota:
    value: float | None
    source: str | None  # e.g. "/config/users/sa-1/clients/<default>"; None when no level sets it


@dataclass(frozen=True)
class Acl:
    id: str
    tenant_id: str
    resource_type: str
    pattern_type: str  # literal | prefixed
    resource_name: str
    operation: str
    permission: str  # allow | deny
    principal: str
    host: str


@dataclass(frozen=True)
class PlanTier:
    """One graduated tier: units up to `up_to` (cumulative, past the allowance; None = no limit)."""

    up_to: Decimal | None
    unit_price: Decimal


@dataclass(frozen=True)
class PlanDimension:
    """A billing dimension: `included` units free, then the graduated `tiers` in order."""

    included: Decimal
    tiers: tuple[PlanTier, ...]

    def __post_init__(self) -> None:
        # Callers building from JSON pass lists; keep the value immutable and hashable.
        object.__setattr__(self, "tiers", tuple(self.tiers))


@dataclass(frozen=True)
class Plan:
    """A plan: its prices (`dimensions`), and what a tenant on it gets. `limits` become the
    tenant's limits when it is created on (or moved to) the plan, unless others are given;
    `quotas` (Kafka quota name -> value) become its default client quotas, the entity
    `/config/users/<default>` of the tenant, which operators may change afterwards."""

    name: str
    currency: str
    dimensions: dict[str, PlanDimension]
    limits: TenantLimits = DEFAULT_LIMITS
    quotas: dict[str, float] = field(default_factory=dict)
    authorization: str = "acls"  # what its tenants get: "acls" (required) or "open"


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True)
class Change:
    version: int
    kind: str
    tenant_id: str | None
    subject: str
    at: datetime


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    actor: str
    action: str
    tenant_id: str | None
    subject: str
    details: dict[str, Any]  # never secrets


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    service_account_id: str
    key_id: str


@dataclass(frozen=True)
class ScramCredential:
    """An RFC 5802 verifier: what a server needs for SCRAM without knowing the secret."""

    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: bytes = field(repr=False)
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
