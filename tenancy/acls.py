"""ACL bindings of a tenant, in Kafka's model (KIP-290 pattern types), for the gateway to enforce.

Resource names are the tenant's own names (without the fleet prefix, which the gateway adds).
Checks mirror Kafka's `CreateAcls` validation: CLUSTER has the single resource `kafka-cluster`; the
`*` wildcard is a literal pattern only; ANY/UNKNOWN operations are not bindings. Principals are
`User:<service account id>` of the same tenant (ForbiddenError for another tenant's) or `User:*`;
hosts are `*` or an IP address. Enum values are accepted in any case and stored in Kafka's
spelling (upper-case types and operations, lower-case pattern and permission, as the API uses).
An identical binding is a ConflictError. Mixin of `TenantStore`; thread-safe.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, fields

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tenancy.domain import Acl, Page
from tenancy.errors import ConflictError, NotFoundError, ValidationError
from tenancy.ids import new_acl_id
from tenancy.models import AclRow
from tenancy.pagination import keyset_page
from tenancy.service_accounts import tenant_account
from tenancy.store_base import MAX_NAME, StoreCore, check_text

RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
PATTERN_TYPES = ("literal", "prefixed")
OPERATIONS = (
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "ALL",
)
PERMISSIONS = ("allow", "deny")
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
USER_PREFIX = "User:"


@dataclass(frozen=True)
class _Binding:
    resource_type: str
    pattern_type: str
    resource_name: str
    operation: str
    permission: str
    principal: str
    host: str


BINDING_FIELDS = tuple(field.name for field in fields(_Binding))


def _choice(field: str, value: object, allowed: tuple[str, ...], upper: bool) -> str:
    if isinstance(value, str):
        normal = value.upper() if upper else value.lower()
        if normal in allowed:
            return normal
    raise ValidationError(field, f"must be one of {', '.join(allowed)}")


def _check_host(host: object) -> str:
    if host == WILDCARD:
        return WILDCARD
    try:
        return str(ipaddress.ip_address(host))  # type: ignore[arg-type]
    except ValueError:
        raise ValidationError("host", "must be '*' or an IP address") from None


def _check_binding(binding: _Binding) -> _Binding:
    resource_type = _choice("resource_type", binding.resource_type, RESOURCE_TYPES, upper=True)
    pattern_type = _choice("pattern_type", binding.pattern_type, PATTERN_TYPES, upper=False)
    name = check_text(
        "resource_name", binding.resource_name, max_length=MAX_NAME, allow_empty=False
    )
    if resource_type == "CLUSTER" and (name != CLUSTER_NAME or pattern_type != "literal"):
        raise ValidationError("resource_name", f"CLUSTER ACLs name the literal {CLUSTER_NAME!r}")
    if name == WILDCARD and pattern_type != "literal":
        raise ValidationError("pattern_type", "the '*' wildcard is a literal pattern")
    principal = binding.principal
    if not isinstance(principal, str) or not principal.startswith(USER_PREFIX):
        raise ValidationError("principal", "must be User:<service account id> or User:*")
    return _Binding(
        resource_type,
        pattern_type,
        name,
        _choice("operation", binding.operation, OPERATIONS, upper=True),
        _choice("permission", binding.permission, PERMISSIONS, upper=False),
        principal,
        _check_host(binding.host),
    )


def acl_from_row(row: AclRow) -> Acl:
    return Acl(
        row.id,
        row.tenant_id,
        row.resource_type,
        row.pattern_type,
        row.resource_name,
        row.operation,
        row.permission,
        row.principal,
        row.host,
    )


class AclCommands(StoreCore):
    def create_acl(
        self,
        tenant_id: str,
        *,
        resource_type: str,
        pattern_type: str,
        resource_name: str,
        operation: str,
        permission: str,
        principal: str,
        host: str = "*",
        actor: str,
    ) -> Acl:
        binding = _check_binding(
            _Binding(
                resource_type, pattern_type, resource_name, operation, permission, principal, host
            )
        )
        try:
            with self._db.write() as session:
                self._live_tenant(session, tenant_id)
                self._check_principal(session, tenant_id, binding.principal)
                if self._existing(session, tenant_id, binding) is not None:
                    raise ConflictError("an identical ACL binding exists")
                row = AclRow(
                    id=new_acl_id(), tenant_id=tenant_id, created_at=self._now(), **asdict(binding)
                )
                session.add(row)
                self._journal(
                    session,
                    actor=actor,
                    action="acl.created",
                    tenant_id=tenant_id,
                    subject=row.id,
                    details=asdict(binding),
                    at=row.created_at,
                )
                return acl_from_row(row)
        except IntegrityError:
            raise ConflictError("an identical ACL binding exists") from None

    @staticmethod
    def _check_principal(session: Session, tenant_id: str, principal: str) -> None:
        account = principal.removeprefix(USER_PREFIX)
        if account != WILDCARD:
            tenant_account(session, tenant_id, account, "principal")

    @staticmethod
    def _existing(session: Session, tenant_id: str, binding: _Binding) -> str | None:
        query = select(AclRow.id).where(AclRow.tenant_id == tenant_id)
        for column, value in asdict(binding).items():
            query = query.where(getattr(AclRow, column) == value)
        return session.scalar(query)

    def list_acls(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[Acl]:
        query = select(AclRow).where(AclRow.tenant_id == tenant_id)
        with self._db.read() as session:
            self._tenant(session, tenant_id)
            return keyset_page(
                session, query, AclRow.created_at, AclRow.id, cursor, limit, acl_from_row
            )

    def delete_acl(self, tenant_id: str, acl_id: str, *, actor: str) -> None:
        with self._db.write() as session:
            self._live_tenant(session, tenant_id)
            row = session.get(AclRow, acl_id) if isinstance(acl_id, str) else None
            if row is None or row.tenant_id != tenant_id:
                raise NotFoundError(f"acl {acl_id!r} not found")
            details = {name: getattr(row, name) for name in BINDING_FIELDS}
            session.delete(row)
            self._journal(
                session,
                actor=actor,
                action="acl.deleted",
                tenant_id=tenant_id,
                subject=acl_id,
                details=details,
            )
