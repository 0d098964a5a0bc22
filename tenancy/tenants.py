"""Tenants: creation, lookup, listing, updates and the status lifecycle.

A tenant id is immutable (it prefixes every resource of the tenant in the fleet). Status moves
active ⇄ suspended, and either → deleted, which is final: deletion is soft (rows stay for billing
and audit) and a deleted tenant accepts no further changes. Setting the status a tenant already has
changes nothing and journals nothing. The plan must exist (an unknown name is refused with the
list of plans). A tenant created on a plan, or moved to another, takes the plan's limits unless
limits are given, and the plan's quotas as its `/config/users/<default>` client quotas (replacing
what that entity had); later changes of the plan leave its tenants alone. Limits are positive
integers; the tenant-wide byte-rate caps (Kafka's bytes/s units) may be None, for no cap. The
tenant's `authorization` ("acls": its service accounts need ACLs; "open": a resource no ACL names
is open to them) is explicit: given, or the plan's when created on or moved to a plan; it is
never inferred from whether the tenant has ACLs, so deleting its last ACL opens nothing. Mixin of
`TenantStore`; thread-safe (one session per call).
"""

from __future__ import annotations

from dataclasses import asdict, replace

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from tenancy.domain import Page, Tenant, TenantLimits
from tenancy.errors import ConflictError, TenantDeletedError, ValidationError
from tenancy.ids import check_tenant_id, new_tenant_id
from tenancy.limits import LIMIT_NAMES, NAME_LIMITS, check_limits, limits_from
from tenancy.models import TenantRow
from tenancy.pagination import keyset_page
from tenancy.plan_rules import PLAN_NAME, check_authorization
from tenancy.plans import known_plan
from tenancy.quotas import write_plan_quotas
from tenancy.store_base import MAX_NAME, StoreCore, check_text

STATUSES = ("active", "suspended", "deleted")
_ID_ATTEMPTS = 5


def check_plan_name(field: str, name: object) -> str:
    if not isinstance(name, str) or PLAN_NAME.fullmatch(name) is None:
        raise ValidationError(field, "must match [a-z0-9][a-z0-9_.-]{0,63}")
    return name


def tenant_from_row(row: TenantRow) -> Tenant:
    limits = limits_from(row)
    return Tenant(
        row.id,
        row.display_name,
        row.plan,
        row.status,
        limits,
        row.created_at,
        row.updated_at,
        row.authorization,
    )


def _with_plan_counts(limits: TenantLimits, plan: TenantLimits) -> TenantLimits:
    """A new tenant's `limits` with the group and transactional-id counts it leaves out (None)
    taken from its plan (None there too: the gateway's setting)."""
    left_out = {name: getattr(plan, name) for name in NAME_LIMITS if getattr(limits, name) is None}
    return replace(limits, **left_out)


def _apply_limits(row: TenantRow, limits: TenantLimits) -> None:
    for name in LIMIT_NAMES:
        setattr(row, name, getattr(limits, name))


class TenantCommands(StoreCore):
    def create_tenant(
        self,
        *,
        display_name: str,
        plan: str,
        limits: TenantLimits | None = None,
        tenant_id: str | None = None,
        authorization: str | None = None,
        actor: str,
    ) -> Tenant:
        """`authorization` None: the plan's ("acls" unless the plan says "open")."""
        check_text("display_name", display_name, max_length=MAX_NAME, allow_empty=False)
        check_plan_name("plan", plan)
        if limits is not None:
            check_limits(limits)
        if authorization is not None:
            check_authorization("authorization", authorization)
        terms = (display_name, plan, limits, authorization, actor)
        if tenant_id is not None:
            return self._insert_tenant(check_tenant_id(tenant_id), *terms)
        for _ in range(_ID_ATTEMPTS):  # a generated id colliding is ~1e-14 per attempt
            try:
                return self._insert_tenant(new_tenant_id(), *terms)
            except ConflictError:
                continue
        raise ConflictError("could not generate a free tenant id")

    def _insert_tenant(
        self,
        tenant_id: str,
        display_name: str,
        plan: str,
        limits: TenantLimits | None,
        authorization: str | None,
        actor: str,
    ) -> Tenant:
        try:
            with self._db.write() as session:
                terms = known_plan(session, plan)
                limits = terms.limits if limits is None else _with_plan_counts(limits, terms.limits)
                authorization = authorization or terms.authorization
                if session.get(TenantRow, tenant_id) is not None:
                    raise ConflictError(f"tenant {tenant_id!r} already exists")
                now = self._now()
                row = TenantRow(
                    id=tenant_id,
                    display_name=display_name,
                    plan=plan,
                    status="active",
                    authorization=authorization,
                    created_at=now,
                    updated_at=now,
                )
                _apply_limits(row, limits)
                session.add(row)
                session.flush()
                write_plan_quotas(session, tenant_id, terms.quotas)
                details = {
                    "display_name": display_name,
                    "plan": plan,
                    "limits": asdict(limits),
                    "quotas": dict(terms.quotas),
                    "authorization": authorization,
                }
                self._journal(
                    session,
                    actor=actor,
                    action="tenant.created",
                    tenant_id=tenant_id,
                    subject=tenant_id,
                    details=details,
                    at=now,
                )
                return tenant_from_row(row)
        except IntegrityError:  # a concurrent create of the same id won the race
            raise ConflictError(f"tenant {tenant_id!r} already exists") from None

    def get_tenant(self, tenant_id: str) -> Tenant:
        with self._db.read() as session:
            return tenant_from_row(self._tenant(session, tenant_id))

    def list_tenants(
        self, *, cursor: str | None = None, limit: int = 100, status: str | None = None
    ) -> Page[Tenant]:
        """Tenants oldest first; `status=None` lists every tenant that is not deleted."""
        query = select(TenantRow)
        if status is None:
            query = query.where(TenantRow.status != "deleted")
        elif status in STATUSES:
            query = query.where(TenantRow.status == status)
        else:
            raise ValidationError("status", f"must be one of {', '.join(STATUSES)}")
        with self._db.read() as session:
            return keyset_page(
                session, query, TenantRow.created_at, TenantRow.id, cursor, limit, tenant_from_row
            )

    def update_tenant(
        self,
        tenant_id: str,
        *,
        actor: str,
        display_name: str | None = None,
        plan: str | None = None,
        limits: TenantLimits | None = None,
        authorization: str | None = None,
    ) -> Tenant:
        """A move to another plan takes its limits, quotas and authorization unless given."""
        changed: dict[str, object] = {}
        if display_name is not None:
            changed["display_name"] = check_text(
                "display_name", display_name, max_length=MAX_NAME, allow_empty=False
            )
        if plan is not None:
            changed["plan"] = check_plan_name("plan", plan)
        if limits is not None:
            changed["limits"] = asdict(check_limits(limits))
        if authorization is not None:
            changed["authorization"] = check_authorization("authorization", authorization)
        with self._db.write() as session:
            row = self._live_tenant(session, tenant_id)
            if display_name is not None:
                row.display_name = display_name
            if plan is not None and plan != row.plan:
                terms = known_plan(session, plan)
                if limits is None:
                    limits = terms.limits
                    changed["limits"] = asdict(limits)
                write_plan_quotas(session, tenant_id, terms.quotas)
                changed["quotas"] = dict(terms.quotas)
                if authorization is None:
                    authorization = terms.authorization
                    changed["authorization"] = authorization
            if plan is not None:
                row.plan = plan
            if limits is not None:
                _apply_limits(row, limits)
            if authorization is not None:
                row.authorization = authorization
            if changed:
                row.updated_at = self._now()
                self._journal(
                    session,
                    actor=actor,
                    action="tenant.updated",
                    tenant_id=tenant_id,
                    subject=tenant_id,
                    details=changed,
                    at=row.updated_at,
                )
            return tenant_from_row(row)

    def set_tenant_status(self, tenant_id: str, status: str, *, actor: str) -> Tenant:
        """active ⇄ suspended, any → deleted (final). The same status again is a no-op."""
        if status not in STATUSES:
            raise ValidationError("status", f"must be one of {', '.join(STATUSES)}")
        with self._db.write() as session:
            row = self._tenant(session, tenant_id)
            if row.status == status:
                return tenant_from_row(row)
            if row.status == "deleted":
                raise TenantDeletedError(f"tenant {tenant_id!r} is deleted")
            action = {"active": "tenant.resumed", "suspended": "tenant.suspended"}.get(
                status, "tenant.deleted"
            )
            previous, row.status, row.updated_at = row.status, status, self._now()
            change = self._journal(
                session,
                actor=actor,
                action=action,
                tenant_id=tenant_id,
                subject=tenant_id,
                details={"from": previous, "to": status},
                at=row.updated_at,
            )
            tenant = tenant_from_row(row)
        self._cache.apply(change)
        return tenant
