"""A tenant's `authorization` (do its service accounts need ACLs?) is explicit, on both stores:
given, or its plan's; revision 0007 writes down what existing tenants had; ACLs never change it.
And the gateways' heartbeat rows the admin API waits on (`tenancy.gateway_registry`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import column, insert, table

from tenancy.database import _alembic_config
from tenancy.errors import ValidationError
from tenancy.sqltypes import UtcDateTime
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, account, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration


def _allow(store: TenantStore, tenant_id: str, principal: str) -> str:
    return store.create_acl(
        tenant_id,
        resource_type="TOPIC",
        pattern_type="literal",
        resource_name="orders",
        operation="WRITE",
        permission="allow",
        principal=principal,
        actor=OPERATOR,
    ).id


def test_a_new_tenant_takes_its_plans_authorization_unless_given(store: TenantStore) -> None:
    assert {plan.name: plan.authorization for plan in store.list_plans()} == {
        "enterprise": "acls",
        "free": "acls",
        "standard": "acls",
    }
    assert tenant(store, "acme").authorization == "acls"
    store.put_plan(
        replace(store.get_plan("free"), name="sandbox", authorization="open"), actor=OPERATOR
    )
    assert tenant(store, "sand", plan="sandbox").authorization == "open"
    explicit = store.create_tenant(
        display_name="x", plan="sandbox", tenant_id="shut", authorization="acls", actor=OPERATOR
    )
    assert explicit.authorization == "acls"
    with pytest.raises(ValidationError):
        store.create_tenant(
            display_name="x", plan="free", tenant_id="bad", authorization="maybe", actor=OPERATOR
        )


def test_update_and_plan_moves_set_it_explicitly(store: TenantStore) -> None:
    tenant(store, "acme")
    store.put_plan(
        replace(store.get_plan("free"), name="sandbox", authorization="open"), actor=OPERATOR
    )
    assert store.update_tenant("acme", authorization="open", actor=OPERATOR).authorization == "open"
    assert store.update_tenant("acme", plan="standard", actor=OPERATOR).authorization == "acls"
    moved = store.update_tenant("acme", plan="sandbox", authorization="acls", actor=OPERATOR)
    assert (moved.plan, moved.authorization) == ("sandbox", "acls")
    assert store.get_tenant("acme").authorization == "acls"
    details = store.audit_log(tenant_id="acme").items[0].details
    assert details["authorization"] == "acls"


def test_acls_never_change_it(store: TenantStore) -> None:
    tenant(store, "acme")
    principal = f"User:{account(store, 'acme').id}"
    acl_id = _allow(store, "acme", principal)
    store.delete_acl("acme", acl_id, actor=OPERATOR)  # the last ACL
    assert store.get_tenant("acme").authorization == "acls"
    store.update_tenant("acme", authorization="open", actor=OPERATOR)
    store.delete_acl("acme", _allow(store, "acme", principal), actor=OPERATOR)
    assert store.get_tenant("acme").authorization == "open"


def test_revision_0007_writes_down_what_existing_tenants_had(
    empty_store_url: str, tenancy_clock: TenancyClock
) -> None:
    with TenantStore.open(empty_store_url, clock=tenancy_clock) as store:
        store.upgrade("0006")
        for tenant_id in ("guarded", "bare"):
            _insert_tenant_at_0006(store, tenant_id)
        acls = table(
            "acls",
            *(column(name) for name in ("id", "tenant_id", "resource_type", "pattern_type")),
            *(column(name) for name in ("resource_name", "operation", "permission", "principal")),
            column("host"),
            column("created_at", UtcDateTime),
        )
        with store._db.write() as session:
            session.execute(
                insert(acls).values(
                    id="acl-1",
                    tenant_id="guarded",
                    resource_type="TOPIC",
                    pattern_type="literal",
                    resource_name="orders",
                    operation="READ",
                    permission="allow",
                    principal="User:*",
                    host="*",
                    created_at=datetime.now(UTC),
                )
            )
        store.upgrade()
        assert store.get_tenant("guarded").authorization == "acls"
        assert store.get_tenant("bare").authorization == "open"
        assert {plan.authorization for plan in store.list_plans()} == {"acls"}
        with store._db.engine.begin() as connection:
            command.downgrade(_alembic_config(connection), "0006")
        assert store.schema_revision() == "0006"


def _insert_tenant_at_0006(store: TenantStore, tenant_id: str) -> None:
    names = ("id", "display_name", "plan", "status", "max_partitions", "max_storage_bytes")
    tenants = table(
        "tenants",
        *(column(name) for name in names),
        column("max_connections"),
        column("max_request_bytes"),
        column("created_at", UtcDateTime),
        column("updated_at", UtcDateTime),
    )
    now = datetime.now(UTC)
    with store._db.write() as session:
        session.execute(
            insert(tenants).values(
                id=tenant_id,
                display_name=tenant_id,
                plan="free",
                status="active",
                max_partitions=10,
                max_storage_bytes=2**30,
                max_connections=10,
                max_request_bytes=2**20,
                created_at=now,
                updated_at=now,
            )
        )


def test_gateway_positions_are_the_live_gateways_and_only_move_forward(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    assert store.gateway_positions(stale_after_s=10) == []
    store.report_gateway("gw-a/1", 7)
    store.report_gateway("gw-b/1", 3)
    store.report_gateway("gw-a/1", 5)  # a late report never moves a gateway back
    assert [
        (p.gateway_id, p.applied_version) for p in store.gateway_positions(stale_after_s=10)
    ] == [
        ("gw-a/1", 7),
        ("gw-b/1", 3),
    ]
    tenancy_clock.advance(11)
    store.report_gateway("gw-b/1", 4)
    assert [p.gateway_id for p in store.gateway_positions(stale_after_s=10)] == ["gw-b/1"]
    store.forget_gateway("gw-b/1")
    assert [p.gateway_id for p in store.gateway_positions(stale_after_s=3600)] == ["gw-a/1"]
    assert store.current_version() == 0  # heartbeats are not tenancy changes
