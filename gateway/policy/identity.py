"""Who is behind a request: `Identity` (principal, peer host, client id) and `QuotaSubject`.

Owns: the one place Kafka's principal string is built (`User:<service account id>`, docs/gateway.md
"The policy stage"), the quota subject of a request (Kafka's (user, client-id) within a tenant)
and the usage key it is metered under. Pure; thread-safe (immutable).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.metering.meter import UsageKey
from gateway.policy.names import usage_client_id
from tenancy.domain import Principal


def kafka_principal(principal: Principal) -> str:
    """Kafka's principal string of an authenticated service account: `User:<service account>`."""
    return f"User:{principal.service_account_id}"


@dataclass(frozen=True, slots=True)
class QuotaSubject:
    """Who a request is charged to: Kafka's (user, client-id) within a tenant."""

    tenant: str
    user: str
    client_id: str


@dataclass(frozen=True, slots=True)
class Identity:
    """The authenticated client behind a request. `client_id` is as the client sent it."""

    principal: Principal
    host: str
    client_id: str
    kafka_principal: str = field(init=False, compare=False)
    usage_client_id: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kafka_principal", kafka_principal(self.principal))
        object.__setattr__(self, "usage_client_id", usage_client_id(self.client_id))

    def with_client_id(self, client_id: str) -> Identity:
        """This identity for a request that names its own client id (Kafka allows it)."""
        if client_id == self.client_id:
            return self
        return Identity(self.principal, self.host, client_id)

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    def subject(self, client_id: str | None = None) -> QuotaSubject:
        """The quota subject; `client_id` is a request's own (Kafka may change it per request)."""
        chosen = self.client_id if client_id is None else client_id
        return QuotaSubject(self.principal.tenant_id, self.principal.service_account_id, chosen)

    def usage_key(self, topic: str | None) -> UsageKey:
        return UsageKey(
            self.principal.tenant_id, self.principal.service_account_id, self.usage_client_id, topic
        )
