"""Routes for plans: list, get and put (create or replace) by name.

Owns: `/v1/plans`, `/v1/plans/{name}` and the plan's JSON form (docs/plans.md). Money and
allowances travel as decimal strings (never floats), parsed and checked by the store's
`plan_from_json`; tier `up_to` null means "no upper bound". `limits` are the tenant limits and
`quotas` the default client quotas (Kafka's names and units) a tenant gets on the plan, and
`authorization` whether its tenants' service accounts need ACLs ("acls", the default) or not
("open"). Runs on the event loop; store calls go through the store thread pool.
"""

from __future__ import annotations

from dataclasses import asdict
from decimal import Decimal
from typing import Any

from aiohttp import web

from tenancy.api.context import actor_of, context_of
from tenancy.api.responses import json_ok
from tenancy.api.validation import BODY, PARAMS
from tenancy.domain import Plan
from tenancy.plan_rules import plan_from_json

routes = web.RouteTableDef()


def _decimal(value: Decimal | None) -> str | None:
    # Plain notation, trailing zeros dropped: NUMERIC(38, 12) reads back as 0.090000000000,
    # and str() would write a zero as "0E-12"; the document's decimal pattern wants neither.
    return None if value is None else format(value.normalize(), "f")


def plan_json(plan: Plan) -> dict[str, Any]:
    dimensions = {
        name: {
            "included": _decimal(dimension.included),
            "tiers": [
                {"up_to": _decimal(tier.up_to), "unit_price": _decimal(tier.unit_price)}
                for tier in dimension.tiers
            ],
        }
        for name, dimension in plan.dimensions.items()
    }
    return {
        "name": plan.name,
        "currency": plan.currency,
        "dimensions": dimensions,
        "limits": asdict(plan.limits),
        "quotas": dict(plan.quotas),
        "authorization": plan.authorization,
    }


@routes.get("/v1/plans")
async def list_plans(request: web.Request) -> web.Response:
    ctx = context_of(request)
    return json_ok({"items": [plan_json(plan) for plan in await ctx.run(ctx.store.list_plans)]})


@routes.get("/v1/plans/{name}")
async def get_plan(request: web.Request) -> web.Response:
    ctx = context_of(request)
    return json_ok(plan_json(await ctx.run(ctx.store.get_plan, request[PARAMS]["name"])))


@routes.put("/v1/plans/{name}")
async def put_plan(request: web.Request) -> web.Response:
    ctx = context_of(request)
    plan = plan_from_json({**request[BODY], "name": request[PARAMS]["name"]})
    return json_ok(plan_json(await ctx.run(ctx.store.put_plan, plan, actor=actor_of(request))))
