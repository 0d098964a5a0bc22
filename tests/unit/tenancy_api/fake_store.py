"""An in-memory stand-in for `tenancy.store.TenantStore`, for unit tests of the HTTP layer only.

Same method names and signatures as the real store; only the behaviour the API relies on (ids,
not found / conflict / forbidden / validation errors, pagination, the quota chain). Acceptance
tests run against the real store on SQLite and PostgreSQL. Guarded by one lock (the API calls it
from its thread pool).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar

from tenancy.domain import (
    DEFAULT_LIMITS,
    Acl,
    ApiKey,
    EffectiveQuota,
    Page,
    Plan,
    PlanDimension,
    PlanTier,
    QuotaEntity,
    Secret,
    ServiceAccount,
    Tenant,
    TenantLimits,
)
from tenancy.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    TenantDeletedError,
    ValidationError,
)

T = TypeVar("T")
D = "<default>"
DEFAULT_PLANS = ("enterprise", "free", "standard")


def _priced(name: str) -> Plan:
    tiers = (PlanTier(None, Decimal("0.1")),)
    return Plan(name, "EUR", {"ingress_gib": PlanDimension(Decimal(0), tiers)})


CHAIN = [
    (("U", "C"), "users/{u}/clients/{c}"),
    (("U", D), "users/{u}/clients/<default>"),
    (("U", None), "users/{u}"),
    ((D, "C"), "users/<default>/clients/{c}"),
    ((D, D), "users/<default>/clients/<default>"),
    ((D, None), "users/<default>"),
    ((None, "C"), "clients/{c}"),
    ((None, D), "clients/<default>"),
]


def _page(items: list[T], cursor: str | None, limit: int) -> Page[T]:
    if not 1 <= limit <= 1000:
        raise ValidationError("limit", "must be 1..1000")
    start = int(cursor) if cursor and cursor.isdigit() else 0
    if cursor and not cursor.isdigit():
        raise ValidationError("cursor", "invalid cursor")
    end = start + limit
    return Page(items[start:end], str(end) if end < len(items) else None)


class FakeStore:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.tenants: dict[str, Tenant] = {}
        self.accounts: dict[str, ServiceAccount] = {}
        self.keys: dict[str, ApiKey] = {}
        self.quotas: dict[tuple[str, QuotaEntity], dict[str, float]] = {}
        self.acls: dict[str, Acl] = {}
        # the real store starts with free, standard and enterprise (migration 0005)
        self.plans: dict[str, Plan] = {name: _priced(name) for name in DEFAULT_PLANS}
        self.operators: dict[str, str] = {}
        self.version = 0
        self.calls: list[str] = []

    def _now(self) -> datetime:
        return datetime.now(UTC)

    def _changed(self, what: str) -> None:
        self.version += 1
        self.calls.append(what)

    def _known_plan(self, name: str) -> None:
        if name not in self.plans:
            known = ", ".join(sorted(self.plans))
            raise ValidationError("plan", f"unknown plan {name!r}; the plans are: {known}")

    def _live(self, tenant_id: str) -> Tenant:
        tenant = self.get_tenant(tenant_id)
        if tenant.status == "deleted":
            raise TenantDeletedError(f"tenant {tenant_id} is deleted")  # as the real store
        return tenant

    # tenants
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
        with self.lock:
            self._known_plan(plan)
            tenant_id = tenant_id or "t" + secrets.token_hex(4)
            if tenant_id in self.tenants:
                raise ConflictError(f"tenant {tenant_id} exists")
            now = self._now()
            tenant = Tenant(
                tenant_id,
                display_name,
                plan,
                "active",
                limits or DEFAULT_LIMITS,
                now,
                now,
                authorization or self.plans[plan].authorization,
            )
            self.tenants[tenant_id] = tenant
            self._changed(f"create_tenant by {actor}")
            return tenant

    def get_tenant(self, tenant_id: str) -> Tenant:
        if tenant_id not in self.tenants:
            raise NotFoundError(f"no tenant {tenant_id}")
        return self.tenants[tenant_id]

    def list_tenants(
        self, *, cursor: str | None = None, limit: int = 100, status: str | None = None
    ) -> Page[Tenant]:
        return _page(
            [t for t in self.tenants.values() if status in (None, t.status)], cursor, limit
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
        with self.lock:
            tenant = self._live(tenant_id)
            if plan is not None:
                self._known_plan(plan)
            changes: dict[str, Any] = {
                "display_name": display_name,
                "plan": plan,
                "limits": limits,
                "authorization": authorization,
            }
            tenant = replace(tenant, **{k: v for k, v in changes.items() if v is not None})
            self.tenants[tenant_id] = tenant
            self._changed("update_tenant")
            return tenant

    def set_tenant_status(self, tenant_id: str, status: str, *, actor: str) -> Tenant:
        with self.lock:
            tenant = replace(self._live(tenant_id), status=status)
            self.tenants[tenant_id] = tenant
            self._changed(f"status {status}")
            return tenant

    # service accounts and keys
    def create_service_account(
        self, tenant_id: str, *, name: str, description: str = "", actor: str
    ) -> ServiceAccount:
        with self.lock:
            self._live(tenant_id)
            if any(a.tenant_id == tenant_id and a.name == name for a in self.accounts.values()):
                raise ConflictError(f"service account {name} exists")
            account = ServiceAccount(
                "sa-" + secrets.token_hex(5), tenant_id, name, description, self._now()
            )
            self.accounts[account.id] = account
            self._changed("create_service_account")
            return account

    def list_service_accounts(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ServiceAccount]:
        self.get_tenant(tenant_id)
        return _page([a for a in self.accounts.values() if a.tenant_id == tenant_id], cursor, limit)

    def create_api_key(
        self,
        tenant_id: str,
        *,
        service_account_id: str,
        description: str = "",
        expires_at: datetime | None = None,
        actor: str,
    ) -> tuple[ApiKey, str]:
        with self.lock:
            self._live(tenant_id)
            account = self.accounts.get(service_account_id)
            if account is None:  # a dangling reference in the body: 400, as the real store
                raise ValidationError("service_account_id", "no such service account")
            if account.tenant_id != tenant_id:
                raise ForbiddenError("the service account belongs to another tenant")
            key = ApiKey(
                secrets.token_hex(8).upper(),
                tenant_id,
                service_account_id,
                description,
                self._now(),
                expires_at,
                None,
                None,
            )
            self.keys[key.key_id] = key
            self._changed("create_api_key")
            return key, Secret(secrets.token_urlsafe(32))

    def list_api_keys(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ApiKey]:
        self.get_tenant(tenant_id)
        return _page([k for k in self.keys.values() if k.tenant_id == tenant_id], cursor, limit)

    def revoke_api_key(self, key_id: str, *, actor: str) -> ApiKey:
        with self.lock:
            if key_id not in self.keys:
                raise NotFoundError(f"no api key {key_id}")
            key = replace(self.keys[key_id], revoked_at=self._now())
            self.keys[key_id] = key
            self._changed("revoke_api_key")
            return key

    # quotas
    def set_quotas(
        self, tenant_id: str, entity: QuotaEntity, quotas: Mapping[str, float | None], *, actor: str
    ) -> None:
        with self.lock:
            self._live(tenant_id)
            if entity.user is None and entity.client_id is None:
                raise ValidationError("entity", "name a user, a client id or both")
            current = self.quotas.setdefault((tenant_id, entity), {})
            for name, value in quotas.items():
                if value is None:
                    current.pop(name, None)
                else:
                    current[name] = float(value)
            self._changed("set_quotas")

    def list_quotas(self, tenant_id: str) -> list[tuple[QuotaEntity, dict[str, float]]]:
        self.get_tenant(tenant_id)
        return [(e, dict(q)) for (t, e), q in self.quotas.items() if t == tenant_id and q]

    def delete_quotas(self, tenant_id: str, entity: QuotaEntity, *, actor: str) -> None:
        with self.lock:
            self._live(tenant_id)
            if self.quotas.pop((tenant_id, entity), None) is None:
                raise NotFoundError("no quotas for that entity")
            self._changed("delete_quotas")

    def effective_quotas(
        self, tenant_id: str, *, user: str, client_id: str
    ) -> dict[str, EffectiveQuota]:
        self.get_tenant(tenant_id)
        names = (
            "producer_byte_rate",
            "consumer_byte_rate",
            "request_percentage",
            "controller_mutation_rate",
        )
        found = dict.fromkeys(names, EffectiveQuota(None, None))
        for name in names:
            for (u, c), path in CHAIN:
                entity = QuotaEntity({"U": user}.get(u or "", u), {"C": client_id}.get(c or "", c))
                value = self.quotas.get((tenant_id, entity), {}).get(name)
                if value is not None:
                    found[name] = EffectiveQuota(
                        value, "/config/" + path.format(u=user, c=client_id)
                    )
                    break
        return found

    # acls
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
        with self.lock:
            self._live(tenant_id)
            account = self.accounts.get(principal.removeprefix("User:"))
            if account is None or account.tenant_id != tenant_id:
                raise ForbiddenError("the principal is not a service account of this tenant")
            acl = Acl(
                "acl-" + secrets.token_hex(6),
                tenant_id,
                resource_type,
                pattern_type,
                resource_name,
                operation,
                permission,
                principal,
                host,
            )
            self.acls[acl.id] = acl
            self._changed("create_acl")
            return acl

    def list_acls(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[Acl]:
        self.get_tenant(tenant_id)
        return _page([a for a in self.acls.values() if a.tenant_id == tenant_id], cursor, limit)

    def delete_acl(self, tenant_id: str, acl_id: str, *, actor: str) -> None:
        with self.lock:
            acl = self.acls.get(acl_id)
            if acl is None or acl.tenant_id != tenant_id:
                raise NotFoundError(f"no acl {acl_id}")
            del self.acls[acl_id]
            self._changed("delete_acl")

    # plans
    def get_plan(self, name: str) -> Plan:
        if name not in self.plans:
            raise NotFoundError(f"no plan {name}")
        return self.plans[name]

    def list_plans(self) -> list[Plan]:
        return [self.plans[name] for name in sorted(self.plans)]

    def put_plan(self, plan: Plan, *, actor: str) -> Plan:
        with self.lock:
            self.plans[plan.name] = plan
            self._changed("put_plan")
            return plan

    # operators
    def create_operator(self, name: str, *, actor: str) -> str:
        token = secrets.token_urlsafe(32)
        self.operators[token] = name
        return Secret(token)

    def verify_operator(self, token: str) -> str | None:
        self.calls.append("verify_operator")
        return self.operators.get(token)

    def has_operators(self) -> bool:
        return bool(self.operators)

    def current_version(self) -> int:
        return self.version

    def gateway_positions(self, *, stale_after_s: float) -> list[Any]:
        return []  # no gateway: changes are in force at once

    def gateway_connections(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass
