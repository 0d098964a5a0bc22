"""Routes for a tenant's billing: hourly/daily usage, invoices, one invoice with its lines.

Owns: `/v1/tenants/{id}/usage`, `/v1/tenants/{id}/invoices`, `/v1/tenants/{id}/invoices/{invoice}`.
Reads only (the billing job writes; `tenancy.billing_store` reads, so this never imports
`billing`). `format=csv` answers `text/csv` with a header row (usage rows; an invoice's lines);
JSON keys of usage are the usage record's field names. Runs on the event loop; store calls go
through the store thread pool.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from tenancy.api.context import context_of
from tenancy.api.responses import json_ok, parse_time
from tenancy.api.validation import PARAMS
from tenancy.billing_store import USAGE_COLUMNS, UsageFilter
from tenancy.errors import ValidationError

routes = web.RouteTableDef()
LINE_COLUMNS = ("kind", "for_period", "dimension", "measure", "quantity", "amount")


def _ms(field: str, text: str) -> int:
    try:
        moment = parse_time(text)
    except ValueError:
        raise ValidationError(field, "must be an RFC 3339 date-time") from None
    assert moment is not None
    return int(moment.timestamp() * 1000)


def _csv(columns: Sequence[str], rows: list[dict[str, Any]]) -> web.Response:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return web.Response(text=out.getvalue(), content_type="text/csv")


@routes.get("/v1/tenants/{id}/usage")
async def get_usage(request: web.Request) -> web.Response:
    ctx, params = context_of(request), request[PARAMS]
    wanted = UsageFilter(
        tenant=params["id"],
        start_ms=_ms("from", params["from"]),
        end_ms=_ms("to", params["to"]),
        principal=params.get("principal"),
        topic=params.get("topic"),
        granularity=params.get("granularity", "hour"),
    )
    rows = await ctx.run(ctx.store.usage, wanted)
    if params.get("format") == "csv":
        return _csv(USAGE_COLUMNS, rows)
    return json_ok({"items": rows})


@routes.get("/v1/tenants/{id}/invoices")
async def list_invoices(request: web.Request) -> web.Response:
    ctx = context_of(request)
    return json_ok({"items": await ctx.run(ctx.store.invoices, request[PARAMS]["id"])})


@routes.get("/v1/tenants/{id}/invoices/{invoice}")
async def get_invoice(request: web.Request) -> web.Response:
    ctx, params = context_of(request), request[PARAMS]
    invoice = await ctx.run(ctx.store.invoice, params["id"], params["invoice"])
    if params.get("format") == "csv":
        return _csv(LINE_COLUMNS, invoice["lines"])
    return json_ok(invoice)
