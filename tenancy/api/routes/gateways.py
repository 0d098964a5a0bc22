"""Route for the operator view of running gateways: which change-feed version each has applied.

Owns: `GET /v1/gateways`: the store's current change version, the propagation bounds, and every
gateway that reported within the stale bound (`tenancy.api.propagation.Propagation.stale_after_s`),
with the version it has applied, how far behind that is, when it started and last reported, and
the connection slots it holds in the store (Kafka sessions and HTTP consumer instances, and over
how many tenants: `tenancy.limit_holdings`). These are the gateways a change that takes access
away waits for (up to `timeout_s`). The operator console's Gateways page shows this answer
(docs/console.md). Runs on the event loop; store calls go through the store thread pool.
"""

from __future__ import annotations

from aiohttp import web

from tenancy.api.context import context_of
from tenancy.api.propagation import DEFAULT_PROPAGATION, PROPAGATION
from tenancy.api.responses import iso, json_ok
from tenancy.gateway_registry import GatewayConnections

routes = web.RouteTableDef()


@routes.get("/v1/gateways")
async def list_gateways(request: web.Request) -> web.Response:
    ctx = context_of(request)
    settings = request.app.get(PROPAGATION) or DEFAULT_PROPAGATION
    version = await ctx.run(ctx.store.current_version)
    positions = await ctx.run(ctx.store.gateway_positions, stale_after_s=settings.stale_after_s)
    held = await ctx.run(ctx.store.gateway_connections)
    none = GatewayConnections(0, 0)
    items = [
        {
            "id": position.gateway_id,
            "applied_version": position.applied_version,
            "behind": max(0, version - position.applied_version),
            "started_at": iso(position.started_at),
            "last_seen": iso(position.last_seen),
            "connections": held.get(position.gateway_id, none).connections,
            "tenants": held.get(position.gateway_id, none).tenants,
        }
        for position in positions
    ]
    return json_ok(
        {
            "version": version,
            "stale_after_s": settings.stale_after_s,
            "propagation_timeout_s": settings.timeout_s,
            "items": items,
        }
    )
