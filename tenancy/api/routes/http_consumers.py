"""Routes for the operator view of tenants' HTTP consumer instances (the gateway's v2 consumers).

Owns: `/v1/tenants/{id}/http-consumers` (GET: every instance of the tenant on each gateway the API
was given, each tagged with its gateway; gateways that did not answer are listed as
`unreachable`) and `/v1/tenants/{id}/http-consumers/{group}/{instance}` (DELETE: closed on the
gateway that holds it; 404 when none does). Instances live in gateway processes, so the API asks
each gateway's operator endpoint (`/operator/v1/...` on its HTTP port) with the caller's own
operator token, which the gateway checks against the same store. Handlers run on the event loop;
the gateway calls are aiohttp requests with a 5 s timeout each.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

from tenancy.api.context import context_of
from tenancy.api.responses import json_ok
from tenancy.api.validation import PARAMS
from tenancy.errors import NotFoundError

routes = web.RouteTableDef()
TIMEOUT = aiohttp.ClientTimeout(total=5)


def _path(tenant: str, *rest: str) -> str:
    parts = "".join(f"/{quote(part, safe='')}" for part in rest)
    return f"/operator/v1/tenants/{quote(tenant, safe='')}/http-consumers{parts}"


async def _ask(
    session: aiohttp.ClientSession, method: str, url: str, token: str
) -> tuple[int, Any]:
    async with session.request(method, url, headers={"Authorization": token}) as answer:
        body = await answer.json() if answer.status == 200 else None
        return answer.status, body


@routes.get("/v1/tenants/{id}/http-consumers")
async def list_http_consumers(request: web.Request) -> web.Response:
    gateways = context_of(request).gateway_http
    tenant = request[PARAMS]["id"]
    token = request.headers.get("Authorization", "")
    items: list[dict[str, Any]] = []
    unreachable: list[str] = []
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        answers = await asyncio.gather(
            *(_ask(session, "GET", base + _path(tenant), token) for base in gateways),
            return_exceptions=True,
        )
    for base, answer in zip(gateways, answers, strict=True):
        if isinstance(answer, BaseException) or answer[0] != 200:
            unreachable.append(base)
            continue
        items += [{"gateway": base, **item} for item in answer[1].get("items", [])]
    return json_ok({"items": items, "unreachable": unreachable})


@routes.delete("/v1/tenants/{id}/http-consumers/{group}/{instance}")
async def delete_http_consumer(request: web.Request) -> web.Response:
    gateways = context_of(request).gateway_http
    params = request[PARAMS]
    path = _path(params["id"], params["group"], params["instance"])
    token = request.headers.get("Authorization", "")
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        for base in gateways:
            try:
                status, _body = await _ask(session, "DELETE", base + path, token)
            except (aiohttp.ClientError, TimeoutError):
                continue
            if status == 204:
                return web.Response(status=204)
    raise NotFoundError(f"no known gateway holds HTTP consumer {params['instance']!r}")
