"""Routes for tenants: create, list, get, update, soft-delete, suspend, resume.

Owns: `/v1/tenants` and `/v1/tenants/{id}[/suspend|/resume]`, and the tenant's JSON form. A PATCH
of `limits` may name only some limits; the others keep their current values (read first — a
concurrent PATCH of other limits can be overwritten, the usual last-writer-wins of PATCH without
ETags). The tenant-wide rate caps (`max_producer_byte_rate`, `max_consumer_byte_rate`) are
optional on create (absent = no cap) and a PATCH sets one to null to remove it. A tenant created
without `limits` gets its plan's; a PATCH that moves it to another plan gives it the new plan's
limits, with the `limits` of the same PATCH applied over them. DELETE is the
store's soft delete (status `deleted`) and answers the tenant. `authorization` ("acls": its
service accounts need ACLs; "open") is the plan's unless given on create, and a PATCH may set it;
a move to another plan takes the plan's unless the same PATCH gives one. A PATCH, suspension,
resumption or deletion is answered once every live gateway applies it, or after at most 1 s
(`tenancy.api.propagation`). Handlers run on the event loop; every store call goes through the
store thread pool.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import asdict, replace
from typing import Any

from aiohttp import web

from tenancy.api.context import actor_of, context_of
from tenancy.api.propagation import confirm_in_force
from tenancy.api.responses import iso, json_ok, page_args, page_response
from tenancy.api.validation import BODY, PARAMS
from tenancy.domain import Tenant, TenantLimits
from tenancy.errors import NotFoundError

routes = web.RouteTableDef()


def tenant_json(tenant: Tenant) -> dict[str, Any]:
    return {
        "id": tenant.id,
        "display_name": tenant.display_name,
        "plan": tenant.plan,
        "status": tenant.status,
        "limits": asdict(tenant.limits),
        "authorization": tenant.authorization,
        "created_at": iso(tenant.created_at),
        "updated_at": iso(tenant.updated_at),
    }


@routes.post("/v1/tenants")
async def create_tenant(request: web.Request) -> web.Response:
    ctx, body = context_of(request), request[BODY]
    limits = TenantLimits(**body["limits"]) if "limits" in body else None
    tenant = await ctx.run(
        ctx.store.create_tenant,
        display_name=body["display_name"],
        plan=body["plan"],
        limits=limits,
        tenant_id=body.get("id"),
        authorization=body.get("authorization"),
        actor=actor_of(request),
    )
    response = json_ok(tenant_json(tenant), status=201)
    response.headers["Location"] = f"/v1/tenants/{tenant.id}"
    return response


@routes.get("/v1/tenants")
async def list_tenants(request: web.Request) -> web.Response:
    ctx = context_of(request)
    status = request[PARAMS].get("status")
    page = await ctx.run(ctx.store.list_tenants, status=status, **page_args(request))
    return page_response(request, page, tenant_json)


@routes.get("/v1/tenants/{id}")
async def get_tenant(request: web.Request) -> web.Response:
    ctx = context_of(request)
    return json_ok(tenant_json(await ctx.run(ctx.store.get_tenant, request[PARAMS]["id"])))


@routes.patch("/v1/tenants/{id}")
async def update_tenant(request: web.Request) -> web.Response:
    ctx, body, tenant_id = context_of(request), request[BODY], request[PARAMS]["id"]
    limits = None
    if "limits" in body:
        current = await ctx.run(ctx.store.get_tenant, tenant_id)
        base = current.limits
        if body.get("plan", current.plan) != current.plan:
            with suppress(NotFoundError):  # the store refuses an unknown plan, naming the known
                base = (await ctx.run(ctx.store.get_plan, body["plan"])).limits
        limits = replace(base, **body["limits"])
    tenant = await ctx.run(
        ctx.store.update_tenant,
        tenant_id,
        actor=actor_of(request),
        display_name=body.get("display_name"),
        plan=body.get("plan"),
        limits=limits,
        authorization=body.get("authorization"),
    )
    return await confirm_in_force(request, json_ok(tenant_json(tenant)))


async def _set_status(request: web.Request, status: str) -> web.Response:
    ctx = context_of(request)
    tenant = await ctx.run(
        ctx.store.set_tenant_status, request[PARAMS]["id"], status, actor=actor_of(request)
    )
    return await confirm_in_force(request, json_ok(tenant_json(tenant)))


@routes.delete("/v1/tenants/{id}")
async def delete_tenant(request: web.Request) -> web.Response:
    return await _set_status(request, "deleted")


@routes.post("/v1/tenants/{id}/suspend")
async def suspend_tenant(request: web.Request) -> web.Response:
    return await _set_status(request, "suspended")


@routes.post("/v1/tenants/{id}/resume")
async def resume_tenant(request: web.Request) -> web.Response:
    return await _set_status(request, "active")
