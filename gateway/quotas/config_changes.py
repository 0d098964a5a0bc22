"""How fast a tenant may change topic and group configs through this gateway process (the
gateway's `tenant.config.changes.per.second`; docs/security.md, limits).

A config change is cheap for the tenant and dear for the fleet: in ZooKeeper mode each one writes
the entity's znode and a `/config/changes` notice that every broker reads and acts on, and the
notices stay 15 minutes (Kafka's expiry), each broker listing all of them at every new one. One
client alternating a topic's `retention.ms` made 232 changes a second straight at a broker,
4,650 notices in 20 s. Kafka has no quota for it (KIP-599 counts partitions created and deleted).

Owns `ConfigChangePacing`: per tenant a virtual-scheduling limiter (GCRA) at `per_second`
changes, with a burst of `burst` (a tool applying fifty topics' settings at once is not slowed).
Each resource an AlterConfigs or IncrementalAlterConfigs would change (not `validate_only`)
moves the tenant's theoretical arrival time on by 1 / `per_second`; a request ahead of it by
more than the burst gets a throttle of the difference: its answer says so (`throttle_time_ms`)
and its connection is muted that long, as for any quota. Nothing is refused; with many
connections the throttles grow with what they asked, so the tenant's changes follow the rate.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

DEFAULT_PER_SECOND = 5
DEFAULT_BURST = 50


class ConfigChangePacing:
    def __init__(self, per_second: float = DEFAULT_PER_SECOND, burst: int = DEFAULT_BURST) -> None:
        if per_second <= 0:
            raise ValueError("config changes per second must be positive")
        self._interval_ms = 1000.0 / per_second
        self._burst_ms = burst * self._interval_ms
        self._arrival: dict[str, float] = {}  # tenant → theoretical arrival time (ms)

    def charge(self, tenant_id: str, changes: int, now_ms: int) -> int:
        """Count `changes` of the tenant's; the throttle (ms) the request earns (0: none)."""
        if changes <= 0:
            return 0
        arrival = max(self._arrival.get(tenant_id, 0.0), float(now_ms))
        arrival += changes * self._interval_ms
        self._arrival[tenant_id] = arrival
        return max(0, int(arrival - now_ms - self._burst_ms))
