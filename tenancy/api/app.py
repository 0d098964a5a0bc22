"""The admin API application factory: middlewares in order, routes, and the shared context.

Owns: `create_app` and the order requests flow through —
  metrics (counts the final status) → problems (typed error → problem+json) → the console's
  public pages (`console.serve`, docs/console.md) → body limit (413 before anything is read) →
  auth (401) → validation (400/415, typed params and body) → idempotency (replay POSTs) → the
  resource handler.
The store is synchronous; its calls run on a bounded thread pool (`store_threads`) owned by the
app and shut down on cleanup — the store itself is the caller's to close. Runs on one event loop.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from console.serve import console_middleware
from tenancy.api.auth import VerifiedTokens, auth_middleware
from tenancy.api.context import CONTEXT, ApiContext, Clock, StoreRunner, utcnow
from tenancy.api.errors import PayloadTooLargeError
from tenancy.api.idempotency import ReplayCache, idempotency_middleware
from tenancy.api.metrics import (
    METRICS,
    ApiMetrics,
    health_handler,
    metrics_handler,
    metrics_middleware,
)
from tenancy.api.openapi import document
from tenancy.api.problems import problem_middleware
from tenancy.api.propagation import DEFAULT_PROPAGATION, PROPAGATION, Propagation
from tenancy.api.routes import add_routes
from tenancy.api.validation import RequestValidator, validation_middleware

if TYPE_CHECKING:
    from tenancy.store import TenantStore

MAX_BODY_BYTES = 1 << 20  # 1 MiB: the largest body (a plan) is a few KiB


def _body_limit(limit: int) -> Middleware:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        # A declared length is refused before reading; a chunked body is cut at `limit` by
        # aiohttp's client_max_size while reading (its 413 is mapped by the problem middleware).
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLargeError(f"the body is larger than {limit} bytes")
        return await handler(request)

    return check


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(document())


def create_app(
    store: TenantStore,
    *,
    clock: Clock = utcnow,
    max_body_bytes: int = MAX_BODY_BYTES,
    store_threads: int = 8,
    token_cache_ttl: timedelta = timedelta(seconds=30),
    gateway_http: tuple[str, ...] = (),
    propagation: Propagation = DEFAULT_PROPAGATION,
) -> web.Application:
    """The admin API over `store`; serve it with `web.AppRunner(app, access_log_class=...)`.
    `propagation`: how long a change that takes access away waits for the gateways."""
    runner = StoreRunner(store_threads)
    metrics = ApiMetrics()
    app = web.Application(
        client_max_size=max_body_bytes,
        middlewares=[
            metrics_middleware(metrics),
            problem_middleware,
            console_middleware("operator"),  # public pages (docs/console.md), before auth
            _body_limit(max_body_bytes),
            auth_middleware(VerifiedTokens(clock, token_cache_ttl)),
            validation_middleware(RequestValidator(document())),
            idempotency_middleware(ReplayCache(clock)),
        ],
    )
    app[CONTEXT] = ApiContext(store=store, run=runner, clock=clock, gateway_http=gateway_http)
    app[METRICS] = metrics
    app[PROPAGATION] = propagation
    app.router.add_get("/openapi.json", _openapi)
    app.router.add_get("/healthz", health_handler)
    app.router.add_get("/metrics", metrics_handler)
    add_routes(app)

    async def close_runner(_: web.Application) -> None:
        runner.close()

    app.on_cleanup.append(close_runner)
    return app
