"""Routes for API keys: create (the secret is in that one response only), list, revoke.

Owns: `/v1/tenants/{id}/api-keys`, `/v1/api-keys/{key}` and the key's JSON form, which never has
a secret field: only the create response adds `secret`, from the store's one-time value. Expiry
is an RFC 3339 timestamp (no offset = UTC). A revocation is answered once every live gateway has
closed the key's connections, or after at most 1 s (`tenancy.api.propagation`). Handlers run on the event loop; store calls go
through the store thread pool.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tenancy.api.context import actor_of, context_of
from tenancy.api.errors import FieldProblem, RequestValidationError
from tenancy.api.propagation import confirm_in_force
from tenancy.api.responses import iso, json_ok, page_args, page_response, parse_time
from tenancy.api.validation import BODY, PARAMS
from tenancy.domain import ApiKey

routes = web.RouteTableDef()


def api_key_json(key: ApiKey) -> dict[str, Any]:
    return {
        "key": key.key_id,
        "tenant_id": key.tenant_id,
        "service_account_id": key.service_account_id,
        "description": key.description,
        "created_at": iso(key.created_at),
        "expires_at": iso(key.expires_at),
        "revoked_at": iso(key.revoked_at),
        "last_used_at": iso(key.last_used_at),
    }


@routes.post("/v1/tenants/{id}/api-keys")
async def create_api_key(request: web.Request) -> web.Response:
    ctx, body = context_of(request), request[BODY]
    try:
        expires_at = parse_time(body.get("expires_at"))
    except ValueError:
        raise RequestValidationError(
            [FieldProblem("body.expires_at", "must be an RFC 3339 date-time")]
        ) from None
    key, secret = await ctx.run(
        ctx.store.create_api_key,
        request[PARAMS]["id"],
        service_account_id=body["service_account_id"],
        description=body.get("description", ""),
        expires_at=expires_at,
        actor=actor_of(request),
    )
    return json_ok({**api_key_json(key), "secret": str(secret)}, status=201)


@routes.get("/v1/tenants/{id}/api-keys")
async def list_api_keys(request: web.Request) -> web.Response:
    ctx = context_of(request)
    page = await ctx.run(ctx.store.list_api_keys, request[PARAMS]["id"], **page_args(request))
    return page_response(request, page, api_key_json)


@routes.delete("/v1/api-keys/{key}")
async def revoke_api_key(request: web.Request) -> web.Response:
    ctx = context_of(request)
    key = await ctx.run(ctx.store.revoke_api_key, request[PARAMS]["key"], actor=actor_of(request))
    return await confirm_in_force(request, json_ok(api_key_json(key)))
