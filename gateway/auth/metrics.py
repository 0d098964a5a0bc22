"""Prometheus counters of SASL authentications at the gateway.

Owns: successful logins per mechanism and tenant, and failures per mechanism only (a failed
client has no tenant we could name without telling it whether its key exists, and an unbounded
label of key ids would be worse); logins answered from the verification cache; attempts refused
by the failed-login backoff without a check; and the scrypt checks run on the hashing threads by
outcome (`match`, `mismatch`, `busy`: no capacity within the queue bounds). Re-authentications
(KIP-368) count as logins. A registry is injected so tests and several gateways in one process do
not collide. Thread-safe (prometheus).
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
        self._cached = Counter(
            "pier_gateway_authentication_cache_hits",
            "Logins whose credentials were answered from the verification cache",
            ["mechanism"],
            registry=registry,
        )
        self._throttled = Counter(
            "pier_gateway_authentication_throttled",
            "Login attempts refused without a check by the failed-login backoff",
            ["mechanism"],
            registry=registry,
        )
        self._secret_checks = Counter(
            "pier_gateway_secret_checks",
            "scrypt checks of PLAIN / HTTP Basic secrets, by outcome (busy: no hashing capacity)",
            ["outcome"],
            registry=registry,
        )

    def authenticated(self, mechanism: str, tenant: str) -> None:
        self._authentications.labels(mechanism, tenant).inc()

    def failed(self, mechanism: str) -> None:
        self._failures.labels(mechanism).inc()

    def cache_hit(self, mechanism: str) -> None:
        self._cached.labels(mechanism).inc()

    def throttled(self, mechanism: str) -> None:
        self._throttled.labels(mechanism).inc()

    def secret_checked(self, outcome: str) -> None:
        self._secret_checks.labels(outcome).inc()
