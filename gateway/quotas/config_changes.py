"""How fast a tenant may change topic configs through this gateway process (the gateway's
`tenant.config.changes.per.second`; docs/security.md, limits).

A config change is cheap for the tenant and dear for the fleet: in ZooKeeper mode each one writes
the topic's config znode and a `/config/changes` notice that every broker lists, reads and acts
on, and the notices stay 15 minutes (Kafka's expiry). One client alternating a topic's
`retention.ms` made 232 changes a second straight at a broker (4,650 notices in 20 s) and 1,077 a
second through the gateway. Kafka has no quota for it (KIP-599 counts partitions created and
deleted).

Owns `ConfigChangePacing`: per tenant a virtual-scheduling limiter (GCRA) at `per_second`
changes with a burst of `burst` (a tool applying fifty topics' settings at once is not slowed),
and `ConfigChangeBudget`, one request's view of it, which the config filters ask before each
topic resource they would forward (`exceeded`) and charge for it (`record`), as KIP-599's
mutation budget: each change moves the tenant's theoretical arrival time on by 1 / `per_second`.
A request ahead of it by more than the burst earns a throttle of the difference (`throttle_ms`):
its answer says so and its connection is muted from then on, before the next request is taken.
A resource is refused THROTTLING_QUOTA_EXCEEDED (not forwarded) once the tenant is
`MAX_BACKLOG_MS` past its burst on the Kafka path, and as soon as it is past its burst for a
strict caller (the HTTP API, which answers 429 rather than hold a request), so no request, pipeline
or fresh connection gets more through than the rate, the burst and that backlog. Runs on the
event loop; not thread-safe.
"""

from __future__ import annotations

DEFAULT_PER_SECOND = 5
DEFAULT_BURST = 50
MAX_BACKLOG_MS = 30_000  # the longest throttle a change earns; past it changes are refused


class ConfigChangePacing:
    def __init__(self, per_second: float = DEFAULT_PER_SECOND, burst: int = DEFAULT_BURST) -> None:
        if per_second <= 0:
            raise ValueError("config changes per second must be positive")
        self._interval_ms = 1000.0 / per_second
        self._burst_ms = burst * self._interval_ms
        self._arrival: dict[str, float] = {}  # tenant → theoretical arrival time (ms)

    def budget(self, tenant_id: str, now_ms: int, *, strict: bool = False) -> ConfigChangeBudget:
        """One request's budget: `strict` refuses as soon as the burst is spent."""
        return ConfigChangeBudget(self, tenant_id, now_ms, 0 if strict else MAX_BACKLOG_MS)

    def throttle_ms(self, tenant_id: str, now_ms: int) -> int:
        """How far the tenant is past its burst (ms; 0: not past it)."""
        return max(0, int(self._backlog(tenant_id, now_ms)))

    def record(self, tenant_id: str, changes: int, now_ms: int) -> None:
        arrival = max(self._arrival.get(tenant_id, 0.0), float(now_ms))
        self._arrival[tenant_id] = arrival + changes * self._interval_ms

    def _backlog(self, tenant_id: str, now_ms: int) -> float:
        return self._arrival.get(tenant_id, 0.0) - now_ms - self._burst_ms


class ConfigChangeBudget:
    """One AlterConfigs / IncrementalAlterConfigs request's view of its tenant's pacing (the
    filters' `MutationBudget`: `exceeded()` before each topic resource, `record(1)` for each
    forwarded)."""

    __slots__ = ("_backlog_ms", "_now_ms", "_pacing", "_tenant")

    def __init__(
        self, pacing: ConfigChangePacing, tenant_id: str, now_ms: int, backlog_ms: int
    ) -> None:
        self._pacing, self._tenant, self._now_ms = pacing, tenant_id, now_ms
        self._backlog_ms = backlog_ms

    def exceeded(self) -> bool:
        return self._pacing._backlog(self._tenant, self._now_ms) > self._backlog_ms

    def record(self, partitions: int) -> None:
        self._pacing.record(self._tenant, partitions, self._now_ms)
