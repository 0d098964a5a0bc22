"""Prometheus metrics of client-quota enforcement, per tenant and quota type.

Owns: throttle time handed out (Kafka's per-sensor `throttle-time`, summed here), throttled
responses, topics refused with THROTTLING_QUOTA_EXCEEDED, and how many quota sensors are held
(Kafka's sensors are per user/client-id, which would be unbounded labels; tenants are not). The
`quota` label is the Kafka quota name (`producer_byte_rate`, `consumer_byte_rate`,
`request_percentage`, `controller_mutation_rate`) whose throttle was applied, or `tenant_<name>`
when the tenant-wide cap was the larger. A registry is injected so tests and several gateways in
one process do not collide. Thread-safe (prometheus).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class QuotaMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._throttle_ms = Counter(
            "pier_gateway_throttle_time_ms",
            "Milliseconds of throttle handed to clients, by the quota that earned it",
            ["tenant", "quota"],
            registry=registry,
        )
        self._throttled = Counter(
            "pier_gateway_throttled_responses",
            "Responses sent with a throttle time (the channel is muted for it)",
            ["tenant", "quota"],
            registry=registry,
        )
        self._refused = Counter(
            "pier_gateway_mutations_refused",
            "Topics refused with THROTTLING_QUOTA_EXCEEDED (strict controller_mutation_rate)",
            ["tenant"],
            registry=registry,
        )
        self._sensors = Gauge(
            "pier_gateway_quota_sensors",
            "Quota sensors held (one per tenant, user and client id as Kafka keys them)",
            ["quota"],
            registry=registry,
        )

    def throttled(self, tenant: str, quota: str, throttle_ms: int) -> None:
        """One response throttled for `throttle_ms` because of `quota`; nothing when not > 0."""
        if throttle_ms > 0:
            self._throttle_ms.labels(tenant, quota).inc(throttle_ms)
            self._throttled.labels(tenant, quota).inc()

    def mutation_refused(self, tenant: str, topics: int = 1) -> None:
        self._refused.labels(tenant).inc(topics)

    def sensors(self, quota: str, count: int) -> None:
        self._sensors.labels(quota).set(count)
