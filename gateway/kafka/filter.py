"""What an API filter is handed and what it returns: the contract between the session and the
one-module-per-API filters in `gateway/kafka/filters/`.

A filter module declares `API_KEY`, `MIN_VERSION`, `MAX_VERSION` (the versions the gateway serves
for that API: its cap in `gateway/kafka/api_table.py`) and `async def handle(ctx, request) -> Forward |
Reply`. The request is the client's kio request entity, decoded; the filter returns either
- `Forward(request, on_response, on_failure)`: the rewritten request (tenant names prefixed)
  goes to the upstream broker, and `on_response` turns the broker's decoded response into the
  client's (names stripped, foreign entries dropped, endpoints replaced, local errors merged back).
  When that answer will never come — the upstream connection failed or timed out, or the client
  went away (its connection closed, its HTTP request ended) — `on_failure` is called instead,
  once, so what the filter holds for the request (a partition reservation) is given back without
  waiting for its expiry; exactly one of the two is called for a forwarded request; or
- `Reply(response)`: the gateway answers itself (refused, or served from the gateway's own state).
`on_response` and `on_failure` run synchronously on the event loop; they must not block. The session sets `throttle_time_ms` on the final response itself, so filters leave it alone.

Everything a filter may consult is on `FilterContext`: the caller's policy, the tenant's
namespace, limits, the fleet view (endpoints, virtual cluster id, the tenant's partition count),
the mutation budget, the tenant's limits on groups and transactional ids (`name_refusal`) and on
the bytes of its group members (`members`). Its ACL checks and topic-name rule are the policy stage's
(`gateway.policy`): `allowed` / `allowed_any` ask the request's `TenantPolicy` (its
`Authorization`), the one place a tenant's ACLs are consulted, under the policy's `Identity`,
whose principal string is built there and nowhere else.
Filters never see sockets. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import MAX_COORDINATED_NAME, NameKind
from gateway.kafka.member_ledger import MemberLedger
from gateway.kafka.namespace import TenantNamespace
from gateway.policy.identity import Identity
from gateway.policy.names import topic_name_problem
from gateway.policy.policy import Access
from gateway.policy.requests import Authorization
from gateway.reservations import PartitionBudget
from tenancy.domain import TenantLimits

Caller = Identity  # the authenticated client behind a request (principal, host, client id)

__all__ = [
    "Access",
    "Authorization",
    "Caller",
    "Failure",
    "FilterContext",
    "FilterModule",
    "Fleet",
    "Forward",
    "HeldGroup",
    "LookupBudget",
    "MutationBudget",
    "Outcome",
    "Reply",
    "ResponseRewrite",
]


class Fleet(Protocol):
    """What the gateway knows of the fleet behind it."""

    default_partitions: int  # what an auto-created topic gets (the brokers' num.partitions)

    def cluster_id(self, tenant_id: str) -> str:
        """The virtual cluster id shown to this tenant (never the fleet's)."""
        ...

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        """The gateway's (host, port) standing for broker `node_id`; None if it has none."""
        ...

    async def partition_counts(self, fleet_topics: Iterable[str]) -> dict[str, int | None]:
        """How many partitions each fleet topic has now; None for one that does not exist (one
        look-up of these topics only)."""
        ...

    async def topic_names(self, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str | None]:
        """The fleet name of the topic with each id now; None when no topic has it (one look-up
        of these ids only)."""
        ...

    def remember_topic_id(self, fleet_name: str, topic_id: uuid.UUID) -> None:
        """An id a broker's answer just showed, for the hot path's look-ups."""
        ...

    async def consumer_group_members(
        self, fleet_group: str, budget: LookupBudget
    ) -> HeldGroup | None:
        """The KIP-848 members a group's coordinator holds (ConsumerGroupDescribe of this group
        alone, or its answer of a moment ago); None when it cannot tell (no answer in time, not a
        consumer group, or `budget` spent: a describe is sent only if it gives a token)."""
        ...


class LookupBudget(Protocol):
    """The look-ups at coordinators a tenant may still cause (`MemberLedger.look_ups`)."""

    def take(self) -> bool:
        """One look-up more now, if the tenant has one left."""
        ...

    def spend(self, size: int) -> None:
        """What the look-up's answer weighed (bytes): large ones count for more."""
        ...


@dataclass(frozen=True, slots=True)
class HeldGroup:
    """A KIP-848 group as its coordinator described it: its assignor's name and its KIP-848
    members (the answer's kio entities, in the fleet's names; classic members of a mixed group
    left out) by member id."""

    assignor: str
    members: dict[str, Any]


class NameAdmission(Protocol):
    """The tenant's limits on coordinator state (`coordinated_names.CoordinatedNames`)."""

    async def admit(
        self, kind: NameKind, tenant_id: str, fleet_name: str, own: int | None = None
    ) -> bool: ...

    def forget(self, kind: NameKind, tenant_id: str, fleet_names: Iterable[str]) -> None: ...

    def limit(self, kind: NameKind, own: int | None = None) -> int:
        """How many of `kind` a tenant may hold: `own` (the tenant's), else the gateway's."""
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
    policy: Authorization  # the request's `TenantPolicy`: its identity and ACL checks
    namespace: TenantNamespace
    limits: TenantLimits
    fleet: Fleet
    mutations: MutationBudget
    partitions: PartitionBudget | None = None  # None: creations are refused (fail closed)
    names: NameAdmission | None = None  # None: no limit on groups and transactional ids
    members: MemberLedger | None = None  # None: no limit on the bytes of group members
    # Why the request was refused, where its error code cannot say (a limit, not an ACL): the
    # HTTP API shows it; Kafka's protocol has no message field for it.
    refusal_detail: str | None = None

    async def name_refusal(self, kind: NameKind, name: str) -> ErrorCode | None:
        """Why a request that makes coordinator state may not name the tenant's group or
        transactional id `name`, or None: longer than MAX_COORDINATED_NAME (INVALID_GROUP_ID,
        INVALID_REQUEST), or one more past the tenant's limit (GROUP_ /
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED); one the fleet holds, or one more within the
        limit, may be named."""
        group = kind is NameKind.GROUP
        if len(name) > MAX_COORDINATED_NAME:
            return ErrorCode.invalid_group_id if group else ErrorCode.invalid_request
        if self.names is None:
            return None
        fleet_name = self.namespace.fleet(name)
        own = self.limits.max_groups if group else self.limits.max_transactional_ids
        if await self.names.admit(kind, self.namespace.tenant_id, fleet_name, own):
            return None
        what = "consumer groups" if group else "transactional ids"
        self.refusal_detail = (
            f"the tenant holds as many {what} as it may ({self.names.limit(kind, own)}): "
            f"{name!r} would be one more (delete one, or let one expire, first)"
        )
        if group:
            return ErrorCode.group_authorization_failed
        return ErrorCode.transactional_id_authorization_failed

    @property
    def caller(self) -> Caller:
        return self.policy.identity

    def allowed(self, operation: str, resource_type: str, name: str) -> bool:
        """Whether the caller may do `operation` on the tenant resource `name` (tenant's name)."""
        return self.policy.allowed(operation, resource_type, name)

    def allowed_any(self, operation: str, resource_type: str) -> bool:
        return self.policy.allowed_any(operation, resource_type)

    def topic_name_problem(self, name: str) -> str | None:
        """Why the tenant may not name a topic `name` (INVALID_TOPIC_EXCEPTION), or None."""
        return topic_name_problem(name, self.namespace.max_topic_length)


ResponseRewrite = Callable[[Any], Any]
Failure = Callable[[], None]


def _nothing_held() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Forward:
    request: Any
    on_response: ResponseRewrite
    on_failure: Failure = _nothing_held  # the answer will never come (see the module doc)
    # Listings only: the fleet-name prefix the broker may limit the request to (sent in the
    # request header, `brokers.wire.headers.NAME_SCOPE_TAG`, on flexible versions); the answer
    # is still filtered to the tenant's names here.
    name_scope: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    response: Any


Outcome = Forward | Reply


class FilterModule(Protocol):
    API_KEY: int
    MIN_VERSION: int
    MAX_VERSION: int

    async def handle(self, ctx: FilterContext, request: Any) -> Outcome: ...
