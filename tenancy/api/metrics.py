"""Operational endpoints of the admin API: `/metrics` (Prometheus), `/healthz`, and the access log.

Owns: the per-application Prometheus registry (one per app, so several apps in one process —
tests — do not collide), the middleware that counts and times every request by route template
(never by raw path, to bound label cardinality), the health check (the store answers
`current_version()` within 2 s on the store thread pool), and `PathAccessLogger`, which logs
method, path (no query string), status and duration — never headers, so never a token. Runs on
the event loop.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

from tenancy.api.context import context_of

HEALTH_TIMEOUT_S = 2.0


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "pier_admin_requests",
            "Admin API requests by method, route template and status",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "pier_admin_request_duration_seconds",
            "Admin API request handling time",
            ("method", "route"),
            registry=self.registry,
        )


METRICS = web.AppKey("pier.admin.metrics", ApiMetrics)


def route_label(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def metrics_middleware(metrics: ApiMetrics) -> Middleware:
    """Outermost: sees the final status, including problem responses."""

    @web.middleware
    async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        response = await handler(request)
        route = route_label(request)
        metrics.requests.labels(request.method, route, str(response.status)).inc()
        metrics.latency.labels(request.method, route).observe(time.perf_counter() - started)
        return response

    return observe


async def metrics_handler(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    response = web.Response(body=body)
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


async def health_handler(request: web.Request) -> web.Response:
    ctx = context_of(request)
    try:
        version = await asyncio.wait_for(ctx.run(ctx.store.current_version), HEALTH_TIMEOUT_S)
    except Exception:  # any store failure means "not healthy", never a 500
        return web.json_response({"status": "unavailable"}, status=503)
    return web.json_response({"status": "ok", "version": version})


class PathAccessLogger(AbstractAccessLogger):
    """`method=GET path=/v1/tenants status=200 duration_ms=1.2` — no query, no headers."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info(
            "method=%s path=%s status=%s duration_ms=%.1f",
            request.method,
            request.path,
            response.status,
            time * 1000,
        )
