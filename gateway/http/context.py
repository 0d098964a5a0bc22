"""What an HTTP request is handed: the gateway's shared parts, and the caller behind the request.

Owns: `HttpServices` (the same `SessionServices` the Kafka listeners use — authenticator, tenant
directory, throttling, meter, fleet view, storage use — plus the fleet client the HTTP side talks
through, the store's billing reads for a tenant's own usage and invoices (`gateway.http.usage`)
and its own settings) and `Caller` (one authenticated request: principal, tenant state,
peer host, client id). Every check a route makes goes through the caller's `TenantPolicy`
(`gateway.policy`), the same policy stage a Kafka session uses: ACLs under the principal
`User:<service account>`, quota subjects (tenant, service account, client id), usage keys. The
client id of an HTTP request is its `X-Client-Id` header, else its `User-Agent`, kept as sent
(invalid UTF-8 bytes read as U+FFFD), as a Kafka client's header client id is: the quota chain sees
it whole, usage meters the policy's bounded form. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from brokers.client import Cluster
from gateway.http.errors import ApiError
from gateway.kafka.services import QuotaSubject, SessionServices, TenantState
from gateway.policy import Identity, TenantPolicy
from tenancy.billing_store import UsageFilter
from tenancy.domain import Principal

_UNDECODABLE = re.compile("[\ud800-\udfff]")  # bytes aiohttp kept with surrogateescape


@dataclass(frozen=True, slots=True)
class HttpSettings:
    bootstrap: str  # the fleet's brokers (consumer instances open their own connections)
    consumer_instance_timeout_ms: int = 300_000
    max_poll_wait_ms: int = 30_000
    default_poll_wait_ms: int = 1_000
    default_max_bytes: int = 1_048_576
    quota_window_ms: int = 11_000  # quota.window.num × quota.window.size.seconds


class BillingReader(Protocol):
    """The tenant store's billing reads (`tenancy.billing_store.BillingReads`); blocking."""

    def usage(self, wanted: UsageFilter) -> list[dict[str, Any]]: ...
    def invoices(self, tenant: str) -> list[dict[str, Any]]: ...
    def invoice(self, tenant: str, invoice_id: str) -> dict[str, Any]: ...


@dataclass(slots=True)
class HttpServices:
    session: SessionServices
    cluster: Cluster  # produce and admin traffic (consumer instances have their own)
    settings: HttpSettings
    make_cluster: Callable[[str], Cluster]  # a new fleet client with this client id
    verify_operator: Callable[[str], str | None] | None = None  # the store's operator tokens
    billing: BillingReader | None = None  # a tenant's own usage and invoices (gateway.http.usage)


@dataclass(slots=True)
class Caller:
    principal: Principal
    tenant_state: TenantState
    host: str
    client_id: str
    services: HttpServices
    login_epoch: int | None = None  # the verification cache's epoch taken before the login
    policy: TenantPolicy = field(init=False)
    _cluster_id: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        session = self.services.session
        directory, tenant_id, at_login = session.directory, self.tenant_id, self.tenant_state
        self.policy = TenantPolicy(
            Identity(self.principal, self.host, self.client_id),
            lambda: directory.current(tenant_id) or at_login,  # no cycle back to the caller
            quotas=session.throttling,
            storage=session.storage,
            meter=session.meter,
            clock_ms=session.clock_ms,
        )

    @property
    def state(self) -> TenantState:
        """The tenant's current state (ACL and limit changes apply at once)."""
        current = self.services.session.directory.current(self.principal.tenant_id)
        return current or self.tenant_state

    def cluster_id(self) -> str:
        """The tenant's virtual cluster id (as its Kafka clients see it in Metadata), worked out
        once per caller: a caller lives one request, or a login's reuse (at most a second)."""
        if self._cluster_id is None:
            self._cluster_id = self.services.session.fleet.cluster_id(self.tenant_id)
        return self._cluster_id

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    @property
    def kafka_principal(self) -> str:
        return self.policy.identity.kafka_principal

    @property
    def subject(self) -> QuotaSubject:
        return self.policy.subject()

    def allowed(self, operation: str, resource_type: str, name: str) -> bool:
        return self.policy.allowed(operation, resource_type, name)

    def require(self, operation: str, resource_type: str, name: str) -> None:
        """403 unless the ACLs allow it (the message names only the tenant's own resource)."""
        if not self.policy.allowed(operation, resource_type, name):
            raise ApiError(
                403, f"not authorized to {operation} {resource_type.lower()} {name!r}", 40301
            )

    def meter(self, topic: str | None, **counters: int) -> None:
        self.policy.meter(topic, **counters)

    def fleet(self, name: str) -> str:
        return self.state.namespace.fleet(name)

    def local(self, fleet_name: str) -> str | None:
        return self.state.namespace.local(fleet_name)


def client_id_of(headers: dict[str, str] | object) -> str:
    """`X-Client-Id`, else `User-Agent`, else empty (as a Kafka client without client.id); as
    sent, but for undecodable bytes, which read as U+FFFD (a Kafka client id is valid UTF-8)."""
    get = getattr(headers, "get", None)
    assert get is not None
    value = str(get("X-Client-Id") or get("User-Agent") or "")
    return value if _UNDECODABLE.search(value) is None else _UNDECODABLE.sub("\ufffd", value)
