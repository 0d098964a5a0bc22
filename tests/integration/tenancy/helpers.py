"""Small builders shared by the tenant-store integration tests."""

from __future__ import annotations

from dataclasses import replace

from tenancy.domain import ApiKey, Secret, ServiceAccount, Tenant
from tenancy.store import TenantStore

OPERATOR = "op-alice"
BARE_PLAN = "bare"  # the free plan's prices and limits without default quotas


def bare_plan(store: TenantStore) -> str:
    """A plan whose tenants start with no quota at all (for tests of the quota mechanics)."""
    store.put_plan(replace(store.get_plan("free"), name=BARE_PLAN, quotas={}), actor=OPERATOR)
    return BARE_PLAN


def tenant(store: TenantStore, tenant_id: str | None = None, plan: str = "free") -> Tenant:
    return store.create_tenant(
        display_name=f"Tenant {tenant_id or 'x'}", plan=plan, tenant_id=tenant_id, actor=OPERATOR
    )


def account(store: TenantStore, tenant_id: str, name: str = "app") -> ServiceAccount:
    return store.create_service_account(tenant_id, name=name, actor=OPERATOR)


def key_for(
    store: TenantStore, tenant_id: str, **kwargs: object
) -> tuple[ServiceAccount, ApiKey, Secret]:
    sa = account(store, tenant_id, name=str(kwargs.pop("name", "app")))
    key, secret = store.create_api_key(
        tenant_id,
        service_account_id=sa.id,
        actor=OPERATOR,
        **kwargs,  # type: ignore[arg-type]
    )
    return sa, key, secret
