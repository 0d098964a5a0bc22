"""Plans on both stores: exact Decimal money round trips, whole-plan replacement, validation."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tenancy.domain import Plan, PlanDimension, PlanTier
from tenancy.errors import NotFoundError, ValidationError
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR

pytestmark = pytest.mark.integration


def _plan(name: str = "pro", price: str = "0.000000000001") -> Plan:
    return Plan(
        name,
        "EUR",
        {
            "ingress_gib": PlanDimension(
                Decimal("10"),
                (PlanTier(Decimal("100"), Decimal("0.09")), PlanTier(None, Decimal(price))),
            ),
            "requests": PlanDimension(Decimal("1000000"), (PlanTier(None, Decimal("0.0000004")),)),
        },
    )


def test_plan_round_trips_exactly(store: TenantStore) -> None:
    plan = _plan(price="12345678901234.123456789012")
    assert store.put_plan(plan, actor=OPERATOR) == plan
    assert store.get_plan("pro") == plan
    assert [p.name for p in store.list_plans()] == ["enterprise", "free", "pro", "standard"]


def test_put_replaces_the_whole_plan(store: TenantStore) -> None:
    store.put_plan(_plan(), actor=OPERATOR)
    smaller = Plan(
        "pro", "USD", {"egress_gib": PlanDimension(Decimal(0), (PlanTier(None, Decimal("0.05")),))}
    )
    store.put_plan(smaller, actor=OPERATOR)
    assert store.get_plan("pro") == smaller
    assert store.audit_log(limit=1).items[0].details["currency"] == "USD"


def test_unknown_plan_is_not_found(store: TenantStore) -> None:
    with pytest.raises(NotFoundError):
        store.get_plan("nope")


@pytest.mark.parametrize(
    ("plan", "field"),
    [
        (Plan("Pro!", "EUR", _plan().dimensions), "name"),
        (Plan("pro", "euro", _plan().dimensions), "currency"),
        (Plan("pro", "EUR", {}), "dimensions"),
        (
            Plan("pro", "EUR", {"Bad": PlanDimension(Decimal(0), (PlanTier(None, Decimal(1)),))}),
            "dimensions",
        ),
        (
            Plan("pro", "EUR", {"x": PlanDimension(Decimal(-1), (PlanTier(None, Decimal(1)),))}),
            "dimensions.x.included",
        ),
        (Plan("pro", "EUR", {"x": PlanDimension(Decimal(0), ())}), "dimensions.x.tiers"),
        (
            Plan(
                "pro", "EUR", {"x": PlanDimension(Decimal(0), (PlanTier(Decimal(5), Decimal(1)),))}
            ),
            "dimensions.x.tiers.0.up_to",
        ),
        (
            Plan(
                "pro",
                "EUR",
                {
                    "x": PlanDimension(
                        Decimal(0),
                        (
                            PlanTier(Decimal(5), Decimal(1)),
                            PlanTier(Decimal(5), Decimal(1)),
                            PlanTier(None, Decimal(1)),
                        ),
                    )
                },
            ),
            "dimensions.x.tiers.1.up_to",
        ),
        (
            Plan(
                "pro",
                "EUR",
                {"x": PlanDimension(Decimal(0), (PlanTier(None, Decimal("0.0000000000001")),))},
            ),
            "dimensions.x.tiers.0.unit_price",
        ),
        (
            Plan("pro", "EUR", {"x": PlanDimension(Decimal(0), (PlanTier(None, Decimal("NaN")),))}),
            "dimensions.x.tiers.0.unit_price",
        ),
    ],
)
def test_invalid_plans(store: TenantStore, plan: Plan, field: str) -> None:
    with pytest.raises(ValidationError) as error:
        store.put_plan(plan, actor=OPERATOR)
    assert error.value.field == field
    assert "pro" not in {p.name for p in store.list_plans()}
