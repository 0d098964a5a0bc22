"""The journal on both stores: every mutation writes one audit entry and one change in its own
transaction; versions are gapless even under concurrent writers; the audit log pages newest first."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest

from tenancy.domain import Plan, PlanDimension, PlanTier, QuotaEntity
from tenancy.errors import ConflictError, ValidationError
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, account, tenant

pytestmark = pytest.mark.integration


def _every_mutation(store: TenantStore) -> list[str]:
    """Run each kind of mutation once; return the actions expected in the journal, in order."""
    tenant(store, "acme")
    store.update_tenant("acme", display_name="Acme Inc", actor=OPERATOR)
    sa = account(store, "acme")
    key, _ = store.create_api_key("acme", service_account_id=sa.id, actor=OPERATOR)
    store.revoke_api_key(key.key_id, actor=OPERATOR)
    entity = QuotaEntity(sa.id, None)
    store.set_quotas("acme", entity, {"producer_byte_rate": 5}, actor=OPERATOR)
    store.delete_quotas("acme", entity, actor=OPERATOR)
    acl = store.create_acl(
        "acme",
        resource_type="GROUP",
        pattern_type="literal",
        resource_name="g",
        operation="READ",
        permission="allow",
        principal=f"User:{sa.id}",
        actor=OPERATOR,
    )
    store.delete_acl("acme", acl.id, actor=OPERATOR)
    tiers = (PlanTier(None, Decimal("1")),)
    store.put_plan(
        Plan("free", "EUR", {"requests": PlanDimension(Decimal(0), tiers)}), actor=OPERATOR
    )
    store.create_operator("bob", actor=OPERATOR)
    store.set_tenant_status("acme", "suspended", actor=OPERATOR)
    store.set_tenant_status("acme", "active", actor=OPERATOR)
    store.set_tenant_status("acme", "deleted", actor=OPERATOR)
    return [
        "tenant.created",
        "tenant.updated",
        "service_account.created",
        "api_key.created",
        "api_key.revoked",
        "quota.set",
        "quota.deleted",
        "acl.created",
        "acl.deleted",
        "plan.put",
        "operator.created",
        "tenant.suspended",
        "tenant.resumed",
        "tenant.deleted",
    ]


def test_every_mutation_is_audited_and_versioned(store: TenantStore) -> None:
    expected = _every_mutation(store)
    changes = store.changes_since(0)
    assert [change.kind for change in changes] == expected
    assert [change.version for change in changes] == list(range(1, len(expected) + 1))
    assert store.current_version() == len(expected)
    audit = list(reversed(store.audit_log(limit=1000).items))
    assert [entry.action for entry in audit] == expected
    assert all(entry.actor == OPERATOR for entry in audit)
    assert [(e.tenant_id, e.subject) for e in audit] == [(c.tenant_id, c.subject) for c in changes]
    assert audit[0].details["display_name"] == "Tenant acme"


def test_failed_mutations_leave_no_trace(store: TenantStore) -> None:
    tenant(store, "acme")
    version, entries = store.current_version(), store.audit_log().items
    with pytest.raises(ConflictError):
        tenant(store, "acme")
    with pytest.raises(ValidationError):
        store.create_service_account("acme", name="app", actor="")  # bad actor, checked last
    assert store.list_service_accounts("acme").items == []
    assert (store.current_version(), store.audit_log().items) == (version, entries)


def test_audit_log_pages_newest_first_and_filters_by_tenant(store: TenantStore) -> None:
    for name in ("aaa", "bbb"):
        tenant(store, name)
        account(store, name, "one")
        account(store, name, "two")
    page = store.audit_log(limit=2, tenant_id="aaa")
    rest = store.audit_log(limit=2, tenant_id="aaa", cursor=page.next_cursor)
    entries = page.items + rest.items
    assert rest.next_cursor is None
    assert [e.action for e in entries] == [
        "service_account.created",
        "service_account.created",
        "tenant.created",
    ]
    assert all(e.tenant_id == "aaa" for e in entries)
    assert [e.id for e in entries] == sorted((e.id for e in entries), reverse=True)
    assert len(store.audit_log(limit=100).items) == 6


def test_concurrent_writers_get_gapless_unique_versions(store: TenantStore) -> None:
    tenant(store, "acme")

    def create(index: int) -> None:
        account(store, "acme", f"sa-{index}")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(create, range(24)))
    versions = [change.version for change in store.changes_since(0)]
    assert versions == list(range(1, 26))


def test_pruned_history_and_validation(store: TenantStore) -> None:
    for name in ("aaa", "bbb", "ccc"):
        tenant(store, name)
    assert store.prune_changes(2) == 2
    assert [change.version for change in store.changes_since(0)] == [3]
    assert store.current_version() == 3
    with pytest.raises(ValidationError):
        store.changes_since(-1)
    with pytest.raises(ValidationError):
        store.changes_since(0, limit=0)
