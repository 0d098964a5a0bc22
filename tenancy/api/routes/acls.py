"""Routes for ACLs: create, list, delete one, and delete by filter (Kafka's DeleteAcls).

Owns: `/v1/tenants/{id}/acls[/{acl_id}]` and the ACL's JSON form. `DELETE /acls` with query
filters deletes every ACL of the tenant matching all given filters (an absent filter matches
anything, as Kafka's ANY) and answers the deleted ones; with no filter at all it is refused
(400) — unlike Kafka, so a stray request cannot wipe a tenant's ACLs. The principal must be
`User:<service account id>` of the same tenant (the store checks it: 403 otherwise). Every change
is answered once it is in force on every live gateway, or after at most 1 s
(`tenancy.api.propagation`: the `Pier-Propagation` header says which). Runs on the event loop;
store calls go through the store thread pool.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aiohttp import web

from tenancy.api.context import actor_of, context_of
from tenancy.api.errors import FieldProblem, RequestValidationError
from tenancy.api.propagation import confirm_in_force
from tenancy.api.responses import json_ok, page_args, page_response
from tenancy.api.validation import BODY, PARAMS
from tenancy.domain import Acl

routes = web.RouteTableDef()
FILTERS = (
    "resource_type",
    "pattern_type",
    "resource_name",
    "operation",
    "permission",
    "principal",
    "host",
)
_SCAN_PAGE = 1000


def acl_json(acl: Acl) -> dict[str, Any]:
    return asdict(acl)


@routes.post("/v1/tenants/{id}/acls")
async def create_acl(request: web.Request) -> web.Response:
    ctx, body = context_of(request), request[BODY]
    acl = await ctx.run(
        ctx.store.create_acl, request[PARAMS]["id"], actor=actor_of(request), **body
    )
    return await confirm_in_force(request, json_ok(acl_json(acl), status=201))


@routes.get("/v1/tenants/{id}/acls")
async def list_acls(request: web.Request) -> web.Response:
    ctx = context_of(request)
    page = await ctx.run(ctx.store.list_acls, request[PARAMS]["id"], **page_args(request))
    return page_response(request, page, acl_json)


@routes.delete("/v1/tenants/{id}/acls/{acl_id}")
async def delete_acl(request: web.Request) -> web.Response:
    ctx, params = context_of(request), request[PARAMS]
    await ctx.run(ctx.store.delete_acl, params["id"], params["acl_id"], actor=actor_of(request))
    return await confirm_in_force(request, web.Response(status=204))


@routes.delete("/v1/tenants/{id}/acls")
async def delete_matching_acls(request: web.Request) -> web.Response:
    ctx, params = context_of(request), request[PARAMS]
    wanted = {name: params[name] for name in FILTERS if name in params}
    if not wanted:
        raise RequestValidationError([FieldProblem("query", "name at least one ACL filter")])
    matching = [acl for acl in await _all_acls(request) if _matches(acl, wanted)]
    for acl in matching:
        await ctx.run(ctx.store.delete_acl, params["id"], acl.id, actor=actor_of(request))
    return await confirm_in_force(
        request, json_ok({"deleted": [acl_json(acl) for acl in matching]})
    )


async def _all_acls(request: web.Request) -> list[Acl]:
    ctx, tenant_id = context_of(request), request[PARAMS]["id"]
    found: list[Acl] = []
    cursor: str | None = None
    while True:
        page = await ctx.run(ctx.store.list_acls, tenant_id, cursor=cursor, limit=_SCAN_PAGE)
        found.extend(page.items)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def _matches(acl: Acl, wanted: dict[str, str]) -> bool:
    return all(getattr(acl, name) == value for name, value in wanted.items())
