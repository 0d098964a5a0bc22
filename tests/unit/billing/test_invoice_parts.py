"""Pure parts of invoicing: UTC month bounds, units, and the one rounding rule."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.invoice.periods import PeriodError, bounds
from billing.invoice.pricing import amount, money, quantity, shown
from tenancy.domain import PlanDimension, PlanTier

pytestmark = pytest.mark.unit


def test_periods_are_utc_months() -> None:
    assert bounds("2026-12") == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert bounds("2028-02")[1] == datetime(2028, 3, 1, tzinfo=UTC)
    for bad in ("2026-13", "2026-1", "26-01", "2026-00"):
        with pytest.raises(PeriodError):
            bounds(bad)


def test_units_are_binary_and_exact() -> None:
    assert quantity("ingress_gib", Decimal(3 * 2**30)) == 3
    assert quantity("storage_gib_hours", Decimal(2**30 * 3_600_000 * 5)) == 5
    assert quantity("connection_hours", Decimal(5_400_000)) == Decimal("1.5")
    assert shown(quantity("ingress_gib", Decimal(1))) == Decimal("0.000000000931")


def test_each_line_is_rounded_once_half_even() -> None:
    price = PlanDimension(Decimal(0), (PlanTier(None, Decimal("0.001")),))
    assert amount(price, "requests", Decimal(5)) == Decimal("0.00")  # 0.005 → 0.00 (even)
    assert amount(price, "requests", Decimal(15)) == Decimal("0.02")  # 0.015 → 0.02 (even)
    assert amount(price, "requests", Decimal(16)) == Decimal("0.02")
    assert money(Decimal(3)) == "3.00"


def test_invoice_lines_write_numbers_fixed_point() -> None:
    from billing.invoice.issue import Line

    tiny = Line("usage", "2026-01", "ingress_gib", Decimal(41), Decimal("0.00")).json()
    assert tiny["quantity"] == "0.000000038184" and tiny["measure"] == "41"
    big = Line("usage", "2026-01", "requests", Decimal("1E+3"), Decimal("0.00")).json()
    assert big["measure"] == "1000"
