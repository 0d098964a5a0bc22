"""How fast a tenant may change the fleet's metadata through the gateways: topic configs
(the gateway's `tenant.config.changes.per.second`) and partitions created or deleted
(`tenant.partition.mutations.per.second`); docs/security.md, limits.

Both are cheap for the tenant and dear for the fleet. In ZooKeeper mode each config change writes
the topic's config znode and a `/config/changes` notice that every broker lists, reads and acts
on, and the notices stay 15 minutes (Kafka's expiry): one client alternating a topic's
`retention.ms` made 232 changes a second straight at a broker (4,650 notices in 20 s) and 1,077 a
second through the gateway. Kafka has no quota for it. Each partition created or deleted is
ZooKeeper writes, a controller decision and a LeaderAndIsr / UpdateMetadata round on the brokers
that host or know it; KIP-599's `controller_mutation_rate` bounds it per user, but only where a
quota is set (the default plans set none), and a tenant's topic churn slowed every other
tenant's produce on the fleet (docs/benchmarks.md, topic churn).

Owns `TenantPacing`: per tenant a virtual-scheduling limiter (GCRA) at `per_second` units (a
config change, a partition) with a burst of `burst` (a tool applying fifty topics' settings, or
creating a topic of a thousand partitions, is not slowed), and `PacedBudget`, one request's view
of it, which the filters ask before each topic they would forward (`exceeded`) and charge for it
(`record`), as KIP-599's mutation budget: each unit moves the tenant's theoretical arrival time
on by 1 / `per_second`. A request ahead of it by more than the burst earns a throttle of the
difference (`throttle_ms`): its answer says so and its connection is muted from then on, before
the next request is taken. A topic is refused THROTTLING_QUOTA_EXCEEDED (not forwarded) once the
tenant is `MAX_BACKLOG_MS` past its burst on the Kafka path, and as soon as it is past its burst
for a strict caller (the HTTP API, which answers 429 rather than hold a request), so no request,
pipeline or fresh connection gets more through than the rate, the burst and that backlog. Given
`UnitCounters`, each unit charged here is counted for the fleet under the pacing's `kind`, and the
units other gateways charged come back through `apply` (`gateway.quotas.shared_units`), so the
pacing holds across every gateway and worker. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from gateway.quotas.shared_units import PEER_DEBT_MS, UnitCounters
from gateway.quotas.throttle import INT32_MAX

CONFIG_CHANGES_PER_SECOND = 5  # `tenant.config.changes.per.second`'s default
CONFIG_CHANGES_BURST = 50
PARTITION_MUTATIONS_PER_SECOND = 100  # `tenant.partition.mutations.per.second`'s default
PARTITION_MUTATIONS_BURST_SECONDS = 20  # its burst: this many seconds' worth (2,000 by default)
MAX_BACKLOG_MS = 30_000  # the longest throttle a request earns; past it topics are refused


CONFIG_CHANGES = "config_changes"  # the pacings' names (metrics, the fleet's unit counts)
PARTITION_MUTATIONS = "partition_mutations"


class TenantPacing:
    def __init__(
        self,
        per_second: float,
        burst: float,
        *,
        kind: str = "",
        counters: UnitCounters | None = None,
    ) -> None:
        if per_second <= 0:
            raise ValueError("a pacing's rate must be positive")
        self._interval_ms = 1000.0 / per_second
        self._burst_ms = burst * self._interval_ms
        self._arrival: dict[str, float] = {}  # tenant → theoretical arrival time (ms)
        self.kind = kind
        self._counters = counters

    @classmethod
    def for_config_changes(
        cls, per_second: float = CONFIG_CHANGES_PER_SECOND, counters: UnitCounters | None = None
    ) -> TenantPacing:
        return cls(per_second, CONFIG_CHANGES_BURST, kind=CONFIG_CHANGES, counters=counters)

    @classmethod
    def for_partitions(
        cls,
        per_second: float = PARTITION_MUTATIONS_PER_SECOND,
        counters: UnitCounters | None = None,
    ) -> TenantPacing:
        burst = per_second * PARTITION_MUTATIONS_BURST_SECONDS
        return cls(per_second, burst, kind=PARTITION_MUTATIONS, counters=counters)

    def budget(self, tenant_id: str, now_ms: int, *, strict: bool = False) -> PacedBudget:
        """One request's budget: `strict` refuses as soon as the burst is spent."""
        return PacedBudget(self, tenant_id, now_ms, 0 if strict else MAX_BACKLOG_MS)

    def throttle_ms(self, tenant_id: str, now_ms: int) -> int:
        """How far the tenant is past its burst (ms; 0: not past it)."""
        return min(max(0, int(self.backlog_ms(tenant_id, now_ms))), INT32_MAX)

    def record(self, tenant_id: str, units: int, now_ms: int) -> None:
        """Charge `units` taken through this gateway (counted for the fleet)."""
        arrival = max(self._arrival.get(tenant_id, 0.0), float(now_ms))
        self._arrival[tenant_id] = arrival + units * self._interval_ms
        if self._counters is not None:
            self._counters.add(self.kind, tenant_id, units, now_ms)

    def apply(self, tenant_id: str, units: int, at_ms: int) -> None:
        """Charge `units` (another gateway's, learnt at `at_ms`) without counting them here, at
        most up to `PEER_DEBT_MS` past the burst."""
        before = self._arrival.get(tenant_id, 0.0)
        arrival = max(before, float(at_ms)) + units * self._interval_ms
        edge = at_ms + self._burst_ms + PEER_DEBT_MS
        self._arrival[tenant_id] = max(before, min(arrival, edge))

    def backlog_ms(self, tenant_id: str, now_ms: int) -> float:
        """How far the tenant's theoretical arrival is past its burst (negative: burst left)."""
        return self._arrival.get(tenant_id, 0.0) - now_ms - self._burst_ms


class PacedBudget:
    """One request's view of its tenant's pacing (the filters' `MutationBudget`: `exceeded()`
    before each topic, `record(n)` for each forwarded: 1 per config resource, its partitions
    per topic created, deleted or grown)."""

    __slots__ = ("_backlog_ms", "_now_ms", "_pacing", "_tenant")

    def __init__(self, pacing: TenantPacing, tenant_id: str, now_ms: int, backlog_ms: int) -> None:
        self._pacing, self._tenant, self._now_ms = pacing, tenant_id, now_ms
        self._backlog_ms = backlog_ms

    def exceeded(self) -> bool:
        return self._pacing.backlog_ms(self._tenant, self._now_ms) > self._backlog_ms

    def record(self, partitions: int) -> None:
        self._pacing.record(self._tenant, partitions, self._now_ms)
