"""Prometheus counters of SASL authentications at the gateway.

Owns: successful logins per mechanism and tenant, and failures per mechanism only (a failed
client has no tenant we could name without telling it whether its key exists, and an unbounded
label of key ids would be worse). Re-authentications (KIP-368) count as logins. A registry is
injected so tests and several gateways in one process do not collide. Thread-safe (prometheus).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class AuthMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._authentications = Counter(
            "pier_gateway_authentications",
            "Successful SASL authentications (re-authentications included)",
            ["mechanism", "tenant"],
            registry=registry,
        )
        self._failures = Counter(
            "pier_gateway_authentication_failures",
            "Failed SASL authentications, whatever the cause",
            ["mechanism"],
            registry=registry,
        )

    def authenticated(self, mechanism: str, tenant: str) -> None:
        self._authentications.labels(mechanism, tenant).inc()

    def failed(self, mechanism: str) -> None:
        self._failures.labels(mechanism).inc()
