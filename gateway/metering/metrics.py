"""Prometheus metrics of the usage writer.

Owns: `UsageMetrics`. A registry is injected so tests and several gateways in one process do not
collide. Thread-safe (prometheus).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class UsageMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.written = Counter(
            "pier_gateway_usage_records_written",
            "Usage records written to __usage",
            registry=registry,
        )
        self.lost = Counter(
            "pier_gateway_usage_records_lost",
            "Usage records dropped unwritten (over max_pending, refused, or left at stop)",
            registry=registry,
        )
        self.flush_failures = Counter(
            "pier_gateway_usage_flush_failures",
            "Flush rounds that left records unwritten",
            registry=registry,
        )
        self.pending = Gauge(
            "pier_gateway_usage_pending_records",
            "Usage records waiting to be written",
            registry=registry,
        )
        self.last_flush = Gauge(
            "pier_gateway_usage_last_flush_timestamp_seconds",
            "When a flush round last wrote everything pending (Unix time)",
            registry=registry,
        )
