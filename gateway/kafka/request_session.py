"""What the per-API request paths (`gateway.kafka.produce`, `fetch`, `kio_path`) use of a session.

Owns: `RequestSession`, the protocol `gateway.kafka.session.Session` implements, so the paths the
session dispatches to depend on this narrow interface rather than importing the session back.
Protocol only; runs on the event loop like the session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from gateway.kafka.exchange import Buffer, Exchange
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.services import SessionServices, TenantState
from tenancy.domain import Principal


class RequestSession(Protocol):
    services: SessionServices
    metrics: GatewayMetrics
    peer_host: str
    principal: Principal | None

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
