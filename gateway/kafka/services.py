"""What a client session is handed by the gateway's composition root: narrow interfaces onto the
gateway's shared parts (tenant directory, throttling, metering, the fleet view, storage use),
so a session can be tested with fakes and never reaches the root.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gateway.auth.authenticator import Authenticator
from gateway.kafka.api_table import ApiRange
from gateway.kafka.coordinated_names import CoordinatedNames
from gateway.kafka.filter import Access, Fleet, MutationBudget
from gateway.kafka.member_ledger import MemberLedger
from gateway.kafka.namespace import TenantNamespace
from gateway.metering.meter import UsageMeter
from gateway.policy.identity import QuotaSubject
from gateway.policy.policy import StorageUse
from gateway.reservations import PartitionBudget
from tenancy.domain import Principal, Tenant

__all__ = [
    "Closable",
    "Directory",
    "FleetView",
    "QuotaSubject",
    "SessionServices",
    "StorageUse",
    "TenantState",
    "Throttling",
]


@dataclass(frozen=True, slots=True)
class TenantState:
    """What the gateway holds of one tenant: its record, namespace and ACLs."""

    tenant: Tenant
    namespace: TenantNamespace
    access: Access


class Closable(Protocol):
    principal: Principal | None

    def close(self, reason: str) -> None: ...


class Directory(Protocol):
    async def state(self, tenant_id: str) -> TenantState: ...

    def current(self, tenant_id: str) -> TenantState | None:
        """The latest loaded state of a tenant (None while it is being reloaded)."""
        ...

    async def admit(self, session: Closable, state: TenantState) -> str | None:
        """Register an authenticated session; a reason string if the tenant is at its limit
        (fleet-wide, held in the tenant store) or the limit cannot be checked."""
        ...

    def admitting(
        self, session: Closable, principal: Principal
    ) -> contextlib.AbstractContextManager[None]:
        """While a login is checked and admitted: closed with its key or tenant meanwhile."""
        ...

    async def key_usable(self, key_id: str) -> bool:
        """The key neither revoked nor expired, read from the store now (False: cannot say)."""
        ...

    def release(self, session: Closable) -> None: ...

    def track(self, session: Closable, state: TenantState) -> str | None:
        """Close `session` with its key or tenant without holding a connection slot; a reason
        string if the tenant is not active."""
        ...

    def untrack(self, session: Closable) -> None: ...


class Throttling(Protocol):
    async def load(self, tenant_id: str) -> None:
        """Make a tenant's quotas available (at login)."""
        ...

    def produce(self, subject: QuotaSubject, request_bytes: int, now_ms: int) -> int:
        """Record a Produce request's size; the throttle time it earns (ms)."""
        ...

    def fetch(self, subject: QuotaSubject, response_bytes: int, now_ms: int) -> int:
        """Record a Fetch response's record bytes; when the result is > 0 the fetch is throttled
        and its bytes are taken back (Kafka returns a throttled fetch with no data)."""
        ...

    def fetch_max_bytes(self, subject: QuotaSubject) -> int | None:
        """A fetch's max bytes cap: quota × (samples − 1) × window; None without a quota."""
        ...

    def request_time(self, subject: QuotaSubject, elapsed_ms: float, now_ms: int) -> int:
        """Record time spent on a request (request_percentage); the throttle time it earns."""
        ...

    def mutations(
        self, subject: QuotaSubject, strict: bool, now_ms: int, *, caller_strict: bool = False
    ) -> MutationBudget:
        """The controller mutation budget for one CreateTopics/DeleteTopics/CreatePartitions:
        the caller's KIP-599 quota (`strict`: a version that refuses) and the tenant's
        `tenant.partition.mutations.per.second` (`caller_strict`: refused past its burst)."""
        ...

    def mutation_throttle_ms(self, subject: QuotaSubject, now_ms: int) -> int:
        """After the mutations of a request were charged: its throttle time."""
        ...

    def config_change_budget(
        self, subject: QuotaSubject, strict: bool, now_ms: int
    ) -> MutationBudget:
        """The config-change pacing of one AlterConfigs / IncrementalAlterConfigs
        (`tenant.config.changes.per.second`), as a mutation budget."""
        ...

    def config_change_throttle_ms(self, subject: QuotaSubject, now_ms: int) -> int:
        """After a request's config changes were charged: its throttle time."""
        ...


class FleetView(Fleet, Protocol):
    def api_table(self) -> dict[int, ApiRange]: ...

    def finalized_features(self) -> dict[str, int]: ...

    def upstream_address(self, node_id: int | None) -> tuple[str, int] | None:
        """Where the broker behind a gateway port is (None: any live broker, for bootstrap)."""
        ...

    def known_topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The fleet name of the topic with this id as last seen, without waiting (hot path)."""
        ...


@dataclass(slots=True)
class SessionServices:
    authenticator: Authenticator
    directory: Directory
    throttling: Throttling
    meter: UsageMeter
    fleet: FleetView
    storage: StorageUse
    clock_ms: Callable[[], int]
    max_reauth_ms: int | None = None
    max_request_bytes: int = 100 * 1024 * 1024
    partitions: PartitionBudget | None = None  # `max_partitions`, reserved in the store
    names: CoordinatedNames | None = None  # `tenant.max.groups` / `.transactional.ids`
    members: MemberLedger | None = None  # `tenant.max.group.member.bytes`
