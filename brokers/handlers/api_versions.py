"""ApiVersions (key 18): the versions we serve, derived from the route table.

Unknown (newer) request versions never reach here: the dispatcher answers them with error 35 in
a v0 body (KIP-511). Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.server.context import RequestContext
from brokers.server.routes import Route, RouteTable
from brokers.wire.errors import ErrorCode

API_KEY = 18


def route(table: RouteTable) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        keys = tuple(
            make(module, "ApiVersion", api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in table.version_ranges()
        )
        return make(
            module,
            "ApiVersionsResponse",
            error_code=ErrorCode.none,
            api_keys=keys,
            throttle_time=throttle(),
        )

    return Route(API_KEY, 0, 4, handle, name="ApiVersions")
