"""Plans as values: validation, the JSON form (money as strings), and graduated pricing.

A plan prices billing dimensions (`ingress_gib`, `egress_gib`, `storage_gib_hours`, `requests`, or
any `[a-z][a-z0-9_]*` name). For each, `included` units are free; the rest is priced by graduated
tiers: tier i covers billable units up to `up_to` (cumulative, counted after the allowance), each
unit at `unit_price`; the last tier has no bound. Money is `Decimal`, at most 12 decimal places
(the NUMERIC(38, 12) column), never a float. A plan also carries the limits its tenants get
(`TenantLimits`; absent from a document: `DEFAULT_LIMITS`), their default client quotas (Kafka
quota names and units; absent: none) and their `authorization`: "acls" (a service account may do
only what an ACL allows; the default) or "open" (a resource no ACL names is open to the tenant's
accounts), see `AUTHORIZATIONS`. The format is documented in docs/plans.md. Pure; safe from any
thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from tenancy.domain import DEFAULT_LIMITS, Plan, PlanDimension, PlanTier, TenantLimits
from tenancy.errors import ValidationError
from tenancy.limits import OPTIONAL_LIMITS, check_limits
from tenancy.quota_chain import check_quotas

PLAN_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
DIMENSION = re.compile(r"[a-z][a-z0-9_]{0,63}")
CURRENCY = re.compile(r"[A-Z]{3}")  # ISO 4217
MAX_DIMENSIONS = 64
MAX_TIERS = 32
# Whether a tenant's service accounts need ACLs, as Kafka's `allow.everyone.if.no.acl.found`
# (false: "acls", true: "open"); the first is the default for plans and so for new tenants.
AUTHORIZATIONS = ("acls", "open")
DEFAULT_AUTHORIZATION = "acls"
_LIMIT = Decimal(10) ** 26  # NUMERIC(38, 12) holds 26 integer digits


def check_amount(field: str, value: object, *, positive: bool = False) -> Decimal:
    """A finite, non-negative Decimal of at most 12 decimal places (positive when asked)."""
    if not isinstance(value, Decimal) or not value.is_finite():
        raise ValidationError(field, "must be a finite Decimal")
    exponent = value.normalize().as_tuple().exponent
    if value < 0 or (positive and value == 0):
        raise ValidationError(field, "must be positive" if positive else "must be >= 0")
    if value >= _LIMIT:
        raise ValidationError(field, "is too large")
    if isinstance(exponent, int) and exponent < -12:
        raise ValidationError(field, "must have at most 12 decimal places")
    return value


def check_authorization(field: str, value: object) -> str:
    if not isinstance(value, str) or value not in AUTHORIZATIONS:
        raise ValidationError(field, f"must be one of {', '.join(AUTHORIZATIONS)}")
    return value


def _check_dimension(name: str, dimension: object) -> None:
    if not isinstance(name, str) or DIMENSION.fullmatch(name) is None:
        raise ValidationError("dimensions", f"dimension name {name!r} must match [a-z][a-z0-9_]*")
    if not isinstance(dimension, PlanDimension):
        raise ValidationError(f"dimensions.{name}", "must be a PlanDimension")
    check_amount(f"dimensions.{name}.included", dimension.included)
    tiers = dimension.tiers
    if not 1 <= len(tiers) <= MAX_TIERS:
        raise ValidationError(f"dimensions.{name}.tiers", f"needs 1 to {MAX_TIERS} tiers")
    previous = Decimal(0)
    for index, tier in enumerate(tiers):
        field = f"dimensions.{name}.tiers.{index}"
        if not isinstance(tier, PlanTier):
            raise ValidationError(field, "must be a PlanTier")
        check_amount(f"{field}.unit_price", tier.unit_price)
        last = index == len(tiers) - 1
        if last != (tier.up_to is None):
            raise ValidationError(f"{field}.up_to", "only the last tier is unbounded (null)")
        if tier.up_to is not None:
            if check_amount(f"{field}.up_to", tier.up_to, positive=True) <= previous:
                raise ValidationError(f"{field}.up_to", "must increase from tier to tier")
            previous = tier.up_to


def check_plan(plan: object) -> Plan:
    if not isinstance(plan, Plan):
        raise ValidationError("plan", "must be a Plan")
    if not isinstance(plan.name, str) or PLAN_NAME.fullmatch(plan.name) is None:
        raise ValidationError("name", "must match [a-z0-9][a-z0-9_.-]{0,63}")
    if not isinstance(plan.currency, str) or CURRENCY.fullmatch(plan.currency) is None:
        raise ValidationError("currency", "must be an ISO 4217 code such as EUR")
    if not isinstance(plan.dimensions, Mapping) or not 1 <= len(plan.dimensions) <= MAX_DIMENSIONS:
        raise ValidationError("dimensions", f"needs 1 to {MAX_DIMENSIONS} dimensions")
    for name, dimension in plan.dimensions.items():
        _check_dimension(name, dimension)
    check_limits(plan.limits)
    check_authorization("authorization", plan.authorization)
    return replace(plan, quotas=_check_plan_quotas(plan.quotas))


def _check_plan_quotas(quotas: object) -> dict[str, float]:
    if not isinstance(quotas, Mapping):
        raise ValidationError("quotas", "must map Kafka quota names to values")
    if not quotas:
        return {}
    checked: dict[str, float] = {}
    for name, value in check_quotas(quotas).items():
        if value is None:
            raise ValidationError(f"quotas.{name}", "must be a number (leave a quota out for none)")
        checked[name] = value
    return checked


def charge(dimension: PlanDimension, quantity: Decimal) -> Decimal:
    """The price of `quantity` units: the allowance is free, the rest walks the graduated tiers."""
    billable = max(Decimal(0), quantity - dimension.included)
    total, floor = Decimal(0), Decimal(0)
    for tier in dimension.tiers:
        ceiling = billable if tier.up_to is None else min(billable, tier.up_to)
        if ceiling > floor:
            total += (ceiling - floor) * tier.unit_price
        if tier.up_to is None or billable <= tier.up_to:
            break
        floor = tier.up_to
    return total


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The plan with every amount as a decimal string (JSON numbers would lose precision)."""
    return {
        "name": plan.name,
        "currency": plan.currency,
        "dimensions": {
            name: {
                "included": str(dimension.included),
                "tiers": [
                    {
                        "up_to": None if tier.up_to is None else str(tier.up_to),
                        "unit_price": str(tier.unit_price),
                    }
                    for tier in dimension.tiers
                ],
            }
            for name, dimension in plan.dimensions.items()
        },
        "limits": asdict(plan.limits),
        "quotas": dict(plan.quotas),
        "authorization": plan.authorization,
    }


def limits_from_json(data: object, field: str = "limits") -> TenantLimits:
    """A plan document's `limits`: the four limits required, the rate caps and the group and
    transactional-id counts optional."""
    if data is None:
        return DEFAULT_LIMITS
    if not isinstance(data, Mapping):
        raise ValidationError(field, "must be an object")
    known = [f.name for f in fields(TenantLimits)]
    for name in data:
        if name not in known:
            raise ValidationError(
                f"{field}.{name}", f"unknown limit; the limits are {', '.join(known)}"
            )
    missing = [name for name in known if name not in data and name not in OPTIONAL_LIMITS]
    if missing:
        raise ValidationError(f"{field}.{missing[0]}", "is required")
    return check_limits(TenantLimits(**data), field)


def _decimal(field: str, value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValidationError(field, "must be a decimal string")
    try:
        return Decimal(value)
    except InvalidOperation:
        raise ValidationError(field, "must be a decimal string") from None


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    """Parse and validate `plan_to_json`'s form; ValidationError names the bad field."""
    dimensions_in = data.get("dimensions")
    if not isinstance(dimensions_in, Mapping):
        raise ValidationError("dimensions", "must be an object")
    dimensions: dict[str, PlanDimension] = {}
    for name, body in dimensions_in.items():
        if not isinstance(body, Mapping) or not isinstance(body.get("tiers"), list):
            raise ValidationError(f"dimensions.{name}", "needs included and a tiers list")
        tiers = []
        for index, tier in enumerate(body["tiers"]):
            field = f"dimensions.{name}.tiers.{index}"
            if not isinstance(tier, Mapping):
                raise ValidationError(field, "must be an object")
            up_to = tier.get("up_to")
            tiers.append(
                PlanTier(
                    None if up_to is None else _decimal(f"{field}.up_to", up_to),
                    _decimal(f"{field}.unit_price", tier.get("unit_price")),
                )
            )
        included = _decimal(f"dimensions.{name}.included", body.get("included", "0"))
        dimensions[name] = PlanDimension(included, tuple(tiers))
    name, currency, quotas = data.get("name"), data.get("currency"), data.get("quotas", {})
    limits = limits_from_json(data.get("limits"))
    authorization = data.get("authorization", DEFAULT_AUTHORIZATION)
    plan = Plan(name, currency, dimensions, limits, quotas, authorization)  # type: ignore[arg-type]
    return check_plan(plan)
