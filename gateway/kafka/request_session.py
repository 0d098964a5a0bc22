"""What the per-API request paths (`gateway.kafka.produce`, `fetch`, `kio_path`) use of a session.

Owns: `RequestSession`, the protocol `gateway.kafka.session.Session` implements, so the paths the
session dispatches to depend on this narrow interface rather than importing the session back; and
`session_policy`, the session's `TenantPolicy` (the policy stage, `gateway.policy`), built once at
login. Runs on the event loop like the session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from gateway.kafka.byte_budget import Charge
from gateway.kafka.exchange import Buffer, Exchange
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.services import SessionServices, TenantState
from gateway.policy import Identity, TenantPolicy
from tenancy.domain import Principal


class RequestSession(Protocol):
    services: SessionServices
    metrics: GatewayMetrics
    peer_host: str
    principal: Principal | None
    policy: TenantPolicy | None  # set at login

    @property
    def tenant(self) -> TenantState | None: ...

    def forward(
        self,
        exchange: Exchange,
        body: Sequence[Buffer],
        body_size: int,
        on_response: Callable[[memoryview | None], None] | None,
    ) -> None: ...

    def finish(
        self, exchange: Exchange, parts: Sequence[Buffer] | None, throttle_ms: int
    ) -> None: ...

    def meter(self, topic: str | None, **counters: int) -> None: ...

    def throttled(self, throttle_ms: int) -> None: ...

    def refuse(self, reason: str) -> None: ...

    def hold_answer_bytes(self, wanted: int) -> Charge | None: ...

    def answers_next(self, exchange: Exchange) -> bool: ...

    def write_through(self, parts: Sequence[Buffer]) -> None: ...

    def splice_fd(self) -> int | None: ...

    def release_answer_bytes(self, charge: Charge) -> None: ...


def session_policy(
    services: SessionServices,
    principal: Principal,
    peer_host: str,
    client_id: str,
    at_login: TenantState,
) -> TenantPolicy:
    """The policy of a session that logged in as `principal` with `client_id` (the client id of
    its first requests: usage is metered under it); the tenant's state is read fresh per decision."""
    directory, tenant_id = services.directory, principal.tenant_id
    return TenantPolicy(
        Identity(principal, peer_host, client_id),
        lambda: directory.current(tenant_id) or at_login,
        quotas=services.throttling,
        storage=services.storage,
        meter=services.meter,
        clock_ms=services.clock_ms,
    )
