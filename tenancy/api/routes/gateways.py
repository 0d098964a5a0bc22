"""Route for the operator view of running gateways: which change-feed version each has applied.

Owns: `GET /v1/gateways`: the store's current change version, the propagation bounds, and every
gateway that reported within the stale bound (`tenancy.api.propagation.Propagation.stale_after_s`),
with the version it has applied, how far behind that is, when it started and last reported, and
the connection slots it holds in the store (Kafka sessions and HTTP consumer instances, and over
how many tenants: `tenancy.limit_holdings`). A worker of `pier gateway --workers N` reports as
its own gateway, id `<gateway>.w<k>/<incarnation>`: each item names its `gateway` (the id without
worker and incarnation) and its `worker` (k, or null for a single-process gateway), so the fleet view groups workers under
their gateway (`pier gateway status`, docs/gateway.md "Fleet view"). With `pier admin-api
--zookeeper` each item is also `registered` (its fleet znode exists: `fleet_registrations`) and the
answer's `zookeeper` says whether ZooKeeper could be read; without, both are null. These are the gateways a
change that takes access away waits for (up to `timeout_s`). The operator console's Gateways page
shows this answer (docs/console.md). Runs on the event loop; store calls go through the store
thread pool.
"""

from __future__ import annotations

import re

from aiohttp import web

from tenancy.api.context import context_of
from tenancy.api.fleet_registrations import FLEET_REGISTRATIONS, znode_name
from tenancy.api.propagation import DEFAULT_PROPAGATION, PROPAGATION
from tenancy.api.responses import iso, json_ok
from tenancy.gateway_registry import GatewayConnections

routes = web.RouteTableDef()
_REPORTING_ID = re.compile(r"(?P<gateway>.+?)(?:\.w(?P<worker>0|[1-9][0-9]{0,2}))?(?:/[^/]+)?")


def split_gateway_id(gateway_id: str) -> tuple[str, int | None]:
    """(gateway, worker index) of a reporting id `<gateway>[.w<k>]/<incarnation>`:
    `gw-1.w3/ab12` → (gw-1, 3), `gw-1/ab12` → (gw-1, None)."""
    match = _REPORTING_ID.fullmatch(gateway_id)
    if match is None:  # an empty id: not reported by any gateway
        return gateway_id, None
    worker = match["worker"]
    return match["gateway"], None if worker is None else int(worker)


@routes.get("/v1/gateways")
async def list_gateways(request: web.Request) -> web.Response:
    ctx = context_of(request)
    settings = request.app.get(PROPAGATION) or DEFAULT_PROPAGATION
    version = await ctx.run(ctx.store.current_version)
    positions = await ctx.run(ctx.store.gateway_positions, stale_after_s=settings.stale_after_s)
    held = await ctx.run(ctx.store.gateway_connections)
    none = GatewayConnections(0, 0)
    fleet = request.app.get(FLEET_REGISTRATIONS)
    registered = None if fleet is None else await fleet.names()
    items = [
        {
            "id": position.gateway_id,
            "gateway": split_gateway_id(position.gateway_id)[0],
            "worker": split_gateway_id(position.gateway_id)[1],
            "applied_version": position.applied_version,
            "behind": max(0, version - position.applied_version),
            "started_at": iso(position.started_at),
            "last_seen": iso(position.last_seen),
            "connections": held.get(position.gateway_id, none).connections,
            "tenants": held.get(position.gateway_id, none).tenants,
            "registered": None
            if registered is None
            else znode_name(position.gateway_id) in registered,
        }
        for position in positions
    ]
    return json_ok(
        {
            "version": version,
            "stale_after_s": settings.stale_after_s,
            "propagation_timeout_s": settings.timeout_s,
            "zookeeper": None
            if fleet is None
            else {"connect": fleet.connect, "readable": registered is not None},
            "items": items,
        }
    )
