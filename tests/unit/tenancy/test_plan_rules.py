"""Plan values: graduated pricing past the allowance, the JSON form with string money, validation."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tenancy.domain import Plan, PlanDimension, PlanTier
from tenancy.errors import ValidationError
from tenancy.plan_rules import charge, check_plan, plan_from_json, plan_to_json

pytestmark = pytest.mark.unit

INGRESS = PlanDimension(
    Decimal(10),
    (
        PlanTier(Decimal(100), Decimal("0.10")),
        PlanTier(Decimal(1000), Decimal("0.05")),
        PlanTier(None, Decimal("0.01")),
    ),
)


@pytest.mark.parametrize(
    ("quantity", "price"),
    [
        ("0", "0"),
        ("10", "0"),  # the allowance is free
        ("60", "5.00"),  # 50 billable at 0.10
        ("110", "10.00"),  # exactly the first tier
        ("160", "12.50"),  # 100 × 0.10 + 50 × 0.05
        ("1010", "55.00"),  # 100 × 0.10 + 900 × 0.05
        ("2010", "65.00"),  # … + 1000 × 0.01
        ("10.5", "0.050"),
    ],
)
def test_graduated_charge(quantity: str, price: str) -> None:
    assert charge(INGRESS, Decimal(quantity)) == Decimal(price)


def test_json_round_trip_keeps_money_exact() -> None:
    plan = Plan("pro", "EUR", {"ingress_gib": INGRESS})
    data = plan_to_json(plan)
    assert data["dimensions"]["ingress_gib"]["tiers"][0] == {"up_to": "100", "unit_price": "0.10"}
    assert data["dimensions"]["ingress_gib"]["tiers"][2]["up_to"] is None
    assert plan_from_json(data) == plan


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "pro", "currency": "EUR"}, "dimensions"),
        (
            {
                "name": "pro",
                "currency": "EUR",
                "dimensions": {"x": {"tiers": [{"unit_price": 1.5}]}},
            },
            "dimensions.x.tiers.0.unit_price",
        ),
        (
            {
                "name": "pro",
                "currency": "EUR",
                "dimensions": {"x": {"tiers": [{"unit_price": "abc"}]}},
            },
            "dimensions.x.tiers.0.unit_price",
        ),
        ({"name": "pro", "currency": "EUR", "dimensions": {"x": {"tiers": "no"}}}, "dimensions.x"),
        (
            {"name": 5, "currency": "EUR", "dimensions": {"x": {"tiers": [{"unit_price": "1"}]}}},
            "name",
        ),
    ],
)
def test_bad_json(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as error:
        plan_from_json(data)
    assert error.value.field == field


def test_amount_limits() -> None:
    huge = PlanDimension(Decimal(0), (PlanTier(None, Decimal(10) ** 26),))
    with pytest.raises(ValidationError):
        check_plan(Plan("pro", "EUR", {"x": huge}))
    fine = PlanDimension(Decimal("0.000000000001"), (PlanTier(None, Decimal("1E+3")),))
    assert check_plan(Plan("pro", "EUR", {"x": fine})).dimensions["x"] == fine
