"""ACL enforcement for one tenant, with Kafka's authorizer semantics over `tenancy.domain.Acl`.

Owns the decision "may principal P from host H do operation O on resource R", mirroring Kafka's
`AclAuthorizer` / `StandardAuthorizer` (KIP-290 pattern types): a binding matches by resource
type and by literal name, the literal `*` wildcard, or a prefix of the name; by principal (equal,
or `User:*`); by host (equal, or `*`); by operation (equal, or ALL). Any matching DENY wins; else
a matching ALLOW is needed. ALLOW bindings also grant the operations Kafka implies (READ, WRITE,
DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS); DENY bindings deny only
their own operation (or everything, for ALL). `allowed_any` is Kafka's `authorizeByResourceType`
(KIP-679), without its super-user probe: we have no super users.

Tenant policy: the tenant's explicit `authorization` setting (`tenancy.plan_rules.AUTHORIZATIONS`),
never whether it has ACLs. "acls" (`required=True`, the default) is Kafka's deny-by-default
(`allow.everyone.if.no.acl.found=false`): only what an ALLOW grants. "open" (`required=False`) is
Kafka's `allow.everyone.if.no.acl.found=true`: a resource that no binding names (of any principal,
operation or permission) is open to the tenant's service accounts; a resource some binding names
is decided by the bindings as above. Deleting a tenant's last ACL thus changes nothing in
"acls" mode. Resource names are the tenant's own (no fleet prefix). `__init__` indexes the bindings so that
`allowed`, which runs per request, is a few set and dict look-ups. Immutable after construction;
pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from tenancy.acls import OPERATIONS, RESOURCE_TYPES, WILDCARD
from tenancy.domain import Acl

ALL: Final = "ALL"
ANY_PRINCIPAL: Final = "User:*"
_IMPLIED: Final = {  # what an ALLOW of the key also allows (Kafka's IMPLIES_DESCRIBE and co.)
    "READ": ("DESCRIBE",),
    "WRITE": ("DESCRIBE",),
    "DELETE": ("DESCRIBE",),
    "ALTER": ("DESCRIBE",),
    "ALTER_CONFIGS": ("DESCRIBE_CONFIGS",),
}
_IPV4_MAPPED: Final = "::ffff:"

Entry = tuple[str, str, str]  # (principal, host, operation)


@dataclass
class _Rules:
    """The entries of the bindings that share one resource pattern."""

    deny: set[Entry] = field(default_factory=set)
    allow: set[Entry] = field(default_factory=set)  # implied operations included


@dataclass
class _TypeIndex:
    literal: dict[str, _Rules] = field(default_factory=dict)  # `*` included, as Kafka keeps it
    prefixed: dict[str, _Rules] = field(default_factory=dict)
    prefix_lengths: tuple[int, ...] = ()
    bindings: list[Acl] = field(default_factory=list)

    def add(self, acl: Acl) -> None:
        patterns = self.literal if acl.pattern_type == "literal" else self.prefixed
        rules = patterns.setdefault(acl.resource_name, _Rules())
        if acl.permission == "deny":
            rules.deny.add((acl.principal, acl.host, acl.operation))
        else:
            for operation in (acl.operation, *_IMPLIED.get(acl.operation, ())):
                rules.allow.add((acl.principal, acl.host, operation))
        self.bindings.append(acl)

    def seal(self) -> None:
        """Called once every binding is added: the prefix lengths `matching` tries."""
        self.prefix_lengths = tuple(sorted({len(prefix) for prefix in self.prefixed}))

    def matching(self, name: str) -> Iterable[_Rules]:
        for key in (name, WILDCARD):
            if (rules := self.literal.get(key)) is not None:
                yield rules
        for length in self.prefix_lengths:
            if length > len(name):
                break
            if (rules := self.prefixed.get(name[:length])) is not None:
                yield rules


def _normal(acl: Acl) -> Acl:
    pattern, permission = acl.pattern_type.lower(), acl.permission.lower()
    if pattern not in ("literal", "prefixed") or permission not in ("allow", "deny"):
        raise ValueError(f"ACL {acl.id}: unknown pattern type or permission")
    return Acl(
        acl.id,
        acl.tenant_id,
        acl.resource_type.upper(),
        pattern,
        acl.resource_name,
        acl.operation.upper(),
        permission,
        acl.principal,
        acl.host,
    )


def _check(operation: str, resource_type: str) -> None:
    if operation not in OPERATIONS or resource_type not in RESOURCE_TYPES:
        raise ValueError(f"cannot authorize {operation!r} on a {resource_type!r}")


def _client_host(host: str) -> str:
    """An IPv4 client on a dual-stack socket shows as `::ffff:a.b.c.d`; ACLs name `a.b.c.d`
    (Java's `getHostAddress`, which Kafka compares, gives the IPv4 form too)."""
    return host[len(_IPV4_MAPPED) :] if host.startswith(_IPV4_MAPPED) and "." in host else host


def _asked(principal: str, host: str, operation: str) -> set[Entry]:
    """The entries that would match this request: exact or wildcard principal, host, operation."""
    return {
        (who, where, what)
        for who in (principal, ANY_PRINCIPAL)
        for where in (host, WILDCARD)
        for what in (operation, ALL)
    }


def _dominated(name: str, deny_prefixes: set[str]) -> bool:
    return any(name[:length] in deny_prefixes for length in range(1, len(name) + 1))


class Authorizer:
    def __init__(self, acls: Sequence[Acl], *, required: bool = True) -> None:
        self.required = required
        self._types: dict[str, _TypeIndex] = {}
        for acl in map(_normal, acls):
            self._types.setdefault(acl.resource_type, _TypeIndex()).add(acl)
        for index in self._types.values():
            index.seal()

    def allowed(
        self, principal: str, host: str, operation: str, resource_type: str, name: str
    ) -> bool:
        _check(operation, resource_type)
        index = self._types.get(resource_type)
        rules = [] if index is None else list(index.matching(name))
        if not rules:
            return not self.required  # no binding names the resource
        asked = _asked(principal, _client_host(host), operation)
        if any(not asked.isdisjoint(found.deny) for found in rules):
            return False
        return any(not asked.isdisjoint(found.allow) for found in rules)

    def allowed_any(self, principal: str, host: str, operation: str, resource_type: str) -> bool:
        """Kafka's `authorizeByResourceType`: is `operation` allowed on at least one resource of
        the type, i.e. some ALLOW that no DENY dominates (a literal by the same literal or a
        covering prefix, a prefix by a covering prefix, anything by the `*` wildcard)? Unlike
        `allowed`, only the exact operation or ALL counts, as in Kafka. In "open" mode a resource
        no binding names is allowed, and one exists unless a literal `*` binding names them all."""
        _check(operation, resource_type)
        index = self._types.get(resource_type, _TypeIndex())
        if not self.required and WILDCARD not in index.literal:
            return True
        asked = _asked(principal, _client_host(host), operation)
        allow: dict[str, set[str]] = {"literal": set(), "prefixed": set()}
        deny: dict[str, set[str]] = {"literal": set(), "prefixed": set()}
        for acl in index.bindings:
            if (acl.principal, acl.host, acl.operation) not in asked:
                continue
            literal_wildcard = acl.pattern_type == "literal" and acl.resource_name == WILDCARD
            if acl.permission == "deny" and literal_wildcard:
                return False
            (deny if acl.permission == "deny" else allow)[acl.pattern_type].add(acl.resource_name)
        if WILDCARD in allow["literal"]:
            return True
        if any(
            name not in deny["literal"] and not _dominated(name, deny["prefixed"])
            for name in allow["literal"]
        ):
            return True
        return any(not _dominated(name, deny["prefixed"]) for name in allow["prefixed"])
