"""A tenant's own usage and invoices on the tenant HTTP API (the tenant console's Usage and
Invoices pages, docs/console.md).

Owns: `GET /v3/clusters/{cluster_id}/usage?from=&to=[&granularity=hour|day][&topic=]`,
`GET /v3/clusters/{cluster_id}/invoices` and `GET /v3/clusters/{cluster_id}/invoices/{invoice_id}`.
The caller is authenticated like every other route (HTTP Basic, an API key); the tenant read is
always the caller's own (`caller.tenant_id`), never one named by the request: another tenant's
cluster id answers 404 as the v3 routes do. Rows are the admin API's (`tenancy.billing_store`):
the usage record's field names by hour or day. The store is synchronous: its reads run in a worker
thread, at most `MAX_CONCURRENT_READS` at once per gateway, and a window is at most
`MAX_SPAN_DAYS` days, so one tenant cannot make the gateway scan the whole ledger. Errors are
Confluent's error JSON (400/40002 bad window, 404/40404 another tenant's cluster id as the v3
routes answer it, 404 unknown invoice or a gateway started without the store's billing reads),
as the tenant HTTP API's OpenAPI document (`gateway.http.openapi`) states. Runs on the event
loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from aiohttp import web

from gateway.http.context import BillingReader, Caller
from gateway.http.errors import ApiError
from tenancy.billing_store import UsageFilter
from tenancy.errors import NotFoundError, ValidationError

MAX_SPAN_DAYS = 62
MAX_CONCURRENT_READS = 4
DAY_MS = 86_400_000
BAD_REQUEST = 40002
NOT_FOUND = 404
CLUSTER_NOT_FOUND = 40404  # as the v3 routes answer another tenant's cluster id
T = TypeVar("T")


def _ms(name: str, text: str | None) -> int:
    if not text:
        raise ApiError(400, f"the query parameter {name!r} is required (RFC 3339)", BAD_REQUEST)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, f"{name!r} must be an RFC 3339 date-time", BAD_REQUEST) from None
    if moment.tzinfo is None:
        raise ApiError(400, f"{name!r} must name its UTC offset (e.g. Z)", BAD_REQUEST)
    return int(moment.timestamp() * 1000)


def usage_filter(tenant: str, query: Any) -> UsageFilter:
    """The caller's usage window from the query string (400 when it is not one)."""
    start, end = _ms("from", query.get("from")), _ms("to", query.get("to"))
    if not 0 < end - start <= MAX_SPAN_DAYS * DAY_MS:
        raise ApiError(400, f"'to' must be after 'from', at most {MAX_SPAN_DAYS} days", BAD_REQUEST)
    granularity = query.get("granularity", "hour")
    if granularity not in ("hour", "day"):
        raise ApiError(400, "'granularity' must be hour or day", BAD_REQUEST)
    topic = query.get("topic") or None
    return UsageFilter(tenant, start, end, topic=topic, granularity=granularity)


class TenantBilling:
    """The routes, over the store's billing reads (None: the routes answer 404)."""

    def __init__(
        self, caller_of: Callable[[web.Request], Awaitable[Caller]], reader: BillingReader | None
    ) -> None:
        self._caller_of = caller_of
        self._reader = reader
        self._reads = asyncio.Semaphore(MAX_CONCURRENT_READS)

    def routes(self) -> list[web.RouteDef]:
        c = "/v3/clusters/{cluster_id}"
        return [
            web.get(c + "/usage", self.usage),
            web.get(c + "/invoices", self.invoices),
            web.get(c + "/invoices/{invoice_id}", self.invoice),
        ]

    async def _tenant(self, request: web.Request) -> tuple[str, BillingReader]:
        caller = await self._caller_of(request)
        cluster_id = caller.services.session.fleet.cluster_id(caller.tenant_id)
        asked = request.match_info["cluster_id"]
        if asked != cluster_id:
            raise ApiError(404, f"cluster {asked!r} not found", CLUSTER_NOT_FOUND)
        if self._reader is None:
            raise ApiError(404, "this gateway does not serve usage or invoices", NOT_FOUND)
        return caller.tenant_id, self._reader

    async def _read(self, call: Callable[..., T], *args: Any) -> T:
        async with self._reads:
            try:
                return await asyncio.to_thread(call, *args)
            except NotFoundError as error:
                raise ApiError(404, str(error), NOT_FOUND) from None
            except ValidationError as error:
                raise ApiError(400, str(error), BAD_REQUEST) from None

    async def usage(self, request: web.Request) -> web.StreamResponse:
        tenant, reader = await self._tenant(request)
        rows = await self._read(reader.usage, usage_filter(tenant, request.query))
        return _json({"kind": "PierUsageList", "items": rows})

    async def invoices(self, request: web.Request) -> web.StreamResponse:
        tenant, reader = await self._tenant(request)
        items = await self._read(reader.invoices, tenant)
        return _json({"kind": "PierInvoiceList", "items": items})

    async def invoice(self, request: web.Request) -> web.StreamResponse:
        tenant, reader = await self._tenant(request)
        return _json(await self._read(reader.invoice, tenant, request.match_info["invoice_id"]))


def _json(body: Any) -> web.Response:
    return web.json_response(body)
