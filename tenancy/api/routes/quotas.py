"""Routes for client quotas (Kafka's (user, client-id) entities, scoped to a tenant).

Owns: `PUT/GET/DELETE /v1/tenants/{id}/quotas` and `GET .../quotas/effective`. An entity is
`{"user": ..., "client_id": ...}` with Kafka's meaning: an absent/null part is not part of the
entity, `<default>` is the default entity. PUT merges: a quota given as null is removed, unnamed
ones are kept (as kafka-configs `--alter --add-config/--delete-config`); it answers the entity's
quotas afterwards. DELETE names its entity with `?user=&client_id=` (a DELETE has no body).
`effective` answers each of the four quotas with its value and the ZooKeeper-style path of the
level that supplied it (docs/gateway-options.md). Runs on the event loop; store calls go through the
store thread pool.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tenancy.api.context import actor_of, context_of
from tenancy.api.openapi_schemas import QUOTA_NAMES
from tenancy.api.responses import json_ok
from tenancy.api.validation import BODY, PARAMS
from tenancy.domain import EffectiveQuota, QuotaEntity

routes = web.RouteTableDef()


def entity_json(entity: QuotaEntity) -> dict[str, str | None]:
    return {"user": entity.user, "client_id": entity.client_id}


def entry_json(entity: QuotaEntity, quotas: dict[str, float]) -> dict[str, Any]:
    return {"entity": entity_json(entity), "quotas": dict(quotas)}


@routes.put("/v1/tenants/{id}/quotas")
async def set_quotas(request: web.Request) -> web.Response:
    ctx, body, tenant_id = context_of(request), request[BODY], request[PARAMS]["id"]
    entity = QuotaEntity(user=body["entity"].get("user"), client_id=body["entity"].get("client_id"))
    await ctx.run(ctx.store.set_quotas, tenant_id, entity, body["quotas"], actor=actor_of(request))
    entries = await ctx.run(ctx.store.list_quotas, tenant_id)
    current: dict[str, float] = next((quotas for known, quotas in entries if known == entity), {})
    return json_ok(entry_json(entity, current))


@routes.get("/v1/tenants/{id}/quotas")
async def list_quotas(request: web.Request) -> web.Response:
    ctx = context_of(request)
    entries = await ctx.run(ctx.store.list_quotas, request[PARAMS]["id"])
    return json_ok({"items": [entry_json(entity, quotas) for entity, quotas in entries]})


@routes.delete("/v1/tenants/{id}/quotas")
async def delete_quotas(request: web.Request) -> web.Response:
    ctx, params = context_of(request), request[PARAMS]
    entity = QuotaEntity(user=params.get("user"), client_id=params.get("client_id"))
    await ctx.run(ctx.store.delete_quotas, params["id"], entity, actor=actor_of(request))
    return web.Response(status=204)


def effective_json(quota: EffectiveQuota | None) -> dict[str, Any]:
    if quota is None:
        return {"value": None, "source": None}
    return {"value": quota.value, "source": quota.source}


@routes.get("/v1/tenants/{id}/quotas/effective")
async def effective_quotas(request: web.Request) -> web.Response:
    ctx, params = context_of(request), request[PARAMS]
    user, client_id = params["user"], params["client_id"]
    resolved = await ctx.run(
        ctx.store.effective_quotas, params["id"], user=user, client_id=client_id
    )
    quotas = {name: effective_json(resolved.get(name)) for name in QUOTA_NAMES}
    return json_ok({"user": user, "client_id": client_id, "quotas": quotas})
