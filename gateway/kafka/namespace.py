"""A tenant's namespace in the fleet: `<tenant id>_<name>` for every tenant resource name.

Owns: adding the prefix on the way in (`fleet`), stripping it on the way out (`local`), and the
rule that anything not carrying this tenant's prefix is not the tenant's (fail closed). Tenant ids
never contain `_` or `.` (docs/gateway.md, "Names"), so the first `_` ends the prefix and
no two tenants' names collide, not even under Kafka's rule that `.` and `_` collide in topic names.
Internal topics (`__consumer_offsets`, `__transaction_state`, `__usage`) start with `_`, which no
tenant id does, so they are never a tenant's. Topic names get at most 249 characters in the fleet,
hence `max_topic_length` for the tenant. Pure; thread-safe (immutable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_FLEET_TOPIC_LENGTH = 249
SEPARATOR = "_"
# A word start that reads as `<tenant id>_` (tenant ids: [a-z][a-z0-9-]{2,15}).
_PREFIX_LIKE = re.compile(r"(?<![A-Za-z0-9._-])([a-z][a-z0-9-]{2,15})_")
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__usage")


@dataclass(frozen=True, slots=True)
class TenantNamespace:
    tenant_id: str
    prefix: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.tenant_id or SEPARATOR in self.tenant_id or "." in self.tenant_id:
            raise ValueError(f"tenant id {self.tenant_id!r} cannot be a namespace")
        object.__setattr__(self, "prefix", self.tenant_id + SEPARATOR)

    @property
    def max_topic_length(self) -> int:
        """The longest topic name this tenant may use (249 minus the prefix)."""
        return MAX_FLEET_TOPIC_LENGTH - len(self.prefix)

    def fleet(self, name: str) -> str:
        """The fleet name of one of the tenant's names."""
        return self.prefix + name

    def fleet_or_none(self, name: str | None) -> str | None:
        return None if name is None else self.prefix + name

    def local(self, fleet_name: str) -> str | None:
        """The tenant's name for a fleet name, or None when it is not the tenant's."""
        if fleet_name.startswith(self.prefix):
            return fleet_name[len(self.prefix) :]
        return None

    def owns(self, fleet_name: str) -> bool:
        return fleet_name.startswith(self.prefix)

    def scrub(self, message: str | None) -> str | None:
        """An error message with the tenant's prefix removed, or None (fail closed) when it could
        name something not the tenant's: an internal topic, or any word that starts like another
        tenant's prefix (`<tenant id>_`). A tenant's own names that merely look like a prefix
        (`foo_bar`) lose their message too: a missing message costs less than a leak."""
        if message is None:
            return None
        if "__" in message or any(internal in message for internal in INTERNAL_TOPICS):
            return None
        for match in _PREFIX_LIKE.finditer(message):
            if match.group(1) != self.tenant_id:
                return None
        return message.replace(self.prefix, "")


def tenant_of(fleet_name: str) -> tuple[str, str] | None:
    """(tenant id, tenant's name) of a fleet name, or None for internal or unprefixed names."""
    tenant, sep, name = fleet_name.partition(SEPARATOR)
    if not sep or not tenant or not name or not tenant[0].isalpha() or "." in tenant:
        return None
    return tenant, name
