"""Plans a newcomer finds (issue 12) on both stores: free, standard and enterprise exist from the
first `upgrade` with the limits and quotas docs/plans.md documents; a tenant takes its plan's
limits and its quotas as `/config/users/<default>`; an unknown plan is refused with the known ones
named; an older store gets the defaults without losing its own plans."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, column, insert, table

from tenancy.database import _alembic_config
from tenancy.domain import (
    DEFAULT_ENTITY,
    DEFAULT_LIMITS,
    Plan,
    PlanDimension,
    PlanTier,
    QuotaEntity,
    TenantLimits,
)
from tenancy.errors import ValidationError
from tenancy.sqltypes import Money, UtcDateTime
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, account

pytestmark = pytest.mark.integration
MIB, GIB, TIB = 2**20, 2**30, 2**40
PLAN_ENTITY = QuotaEntity(DEFAULT_ENTITY, None)

# docs/plans.md, "The default plans"
DOCUMENTED: dict[str, tuple[TenantLimits, dict[str, float]]] = {
    "free": (
        TenantLimits(100, 10 * GIB, 100, MIB),
        {"producer_byte_rate": MIB, "consumer_byte_rate": 2 * MIB, "request_percentage": 25.0},
    ),
    "standard": (
        TenantLimits(1_000, TIB, 1_000, 8 * MIB),
        {
            "producer_byte_rate": 10 * MIB,
            "consumer_byte_rate": 20 * MIB,
            "request_percentage": 100.0,
        },
    ),
    "enterprise": (
        TenantLimits(10_000, 100 * TIB, 10_000, 100 * MIB),
        {
            "producer_byte_rate": 100 * MIB,
            "consumer_byte_rate": 200 * MIB,
            "request_percentage": 400.0,
        },
    ),
}


def test_a_new_store_has_the_documented_plans(store: TenantStore) -> None:
    plans = {plan.name: plan for plan in store.list_plans()}
    assert sorted(plans) == ["enterprise", "free", "standard"]
    for name, (limits, quotas) in DOCUMENTED.items():
        assert (plans[name].limits, plans[name].quotas) == (limits, quotas), name
        assert plans[name].currency == "EUR"
        assert store.get_plan(name) == plans[name]
    assert all(
        tier.unit_price == 0 for d in plans["free"].dimensions.values() for tier in d.tiers
    )  # the free plan is never billed
    assert plans["free"].limits == DEFAULT_LIMITS  # what a tenant got before plans had limits


@pytest.mark.parametrize("plan", ["free", "standard", "enterprise"])
def test_a_tenant_takes_its_plans_limits_and_default_quotas(store: TenantStore, plan: str) -> None:
    limits, quotas = DOCUMENTED[plan]
    created = store.create_tenant(display_name="Acme", plan=plan, tenant_id="acme", actor=OPERATOR)
    assert created.limits == limits
    assert store.list_quotas("acme") == [(PLAN_ENTITY, quotas)]
    sa = account(store, "acme")
    effective = store.effective_quotas("acme", user=sa.id, client_id="app")
    assert {n: q.value for n, q in effective.items() if q.value is not None} == quotas
    assert {q.source for q in effective.values() if q.value is not None} == {
        "/config/users/<default>"
    }
    byte_rate = effective["producer_byte_rate"].value
    assert isinstance(byte_rate, int)  # Kafka's unit: whole bytes/s


def test_given_limits_win_and_a_users_own_quota_wins(store: TenantStore) -> None:
    own = TenantLimits(3, GIB, 4, 65536)
    created = store.create_tenant(
        display_name="Acme", plan="standard", limits=own, tenant_id="acme", actor=OPERATOR
    )
    assert created.limits == own
    sa = account(store, "acme")
    store.set_quotas("acme", QuotaEntity(sa.id, None), {"producer_byte_rate": 5}, actor=OPERATOR)
    effective = store.effective_quotas("acme", user=sa.id, client_id="")
    assert (effective["producer_byte_rate"].value, effective["producer_byte_rate"].source) == (
        5,
        f"/config/users/{sa.id}",
    )
    assert effective["consumer_byte_rate"].value == 20 * MIB  # still the plan's


def test_unknown_plans_are_refused_naming_the_known_ones(store: TenantStore) -> None:
    with pytest.raises(ValidationError) as refused:
        store.create_tenant(display_name="Acme", plan="gold", tenant_id="acme", actor=OPERATOR)
    assert refused.value.field == "plan"
    assert "unknown plan 'gold'; the plans are: enterprise, free, standard" in str(refused.value)
    assert "pier admin plans list" in str(refused.value)
    assert store.list_tenants().items == []
    store.create_tenant(display_name="Acme", plan="free", tenant_id="acme", actor=OPERATOR)
    with pytest.raises(ValidationError, match="unknown plan 'gold'"):
        store.update_tenant("acme", plan="gold", actor=OPERATOR)
    assert store.get_tenant("acme").plan == "free"


def test_moving_to_another_plan_takes_its_limits_and_quotas(store: TenantStore) -> None:
    store.create_tenant(display_name="Acme", plan="free", tenant_id="acme", actor=OPERATOR)
    store.set_quotas("acme", PLAN_ENTITY, {"controller_mutation_rate": 2.0}, actor=OPERATOR)
    moved = store.update_tenant("acme", plan="enterprise", actor=OPERATOR)
    assert moved.limits == DOCUMENTED["enterprise"][0]
    assert store.list_quotas("acme") == [(PLAN_ENTITY, DOCUMENTED["enterprise"][1])]
    entry = store.audit_log(tenant_id="acme", limit=1).items[0]
    assert (entry.action, entry.details["quotas"]["request_percentage"]) == (
        "tenant.updated",
        400.0,
    )
    own = TenantLimits(1, 1, 1, 1)
    assert store.update_tenant("acme", plan="standard", limits=own, actor=OPERATOR).limits == own
    renamed = store.update_tenant("acme", display_name="Acme 2", actor=OPERATOR)
    assert renamed.limits == own  # no plan change: nothing re-applied


def test_a_plan_document_carries_limits_and_quotas(store: TenantStore) -> None:
    prices = {"ingress_gib": PlanDimension(Decimal(0), (PlanTier(None, Decimal("0.1")),))}
    plan = Plan("team", "EUR", prices, TenantLimits(5, GIB, 6, 65536, 10 * MIB, None), {})
    plan = replace(plan, quotas={"consumer_byte_rate": 3 * MIB, "controller_mutation_rate": 0.5})
    assert store.put_plan(plan, actor=OPERATOR) == plan
    assert store.get_plan("team") == plan
    created = store.create_tenant(display_name="T", plan="team", tenant_id="team", actor=OPERATOR)
    assert created.limits == plan.limits
    bad: Any
    for bad, field in (
        ({"producer_byte_rate": 1.5}, "quotas.producer_byte_rate"),
        ({"producer_byte_rate": None}, "quotas.producer_byte_rate"),
        ({"bytes": 1}, "quotas.bytes"),
    ):
        with pytest.raises(ValidationError) as refused:
            store.put_plan(replace(plan, quotas=bad), actor=OPERATOR)
        assert refused.value.field == field
    with pytest.raises(ValidationError) as refused:
        store.put_plan(replace(plan, limits=TenantLimits(0, 1, 1, 1)), actor=OPERATOR)
    assert refused.value.field == "limits.max_partitions"


def test_an_older_store_gets_the_defaults_and_keeps_its_plans(empty_store_url: str) -> None:
    mine = Plan(
        "free", "USD", {"requests": PlanDimension(Decimal(5), (PlanTier(None, Decimal(1)),))}
    )
    with TenantStore.open(empty_store_url) as store:
        store.upgrade("0004")
        with store._db.engine.begin() as connection:  # a plan as 0004 knew it
            _insert_plan_at_0004(connection, mine)
        store.upgrade()
        free = store.get_plan("free")
        assert (free.currency, free.dimensions) == (mine.currency, mine.dimensions)
        assert (free.limits, free.quotas) == (DEFAULT_LIMITS, {})  # the operator's plan, kept
        assert [p.name for p in store.list_plans()] == ["enterprise", "free", "standard"]
        assert store.get_plan("standard").limits == DOCUMENTED["standard"][0]
        with store._db.engine.begin() as connection:
            command.downgrade(_alembic_config(connection), "0004")
        store.upgrade()  # and back: the defaults are not added twice
        assert [p.name for p in store.list_plans()] == ["enterprise", "free", "standard"]


def _insert_plan_at_0004(connection: Connection, plan: Plan) -> None:
    plans = table("plans", column("name"), column("currency"), column("updated_at", UtcDateTime))
    dimensions = table(
        "plan_dimensions", column("plan_name"), column("dimension"), column("included", Money)
    )
    tiers = table(
        "plan_tiers",
        *(column(name) for name in ("plan_name", "dimension", "position")),
        column("up_to", Money),
        column("unit_price", Money),
    )
    now = datetime(2026, 1, 1, tzinfo=UTC)
    connection.execute(insert(plans).values(name=plan.name, currency=plan.currency, updated_at=now))
    for name, dimension in plan.dimensions.items():
        connection.execute(
            insert(dimensions).values(
                plan_name=plan.name, dimension=name, included=dimension.included
            )
        )
        for position, tier in enumerate(dimension.tiers):
            connection.execute(
                insert(tiers).values(
                    plan_name=plan.name,
                    dimension=name,
                    position=position,
                    up_to=tier.up_to,
                    unit_price=tier.unit_price,
                )
            )
