"""Routes for service accounts, a tenant's principals: create and list.

Owns: `/v1/tenants/{id}/service-accounts` and the service account's JSON form. A duplicate name
within the tenant is the store's ConflictError (409). Handlers run on the event loop; store calls
go through the store thread pool.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tenancy.api.context import actor_of, context_of
from tenancy.api.responses import iso, json_ok, page_args, page_response
from tenancy.api.validation import BODY, PARAMS
from tenancy.domain import ServiceAccount

routes = web.RouteTableDef()


def service_account_json(account: ServiceAccount) -> dict[str, Any]:
    return {
        "id": account.id,
        "tenant_id": account.tenant_id,
        "name": account.name,
        "description": account.description,
        "created_at": iso(account.created_at),
    }


@routes.post("/v1/tenants/{id}/service-accounts")
async def create_service_account(request: web.Request) -> web.Response:
    ctx, body = context_of(request), request[BODY]
    account = await ctx.run(
        ctx.store.create_service_account,
        request[PARAMS]["id"],
        name=body["name"],
        description=body.get("description", ""),
        actor=actor_of(request),
    )
    return json_ok(service_account_json(account), status=201)


@routes.get("/v1/tenants/{id}/service-accounts")
async def list_service_accounts(request: web.Request) -> web.Response:
    ctx = context_of(request)
    page = await ctx.run(
        ctx.store.list_service_accounts, request[PARAMS]["id"], **page_args(request)
    )
    return page_response(request, page, service_account_json)
