"""A `FilterContext` for filter unit tests, with fakes for the ACLs, the fleet and the mutation
budget, and helpers to run a filter end to end on kio entities (request in → what goes upstream;
upstream response in → what the client gets).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from brokers.wire.entities import has_field, known_fields, make, request_module, response_module
from gateway.kafka.filter import (
    Caller,
    FilterContext,
    FilterModule,
    Forward,
    HeldGroup,
    LookupBudget,
    Outcome,
    Reply,
)
from gateway.kafka.member_ledger import MemberLedger
from gateway.kafka.namespace import TenantNamespace
from gateway.policy import TenantPolicy
from gateway.reservations import LedgerUnavailable
from tenancy.domain import DEFAULT_LIMITS, Principal, TenantLimits
from tenancy.reservations import PartitionGrant

TENANT = "acme"
OTHER = "bolt"


@dataclass
class FakeAccess:
    """Allows everything except the (operation, resource type, name) triples in `denied`."""

    denied: set[tuple[str, str, str]] = field(default_factory=set)
    denied_any: set[tuple[str, str]] = field(default_factory=set)

    def allowed(
        self, principal: str, host: str, operation: str, resource_type: str, name: str
    ) -> bool:
        return (operation, resource_type, name) not in self.denied

    def allowed_any(self, principal: str, host: str, operation: str, resource_type: str) -> bool:
        return (operation, resource_type) not in self.denied_any


@dataclass
class FakeFleet:
    partitions: int = 0
    default_partitions: int = 1
    endpoints: dict[int, tuple[str, int]] = field(
        default_factory=lambda: {1: ("gw.example", 9101), 2: ("gw.example", 9102)}
    )
    topic_counts: dict[str, int] = field(default_factory=dict)  # fleet topic -> partitions
    ids: dict[uuid.UUID, str] = field(default_factory=dict)  # topic id -> fleet topic
    lookups: list[tuple[str, int]] = field(default_factory=list)  # (what, how many) asked
    groups: dict[str, HeldGroup] = field(default_factory=dict)  # fleet group -> its coordinator's

    def cluster_id(self, tenant_id: str) -> str:
        return f"virtual-{tenant_id}"

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        return self.endpoints.get(node_id)

    async def partition_counts(self, fleet_topics: Iterable[str]) -> dict[str, int | None]:
        names = list(dict.fromkeys(fleet_topics))
        self.lookups.append(("counts", len(names)))
        return {name: self.topic_counts.get(name) for name in names}

    async def topic_names(self, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str | None]:
        ids = list(dict.fromkeys(topic_ids))
        self.lookups.append(("ids", len(ids)))
        return {topic_id: self.ids.get(topic_id) for topic_id in ids}

    def remember_topic_id(self, fleet_name: str, topic_id: uuid.UUID) -> None:
        self.ids.setdefault(topic_id, fleet_name)

    async def consumer_group_members(
        self, fleet_group: str, budget: LookupBudget
    ) -> HeldGroup | None:
        if not budget.take():
            return None
        self.lookups.append(("members", 1))
        return self.groups.get(fleet_group)


@dataclass
class FakePartitions:
    """The partition ledger in memory: the fleet's count plus what this test reserved."""

    fleet: FakeFleet
    limit: int = DEFAULT_LIMITS.max_partitions
    reserved: int = 0
    settled: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    unavailable: bool = False

    async def reserve(self, tenant_id: str, sizes: Sequence[int]) -> PartitionGrant:
        if self.unavailable:
            raise LedgerUnavailable("store down")
        in_use = self.fleet.partitions + self.reserved
        room, granted = self.limit - in_use, []
        for size in sizes:
            granted.append(size <= room)
            room -= size if granted[-1] else 0
        self.reserved += sum(s for s, ok in zip(sizes, granted, strict=True) if ok)
        return PartitionGrant("r1" if any(granted) else None, tuple(granted), in_use, self.limit)

    def settle(self, tenant_id: str, grant: PartitionGrant, created: int) -> None:
        self.settled.append(created)

    def release(self, tenant_id: str, partitions: int) -> None:
        self.released.append(partitions)


@dataclass
class FakeBudget:
    over: bool = False
    charged: int = 0

    def exceeded(self) -> bool:
        return self.over

    def record(self, partitions: int) -> None:
        self.charged += partitions


def _policy(tenant: str, access: FakeAccess) -> TenantPolicy:
    """The real policy stage over fake ACLs: the filters' checks go through `TenantPolicy`."""
    identity = Caller(Principal(tenant, "sa-0000000001", "KEY0000000000001"), "127.0.0.1", "app")
    state = SimpleNamespace(access=access)
    return TenantPolicy(
        identity,
        lambda: state,  # a TenantView for what `allowed` reads
        quotas=None,  # type: ignore[arg-type]
        storage=None,  # type: ignore[arg-type]
        meter=None,  # type: ignore[arg-type]
        clock_ms=lambda: 0,
    )


def context(
    module: FilterModule,
    version: int,
    *,
    tenant: str = TENANT,
    access: FakeAccess | None = None,
    fleet: FakeFleet | None = None,
    limits: TenantLimits = DEFAULT_LIMITS,
    budget: FakeBudget | None = None,
    partitions: FakePartitions | None = None,
    members: MemberLedger | None = None,
) -> FilterContext:
    fleet = fleet or FakeFleet()
    return FilterContext(
        api_key=module.API_KEY,
        api_version=version,
        policy=_policy(tenant, access or FakeAccess()),
        namespace=TenantNamespace(tenant),
        limits=limits,
        fleet=fleet,
        mutations=budget or FakeBudget(),
        partitions=partitions or FakePartitions(fleet, limit=limits.max_partitions),
        members=members,
    )


def request(module: FilterModule, version: int, name: str, /, **fields: Any) -> Any:
    return make(request_module(module.API_KEY, version), name, **fields)


def response(module: FilterModule, version: int, name: str, /, **fields: Any) -> Any:
    """A response entity as the broker would send it (`throttle_time` defaults to zero where the
    entity has one)."""
    entity_module = response_module(module.API_KEY, version)
    if has_field(entity_module, name, "throttle_time"):
        fields.setdefault("throttle_time", timedelta(0))
    return make(entity_module, name, **fields)


def fitting(
    module: FilterModule, version: int, name: str, bag: Mapping[str, Any]
) -> dict[str, Any]:
    """The fields of a bag shared by several APIs that `name` has in some version (of the
    request or response of `module`'s API): for tests that build many APIs from one bag."""
    side = request_module(module.API_KEY, version)
    if not hasattr(side, name):
        side = response_module(module.API_KEY, version)
    known = known_fields(side, name)
    return {k: v for k, v in bag.items() if k in known}


def versions(module: FilterModule) -> Iterable[int]:
    return range(module.MIN_VERSION, module.MAX_VERSION + 1)


async def run(module: FilterModule, ctx: FilterContext, req: Any) -> Outcome:
    return await module.handle(ctx, req)


def forwarded(outcome: Outcome) -> Forward:
    assert isinstance(outcome, Forward), f"expected the request to be forwarded, got {outcome!r}"
    return outcome


def replied(outcome: Outcome) -> Any:
    assert isinstance(outcome, Reply), f"expected a local answer, got {outcome!r}"
    return outcome.response
