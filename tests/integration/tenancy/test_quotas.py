"""Client quotas on both stores: set/list/delete, validation, and the precedence chain resolved by
the store matching the plain reference over random entity sets (hypothesis)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenancy.domain import DEFAULT_ENTITY, EffectiveQuota, QuotaEntity, Tenant
from tenancy.errors import (
    ForbiddenError,
    NotFoundError,
    TenantDeletedError,
    ValidationError,
)
from tenancy.quota_chain import QUOTA_NAMES
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, account, bare_plan
from tests.integration.tenancy.helpers import tenant as any_tenant
from tests.unit.tenancy.quota_reference import reference_effective


def tenant(store: TenantStore, tenant_id: str) -> Tenant:
    """A tenant without the quotas a plan gives, so each test sees only the quotas it sets."""
    return any_tenant(store, tenant_id, plan=bare_plan(store))


pytestmark = pytest.mark.integration
D = DEFAULT_ENTITY


def test_set_list_update_remove(store: TenantStore) -> None:
    tenant(store, "acme")
    sa = account(store, "acme")
    user = QuotaEntity(sa.id, None)
    store.set_quotas(
        "acme", user, {"producer_byte_rate": 1024, "consumer_byte_rate": 2048}, actor=OPERATOR
    )
    store.set_quotas("acme", QuotaEntity(None, D), {"request_percentage": 25.5}, actor=OPERATOR)
    assert store.list_quotas("acme") == [
        (QuotaEntity(None, D), {"request_percentage": 25.5}),
        (user, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}),
    ]
    store.set_quotas(
        "acme", user, {"producer_byte_rate": 10, "consumer_byte_rate": None}, actor=OPERATOR
    )
    assert dict(store.list_quotas("acme"))[user] == {"producer_byte_rate": 10.0}
    store.delete_quotas("acme", user, actor=OPERATOR)
    assert store.list_quotas("acme") == [(QuotaEntity(None, D), {"request_percentage": 25.5})]
    with pytest.raises(NotFoundError):
        store.delete_quotas("acme", user, actor=OPERATOR)


def test_quotas_are_per_tenant(store: TenantStore) -> None:
    tenant(store, "acme")
    tenant(store, "beta")
    store.set_quotas("acme", QuotaEntity(D, None), {"producer_byte_rate": 1}, actor=OPERATOR)
    assert store.list_quotas("beta") == []
    effective = store.effective_quotas("beta", user="sa-x", client_id="c")
    assert effective["producer_byte_rate"] == EffectiveQuota(None, None)


def test_user_must_be_an_account_of_the_tenant(store: TenantStore) -> None:
    tenant(store, "acme")
    tenant(store, "beta")
    theirs = account(store, "beta")
    with pytest.raises(ForbiddenError):
        store.set_quotas(
            "acme", QuotaEntity(theirs.id, None), {"producer_byte_rate": 1}, actor=OPERATOR
        )
    with pytest.raises(ValidationError):
        store.set_quotas(
            "acme", QuotaEntity("sa-nobody0000", None), {"producer_byte_rate": 1}, actor=OPERATOR
        )


@pytest.mark.parametrize(
    ("entity", "quotas", "field"),
    [
        (QuotaEntity(None, None), {"producer_byte_rate": 1}, "entity"),
        (QuotaEntity(None, ""), {"producer_byte_rate": 1}, "entity.client_id"),
        (QuotaEntity(None, "c"), {}, "quotas"),
        (QuotaEntity(None, "c"), {"bytes": 1}, "quotas.bytes"),
        (QuotaEntity(None, "c"), {"producer_byte_rate": 0}, "quotas.producer_byte_rate"),
        (QuotaEntity(None, "c"), {"producer_byte_rate": -1}, "quotas.producer_byte_rate"),
        (QuotaEntity(None, "c"), {"producer_byte_rate": float("inf")}, "quotas.producer_byte_rate"),
        (QuotaEntity(None, "c"), {"producer_byte_rate": "10"}, "quotas.producer_byte_rate"),
        (QuotaEntity(None, "c"), {"producer_byte_rate": True}, "quotas.producer_byte_rate"),
    ],
)
def test_bad_quotas_are_refused(
    store: TenantStore, entity: QuotaEntity, quotas: dict[str, object], field: str
) -> None:
    tenant(store, "acme")
    with pytest.raises(ValidationError) as error:
        store.set_quotas("acme", entity, quotas, actor=OPERATOR)  # type: ignore[arg-type]
    assert error.value.field == field


def test_deleted_tenant_refuses_quota_changes(store: TenantStore) -> None:
    tenant(store, "acme")
    store.set_tenant_status("acme", "deleted", actor=OPERATOR)
    with pytest.raises(TenantDeletedError):
        store.set_quotas("acme", QuotaEntity(D, None), {"producer_byte_rate": 1}, actor=OPERATOR)
    with pytest.raises(NotFoundError):
        store.list_quotas("nope")


def test_effective_reports_the_supplying_level(store: TenantStore) -> None:
    tenant(store, "acme")
    sa = account(store, "acme").id
    store.set_quotas("acme", QuotaEntity(sa, D), {"producer_byte_rate": 100}, actor=OPERATOR)
    store.set_quotas("acme", QuotaEntity(D, "app one"), {"consumer_byte_rate": 200}, actor=OPERATOR)
    store.set_quotas(
        "acme",
        QuotaEntity(None, D),
        {"producer_byte_rate": 1, "request_percentage": 5},
        actor=OPERATOR,
    )
    effective = store.effective_quotas("acme", user=sa, client_id="app one")
    assert effective == {
        "producer_byte_rate": EffectiveQuota(100.0, f"/config/users/{sa}/clients/<default>"),
        "consumer_byte_rate": EffectiveQuota(200.0, "/config/users/<default>/clients/app%20one"),
        "request_percentage": EffectiveQuota(5.0, "/config/clients/<default>"),
        "controller_mutation_rate": EffectiveQuota(None, None),
    }


USERS = ("A", "B", D, None)  # A and B stand for two service accounts made per example
CLIENTS = ("c1", "c2", D, None)
ENTITIES = [
    QuotaEntity(u, c) for u, c in itertools.product(USERS, CLIENTS) if (u, c) != (None, None)
]
configs = st.dictionaries(
    st.sampled_from(ENTITIES),
    st.dictionaries(st.sampled_from(QUOTA_NAMES), st.integers(1, 10**9).map(float), min_size=1),
    max_size=10,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    configured=configs, user=st.sampled_from(USERS[:3]), client=st.sampled_from(("c1", "c2", "c3"))
)
def test_store_resolution_matches_the_reference(
    store: TenantStore,
    configured: dict[QuotaEntity, dict[str, float]],
    user: str,
    client: str,
) -> None:
    tenant_id = store.create_tenant(display_name="prop", plan=bare_plan(store), actor=OPERATOR).id
    ids = {name: account(store, tenant_id, name).id for name in ("A", "B")}

    def real(entity: QuotaEntity) -> QuotaEntity:
        return QuotaEntity(ids.get(entity.user or "", entity.user), entity.client_id)

    stored = {real(entity): quotas for entity, quotas in configured.items()}
    for entity, quotas in stored.items():
        store.set_quotas(tenant_id, entity, quotas, actor=OPERATOR)
    lookup_user = ids.get(user, user)
    expected = reference_effective(stored, lookup_user, client)
    assert store.effective_quotas(tenant_id, user=lookup_user, client_id=client) == expected


def test_effective_lookup_refuses_control_characters(store: TenantStore) -> None:
    tenant(store, "acme")
    for user, client in (("a\x00b", "c"), ("u", "c\x1f")):
        with pytest.raises(ValidationError):
            store.effective_quotas("acme", user=user, client_id=client)
