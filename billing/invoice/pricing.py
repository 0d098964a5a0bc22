"""Billing dimensions and the one rounding rule.

Dimensions (the names a plan prices; a plan's other dimensions are not metered and bill nothing):

| dimension | measure (rollup column) | unit |
|---|---|---|
| `ingress_gib` | `bytes_in` | GiB = 2^30 bytes |
| `egress_gib` | `bytes_out` | GiB |
| `storage_gib_hours` | `storage_byte_ms` | GiB-hour = 2^30 bytes × 3,600,000 ms |
| `requests` | `requests` | one request |
| `connection_hours` | `connection_ms` | hour |
| `partition_hours` | `partition_ms` | hour |

Rounding, stated once: quantities are exact (the measure divided by the unit in a 60-digit decimal
context) and a line's amount is the plan's charge for the exact quantity rounded ONCE to 0.01 of
the currency, half to even. An adjustment line for an earlier period is the rounded charge of that
period's new total minus the amounts already billed for it, so every period's lines add up to the
rounded charge of its total. Quantities are shown with 12 decimal places. Pure; thread-safe.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from typing import Final

from tenancy.domain import PlanDimension
from tenancy.plan_rules import charge

GIB: Final = Decimal(2**30)
HOUR_MS: Final = Decimal(3_600_000)
UNITS: Final[dict[str, tuple[str, Decimal]]] = {
    "ingress_gib": ("bytes_in", GIB),
    "egress_gib": ("bytes_out", GIB),
    "storage_gib_hours": ("storage_byte_ms", GIB * HOUR_MS),
    "requests": ("requests", Decimal(1)),
    "connection_hours": ("connection_ms", HOUR_MS),
    "partition_hours": ("partition_ms", HOUR_MS),
}
CENT: Final = Decimal("0.01")
SHOWN: Final = Decimal("1e-12")
EXACT: Final = Context(prec=60)


def quantity(dimension: str, measure: Decimal) -> Decimal:
    """The exact quantity of `measure` in `dimension`'s unit."""
    return EXACT.divide(measure, UNITS[dimension][1])


def shown(value: Decimal) -> Decimal:
    return value.quantize(SHOWN, rounding=ROUND_HALF_EVEN, context=EXACT)


def amount(prices: PlanDimension, dimension: str, measure: Decimal) -> Decimal:
    """The rounded charge for `measure` (raw units) under one plan dimension."""
    with localcontext(EXACT):
        exact = charge(prices, quantity(dimension, measure))
    return exact.quantize(CENT, rounding=ROUND_HALF_EVEN, context=EXACT)


def money(value: Decimal) -> str:
    return str(value.quantize(CENT, rounding=ROUND_HALF_EVEN, context=EXACT))
