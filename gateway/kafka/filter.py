"""What an API filter is handed and what it returns: the contract between the session and the
one-module-per-API filters in `gateway/kafka/filters/`.

A filter module declares `API_KEY`, `MIN_VERSION`, `MAX_VERSION` (the versions the gateway serves
for that API: its CAP from `gateway-apis.md`) and `async def handle(ctx, request) -> Forward |
Reply`. The request is the client's kio request entity, decoded; the filter returns either
- `Forward(request, on_response)`: the rewritten request (tenant names prefixed) goes to the
  upstream broker, and `on_response` turns the broker's decoded response into the client's (names
  stripped, foreign entries dropped, endpoints replaced, local errors merged back); or
- `Reply(response)`: the gateway answers itself (refused, or served from the gateway's own state).
`on_response` runs synchronously on the event loop when the upstream answer arrives; it must not
block. The session sets `throttle_time_ms` on the final response itself, so filters leave it alone.

Everything a filter may consult is on `FilterContext`: the caller, the tenant's namespace, ACLs,
limits, the fleet view (endpoints, virtual cluster id, the tenant's partition count) and the
mutation budget. Filters never see sockets. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.kafka.namespace import TenantNamespace
from gateway.reservations import PartitionBudget
from tenancy.domain import Principal, TenantLimits


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated client behind a request."""

    principal: Principal
    host: str
    client_id: str

    @property
    def kafka_principal(self) -> str:
        """Kafka's principal string: `User:<service account id>` (DESIGN.md "Auth")."""
        return f"User:{self.principal.service_account_id}"


class Access(Protocol):
    """The tenant's ACLs (`gateway.kafka.authorizer.Authorizer` satisfies it)."""

    def allowed(
        self, principal: str, host: str, operation: str, resource_type: str, name: str
    ) -> bool: ...

    def allowed_any(
        self, principal: str, host: str, operation: str, resource_type: str
    ) -> bool: ...


class Fleet(Protocol):
    """What the gateway knows of the fleet behind it."""

    default_partitions: int  # what an auto-created topic gets (the brokers' num.partitions)

    def cluster_id(self, tenant_id: str) -> str:
        """The virtual cluster id shown to this tenant (never the fleet's)."""
        ...

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        """The gateway's (host, port) standing for broker `node_id`; None if it has none."""
        ...

    async def tenant_partitions(self, namespace: TenantNamespace) -> int:
        """How many partitions the tenant's topics have now (fresh from the fleet)."""
        ...

    async def topic_partitions(self, fleet_topic: str) -> int | None:
        """How many partitions one fleet topic has now; None when it does not exist."""
        ...


class MutationBudget(Protocol):
    """The caller's `controller_mutation_rate` quota (KIP-599), one partition per token."""

    def exceeded(self) -> bool:
        """True when a strict request must refuse the next topic (THROTTLING_QUOTA_EXCEEDED)."""
        ...

    def record(self, partitions: int) -> None:
        """Charge created, deleted or added partitions."""
        ...


@dataclass(slots=True)
class FilterContext:
    api_key: int
    api_version: int
    caller: Caller
    namespace: TenantNamespace
    access: Access
    limits: TenantLimits
    fleet: Fleet
    mutations: MutationBudget
    partitions: PartitionBudget | None = None  # None: creations are refused (fail closed)

    def allowed(self, operation: str, resource_type: str, name: str) -> bool:
        """Whether the caller may do `operation` on the tenant resource `name` (tenant's name)."""
        return self.access.allowed(
            self.caller.kafka_principal, self.caller.host, operation, resource_type, name
        )

    def allowed_any(self, operation: str, resource_type: str) -> bool:
        return self.access.allowed_any(
            self.caller.kafka_principal, self.caller.host, operation, resource_type
        )


ResponseRewrite = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Forward:
    request: Any
    on_response: ResponseRewrite


@dataclass(frozen=True, slots=True)
class Reply:
    response: Any


Outcome = Forward | Reply


class FilterModule(Protocol):
    API_KEY: int
    MIN_VERSION: int
    MAX_VERSION: int

    async def handle(self, ctx: FilterContext, request: Any) -> Outcome: ...
