"""ACL bindings on both stores: create (normalised), list, delete, and Kafka's validation rules."""

from __future__ import annotations

from typing import Any

import pytest

from tenancy.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, account, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration


def _binding(principal: str, **overrides: Any) -> dict[str, Any]:
    binding = {
        "resource_type": "TOPIC",
        "pattern_type": "literal",
        "resource_name": "orders",
        "operation": "READ",
        "permission": "allow",
        "principal": principal,
    }
    return binding | overrides


def test_create_list_delete(store: TenantStore, tenancy_clock: TenancyClock) -> None:
    tenant(store, "acme")
    sa = account(store, "acme")
    first = store.create_acl(
        "acme", **_binding(f"User:{sa.id}", resource_type="topic", operation="read"), actor=OPERATOR
    )
    assert (first.resource_type, first.operation, first.host) == ("TOPIC", "READ", "*")
    assert first.id.startswith("acl-") and first.tenant_id == "acme"
    tenancy_clock.advance(1)
    second = store.create_acl(
        "acme",
        **_binding("User:*", pattern_type="PREFIXED", resource_name="logs.", permission="DENY"),
        host="10.0.0.1",
        actor=OPERATOR,
    )
    assert (second.pattern_type, second.permission, second.host) == ("prefixed", "deny", "10.0.0.1")
    page = store.list_acls("acme", limit=1)
    rest = store.list_acls("acme", cursor=page.next_cursor)
    assert page.items + rest.items == [first, second]
    store.delete_acl("acme", first.id, actor=OPERATOR)
    assert store.list_acls("acme").items == [second]
    with pytest.raises(NotFoundError):
        store.delete_acl("acme", first.id, actor=OPERATOR)


def test_identical_binding_conflicts(store: TenantStore) -> None:
    tenant(store, "acme")
    sa = account(store, "acme")
    store.create_acl("acme", **_binding(f"User:{sa.id}"), actor=OPERATOR)
    with pytest.raises(ConflictError):
        store.create_acl("acme", **_binding(f"User:{sa.id}", operation="read"), actor=OPERATOR)


def test_principals_must_be_the_tenants(store: TenantStore) -> None:
    tenant(store, "acme")
    tenant(store, "beta")
    theirs = account(store, "beta")
    with pytest.raises(ForbiddenError):
        store.create_acl("acme", **_binding(f"User:{theirs.id}"), actor=OPERATOR)
    with pytest.raises(ValidationError):
        store.create_acl("acme", **_binding("User:sa-nobody00000"), actor=OPERATOR)
    with pytest.raises(ValidationError):
        store.create_acl("acme", **_binding(f"Group:{theirs.id}"), actor=OPERATOR)


def test_other_tenants_acls_are_invisible(store: TenantStore) -> None:
    tenant(store, "acme")
    tenant(store, "beta")
    acl = store.create_acl("acme", **_binding("User:*"), actor=OPERATOR)
    assert store.list_acls("beta").items == []
    with pytest.raises(NotFoundError):
        store.delete_acl("beta", acl.id, actor=OPERATOR)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"resource_type": "BROKER"}, "resource_type"),
        ({"pattern_type": "match"}, "pattern_type"),
        ({"operation": "ANY"}, "operation"),
        ({"permission": "maybe"}, "permission"),
        ({"resource_name": ""}, "resource_name"),
        ({"resource_type": "CLUSTER", "resource_name": "other"}, "resource_name"),
        ({"resource_name": "*", "pattern_type": "prefixed"}, "pattern_type"),
        ({"host": "example.com"}, "host"),
    ],
)
def test_invalid_bindings(store: TenantStore, overrides: dict[str, str], field: str) -> None:
    tenant(store, "acme")
    overrides = dict(overrides)  # the parameter dict is shared by both backends' runs
    host = overrides.pop("host", "*")
    with pytest.raises(ValidationError) as error:
        store.create_acl("acme", **_binding("User:*", **overrides), host=host, actor=OPERATOR)
    assert error.value.field == field


def test_cluster_and_wildcard_bindings(store: TenantStore) -> None:
    tenant(store, "acme")
    cluster = store.create_acl(
        "acme",
        **_binding(
            "User:*",
            resource_type="CLUSTER",
            resource_name="kafka-cluster",
            operation="IDEMPOTENT_WRITE",
        ),
        actor=OPERATOR,
    )
    everything = store.create_acl(
        "acme", **_binding("User:*", resource_name="*", operation="ALL"), actor=OPERATOR
    )
    assert {cluster.id, everything.id} == {acl.id for acl in store.list_acls("acme").items}
