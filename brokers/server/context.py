"""What a handler knows about the request beyond its body: header, peer, principal.

Owns: `RequestContext`. Immutable per request; safe to pass anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokers.wire.headers import RequestHeader


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    client_host: str
    connection_id: str
    principal: str = "User:ANONYMOUS"

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""
